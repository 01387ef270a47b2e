package controller

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

// topicZnode decodes /brokers/topics/t with its adding and removing
// replicas.
func topicZnode(t *testing.T, tc *testCluster) zkdata.TopicAssignment {
	t.Helper()
	d, _, err := tc.zk.Get(zkdata.TopicPath("t"))
	if err != nil {
		t.Fatal(err)
	}
	var a zkdata.TopicAssignment
	if err := json.Unmarshal(d, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// runUntilReassignISR processes queued events until the state znode
// watch of a partition being reassigned has fired and been processed
// (the watch's goroutine queues it).
func runUntilReassignISR(t *testing.T, tc *testCluster) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		seen := false
		for _, ev := range tc.c.events.drain() {
			_, ok := ev.(evReassignISR)
			seen = seen || ok
			tc.process(ev)
		}
		if seen {
			return
		}
	}
	t.Fatal("no PartitionReassignmentIsrChange event within 2s")
}

// lais returns, per broker, the LeaderAndIsr partition states of t-0 in
// its queue.
func laiStates(tc *testCluster, id int32) (lai []kmsg.LeaderAndISRRequestTopicPartition, stops []kmsg.StopReplicaRequestTopicPartitionState) {
	for _, r := range tc.drain(id) {
		switch r := r.(type) {
		case *kmsg.LeaderAndISRRequest:
			for _, ts := range r.TopicStates {
				lai = append(lai, ts.PartitionStates...)
			}
		case *kmsg.StopReplicaRequest:
			for _, ts := range r.Topics {
				stops = append(stops, ts.PartitionStates...)
			}
		}
	}
	return lai, stops
}

// A reassignment of t-0 from {1,2} to {2,3} follows
// KafkaController.onPartitionReassignment: U1 writes RS = TRS + ORS =
// [2,3,1] with adding [3] and removing [1] to the topic znode; A1 bumps
// the leader epoch and sends LeaderAndIsr with RS to 1 and 2; A2 sends
// broker 3 a LeaderAndIsr marked new. The request stays in
// /admin/reassign_partitions while 3 is out of the ISR, and the
// controller's own epoch bump (a state change, not a join) completes
// nothing. Once the leader adds 3 to the ISR, phase B: B3 elects 2 (the
// old leader 1 is not in TRS; ReassignPartitionLeaderElectionStrategy
// takes the first live TRS member in the ISR), B4 takes 1 out of the ISR
// and sends it StopReplica, B5 StopReplica with delete, B6 writes RS = TRS
// without adding or removing replicas, B7 deletes the request znode.
func TestReassignmentAddingAReplicaWaitsForTheISR(t *testing.T) {
	tc := newTestCluster(t, "", []int32{1, 2, 3}, map[int32][]int32{0: {1, 2}},
		map[int32]*zkdata.PartitionState{0: {Leader: 1, LeaderEpoch: 4, ISR: []int32{1, 2}}})
	tc.elect()
	tc.drainAll()
	tp := history.TP("t", 0)
	tc.zk.put(zkdata.ReassignPartitionsPath, zkdata.EncodeReassignment([]zkdata.ReassignmentPartition{{Topic: "t", Partition: 0, Replicas: []int32{2, 3}}}))
	tc.process(evReassign{gen: tc.c.gen})

	a := topicZnode(t, tc)
	if !slices.Equal(a.Partitions["0"], []int32{2, 3, 1}) || !slices.Equal(a.AddingReplicas["0"], []int32{3}) || !slices.Equal(a.RemovingReplicas["0"], []int32{1}) {
		t.Fatalf("phase A topic znode %+v, want RS [2 3 1], adding [3], removing [1]", a)
	}
	st, _ := tc.zk.state0(tp)
	if st.Leader != 1 || st.LeaderEpoch != 5 || !slices.Equal(st.ISR, []int32{1, 2}) {
		t.Fatalf("phase A state %+v, want leader 1 at epoch 5 (A1's bump), ISR [1 2]", st)
	}
	for _, id := range []int32{1, 2} {
		lai, _ := laiStates(tc, id)
		if len(lai) != 1 || lai[0].IsNew || !slices.Equal(lai[0].Replicas, []int32{2, 3, 1}) || lai[0].LeaderEpoch != 5 {
			t.Fatalf("broker %d got LeaderAndIsr %+v, want one with replicas [2 3 1] at epoch 5", id, lai)
		}
	}
	lai, _ := laiStates(tc, 3)
	if len(lai) != 2 || !lai[len(lai)-1].IsNew {
		t.Fatalf("broker 3 got LeaderAndIsr %+v, want A1's and A2's (marked new)", lai)
	}
	if ok, _, _ := tc.zk.Exists(zkdata.ReassignPartitionsPath); !ok {
		t.Fatal("the request znode was deleted before the new replica joined the ISR")
	}
	runUntilReassignISR(t, tc) // A1's own write fired the watch
	if tc.c.ctx.reassigning[tp] == nil {
		t.Fatal("the controller's own epoch bump completed the reassignment")
	}

	// The leader adds 3 (Partition.expandIsr).
	tc.zk.put(zkdata.PartitionStatePath("t", 0), zkdata.EncodePartitionState(zkdata.PartitionState{Leader: 1, LeaderEpoch: 5, ControllerEpoch: 1, ISR: []int32{1, 2, 3}}))
	runUntilReassignISR(t, tc)
	st, _ = tc.zk.state0(tp)
	if st.Leader != 2 || st.LeaderEpoch != 7 || !slices.Equal(st.ISR, []int32{2, 3}) {
		t.Fatalf("phase B state %+v, want leader 2 (B3) and ISR [2 3] (B4) at epoch 7", st)
	}
	_, stops := laiStates(tc, 1)
	if len(stops) != 2 || stops[0].Delete || !stops[1].Delete {
		t.Fatalf("broker 1 got StopReplica %+v, want one without delete (B4), then one with (B5)", stops)
	}
	a = topicZnode(t, tc)
	if !slices.Equal(a.Partitions["0"], []int32{2, 3}) || a.AddingReplicas != nil || a.RemovingReplicas != nil {
		t.Fatalf("phase B topic znode %+v, want RS [2 3] alone (B6)", a)
	}
	if ok, _, _ := tc.zk.Exists(zkdata.ReassignPartitionsPath); ok {
		t.Fatal("the request znode is still there after the reassignment completed (B7)")
	}
	if len(tc.c.ctx.reassigning) != 0 || !slices.Equal(tc.c.ctx.assign[tp], []int32{2, 3}) {
		t.Fatalf("controller context: reassigning %v, assignment %v", tc.c.ctx.reassigning, tc.c.ctx.assign[tp])
	}
}

