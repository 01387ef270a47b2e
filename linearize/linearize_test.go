package linearize

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"pgregory.net/rapid"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// corruptOneRead changes one record of a read near the middle of h to a
// value that was produced elsewhere in the partition, and returns the read's
// completion index.
func corruptOneRead(t testing.TB, h *history.History) int {
	t.Helper()
	var reads []int
	for i := range h.Events {
		e := &h.Events[i]
		if e.Kind == history.KindOp && e.Op.F == history.FRead && e.Op.Type == history.OpOK && !e.Op.Final && len(e.Op.Records) > 0 && e.Op.Records[0].Offset > 10 {
			reads = append(reads, i)
		}
	}
	if len(reads) == 0 {
		t.Fatal("no read to corrupt")
	}
	e := &h.Events[reads[len(reads)/2]]
	e.Op.Records[0].Value = "corrupted"
	return e.Index
}

// The bar: a definite Illegal (not Unknown) on 5,000 operations at
// concurrency 10 with 5% unknown-outcome produces and one corrupted read.
// Speed is measured by BenchmarkPorcupineIllegal5000; the generous timeout
// here only keeps the test from hanging.
func TestIllegalDespiteUnknownProduces(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  hb.GenConfig
	}{
		{"info outcomes", hb.GenConfig{Partitions: 1, Processes: 10, Ops: 5000, UnknownRate: 0.05, ReadRate: 0.3, Seed: 7}},
		{"with final read", hb.GenConfig{Partitions: 1, Processes: 10, Ops: 5000, UnknownRate: 0.05, ReadRate: 0.3, FinalReads: true, Seed: 9}},
		{"no completions", hb.GenConfig{Partitions: 1, Processes: 10, Ops: 5000, UnknownRate: 0.05, ReadRate: 0.3, NoCompletion: true, Seed: 11}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hb.Clean(tc.cfg)
			bad := corruptOneRead(t, h)
			out := Check(h, Options{Timeout: 30 * time.Second})
			t.Logf("5000 ops, 5%% unknown, one corrupted read: %s in %s (%+v)", out.Result, out.Elapsed, out.Partitions[0])
			if out.Result != porcupine.Illegal {
				t.Fatalf("result %s, want Illegal", out.Result)
			}
			if p := out.Partitions[0]; len(p.Suspects) == 0 || p.Suspects[0] != bad {
				t.Errorf("suspects %v, want the corrupted read %d", p.Suspects, bad)
			}
		})
	}
}

func TestCleanWithUnknownProducesIsOk(t *testing.T) {
	h := hb.Clean(hb.GenConfig{Partitions: 2, Processes: 10, Ops: 5000, UnknownRate: 0.05, ReadRate: 0.3, Seed: 8})
	out := Check(h, Options{Timeout: 30 * time.Second})
	t.Logf("2 x 5000 ops: %s in %s; %+v", out.Result, out.Elapsed, out.Partitions)
	if out.Result != porcupine.Ok {
		t.Fatalf("result %s, want Ok", out.Result)
	}
}

// Property: concurrent unknown outcomes never make a clean history look
// non-linearizable, with or without final reads.
func TestUnknownOutcomesNeverFalseIllegal(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := hb.Draw(rt, hb.GenConfig{Partitions: 3, Processes: 8, Ops: 200, UnknownRate: 0.6, ReadRate: 0.7})
		out := Check(hb.Clean(cfg), Options{Timeout: 20 * time.Second})
		if out.Result == porcupine.Illegal {
			rt.Fatalf("clean history judged Illegal: %+v", out.Partitions)
		}
	})
}

