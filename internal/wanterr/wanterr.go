// Package wanterr holds the error check table-driven tests share: a case
// either wants no error or an error whose text contains a phrase. Only
// tests import it, and it imports no project package.
package wanterr

import (
	"strings"
	"testing"
)

// Check fails t unless err matches want: nil when want is empty, else an
// error whose text contains want. It reports whether an error was wanted, so
// a case that wanted one stops there and only a success goes on to check
// its result.
func Check(t testing.TB, err error, want string) (wanted bool) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatal(err)
		}
		return false
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
	return true
}
