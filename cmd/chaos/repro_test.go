package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/checkers"
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

// The verdict line says how many stale inputs the scenario's fence refused,
// and what every fence saw.
func TestPrintReproFences(t *testing.T) {
	sc, err := scenarios.Get("KAFKA-532")
	if err != nil {
		t.Fatal(err)
	}
	counts := []checkers.FenceCount{{Fence: checkers.FenceBrokerControllerEpoch, Inputs: 3, Rejected: 2}, {Fence: checkers.FenceFetchLeaderEpoch}}
	tests := []struct {
		name    string
		results []checkers.Result
		want    []string
	}{
		{"counted", []checkers.Result{{Checker: "fences", Details: map[string]any{"fences": counts}}}, []string{
			"broker-controller-epoch fence: rejected 2 of 3 control requests from a deposed controller",
			"fences: broker-controller-epoch 3 stale inputs, 2 rejected; fetch-leader-epoch untested",
		}},
		{"untested", []checkers.Result{{Checker: "fences", Details: map[string]any{"fences": counts[1:]}}}, []string{
			"fences: fetch-leader-epoch untested",
		}},
		{"checked without fences", []checkers.Result{{Checker: "controller-fencing"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			printReproFences(&out, sc, tt.results)
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if tt.want == nil && out.Len() > 0 {
				t.Errorf("output %q, want none", out.String())
			}
		})
	}
	var out bytes.Buffer
	printReproFences(&out, sc, []checkers.Result{{Checker: "fences", Details: map[string]any{"fences": []checkers.FenceCount{{Fence: checkers.FenceBrokerControllerEpoch}}}}})
	if !strings.Contains(out.String(), "broker-controller-epoch fence untested: no control requests from a deposed controller") {
		t.Errorf("untested scenario fence: %q", out.String())
	}
}
