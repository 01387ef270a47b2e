package scenarios

import (
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// KAFKA-3861's unclean mode, in the shape its driver gives it: broker 1
// leads chaos-0 with ISR [1 3], acknowledges "a" and "b", shrinks the ISR
// to [1], and dies; controller 2, running the unclean policy, elects broker
// 2, which left the ISR first; the final read holds neither record. Judged
// with the scenario's knobs, the run is valid and the isr checker names
// the known anomaly unclean-election with both records; with
// --strict-elections it is invalid by that name.
func TestKAFKA3861UncleanModeVerdict(t *testing.T) {
	sc := kafka3861()
	if _, err := sc.Mode("unclean"); err != nil {
		t.Fatal(err)
	}
	tp := history.TP("chaos", 0)
	state := func(b *hb.Builder, node, ctrlEpoch int32, zxid int64, expected, version, leader, epoch int32, isr ...int32) {
		b.Add(history.Event{Kind: history.KindZKWrite, Node: node, ZKWrite: &history.ZKWrite{Start: b.Now() - hb.Ms/2,
			Path: "/brokers/topics/chaos/partitions/0/state", Op: "set", Conditional: ctrlEpoch > 0, ControllerEpoch: ctrlEpoch,
			ExpectedVersion: expected, Outcome: history.ZKOK, NewVersion: version, Zxid: zxid,
			State: &history.PartitionState{Topic: tp.Topic, Partition: tp.Partition, Leader: leader, LeaderEpoch: epoch, ControllerEpoch: max(ctrlEpoch, 1), ISR: isr}}})
	}
	b := hb.New()
	b.Add(history.Event{Kind: history.KindNodeStart, Node: 2, Process: &history.Process{Incarnation: 1, Policy: "unclean"}})
	b.Add(history.Event{Kind: history.KindControllerElected, Node: 2, Controller: &history.ControllerRun{Epoch: 1}})
	state(b, 2, 1, 10, -1, 0, 1, 1, 1, 3)
	b.ProduceOK(0, tp, "a", 0)
	b.ProduceOK(0, tp, "b", 1)
	state(b, 1, 0, 11, 0, 1, 1, 1, 1)
	state(b, 2, 1, 12, 1, 2, 2, 2, 2)
	b.ProduceOK(0, tp, "c", 0)
	b.ReadBack(99, tp, 0, true, hb.Rec(0, "c"))
	h := b.History()

	for _, strict := range []bool{false, true} {
		cfg := sc.Check
		cfg.StrictElections = strict
		results, verdict := checkers.Run(h, checkers.All(cfg))
		var isr checkers.Result
		for _, r := range results {
			if r.Checker == (checkers.ISR{}).Name() {
				isr = r
			}
			if r.Checker != (checkers.ISR{}).Name() && r.Verdict == checkers.Invalid {
				t.Errorf("strict %v: %s invalid: %s", strict, r.Checker, r.Explanation)
			}
		}
		if len(isr.Known) != 1 || isr.Known[0].Name != checkers.KnownUncleanElection ||
			!strings.Contains(isr.Known[0].Example, `it cost 2 acknowledged records that broker 2 lacked: "a" at offset 0`) {
			t.Fatalf("strict %v: isr known anomalies %+v", strict, isr.Known)
		}
		want := checkers.Valid
		if strict {
			want = checkers.Invalid
		}
		if isr.Verdict != want {
			t.Errorf("strict %v: isr %s: %s; want %s", strict, isr.Verdict, isr.Explanation, want)
		}
		_ = verdict
	}
}
