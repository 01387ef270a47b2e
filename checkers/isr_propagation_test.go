package checkers

import (
	"fmt"
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// propagationRun builds the ISR change propagation of partition t-0: leader
// 2 writes t-0's state at zkVersion 5 (ISR [2 3]) at +100 ms and creates
// notification isr_change_0000000001 naming it at +200 ms; controller 1
// (elected at +10 ms) deletes it at +300 ms. Then each step of after runs.
type propagationStep func(b *hb.Builder)

const propagationNote = "/isr_change_notification/isr_change_0000000001"

func propagationRun(after ...propagationStep) *history.History {
	b := hb.New()
	b.At(0).Start(2)
	b.At(10).Start(1)
	b.At(100).Add(history.Event{Kind: history.KindZKWrite, Node: 2, ZKWrite: &history.ZKWrite{Start: b.Now() - hb.Ms, Path: "/brokers/topics/t/partitions/0/state",
		Op: "set", ExpectedVersion: 4, Outcome: history.ZKOK, NewVersion: 5,
		State: &history.PartitionState{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 3, ControllerEpoch: 1, ISR: []int32{2, 3}}}})
	b.At(201).Add(history.Event{Kind: history.KindZKWrite, Node: 2, ZKWrite: &history.ZKWrite{Start: hb.T0 + 200*hb.Ms, Path: propagationNote,
		Op: "create", ExpectedVersion: -1, Outcome: history.ZKOK, Data: `{"version":1,"partitions":[{"topic":"t","partition":0}]}`}})
	b.At(300).Add(history.Event{Kind: history.KindZKWrite, Node: 1, ZKWrite: &history.ZKWrite{Start: b.Now() - hb.Ms, Path: propagationNote,
		Op: "delete", Conditional: true, ControllerEpoch: 1, ExpectedVersion: -1, Outcome: history.ZKOK}})
	for _, f := range after {
		f(b)
	}
	return b.History()
}

// umQueued appends controller 1's UpdateMetadata to broker 3, queued at
// queuedMs and handed to the network at sentMs, carrying t-0 at zkVersion
// version with ISR isr.
func umQueued(queuedMs, sentMs int64, version int32, isr ...int32) propagationStep {
	return func(b *hb.Builder) {
		b.At(sentMs).Add(history.Event{Kind: history.KindControlSent, Node: 1, Control: &history.Control{API: history.APIUpdateMetadata,
			ControllerID: 1, ControllerEpoch: 1, BrokerEpoch: 103, TargetBroker: 3, Attempt: 1, Queued: hb.T0 + queuedMs*hb.Ms,
			Partitions: []history.ControlPartition{{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 3, ISR: isr, ZkVersion: version}}}})
	}
}

func TestISRPropagation(t *testing.T) {
	tests := []struct {
		name    string
		after   []propagationStep
		want    Verdict
		explain string
	}{
		{name: "the controller's later UpdateMetadata carries the notified state", after: []propagationStep{umQueued(310, 311, 5, 2, 3)}, want: Valid,
			explain: "every one of the 1 ISR change notifications a controller deleted had been taken in: each of the 1 partition states"},
		{name: "a notification deleted unread leaves the controller serving the replaced ISR", after: []propagationStep{umQueued(400, 401, 4, 2, 3, 1)}, want: Invalid,
			explain: "controller broker 1 (the process started at event 1 (+10ms), controller epoch 1) deleted ISR change notification " + propagationNote +
				" at +300ms (event 4), which broker 2 had created at +200ms (event 3) naming t-0, and at +400ms queued UpdateMetadata for broker 3 carrying t-0 at zkVersion 4" +
				" (leader 2, leader epoch 3, ISR [2 3 1], event 5), although broker 2 had written zkVersion 5 (leader 2, leader epoch 3, ISR [2 3]) at +100ms (event 2)"},
		{name: "queued before the delete, sent after it (the send thread held it)", after: []propagationStep{umQueued(150, 500, 4, 2, 3, 1)}, want: Valid},
		{name: "a state written after the notification was sent is not owed", after: []propagationStep{
			func(b *hb.Builder) {
				b.At(250).Add(history.Event{Kind: history.KindZKWrite, Node: 2, ZKWrite: &history.ZKWrite{Start: b.Now() - hb.Ms, Path: "/brokers/topics/t/partitions/0/state",
					Op: "set", ExpectedVersion: 5, Outcome: history.ZKOK, NewVersion: 6,
					State: &history.PartitionState{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 3, ControllerEpoch: 1, ISR: []int32{2}}}})
			}, umQueued(400, 401, 5, 2, 3)}, want: Valid},
		{name: "the topic was deleted and created again in between", after: []propagationStep{
			func(b *hb.Builder) {
				b.At(320).Add(history.Event{Kind: history.KindTopicDeletion, Node: 1, Deletion: &history.TopicDeletion{Topic: "t", Step: history.DeletionStarted, Partitions: []int32{0}, ControllerEpoch: 1}})
				b.At(340).Add(history.Event{Kind: history.KindZKWrite, Node: 1, ZKWrite: &history.ZKWrite{Start: b.Now() - hb.Ms, Path: "/brokers/topics/t/partitions/0/state",
					Op: "create", Conditional: true, ControllerEpoch: 1, ExpectedVersion: -1, Outcome: history.ZKOK, NewVersion: 0,
					State: &history.PartitionState{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 0, ControllerEpoch: 1, ISR: []int32{2, 3, 1}}}})
			}, umQueued(400, 401, 0, 2, 3, 1)}, want: Valid},
		{name: "a later process of the controller's broker is another controller", after: []propagationStep{
			func(b *hb.Builder) { b.At(350).Start(1) }, umQueued(400, 401, 4, 2, 3, 1)}, want: Valid},
		{name: "being deleted: the broker drops the partition", after: []propagationStep{
			func(b *hb.Builder) {
				b.At(400).Add(history.Event{Kind: history.KindControlSent, Node: 1, Control: &history.Control{API: history.APIUpdateMetadata,
					ControllerID: 1, ControllerEpoch: 1, TargetBroker: 3, Attempt: 1, Queued: b.Now(),
					Partitions: []history.ControlPartition{{Topic: "t", Partition: 0, Leader: -2, LeaderEpoch: 3, ISR: []int32{2, 3, 1}, ZkVersion: 4}}}})
			}}, want: Valid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantFinding(t, ISRPropagation{}.Check(propagationRun(tt.after...)), tt.want, "", tt.explain)
		})
	}
}

