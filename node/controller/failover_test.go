package controller

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

// Kafka 2.6.3's onControllerFailover runs ReplicaStateMachine.startup
// before PartitionStateMachine.startup: the first LeaderAndIsr a live broker
// hears from a new controller carries every partition of it that has a
// state in ZooKeeper (handleStateChanges(onlineReplicas, OnlineReplica));
// the ISR removals of dead brokers' replicas, the creation of partitions
// without a state and the offline elections come after. A restarted
// broker's first LeaderAndIsr starts its high-watermark checkpoint thread
// (ReplicaManager.becomeLeaderOrFollower), and the checkpoint holds only the
// partitions the broker has in memory: a first LeaderAndIsr for a new
// partition alone made the broker rewrite its checkpoint without the
// partitions it held before the restart, and those started again from high
// watermark 0 when their own LeaderAndIsr came.
func TestFirstLeaderAndIsrAfterFailoverCarriesEveryPartition(t *testing.T) {
	tests := []struct {
		name   string
		states map[int32]*zkdata.PartitionState
		want   []int32 // partitions of broker 3's first LeaderAndIsr
	}{
		{"a new partition and a dead broker's replica", map[int32]*zkdata.PartitionState{
			0: ps(2, 4, 2, 3), 1: nil, 2: ps(4, 6, 4, 3)}, []int32{0, 2}},
		{"no new partition", map[int32]*zkdata.PartitionState{
			0: ps(2, 4, 2, 3), 1: ps(3, 1, 3), 2: ps(4, 6, 4, 3)}, []int32{0, 1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Broker 4 is dead: partition 2's ISR loses it, and
			// partition 1 (no state yet) is created by the failover.
			tc := newTestCluster(t, "", []int32{1, 2, 3},
				map[int32][]int32{0: {2, 3}, 1: {3, 2}, 2: {4, 3}}, tt.states)
			tc.process(evElect{reason: "test"})
			if !tc.c.active {
				t.Fatal("controller not elected")
			}
			var first *kmsg.LeaderAndISRRequest
			var all []kmsg.Request
			for _, r := range tc.drain(3) {
				all = append(all, r)
				if l, ok := r.(*kmsg.LeaderAndISRRequest); ok && first == nil {
					first = l
				}
			}
			if first == nil {
				t.Fatal("broker 3 got no LeaderAndIsr")
			}
			got := laiPartitions([]kmsg.Request{first})
			if !slices.Equal(got, tt.want) {
				t.Fatalf("broker 3's first LeaderAndIsr carries partitions %v, want %v (all its LeaderAndIsr: %v)", got, tt.want, laiPartitions(all))
			}
			// The failover still creates partition 1, takes 4 out of
			// partition 2's ISR and elects 3 there.
			if st, _ := tc.zk.state0(history.TP("t", 1)); st.Leader != 3 {
				t.Fatalf("partition 1: state %+v, want leader 3", st)
			}
			if st, _ := tc.zk.state0(history.TP("t", 2)); st.Leader != 3 || !slices.Equal(st.ISR, []int32{3}) {
				t.Fatalf("partition 2: state %+v, want leader 3, ISR [3] (4 taken out, then 3 elected)", st)
			}
		})
	}
}
