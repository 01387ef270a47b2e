package scenarios

import (
	"os"
	"testing"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/internal/dockertest"
)

// Every scenario, run for real: with its bug switch on the checker it names
// must find the bug; with every fix on the run must be valid.
func TestScenariosCatchTheirBugAndPassWhenFixed(t *testing.T) {
	dockertest.Require(t)
	for _, name := range Names() {
		sc, _ := Get(name)
		for _, fixed := range []bool{false, true} {
			mode := "bug"
			if fixed {
				mode = "fixed"
			}
			t.Run(name+"/"+mode, func(t *testing.T) {
				cfg := sc.Config(fixed)
				cfg.RunID = "t-" + cluster.NewRunID()[16:]
				cfg.RunDir = t.TempDir()
				if testing.Verbose() {
					cfg.Progress = os.Stderr
				}
				dir, err := harness.Run(t.Context(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				rep, err := harness.Check(dir, checkers.DefaultConfig())
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rep.Results {
					t.Logf("%s: %s: %s", r.Checker, r.Verdict, r.Explanation)
					if !fixed && r.Checker == sc.Catches() && r.Verdict != checkers.Invalid {
						t.Errorf("bug switch on, but %s says %s", r.Checker, r.Verdict)
					}
				}
				if fixed && rep.Verdict != checkers.Valid {
					t.Errorf("every fix on, but the verdict is %s", rep.Verdict)
				}
			})
		}
	}
}

func TestGetNamesKnownScenarios(t *testing.T) {
	if _, err := Get("kafka-532"); err != nil {
		t.Errorf("lookup is case-insensitive: %v", err)
	}
	if _, err := Get("KAFKA-1"); err == nil {
		t.Error("unknown scenario found")
	}
}
