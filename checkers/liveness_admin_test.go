package checkers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
)

// Admin operations the controller still owed after the grace are a
// liveness violation; ones that completed, or whose timeout came before
// the grace ran out (the controller may have finished unseen), are not.
func TestLivenessAdminOps(t *testing.T) {
	reassign := history.ClientOp{F: history.FReassign, Topic: "chaos", Partition: 1, Process: 0}
	shutdown := history.ClientOp{F: history.FControlledShutdown, Broker: 2, Topic: "chaos", Partition: -1, Process: 0}
	election := history.ClientOp{F: history.FPreferredElection, Topic: "chaos", Partition: 1, Process: 0}
	other := history.ClientOp{F: history.FReassign, Topic: "other", Partition: 1, Process: 0}
	with := func(o history.ClientOp, typ history.OpType, err string) history.ClientOp {
		o.Type, o.Error = typ, err
		return o
	}
	tests := []struct {
		name string
		op   history.ClientOp
		// completion type and when (ms); "" leaves it pending.
		done   history.OpType
		doneAt int64
		endAt  int64
		// deleteAt, when not 0, is when the controller began deleting the
		// op's topic (ms); the topic is created again 400 ms later.
		deleteAt int64
		want     Verdict
		say      string
	}{
		{"completed after healing", reassign, history.OpOK, 1500, 3000, 0, Valid, ""},
		{"refused by ZooKeeper", reassign, history.OpFail, 1100, 3000, 0, Valid, ""},
		{"timed out inside the grace", reassign, history.OpInfo, 1080, 3000, 0, Valid, ""},
		{"info after the grace", reassign, history.OpInfo, 2500, 3000, 0, Invalid, "reassign of chaos-1 (invoked at event 1"},
		{"never completed, history past the grace", shutdown, "", 0, 3000, 0, Invalid, "controlled-shutdown of broker 2"},
		{"never completed, history ends inside the grace", shutdown, "", 0, 1050, 0, Valid, ""},
		// The run's case: chaos-rf2's deletion began at +63.90s, the
		// reassignment of chaos-rf2-0 came at +65.02s, the controller
		// dropped /admin/reassign_partitions 15 ms later, the topic came
		// back at +69.65s with the old assignment and the client's timeout
		// ended the op at +80.11s, after the grace.
		{"topic being deleted at the invocation", reassign, history.OpInfo, 2500, 3000, 300, Valid, ""},
		{"preferred election of a topic being deleted", election, "", 0, 3000, 300, Valid, ""},
		{"topic deleted only after the invocation", reassign, history.OpInfo, 2500, 3000, 700, Invalid, "reassign of chaos-1 (invoked at event"},
		{"another topic being deleted", other, history.OpInfo, 2500, 3000, 300, Invalid, "reassign of other-1 (invoked at event"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := historytest.New()
			b.At(0).Fault(true, "f1", "pause", "n1")
			b.At(500).Op(with(tt.op, history.OpInvoke, ""))
			if tt.deleteAt != 0 {
				// The topic's partition states before, during and after
				// its deletion: the new znode's versions restart.
				b.At(0).Add(stateVersion("chaos", 1, 5))
				b.At(tt.deleteAt).Add(history.Event{Kind: history.KindTopicDeletion, Node: 3,
					Deletion: &history.TopicDeletion{Topic: "chaos", Step: history.DeletionStarted, Partitions: []int32{0, 1}}})
				b.At(tt.deleteAt + 400).Add(stateVersion("chaos", 1, 0))
			}
			b.At(1000).Fault(false, "f1", "pause", "n1")
			if tt.done != "" {
				b.At(tt.doneAt).Op(with(tt.op, tt.done, "not completed within 15s"))
			}
			b.At(tt.endAt).Phase()
			r := Liveness{Grace: time.Second, MaxBadVersionRetries: 3}.Check(b.History())
			if r.Verdict != tt.want || !strings.Contains(r.Explanation, tt.say) {
				t.Fatalf("got %s: %s\nwant %s saying %q", r.Verdict, r.Explanation, tt.want, tt.say)
			}
		})
	}
}

// stateVersion is a watcher's observation of version v of the partition's
// state znode, leader 1 at leader epoch v.
func stateVersion(topic string, partition int32, v int32) history.Event {
	return history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{
		Path: fmt.Sprintf("/brokers/topics/%s/partitions/%d/state", topic, partition), Type: history.WatchChanged, Version: v,
		State: &history.PartitionState{Topic: topic, Partition: partition, Leader: 1, LeaderEpoch: v, ISR: []int32{1}}}}
}
