package checkers

import (
	"testing"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
)

// bigHistory is a generated clean history of about a million events: 8
// partitions, 10 clients each, 31,500 operations per partition, with the
// cluster's node, watcher and nemesis events.
func bigHistory(b *testing.B) *history.History {
	b.Helper()
	h := historytest.Clean(historytest.GenConfig{Partitions: 8, Processes: 10, Ops: 31_500, UnknownRate: 0.05,
		ReadRate: 0.3, FinalReads: true, NodeEvents: true, Seed: 1})
	b.Logf("generated %d events", len(h.Events))
	return h
}

// BenchmarkCustomCheckers1M runs every custom checker (all but
// linearizability, which BenchmarkPorcupine8x5000 in linearize measures).
func BenchmarkCustomCheckers1M(b *testing.B) {
	h := bigHistory(b)
	cs := customCheckers()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		results, v := Run(h, cs)
		if v != Valid {
			for _, r := range results {
				b.Logf("%s: %s: %s", r.Checker, r.Verdict, r.Explanation)
			}
			b.Fatalf("verdict %s", v)
		}
	}
}

// BenchmarkEachChecker1M breaks the total down per checker.
func BenchmarkEachChecker1M(b *testing.B) {
	h := bigHistory(b)
	for _, c := range customCheckers() {
		b.Run(c.Name(), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				c.Check(h)
			}
		})
	}
}

// customCheckers is All without Linearizable, found by type: its place in
// All moved once (Idempotence came after it) and a slice by position then
// measured the wrong checker.
func customCheckers() []Checker {
	var cs []Checker
	for _, c := range All(DefaultConfig()) {
		if _, ok := c.(Linearizable); !ok {
			cs = append(cs, c)
		}
	}
	return cs
}
