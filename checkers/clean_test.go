package checkers

import (
	"pgregory.net/rapid"

	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history/historytest"
)

func testConfig() Config {
	c := DefaultConfig()
	c.OfflineGrace = 100 * time.Millisecond
	c.LivenessGrace = 100 * time.Millisecond
	c.LinearizeTimeout = 30 * time.Second
	return c
}

func TestGeneratedCleanHistoryIsValid(t *testing.T) {
	h := historytest.Clean(historytest.GenConfig{Partitions: 3, Processes: 5, Ops: 400, UnknownRate: 0.1,
		ReadRate: 0.3, FinalReads: true, NodeEvents: true, Seed: 1})
	results, v := Run(h, All(testConfig()))
	for _, r := range results {
		if r.Verdict != Valid {
			t.Errorf("%s: %s: %s (events %v)", r.Checker, r.Verdict, r.Explanation, r.Events)
		}
	}
	if v != Valid {
		t.Fatalf("combined verdict %s", v)
	}
}

// Property: on generated clean histories, however many produces end with
// unknown outcomes (info or no completion at all), no checker says invalid.
func TestUnknownOutcomesNeverFalseInvalid(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := historytest.Draw(rt, historytest.GenConfig{Partitions: 3, Processes: 8, Ops: 150, UnknownRate: 0.6, ReadRate: 0.7, NodeEvents: true})
		results, _ := Run(historytest.Clean(cfg), All(testConfig()))
		for _, r := range results {
			if r.Verdict == Invalid {
				rt.Fatalf("%s: false invalid: %s (events %v)", r.Checker, r.Explanation, r.Events)
			}
		}
	})
}

// An empty history (a run that recorded nothing) holds no anomaly: every
// checker finds it valid, without a case of its own for it.
func TestEmptyHistoryIsValid(t *testing.T) {
	for _, c := range All(testConfig()) {
		if r := c.Check(historytest.New().History()); r.Verdict != Valid {
			t.Errorf("%s: %s: %s", r.Checker, r.Verdict, r.Explanation)
		}
	}
}