// A request listing a reorder of t-1 beside t-0's growth: the reorder is
// applied at once and dropped from the znode, which keeps t-0's entry
// only, as Kafka removes each partition once its reassignment completes.
func TestReassignmentZnodeKeepsOnlyPendingPartitions(t *testing.T) {
	tc := newTestCluster(t, "", []int32{1, 2, 3}, map[int32][]int32{0: {1, 2}, 1: {2, 3}},
		map[int32]*zkdata.PartitionState{0: {Leader: 1, ISR: []int32{1, 2}}, 1: {Leader: 2, ISR: []int32{2, 3}}})
	tc.elect()
	tc.zk.put(zkdata.ReassignPartitionsPath, zkdata.EncodeReassignment([]zkdata.ReassignmentPartition{
		{Topic: "t", Partition: 0, Replicas: []int32{2, 3}}, {Topic: "t", Partition: 1, Replicas: []int32{3, 2}}}))
	tc.process(evReassign{gen: tc.c.gen})
	d, _, err := tc.zk.Get(zkdata.ReassignPartitionsPath)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := zkdata.DecodeReassignment(d)
	if err != nil || len(parts) != 1 || parts[0].Partition != 0 {
		t.Fatalf("request znode lists %+v (%v), want t-0 alone", parts, err)
	}
	if a := topicZnode(t, tc); !slices.Equal(a.Partitions["1"], []int32{3, 2}) || !slices.Equal(a.Partitions["0"], []int32{2, 3, 1}) {
		t.Fatalf("topic znode %+v", a)
	}
}

// reassignTo is ReplicaAssignment.reassignTo: target first, then the
// origin's replicas it drops.
func TestReassignTo(t *testing.T) {
	rs, r := reassignTo([]int32{1, 2, 3}, []int32{3, 4, 2})
	if !slices.Equal(rs, []int32{3, 4, 2, 1}) || !slices.Equal(r.adding, []int32{4}) || !slices.Equal(r.removing, []int32{1}) {
		t.Fatalf("rs %v, %+v", rs, r)
	}
	if o := r.origin(rs); !slices.Equal(o, []int32{3, 2, 1}) {
		t.Fatalf("origin %v", o)
	}
}

