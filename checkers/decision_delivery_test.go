package checkers

import (
	"testing"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// deliveryStep is one step of a decision-delivery history.
type deliveryStep func(b *hb.Builder)

// deliveryRun builds: brokers 1-3 started and registered (broker 2 with
// czxid 202), controller 1 elected at epoch 1, then the steps.
func deliveryRun(steps ...deliveryStep) *history.History {
	b := hb.New()
	for _, n := range []int32{1, 2, 3} {
		b.At(int64(n)).Start(n)
		b.At(int64(5+n)).Register(n, int64(200+n))
	}
	b.At(20).Add(history.Event{Kind: history.KindControllerElected, Node: 1, Controller: &history.ControllerRun{Epoch: 1, EpochZkVersion: 1}})
	for _, f := range steps {
		f(b)
	}
	return b.History()
}

// ctlStateWrite is controller 1's write of t-0's state naming leader 2 at
// leaderEpoch, started at startMs and answered (outcome) at endMs.
func ctlStateWrite(startMs, endMs int64, leaderEpoch int32, outcome string, attempt int) deliveryStep {
	return func(b *hb.Builder) {
		w := &history.ZKWrite{Start: hb.T0 + startMs*hb.Ms, Path: "/brokers/topics/t/partitions/0/state", Op: "set", Conditional: true,
			ControllerEpoch: 1, EpochZkVersion: 1, ExpectedVersion: leaderEpoch - 1, Outcome: outcome, Attempt: attempt,
			State: &history.PartitionState{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: leaderEpoch, ControllerEpoch: 1, ISR: []int32{2, 3}}}
		if outcome == history.ZKOK {
			w.NewVersion, w.Zxid = leaderEpoch, int64(1000+leaderEpoch)
		} else {
			w.Error = "zookeeper call timed out (outcome unknown): context deadline exceeded"
		}
		b.At(endMs).Add(history.Event{Kind: history.KindZKWrite, Node: 1, ZKWrite: w})
	}
}

// watched is the watcher's observation of t-0 naming leader 2 at
// leaderEpoch.
func watched(ms int64, leaderEpoch int32) deliveryStep {
	return func(b *hb.Builder) {
		b.At(ms).Add(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: "/brokers/topics/t/partitions/0/state", Type: history.WatchChanged,
			Mzxid: int64(1000 + leaderEpoch), Version: leaderEpoch,
			State: &history.PartitionState{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: leaderEpoch, ControllerEpoch: 1, ISR: []int32{2, 3}}}})
	}
}

// laiTo is controller 1's LeaderAndIsr to broker 2 for t-0 at leaderEpoch,
// meant for the registration with czxid meant.
func laiTo(ms int64, leaderEpoch int32, meant int64) deliveryStep {
	return func(b *hb.Builder) {
		b.At(ms).Add(history.Event{Kind: history.KindControlSent, Node: 1, Control: &history.Control{API: history.APILeaderAndIsr,
			ControllerID: 1, ControllerEpoch: 1, BrokerEpoch: meant, MeantBrokerEpoch: meant, TargetBroker: 2, Attempt: 1, Queued: b.Now() - hb.Ms,
			Partitions: []history.ControlPartition{{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: leaderEpoch, ISR: []int32{2, 3}}}}})
	}
}

// umTo is controller 1's UpdateMetadata to broker target naming t-0 led by
// broker 2 at leaderEpoch, meant for the registration with czxid meant.
func umTo(ms int64, target int32, leaderEpoch int32, meant int64) deliveryStep {
	return func(b *hb.Builder) {
		b.At(ms).Add(history.Event{Kind: history.KindControlSent, Node: 1, Control: &history.Control{API: history.APIUpdateMetadata,
			ControllerID: 1, ControllerEpoch: 1, BrokerEpoch: meant, MeantBrokerEpoch: meant, TargetBroker: target, Attempt: 1, Queued: b.Now() - hb.Ms,
			Partitions: []history.ControlPartition{{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: leaderEpoch, ISR: []int32{2, 3}}}}})
	}
}

