package checkers

import (
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// leaderWrite appends node's write of t-0's state at zxid (znode version
// version) with outcome: a controller's when ctrlEpoch > 0, a leader's own
// ISR write otherwise.
func leaderWrite(b *hb.Builder, node, ctrlEpoch int32, zxid int64, version int32, outcome string, leader, leaderEpoch int32, isr ...int32) int {
	w := &history.ZKWrite{Start: b.Now() - hb.Ms/2, Path: "/brokers/topics/t/partitions/0/state", Op: "set", Conditional: ctrlEpoch > 0,
		ControllerEpoch: ctrlEpoch, ExpectedVersion: version - 1, Outcome: outcome,
		State: &history.PartitionState{Topic: "t", Partition: 0, Leader: leader, LeaderEpoch: leaderEpoch, ControllerEpoch: max(ctrlEpoch, 1), ISR: isr}}
	if outcome == history.ZKOK {
		w.NewVersion, w.Zxid = version, zxid
	}
	return b.Add(history.Event{Kind: history.KindZKWrite, Node: node, ZKWrite: w})
}

func leaderWatch(b *hb.Builder, zxid int64, version int32, leader, leaderEpoch int32, isr ...int32) int {
	return b.Add(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: "/brokers/topics/t/partitions/0/state", Type: history.WatchChanged,
		Mzxid: zxid, Version: version,
		State: &history.PartitionState{Topic: "t", Partition: 0, Leader: leader, LeaderEpoch: leaderEpoch, ControllerEpoch: 1, ISR: isr}}})
}

// laggingLeaderDies builds the kill-lagging-leader window on t-0, whose
// preferred replica is broker 2: broker 1 leads with ISR [1 2], shrinks it
// to [1] and acknowledges offset 1 alone, dies, and controller 3 (epoch 2),
// whose process runs with policy, writes it offline, leader -1 with ISR [1]
// (event offline, zxid 13, version 2): KAFKA-3861's default policy.
func laggingLeaderDies(b *hb.Builder, policy string) (ack, offline int) {
	startPolicy(b, 3, policy)
	leaderWatch(b, 10, 0, 1, 1, 1, 2)
	b.ProduceOK(0, tp0, "a", 0)
	leaderWrite(b, 1, 0, 11, 1, history.ZKOK, 1, 1, 1)
	_, ack = b.ProduceOK(0, tp0, "b", 1)
	offline = leaderWrite(b, 3, 2, 13, 2, history.ZKOK, -1, 2, 1)
	return ack, offline
}

func TestISRLeaderOutsideISR(t *testing.T) {
	runCases(t, ISR{}, []tcase{
		{name: "preferred election of a replica outside the ISR (mutant 05)", want: Invalid,
			explain: "controller 3 (epoch 2) wrote t-0's state with leader 2 at leader epoch 3 and ISR [1]",
			build: func(b *hb.Builder) []int {
				_, offline := laggingLeaderDies(b, "offline")
				w := leaderWrite(b, 3, 2, 14, 3, history.ZKOK, 2, 3, 1)
				leaderWatch(b, 14, 3, 2, 3, 1) // the same version: judged once
				return []int{offline, w}
			}},
		{name: "offline, then the old leader back and elected from its ISR", want: Valid, build: func(b *hb.Builder) []int {
			laggingLeaderDies(b, "offline")
			leaderWatch(b, 13, 2, -1, 2, 1)
			leaderWrite(b, 3, 2, 14, 3, history.ZKOK, 1, 3, 1)
			return nil
		}},
		{name: "preferred election of an ISR member", want: Valid, build: func(b *hb.Builder) []int {
			leaderWatch(b, 10, 0, 1, 1, 1, 2)
			leaderWrite(b, 3, 2, 11, 1, history.ZKOK, 2, 2, 1, 2)
			return nil
		}},
		{name: "unclean election: the ISR is the leader alone", want: Valid, build: func(b *hb.Builder) []int {
			laggingLeaderDies(b, "unclean")
			leaderWrite(b, 3, 2, 14, 3, history.ZKOK, 2, 3, 2)
			return nil
		}},
		{name: "reassignment leaves no leader", want: Valid, build: func(b *hb.Builder) []int {
			leaderWatch(b, 10, 0, 1, 1, 1, 2, 3)
			leaderWrite(b, 3, 2, 11, 1, history.ZKOK, -1, 2, 2, 3)
			return nil
		}},
		{name: "a failed write is not a state", want: Valid, build: func(b *hb.Builder) []int {
			laggingLeaderDies(b, "offline")
			leaderWrite(b, 3, 2, 0, 3, history.ZKBadVersion, 2, 3, 1)
			return nil
		}},
		{name: "a state only the watcher saw", want: Invalid, explain: "the ZooKeeper watcher saw t-0's state (zxid 0xe), which no node's log shows writing, with leader 2",
			build: func(b *hb.Builder) []int {
				_, offline := laggingLeaderDies(b, "offline")
				return []int{offline, leaderWatch(b, 14, 3, 2, 3, 1)}
			}},
		{name: "a leader's ISR write leaving itself out", want: Invalid, explain: "broker 1 wrote t-0's state (a leader's ISR change",
			build: func(b *hb.Builder) []int {
				leaderWatch(b, 10, 0, 1, 1, 1, 2)
				return []int{leaderWrite(b, 1, 0, 11, 1, history.ZKOK, 1, 1, 2)}
			}},
	})
}

// TestLeaderInISRRuleAlone: the mutant 05 story is the new rule's alone;
// without it the isr checker's other rules pass it (the election grew no
// ISR and no replica's log is shown to differ).
func TestLeaderInISRRuleAlone(t *testing.T) {
	b := hb.New()
	laggingLeaderDies(b, "offline")
	leaderWrite(b, 3, 2, 14, 3, history.ZKOK, 2, 3, 1)
	h := b.History()
	r := &report{name: "isr"}
	checkControllerISRGrowth(h, r)
	checkDivergentISRMembers(h, r)
	if len(r.violations) != 0 {
		t.Fatalf("the other rules found %d violations: %v", len(r.violations), r.violations)
	}
	checkLeaderInISR(h, r)
	if len(r.violations) != 1 || !strings.Contains(r.violations[0].Explanation, "not a member of its own ISR") {
		t.Fatalf("the rule found %v, want one leader outside its ISR", r.violations)
	}
	if got := r.details["states_with_leader_judged"]; got != 3 {
		t.Errorf("judged %v states with a leader, want 3 (the first observation, the shrink, the election)", got)
	}
}
