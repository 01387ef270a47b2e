package nodecover

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/docker"
)

// An instrumented node process that runs for a moment leaves counters in
// its node directory although it never reaches ZooKeeper, and Merge turns
// them into coverage.json: some blocks reached (flag parsing, start-up),
// most not.
func TestMergeWhatANodeProcessReached(t *testing.T) {
	bin, err := docker.BuildGoBinary(t.Context(), "./cmd/kafkanode", "kafkanode-cover-test", BuildFlags()...)
	if err != nil {
		t.Fatal(err)
	}
	run := t.TempDir()
	node := filepath.Join(run, "nodes", "n1")
	if err := Prepare(node); err != nil {
		t.Fatal(err)
	}
	// A short connect timeout: the process only has to start and
	// give up (its exit writes the counters), and each run's wait
	// is time every `go test -short` pays.
	cmd := exec.CommandContext(t.Context(), bin, "--id=1", "--zk=127.0.0.1:1", "--zk-connect-timeout=300ms",
		"--listen=127.0.0.1:0", "--advertised=127.0.0.1:9092", "--admin-listen=off",
		"--data-dir="+filepath.Join(node, "data"), "--event-log=")
	cmd.Env = os.Environ()
	for k, v := range Env(node) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("the node started without ZooKeeper:\n%s", out)
	}
	s, err := Merge(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	if s.Blocks == 0 || s.Covered == 0 || s.Covered >= s.Blocks || len(s.Reached) != s.Covered {
		t.Fatalf("coverage %d of %d blocks, %d named", s.Covered, s.Blocks, len(s.Reached))
	}
	var config bool
	for _, p := range s.Packages {
		if strings.HasSuffix(p.Path, "node/config") && p.Covered > 0 {
			config = true
		}
	}
	if !config {
		t.Errorf("flag parsing (node/config) not reached: %+v", s.Packages)
	}
	back, err := Read(run)
	if err != nil || back.Covered != s.Covered || back.Blocks != s.Blocks {
		t.Fatalf("read back %d of %d (%v), merged %d of %d", back.Covered, back.Blocks, err, s.Covered, s.Blocks)
	}
}

// A run whose nodes left no counters (a plain build, or no process ran)
// has nothing to merge, and Merge says so by ErrNoCoverage.
func TestMergeWithoutCounters(t *testing.T) {
	run := t.TempDir()
	if err := Prepare(filepath.Join(run, "nodes", "n1")); err != nil {
		t.Fatal(err)
	}
	if _, err := Merge(t.Context(), run); !errors.Is(err, ErrNoCoverage) {
		t.Fatalf("Merge of a run without counters: %v, want ErrNoCoverage", err)
	}
}
func TestParseTextFmt(t *testing.T) {
	tests := []struct {
		name, profile   string
		blocks, covered int
		wantErr         string
	}{
		{"two files, one block listed twice", "mode: set\na/x.go:1.1,2.2 1 0\na/x.go:1.1,2.2 1 1\na/y.go:3.1,4.2 2 0\nb/z.go:1.1,1.9 1 1\n", 3, 2, ""},
		{"empty profile", "mode: set\n", 0, 0, ""},
		{"short line", "mode: set\na/x.go:1.1,2.2 1\n", 0, 0, "line 2"},
		{"bad count", "mode: set\na/x.go:1.1,2.2 1 many\n", 0, 0, `count "many"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "p.txt")
			if err := os.WriteFile(p, []byte(tt.profile), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			s, err := parseTextFmt(f)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || s.Blocks != tt.blocks || s.Covered != tt.covered {
				t.Fatalf("%d of %d (%v), want %d of %d", s.Covered, s.Blocks, err, tt.covered, tt.blocks)
			}
		})
	}
}
