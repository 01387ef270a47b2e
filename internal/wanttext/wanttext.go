// Package wanttext holds the output check tests share: a text (a table, a
// report, a generated file) must hold every phrase a test wants. Only tests
// import it, and it imports no project package.
package wanttext

import (
	"strings"
	"testing"
)

// Contains fails t, without stopping it, for each of wants that text lacks;
// what names the text in the failure ("table", "zoo.cfg"). Each failure
// shows the whole text, so one run shows every phrase missing and what was
// there instead.
func Contains(t testing.TB, what, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, text)
		}
	}
}
