package controller

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

// umState returns the partition state broker id's queued UpdateMetadata
// requests last carried for partition p of topic t (nil if none did).
func umState(reqs []kmsg.Request, p int32) *kmsg.UpdateMetadataRequestTopicPartition {
	var got *kmsg.UpdateMetadataRequestTopicPartition
	for _, r := range reqs {
		um, ok := r.(*kmsg.UpdateMetadataRequest)
		if !ok {
			continue
		}
		for _, ts := range um.TopicStates {
			for i, st := range ts.PartitionStates {
				if ts.Topic == "t" && st.Partition == p {
					got = &ts.PartitionStates[i]
				}
			}
		}
	}
	return got
}

// umISR returns the ISR that broker id's queued UpdateMetadata requests
// last carried for partition p of topic t, and whether any carried it.
func umISR(reqs []kmsg.Request, p int32) ([]int32, bool) {
	if st := umState(reqs, p); st != nil {
		return st.ISR, true
	}
	return nil, false
}

// KafkaController.processIsrChangeNotification deletes exactly the
// notifications it read, after it refreshed the states they name and sent
// UpdateMetadata. A leader's notification created while the controller
// reads stays for the next event (its creation fires the child watch the
// read set), so the change it names reaches the brokers. Deleting every
// notification there at the end (the overload a new controller uses
// before it reads every state) drops it unread: the controller and every
// broker's metadata keep the ISR it replaced.
func TestISRChangeNotificationCreatedWhileHandlingOneIsKept(t *testing.T) {
	tc := newTestCluster(t, "", []int32{1, 2, 3}, map[int32][]int32{0: {1, 2, 3}, 1: {2, 3, 1}},
		map[int32]*zkdata.PartitionState{0: ps(1, 0, 1, 2, 3), 1: ps(2, 0, 2, 3, 1)})
	tc.elect()
	tc.drainAll()

	// Leader 1 shrinks partition 0 and notifies; while the controller
	// reads partition 0's state, leader 2 shrinks partition 1 and
	// notifies too.
	tc.zk.put(zkdata.PartitionStatePath("t", 0), zkdata.EncodePartitionState(zkdata.PartitionState{Leader: 1, LeaderEpoch: 0, ControllerEpoch: 1, ISR: []int32{1, 2}}))
	tc.zk.put(zkdata.ISRChangePath+"/isr_change_0000000001", zkdata.EncodeTopicPartitions([]zkdata.TopicPartition{{Topic: "t", Partition: 0}}))
	second := zkdata.ISRChangePath + "/isr_change_0000000002"
	tc.zk.hook = func(op, p string) error {
		if p == zkdata.PartitionStatePath("t", 0) && op == "get" {
			tc.zk.hook = nil
			tc.zk.put(zkdata.PartitionStatePath("t", 1), zkdata.EncodePartitionState(zkdata.PartitionState{Leader: 2, LeaderEpoch: 0, ControllerEpoch: 1, ISR: []int32{2, 3}}))
			tc.zk.put(second, zkdata.EncodeTopicPartitions([]zkdata.TopicPartition{{Topic: "t", Partition: 1}}))
		}
		return nil
	}
	tc.process(evISRChange{gen: tc.c.gen})
	if tc.zk.hook != nil {
		t.Fatal("the controller never read partition 0's state")
	}
	if ok, _, _ := tc.zk.Exists(second); !ok {
		t.Fatalf("%s, created while the controller handled another, was deleted unread", second)
	}
	if isr, _ := umISR(tc.drain(3), 0); !slices.Equal(isr, []int32{1, 2}) {
		t.Fatalf("UpdateMetadata for t-0 carried ISR %v, want [1 2]", isr)
	}
	// The watch brings the second notification.
	tc.process(evISRChange{gen: tc.c.gen})
	if isr, ok := umISR(tc.drain(3), 1); !ok || !slices.Equal(isr, []int32{2, 3}) {
		t.Fatalf("UpdateMetadata for t-1 after the second notification: ISR %v (sent %v), want [2 3]", isr, ok)
	}
	if got := tc.c.ctx.state[history.TP("t", 1)].st.ISR; !slices.Equal(got, []int32{2, 3}) {
		t.Fatalf("controller's cached ISR of t-1 %v, want [2 3]", got)
	}
	if n := tc.zk.count(zkdata.ISRChangePath + "/"); n != 0 {
		t.Fatalf("%d notifications left after both were handled", n)
	}
}
