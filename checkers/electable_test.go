package checkers

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// kafka3861 builds KAFKA-3861's window on partition t-0: brokers 1 (leader)
// and 2 in the ISR while acks=all produces are acknowledged, the ISR then
// shrinks to the leader (broker 2 keeps what it has), the leader dies and
// the controller writes leader -1 at +100 ms; broker 1 returns at
// +backMs. mod changes the story before the leader dies; survivors are
// the brokers registered while it is dead (2 and 3 unless given).
func kafka3861(b *hb.Builder, backMs int64, mod func(b *hb.Builder), survivors ...int32) (write, ack int) {
	if survivors == nil {
		survivors = []int32{2, 3}
	}
	b.Brokers(1, 2, 3)
	b.State(tp0, 1, 1, 1, 1, 1, 2)
	role(b, 1, 1, history.RoleLeader)
	b.ProduceOK(0, tp0, "a", 0)
	_, ack = b.ProduceOK(0, tp0, "b", 1)
	b.At(20).State(tp0, 1, 1, 1, 2, 1)
	if mod != nil {
		mod(b)
	}
	b.At(50).Fault(true, "f1", "kill-lagging-leader", "n1", "|", "n2", "n3")
	b.At(80).Brokers(survivors...)
	write = b.At(100).Add(history.Event{Kind: history.KindZKWrite, Node: 3, ZKWrite: &history.ZKWrite{
		Path: "/brokers/topics/t/partitions/0/state", Op: "set", ControllerEpoch: 1, Outcome: history.ZKOK, Zxid: 3,
		State: &history.PartitionState{Topic: "t", Partition: 0, Leader: -1, LeaderEpoch: 2, ControllerEpoch: 1, ISR: []int32{1}}}})
	b.At(backMs).Brokers(1, 2, 3)
	b.Start(1)
	b.State(tp0, 1, 3, 1, 4, 1)
	role(b, 1, 3, history.RoleLeader)
	b.Fault(false, "f1", "kill-lagging-leader", "n1", "|", "n2", "n3")
	b.At(backMs + 1000).Phase()
	return write, ack
}

func TestAvailabilityElectableOffline(t *testing.T) {
	grace := 300 * time.Millisecond
	lenient := Availability{Grace: time.Second, ElectGrace: grace}
	strict := Availability{Grace: time.Second, ElectGrace: grace, Strict: true}
	for _, tt := range []struct {
		name    string
		c       Availability
		backMs  int64
		mod     func(b *hb.Builder)
		alive   []int32
		want    Verdict
		explain string
		events  bool
	}{
		{name: "a registered follower held everything: strict", c: strict, backMs: 900, want: Invalid,
			explain: "although broker 2 was registered in ZooKeeper all along and held every acknowledged record: the last acknowledged produce, offset 1", events: true},
		{name: "the same, by default a known anomaly", c: lenient, backMs: 900, want: Valid, explain: "KAFKA-3861"},
		{name: "leader back within the grace", c: strict, backMs: 300, want: Valid},
		{name: "judgement off", c: Availability{Grace: time.Second, Strict: true}, backMs: 900, want: Valid},
		{name: "the follower truncated below the last acknowledged offset", c: strict, backMs: 900, want: Valid,
			mod: func(b *hb.Builder) {
				b.At(30).Add(history.Event{Kind: history.KindTruncation, Node: 2,
					Truncation: &history.Truncation{Topic: "t", Partition: 0, From: 2, To: 1, Reason: "high-watermark"}})
			}},
		{name: "the follower was not registered", c: strict, backMs: 900, alive: []int32{3}, want: Valid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := hb.New()
			write, ack := kafka3861(b, tt.backMs, tt.mod, tt.alive...)
			r := tt.c.Check(b.History())
			if r.Verdict != tt.want {
				t.Fatalf("verdict %s, want %s: %s", r.Verdict, tt.want, r.Explanation)
			}
			if !strings.Contains(r.Explanation, tt.explain) {
				t.Fatalf("explanation %q does not contain %q", r.Explanation, tt.explain)
			}
			if tt.events {
				for _, e := range []int{write, ack} {
					if !slices.Contains(r.Events, e) {
						t.Errorf("events %v do not include %d", r.Events, e)
					}
				}
			}
			if tt.want == Valid && tt.explain == "" && len(r.Known) > 0 {
				t.Errorf("known anomalies %+v, want none", r.Known)
			}
		})
	}
}