// leaderRun builds leader 2's ISR changes and notifications: t-1's ISR
// write answered at +149 ms and logged as an isr_change at +150 ms, then
// each step of after.
func leaderRun(after ...propagationStep) *history.History {
	b := hb.New()
	b.At(0).Start(2)
	b.At(149).Add(history.Event{Kind: history.KindZKWrite, Node: 2, ZKWrite: &history.ZKWrite{Start: b.Now() - hb.Ms, Path: "/brokers/topics/t/partitions/1/state",
		Op: "set", ExpectedVersion: 4, Outcome: history.ZKOK, NewVersion: 5,
		State: &history.PartitionState{Topic: "t", Partition: 1, Leader: 2, LeaderEpoch: 3, ControllerEpoch: 1, ISR: []int32{2}}}})
	b.At(150).Add(history.Event{Kind: history.KindISRChange, Node: 2, ISR: &history.ISRChange{Topic: "t", Partition: 1, Action: "shrink",
		Old: []int32{2, 3}, New: []int32{2}, LeaderEpoch: 3, ZkVersion: 5, Outcome: history.ZKOK}})
	for _, f := range after {
		f(b)
	}
	return b.History()
}

// notified appends leader 2's notification create started at startMs
// (answered 1 ms later) naming partitions of t.
func notified(startMs int64, seq int, parts ...int32) propagationStep {
	return func(b *hb.Builder) {
		var ps []string
		for _, p := range parts {
			ps = append(ps, fmt.Sprintf(`{"topic":"t","partition":%d}`, p))
		}
		b.At(startMs + 1).Add(history.Event{Kind: history.KindZKWrite, Node: 2, ZKWrite: &history.ZKWrite{Start: hb.T0 + startMs*hb.Ms,
			Path: fmt.Sprintf("/isr_change_notification/isr_change_%010d", seq), Op: "create", ExpectedVersion: -1, Outcome: history.ZKOK,
			Data: `{"version":1,"partitions":[` + strings.Join(ps, ",") + `]}`}})
	}
}

func TestISRPropagationLeaders(t *testing.T) {
	tests := []struct {
		name    string
		after   []propagationStep
		want    Verdict
		explain string
	}{
		{name: "the next notification names the change", after: []propagationStep{notified(5200, 1, 0, 1)}, want: Valid,
			explain: "each of the 1 ISR changes leaders wrote that a later notification of their process could name (of 1) was named by one"},
		{name: "a notification started between the write's answer and the log names it", after: []propagationStep{
			func(b *hb.Builder) {
				// Started at +149.5 ms, logged after the isr_change line.
				b.At(151).Add(history.Event{Kind: history.KindZKWrite, Node: 2, ZKWrite: &history.ZKWrite{Start: hb.T0 + 149*hb.Ms + hb.Ms/2,
					Path: "/isr_change_notification/isr_change_0000000001", Op: "create", ExpectedVersion: -1, Outcome: history.ZKOK,
					Data: `{"version":1,"partitions":[{"topic":"t","partition":1}]}`}})
			}, notified(5200, 2, 0)}, want: Valid},
		{name: "the change dropped from the set", after: []propagationStep{notified(5200, 1, 0), notified(7700, 2, 2)}, want: Invalid,
			explain: "broker 2 (the process started at event 0 (+0s)), leader of t-1 at leader epoch 3, changed its ISR [2 3] → [2] at zkVersion 5 (shrink at +150ms, event 2), but its next ISR change notification, started at +5.2s (/isr_change_notification/isr_change_0000000001, event 3), named [t-0] and no notification of that process named t-1"},
		{name: "no notification after the change: not judged", want: Valid},
		{name: "a later process's notification is not this one's", after: []propagationStep{
			func(b *hb.Builder) { b.At(3000).Start(2) }, notified(5200, 1, 0)}, want: Valid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantFinding(t, ISRPropagation{}.Check(leaderRun(tt.after...)), tt.want, "", tt.explain)
		})
	}
}