func TestDecisionDelivery(t *testing.T) {
	tests := []struct {
		name    string
		steps   []deliveryStep
		want    Verdict
		explain string
	}{
		{name: "each state written is sent to its leader",
			steps: []deliveryStep{ctlStateWrite(100, 105, 1, history.ZKOK, 1), laiTo(110, 1, 202), ctlStateWrite(200, 205, 2, history.ZKOK, 1), laiTo(210, 2, 202)},
			want:  Valid, explain: "2 controller state writes that ZooKeeper applied, 2 sent to the leader they name"},
		{name: "a write given up after a deadline landed, and the next decision was sent instead",
			steps: []deliveryStep{laiTo(50, 0, 202), ctlStateWrite(100, 600, 1, history.ZKConnectionLoss, 1), watched(900, 1), ctlStateWrite(3000, 3005, 2, history.ZKOK, 1), laiTo(3010, 2, 202)},
			want:  Invalid,
			explain: "controller 1 (epoch 1) wrote t-0's state: leader 2, leader epoch 1, ISR [2 3] (write started +100ms, answered connectionloss " +
				"(zookeeper call timed out (outcome unknown): context deadline exceeded) after 500ms); ZooKeeper holds it (version 1, zxid 1001, logged at +900ms), " +
				"but the controller never sent broker 2 a LeaderAndIsr at leader epoch 1 for t-0: its next one to broker 2 for t-0, queued at +3.01s, carried leader epoch 2"},
		{name: "a write that never landed is decided again at the same epoch and sent",
			steps: []deliveryStep{ctlStateWrite(100, 600, 1, history.ZKConnectionLoss, 1), ctlStateWrite(3000, 3005, 1, history.ZKOK, 1), laiTo(3010, 1, 202)},
			want:  Valid, explain: "2 controller state writes that ZooKeeper applied, 2 sent"},
		{name: "a re-issued write whose first attempt landed is decided again one epoch up (attempt 2)",
			steps: []deliveryStep{ctlStateWrite(100, 600, 1, history.ZKBadVersion, 1), watched(300, 1), ctlStateWrite(610, 615, 2, history.ZKOK, 2), laiTo(620, 2, 202)},
			want:  Valid, explain: "1 controller state writes that ZooKeeper applied, 1 sent"},
		{name: "a leader that registered again was sent only the newest state",
			steps: []deliveryStep{laiTo(50, 0, 202), ctlStateWrite(100, 105, 1, history.ZKOK, 1), func(b *hb.Builder) { b.At(2000).Register(2, 250) }, ctlStateWrite(3000, 3005, 2, history.ZKOK, 1), laiTo(3010, 2, 250)},
			want:  Valid, explain: "2 controller state writes that ZooKeeper applied, 1 sent"},
		{name: "a leader the controller had not yet taken in as live was sent only the newest state",
			steps: []deliveryStep{ctlStateWrite(100, 105, 1, history.ZKOK, 1), ctlStateWrite(3000, 3005, 2, history.ZKOK, 1), laiTo(3010, 2, 202)},
			want:  Valid, explain: "2 controller state writes that ZooKeeper applied, 1 sent"},
		{name: "every state reaches every live broker's metadata",
			steps: []deliveryStep{umTo(50, 3, 0, 203), ctlStateWrite(100, 105, 1, history.ZKOK, 1), laiTo(110, 1, 202), umTo(111, 3, 1, 203),
				ctlStateWrite(200, 205, 2, history.ZKOK, 1), laiTo(210, 2, 202), umTo(211, 3, 2, 203)},
			want: Valid, explain: "2 controller state writes that ZooKeeper applied, 2 sent to the leader they name, 2 (state x broker) in UpdateMetadata"},
		{name: "a broker told only the later of two states in its metadata",
			steps: []deliveryStep{umTo(50, 3, 0, 203), ctlStateWrite(100, 105, 1, history.ZKOK, 1), laiTo(110, 1, 202),
				ctlStateWrite(200, 205, 2, history.ZKOK, 1), laiTo(210, 2, 202), umTo(211, 3, 2, 203)},
			want: Invalid,
			explain: "but the controller never sent broker 3 an UpdateMetadata with t-0 at leader epoch 1: its next one to broker 3 naming t-0, queued at +210ms, carried leader epoch 2, " +
				"so until then broker 3 answered clients' metadata requests with the leader the write replaced"},
		{name: "a broker the controller took in as live only after the write is told the newest state",
			steps: []deliveryStep{ctlStateWrite(100, 105, 1, history.ZKOK, 1), laiTo(110, 1, 202),
				ctlStateWrite(200, 205, 2, history.ZKOK, 1), laiTo(210, 2, 202), umTo(211, 3, 2, 203)},
			want: Valid},
		{name: "a controller that sent its leader nothing later shows nothing",
			steps: []deliveryStep{ctlStateWrite(100, 600, 1, history.ZKConnectionLoss, 1), watched(900, 1)},
			want:  Valid, explain: "1 controller state writes that ZooKeeper applied, 0 sent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantFinding(t, DecisionDelivery{}.Check(deliveryRun(tt.steps...)), tt.want, "", tt.explain)
		})
	}
}
