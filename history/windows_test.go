package history_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
)

func TestTopicPartitionCompare(t *testing.T) {
	tests := []struct {
		a, b history.TopicPartition
		want int
	}{
		{history.TP("a", 1), history.TP("a", 1), 0},
		{history.TP("a", 2), history.TP("a", 10), -1}, // by number, not by "a-10" < "a-2"
		{history.TP("b", 0), history.TP("a", 9), 1},
	}
	for _, tt := range tests {
		if got := tt.a.Compare(tt.b); got != tt.want {
			t.Errorf("%s vs %s: %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestFaultWindows(t *testing.T) {
	type win struct {
		id       string
		from, to int64
		stopped  bool
		open     bool
	}
	b := historytest.New()
	b.At(0).Fault(true, "f1", "pause", "n1")
	b.At(10).Fault(false, "f1", "pause", "n1") // stopped
	b.At(20).Fault(true, "f2", "kill", "n2")
	b.At(30).Fault(true, "f2", "kill", "n2")  // started again: ends the first
	b.At(35).Fault(false, "f9", "kill", "n2") // a stop without a start
	b.At(40).Add(history.Event{Source: "n1", Kind: history.KindFaultStart, Fault: &history.Fault{ID: "fp", Name: "failpoint"}})
	b.At(50).Add(history.Event{Source: "n1", Node: 1, Kind: history.KindNodeStart, Process: &history.Process{}})
	b.At(60).Add(history.Event{Source: "harness", Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseHeal, Mark: history.PhaseEnd}})
	b.At(70).Add(history.Event{Source: "client", Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseCollect, Mark: history.PhaseEnd}})
	h := b.History()
	ms := func(x int64) int64 { return historytest.T0 + x*historytest.Ms }
	tests := []struct {
		name                  string
		processEnds, healEnds bool
		want                  []win
	}{
		{"pairs only", false, false, []win{{"f1", 0, 10, true, false}, {"f2", 20, 30, false, false}, {"f2", 30, 70, false, true}, {"fp", 40, 70, false, true}}},
		{"process ends its failpoints", true, false, []win{{"f1", 0, 10, true, false}, {"f2", 20, 30, false, false}, {"fp", 40, 50, false, false}, {"f2", 30, 70, false, true}}},
		{"heal ends everything", true, true, []win{{"f1", 0, 10, true, false}, {"f2", 20, 30, false, false}, {"fp", 40, 50, false, false}, {"f2", 30, 60, false, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, orphans := history.FaultWindowsOf(h, tt.processEnds, tt.healEnds)
			var got []win
			for _, w := range ws {
				got = append(got, win{w.Start.Fault.ID, w.Start.Time, w.End, w.Stopped, w.Open})
				if w.Open != (w.EndIndex < 0) {
					t.Errorf("%s: open %v but end index %d", w.Start.Fault.ID, w.Open, w.EndIndex)
				}
			}
			for i := range tt.want {
				tt.want[i].from, tt.want[i].to = ms(tt.want[i].from), ms(tt.want[i].to)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			if len(orphans) != 1 || h.Events[orphans[0]].Fault.ID != "f9" {
				t.Errorf("orphans %v, want the stop of f9", orphans)
			}
		})
	}
}

// OpPairer fed event by event pairs exactly as Operations does.
func TestOpPairerAgreesWithOperations(t *testing.T) {
	h := historytest.Clean(historytest.GenConfig{Partitions: 2, Processes: 3, Ops: 300, UnknownRate: 0.2, ReadRate: 0.3, NoCompletion: true, Seed: 4})
	// A completion without an invoke, and a busy process invoked again.
	h = history.New(append(slices.Clone(h.Events),
		history.Event{Time: historytest.T0 + 1e12, Source: "c9", Kind: history.KindOp, Op: &history.ClientOp{Type: history.OpOK, Process: 1, F: history.FRead}},
		history.Event{Time: historytest.T0 + 1e12 + 1, Source: "c9", Kind: history.KindOp, Op: &history.ClientOp{Type: history.OpInvoke, Process: 2, F: history.FRead}},
		history.Event{Time: historytest.T0 + 1e12 + 2, Source: "c9", Kind: history.KindOp, Op: &history.ClientOp{Type: history.OpInvoke, Process: 2, F: history.FRead}},
	))
	ops, orphans := history.Operations(h)
	var p history.OpPairer[int]
	pairs := map[int]int{} // invoke index → completion index
	var gotOrphans []int
	for i := range h.Events {
		e := &h.Events[i]
		if e.Kind != history.KindOp {
			continue
		}
		if e.Op.Type == history.OpInvoke {
			p.Invoke(e, e.Index)
			continue
		}
		if inv, ok := p.Complete(e); ok {
			pairs[inv] = e.Index
		} else {
			gotOrphans = append(gotOrphans, e.Index)
		}
	}
	unknown := 0
	for _, o := range ops {
		if o.Complete == nil {
			unknown++
			if _, ok := pairs[o.Invoke.Index]; ok {
				t.Errorf("invoke %d paired by OpPairer, not by Operations", o.Invoke.Index)
			}
			continue
		}
		if pairs[o.Invoke.Index] != o.Complete.Index {
			t.Errorf("invoke %d: OpPairer pairs %d, Operations %d", o.Invoke.Index, pairs[o.Invoke.Index], o.Complete.Index)
		}
	}
	if !reflect.DeepEqual(gotOrphans, orphans) || len(orphans) == 0 {
		t.Errorf("orphans %v, Operations %v", gotOrphans, orphans)
	}
	if unknown == 0 || len(pairs) != len(ops)-unknown {
		t.Errorf("%d unknown, %d pairs of %d ops", unknown, len(pairs), len(ops))
	}
}