// A controller elected while t-0 is half-way from {1,2} to {2,3} (the
// topic znode has RS [2,3,1] with adding [3] and removing [1]) knows the
// reassignment from the topic znode (initializeControllerContext) and goes
// on with it: ORS is RS without the adding replicas, so the request's
// target [2,3] still adds 3; the ISR is not cut before 3 joins it. Without
// the request znode, the failover resumes it all the same
// (maybeResumeReassignments).
func TestReassignmentGoesOnAtFailover(t *testing.T) {
	for _, request := range []bool{true, false} {
		tc := newTestCluster(t, "", []int32{1, 2, 3}, map[int32][]int32{0: {2, 3, 1}},
			map[int32]*zkdata.PartitionState{0: {Leader: 1, LeaderEpoch: 5, ISR: []int32{1, 2}}})
		tc.zk.put(zkdata.TopicPath("t"), zkdata.EncodeTopicReassigning(map[int32][]int32{0: {2, 3, 1}}, map[int32][]int32{0: {3}}, map[int32][]int32{0: {1}}))
		if request {
			tc.zk.put(zkdata.ReassignPartitionsPath, zkdata.EncodeReassignment([]zkdata.ReassignmentPartition{{Topic: "t", Partition: 0, Replicas: []int32{2, 3}}}))
		}
		tc.elect()
		tp := history.TP("t", 0)
		r := tc.c.ctx.reassigning[tp]
		if r == nil || !slices.Equal(r.target, []int32{2, 3}) || !slices.Equal(r.adding, []int32{3}) || !slices.Equal(r.removing, []int32{1}) {
			t.Fatalf("request %v: reassignment after failover %+v", request, r)
		}
		st, _ := tc.zk.state0(tp)
		if st.Leader != 1 || !slices.Equal(st.ISR, []int32{1, 2}) || st.LeaderEpoch != 6 {
			t.Fatalf("request %v: state %+v, want leader 1, ISR [1 2] at epoch 6 (A1 once)", request, st)
		}
		lai, _ := laiStates(tc, 3)
		if len(lai) == 0 || !lai[len(lai)-1].IsNew {
			t.Fatalf("request %v: broker 3 got %+v, want a LeaderAndIsr marked new", request, lai)
		}
		tc.zk.put(zkdata.PartitionStatePath("t", 0), zkdata.EncodePartitionState(zkdata.PartitionState{Leader: 1, LeaderEpoch: 6, ControllerEpoch: 1, ISR: []int32{1, 2, 3}}))
		runUntilReassignISR(t, tc)
		if a := topicZnode(t, tc); !slices.Equal(a.Partitions["0"], []int32{2, 3}) || a.AddingReplicas != nil {
			t.Fatalf("request %v: topic znode %+v after the join", request, a)
		}
	}
}

// A deletion requested at failover for a topic whose partition is being
// reassigned waits for the reassignment (fetchTopicDeletionsInProgress
// makes it ineligible) and goes on once the reassignment completes
// (resumeDeletionForTopics in phase B).
func TestDeletionWaitsForAReassignmentAtFailover(t *testing.T) {
	tc := newTestCluster(t, "", []int32{1, 2, 3}, map[int32][]int32{0: {2, 3, 1}},
		map[int32]*zkdata.PartitionState{0: {Leader: 1, LeaderEpoch: 5, ISR: []int32{1, 2}}})
	tc.zk.put(zkdata.TopicPath("t"), zkdata.EncodeTopicReassigning(map[int32][]int32{0: {2, 3, 1}}, map[int32][]int32{0: {3}}, map[int32][]int32{0: {1}}))
	tc.zk.put(zkdata.DeleteTopicPath("t"), nil)
	tc.elect()
	if !tc.c.ctx.del.ineligible["t"] || tc.c.ctx.del.started["t"] {
		t.Fatalf("deletion of t: ineligible %v, started %v; want held back by the reassignment", tc.c.ctx.del.ineligible["t"], tc.c.ctx.del.started["t"])
	}
	tc.zk.put(zkdata.PartitionStatePath("t", 0), zkdata.EncodePartitionState(zkdata.PartitionState{Leader: 1, LeaderEpoch: 6, ControllerEpoch: 1, ISR: []int32{1, 2, 3}}))
	runUntilReassignISR(t, tc)
	if tc.c.ctx.del.ineligible["t"] || !tc.c.ctx.del.started["t"] {
		t.Fatalf("deletion of t after the reassignment: ineligible %v, started %v", tc.c.ctx.del.ineligible["t"], tc.c.ctx.del.started["t"])
	}
}
