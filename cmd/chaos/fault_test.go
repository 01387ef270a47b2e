package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/rundir"
)

// Without --dir, `chaos fault` reaches the one running `chaos up` under
// --runs, and says what it found otherwise.
func TestLiveRunDir(t *testing.T) {
	tests := []struct {
		name    string
		live    []string // run directories with a control file
		idle    []string // run directories without one
		want    string
		wantErr string
	}{
		{"one running", []string{"a"}, []string{"b"}, "a", ""},
		{"none running", nil, []string{"b"}, "", "no running `chaos up` under"},
		{"two running", []string{"a", "c"}, nil, "", "2 runs of `chaos up`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs := t.TempDir()
			for _, d := range append(append([]string{}, tt.live...), tt.idle...) {
				if err := os.MkdirAll(filepath.Join(runs, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, d := range tt.live {
				if err := rundir.WriteControl(filepath.Join(runs, d), rundir.Control{Addr: "127.0.0.1:1"}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := liveRunDir(runs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != filepath.Join(runs, tt.want) {
				t.Fatalf("got %q, %v; want %q", got, err, filepath.Join(runs, tt.want))
			}
		})
	}
}

// Bad input is refused before anything is contacted, with exit status 2.
func TestFaultBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"fault", "no-such-fault", "--dir", t.TempDir()},
		{"fault", "pause-controller", "--pick", "-1", "--dir", t.TempDir()},
		{"fault", "pause-controller", "--dir", t.TempDir()}, // no chaos up there
	} {
		root := newRootCmd()
		root.SetArgs(args)
		err := root.Execute()
		var ee *exitError
		if err == nil || !errors.As(err, &ee) || ee.code != exitBad {
			t.Errorf("%v: %v, want exit status %d", args, err, exitBad)
		}
	}
}