func TestResolution(t *testing.T) {
	tp := history.TP("t", 0)
	b := hb.New()
	b.Produce(1, tp, "a")
	b.Produce(2, tp, "seen")   // unknown, observed → resolved
	b.Produce(3, tp, "unseen") // unknown, not in the final read → dropped
	b.Complete(1, history.OpOK, tp, history.FProduce, 0)
	b.Complete(2, history.OpInfo, tp, history.FProduce, 0)
	b.Complete(3, history.OpInfo, tp, history.FProduce, 0)
	b.ReadBack(4, tp, 0, true, hb.Rec(0, "a"), hb.Rec(1, "seen"))
	out := Check(b.History(), Options{Timeout: 5 * time.Second})
	p := out.Partitions[0]
	if out.Result != porcupine.Ok || p.Resolved != 1 || p.Dropped != 1 || p.Unresolved != 0 {
		t.Fatalf("got %s %+v", out.Result, p)
	}
}

func TestVisualizationWithAnnotations(t *testing.T) {
	tp := history.TP("t", 0)
	b := hb.New()
	b.Fault(true, "f1", "pause", "n1")
	b.ProduceOK(1, tp, "a", 0)
	b.Fault(false, "f1", "pause", "n1")
	b.ReadBack(2, tp, 0, false, hb.Rec(0, "never produced"))
	path := filepath.Join(t.TempDir(), "lin.html")
	out := Check(b.History(), Options{Timeout: 5 * time.Second, VisualizePath: path,
		Marks: []Mark{{Tag: "controller-fencing", Description: "violation", Start: hb.T0}}})
	if out.Result != porcupine.Illegal || out.Visualization != path {
		t.Fatalf("got %s, visualization %q (%s)", out.Result, out.Visualization, out.Note)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("visualization not written: %v", err)
	}
	// Too big to draw: skipped with a note, not written.
	out = Check(b.History(), Options{Timeout: 5 * time.Second, VisualizePath: path + "2", MaxVisualizeOps: 1})
	if out.Visualization != "" || out.Note == "" {
		t.Fatalf("cap not applied: %+v", out)
	}
}

func BenchmarkPorcupine8x5000(b *testing.B) {
	h := hb.Clean(hb.GenConfig{Partitions: 8, Processes: 10, Ops: 5000, UnknownRate: 0.05, ReadRate: 0.3, Seed: 3})
	benchmarkCheck(b, h, porcupine.Ok)
}

func BenchmarkPorcupineIllegal5000(b *testing.B) {
	h := hb.Clean(hb.GenConfig{Partitions: 1, Processes: 10, Ops: 5000, UnknownRate: 0.05, ReadRate: 0.3, Seed: 7})
	corruptOneRead(b, h)
	benchmarkCheck(b, h, porcupine.Illegal)
}

// benchmarkCheck times Check on h, which must give want.
func benchmarkCheck(b *testing.B, h *history.History, want porcupine.CheckResult) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if out := Check(h, Options{Timeout: time.Minute}); out.Result != want {
			b.Fatalf("result %s, want %s", out.Result, want)
		}
	}
}

// A timeout gives Unknown for every partition it cut short, never Ok.
func TestTimeoutIsUnknown(t *testing.T) {
	h := hb.Clean(hb.GenConfig{Partitions: 2, Processes: 10, Ops: 2000, UnknownRate: 0.05, ReadRate: 0.3, Seed: 5})
	out := Check(h, Options{Timeout: time.Nanosecond})
	if out.Result != porcupine.Unknown {
		t.Fatalf("result %s, want Unknown", out.Result)
	}
}

