package controller

import (
	"slices"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

func ps(leader, epoch int32, isr ...int32) *zkdata.PartitionState {
	return &zkdata.PartitionState{Leader: leader, LeaderEpoch: epoch, ControllerEpoch: 0, ISR: isr}
}

// A broker that shut down cleanly and came back before the controller saw
// it gone is seen once, bounced (a newer czxid). Kafka's processBrokerChange
// calls onBrokerFailure for bounced brokers too, and onBrokerFailure removes
// every failed broker from shuttingDownBrokerIds, so the new process is
// electable again. Before, the node cleared the mark only for dead brokers:
// the bounced broker stayed "shutting down" and was never elected.
func TestBouncedBrokerIsNoLongerShuttingDown(t *testing.T) {
	tc := newTestCluster(t, "", []int32{1, 2, 3}, map[int32][]int32{0: {3, 2}}, map[int32]*zkdata.PartitionState{0: ps(3, 0, 3, 2)})
	tc.elect()
	if code := tc.shutdown(2); code != 0 {
		t.Fatalf("controlled shutdown of 2: error %d", code)
	}
	if st, _ := tc.zk.state0(history.TP("t", 0)); !slices.Equal(st.ISR, []int32{3}) {
		t.Fatalf("after 2's controlled shutdown ISR %v, want [3]", st.ISR)
	}
	tc.bounce(2)
	if tc.c.ctx.shuttingDown[2] || !tc.c.ctx.isLive(2) {
		t.Fatalf("bounced broker 2: shutting down %v, live %v; want a live broker", tc.c.ctx.shuttingDown[2], tc.c.ctx.isLive(2))
	}
	// Its new process catches up and the leader adds it back.
	tc.isrChange(0, zkdata.PartitionState{Leader: 3, LeaderEpoch: 2, ControllerEpoch: 1, ISR: []int32{3, 2}})
	tc.kill(3)
	if st, _ := tc.zk.state0(history.TP("t", 0)); st.Leader != 2 {
		t.Fatalf("after 3 died: state %+v, want leader 2 (the bounced broker, in the ISR)", st)
	}
}
