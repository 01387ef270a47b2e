package harness

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/zkchaos/zkchaos/internal/dockertest"
)

// `chaos bench-env` passes a relative run directory (runs/bench-env-ID) by
// default; the ensemble's bind mounts must still get an absolute path, or
// Docker reads it as a volume name and refuses it. One repetition of every
// figure, from a relative directory, must succeed and leave its history.
func TestMeasureEnvFromRelativeDir(t *testing.T) {
	dockertest.Require(t)
	t.Chdir(t.TempDir())
	dir := filepath.Join("runs", "bench-env-test")
	var out io.Writer = io.Discard
	if testing.Verbose() {
		out = os.Stderr
	}
	f, err := MeasureEnv(t.Context(), dir, 1, out)
	if err != nil {
		t.Fatalf("MeasureEnv(%q): %v", dir, err)
	}
	if len(f.EnsembleUp) != 1 || len(f.BounceGap) != 1 || len(f.Election) != 1 {
		t.Errorf("want one sample per figure, got ensemble %d, bounce %d, election %d", len(f.EnsembleUp), len(f.BounceGap), len(f.Election))
	}
	if _, err := os.Stat(filepath.Join(dir, "history", "nemesis.jsonl")); err != nil {
		t.Errorf("no fault history: %v", err)
	}
}
