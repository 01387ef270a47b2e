package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/scenarios"
)

func runRepro(args ...string) (stdout, stderr string, code int) {
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(append([]string{"repro"}, args...))
	code = exitCode(root.Execute())
	return out.String(), errb.String(), code
}

// Bad input never starts a cluster: it exits 2 and says what is known.
func TestReproList(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		listIn   string // "stdout", "stderr" or "" (no list)
	}{
		{"list", []string{"--list"}, 0, "stdout"},
		{"unknown scenario", []string{"KAFKA-1"}, 2, "stderr"},
		{"no scenario", nil, 2, "stderr"},
		{"unknown mode", []string{"KAFKA-3861", "--mode", "clean"}, 2, ""},
		{"mode and fixed", []string{"KAFKA-3861", "--mode", "unclean", "--fixed"}, 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runRepro(tt.args...)
			out = strings.ReplaceAll(out, "\n", " ")
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d (stdout %q, stderr %q)", code, tt.wantCode, out, errOut)
			}
			where := map[string]string{"stdout": out, "stderr": errOut}[tt.listIn]
			for _, sc := range scenarios.All() {
				if tt.listIn != "" && (!strings.Contains(where, sc.Bug) || !strings.Contains(where, sc.Catches.Name())) {
					t.Errorf("list in %s lacks %s or its checker %s:\n%s", tt.listIn, sc.Bug, sc.Catches.Name(), where)
				}
			}
		})
	}
}