// Kafka lets a fetch return nothing below committed records (KAFKA-2334):
// such a read never makes a partition illegal, and it is listed as stale,
// with what it missed, only when produces at or above its offset were
// acknowledged before it began.
func TestStaleEmptyReads(t *testing.T) {
	tp := history.TP("t", 0)
	for _, tc := range []struct {
		name       string
		build      func(b *hb.Builder) (stale int)
		acked      int
		firstValue string
	}{
		{"empty read below two acknowledged produces", func(b *hb.Builder) int {
			b.ProduceOK(1, tp, "a", 0)
			b.ProduceOK(1, tp, "b", 1)
			return b.ReadBack(2, tp, 0, false)
		}, 2, "a"},
		{"only the produces at or above the offset count", func(b *hb.Builder) int {
			b.ProduceOK(1, tp, "a", 0)
			b.ProduceOK(1, tp, "b", 1)
			return b.ReadBack(2, tp, 1, false)
		}, 1, "b"},
		{"empty read at the end of the log", func(b *hb.Builder) int {
			b.ProduceOK(1, tp, "a", 0)
			b.ReadBack(2, tp, 1, false)
			return -1
		}, 0, ""},
		{"empty read concurrent with the acknowledgement", func(b *hb.Builder) int {
			b.Produce(1, tp, "a")
			b.Read(2, tp, 0, false)
			b.Complete(1, history.OpOK, tp, history.FProduce, 0)
			b.ReadOK(2, tp, 0, false)
			return -1
		}, 0, ""},
		{"unknown produce does not count", func(b *hb.Builder) int {
			b.Produce(1, tp, "a")
			b.Complete(1, history.OpInfo, tp, history.FProduce, 0)
			b.ReadBack(2, tp, 0, false)
			return -1
		}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := hb.New()
			stale := tc.build(b)
			out := Check(b.History(), Options{Timeout: 5 * time.Second})
			p := out.Partitions[0]
			if out.Result != porcupine.Ok {
				t.Fatalf("result %s, want Ok: an empty fetch is allowed (%+v)", out.Result, p)
			}
			if stale < 0 {
				if p.StaleEmptyCount != 0 {
					t.Fatalf("stale reads %+v, want none", p.StaleEmpty)
				}
				return
			}
			if p.StaleEmptyCount != 1 || len(p.StaleEmpty) != 1 {
				t.Fatalf("stale reads %d %+v, want the read %d", p.StaleEmptyCount, p.StaleEmpty, stale)
			}
			s := p.StaleEmpty[0]
			if s.Read != stale || s.Acknowledged != tc.acked || s.FirstValue != tc.firstValue || s.FirstAck < 0 {
				t.Errorf("stale read %+v, want read %d missing %d acknowledged produces, first %q", s, stale, tc.acked, tc.firstValue)
			}
		})
	}
}

// BenchmarkCheck1M is the linearizability check of the generated 1M-event
// history (historytest.Bench1M: 8 partitions × 31,500 operations and a final
// read of each partition), the part of `chaos check` that BENCHMARKS.md's
// "Check cost" section measures.
func BenchmarkCheck1M(b *testing.B) {
	h := hb.Clean(hb.Bench1M)
	benchmarkCheck(b, h, porcupine.Ok)
}

// A clean history is drawn too (its first partition), although Check drops
// the operations of clean partitions once they are checked; one too big to
// draw is named with its operation count.
func TestVisualizeCleanPartition(t *testing.T) {
	h := hb.Clean(hb.GenConfig{Partitions: 3, Processes: 4, Ops: 200, UnknownRate: 0.05, ReadRate: 0.3, FinalReads: true, Seed: 4})
	path := filepath.Join(t.TempDir(), "lin.html")
	out := Check(h, Options{Timeout: 5 * time.Second, VisualizePath: path})
	if out.Result != porcupine.Ok || out.Visualization != path || out.Note != "visualized partition "+out.Partitions[0].Partition {
		t.Fatalf("got %s, visualization %q (%s)", out.Result, out.Visualization, out.Note)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("visualization not written: %v", err)
	}
	out = Check(h, Options{Timeout: 5 * time.Second, VisualizePath: path + "2", MaxVisualizeOps: 10})
	want := fmt.Sprintf("partition %s has %d operations, more than the 10 drawn; no visualization written", out.Partitions[0].Partition, out.Partitions[0].Ops)
	if out.Visualization != "" || out.Note != want || out.Partitions[0].Ops <= 10 {
		t.Fatalf("note %q, want %q", out.Note, want)
	}
}

// BenchmarkCheck1MPolls is BenchmarkCheck1M with reads of up to 64 records
// (historytest.Bench1MPolls), as the workload's polls return.
func BenchmarkCheck1MPolls(b *testing.B) {
	h := hb.Clean(hb.Bench1MPolls)
	benchmarkCheck(b, h, porcupine.Ok)
}
