package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

// Kafka 2.6.3's state machines decide on a fresh read of the state znode:
// PartitionStateMachine.doElectLeaderForPartitions reads
// getTopicPartitionStatesRaw before every election round and
// ReplicaStateMachine.doRemoveReplicasFromIsr reads
// getTopicPartitionStatesFromZk before every ISR removal. A leader's ISR
// expand is in ZooKeeper before the controller hears of it (the change
// notice waits up to 5 s), so the cached ISR may lack a member. Before,
// the node decided on its cache: a decision the cache called unneeded was
// never written, so a live ISR member was not elected, or a dead one stayed
// in the ISR.
func TestDecisionsReadTheStateFresh(t *testing.T) {
	tests := []struct {
		name       string
		act        func(tc *testCluster)
		wantLeader int32
		wantISR    []int32
	}{
		{"offline election elects the member the cache lacks", func(tc *testCluster) { tc.kill(2) }, 3, []int32{3}},
		{"controlled shutdown moves to the member the cache lacks", func(tc *testCluster) {
			if code := tc.shutdown(2); code != 0 {
				tc.t.Fatalf("controlled shutdown of 2: error %d", code)
			}
		}, 3, []int32{3}},
		{"offline replica leaves the ISR the cache did not put it in", func(tc *testCluster) { tc.kill(3) }, 2, []int32{2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCluster(t, "", []int32{1, 2, 3}, map[int32][]int32{0: {2, 3}}, map[int32]*zkdata.PartitionState{0: ps(2, 0, 2)})
			tc.elect()
			// Leader 2 expands its ISR (Partition.expandIsr); the notice
			// has not reached the controller yet.
			tc.zk.put(zkdata.PartitionStatePath("t", 0), zkdata.EncodePartitionState(zkdata.PartitionState{Leader: 2, LeaderEpoch: 0, ControllerEpoch: 1, ISR: []int32{2, 3}}))
			tt.act(tc)
			st, _ := tc.zk.state0(history.TP("t", 0))
			if st.Leader != tt.wantLeader || !slices.Equal(st.ISR, tt.wantISR) {
				t.Fatalf("state %+v, want leader %d ISR %v", st, tt.wantLeader, tt.wantISR)
			}
		})
	}
}

// electionsFrom2To3 are the three ways a controller moves t-0's leadership
// from broker 2 to broker 3 (ISR [2 3], each with the assignment its
// election needs): a failure, a controlled shutdown, a preferred election.
var electionsFrom2To3 = []struct {
	name   string
	assign []int32
	act    func(tc *testCluster)
}{
	{"offline election", []int32{2, 3}, func(tc *testCluster) { tc.kill(2) }},
	{"controlled shutdown", []int32{2, 3}, func(tc *testCluster) {
		if code := tc.shutdown(2); code != 0 {
			tc.t.Fatalf("controlled shutdown of 2: error %d", code)
		}
	}},
	{"preferred election", []int32{3, 2}, func(tc *testCluster) {
		tc.zk.put(zkdata.PreferredElectionPath, zkdata.EncodeTopicPartitions([]zkdata.TopicPartition{{Topic: "t", Partition: 0}}))
		tc.process(evPreferred{gen: tc.c.gen})
	}},
}

// A state write whose answer was lost with its connection is re-issued by
// retryRequestsUntilConnected; when the first attempt had landed the resend
// meets BADVERSION, and PartitionStateMachine.electLeaderForPartitions
// sends the partition round again: a fresh read, a new election (leader
// epoch + 1 once more) and the LeaderAndIsr for that one. Before, the node
// took the re-read state as its own and sent the first epoch.
func TestLandedStateWriteIsElectedAgain(t *testing.T) {
	for _, tt := range electionsFrom2To3 {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCluster(t, "", []int32{1, 2, 3}, map[int32][]int32{0: tt.assign}, map[int32]*zkdata.PartitionState{0: ps(2, 0, 2, 3)})
			tc.elect()
			tc.drainAll()
			statePath := zkdata.PartitionStatePath("t", 0)
			lost := 0
			tc.zk.loseAnswer = func(paths string) bool {
				if strings.Contains(paths, statePath) && lost == 0 {
					lost++
					return true
				}
				return false
			}
			tt.act(tc)
			st, _ := tc.zk.state0(history.TP("t", 0))
			if lost != 1 || st.Leader != 3 || st.LeaderEpoch != 2 {
				t.Fatalf("state %+v (answers lost %d), want leader 3 at leader epoch 2 (elected twice)", st, lost)
			}
			var epochs []int32
			for _, r := range tc.drain(3) {
				if l, ok := r.(*kmsg.LeaderAndISRRequest); ok {
					for _, ts := range l.TopicStates {
						for _, p := range ts.PartitionStates {
							epochs = append(epochs, p.LeaderEpoch)
						}
					}
				}
			}
			// The OfflineReplica transition that follows a broker
			// failure sends the state once more, at the same epoch.
			if len(epochs) == 0 || slices.ContainsFunc(epochs, func(e int32) bool { return e != 2 }) {
				t.Fatalf("LeaderAndIsr to 3 carried leader epochs %v, want only 2", epochs)
			}
		})
	}
}

// PartitionStateMachine.triggerOnlinePartitionStateChange elects only
// partitions in the Offline or New state. A partition becomes Offline when
// its leader is not online at a broker failure (onReplicasBecomeOffline,
// isReplicaOnline: shutting-down brokers are not online) or at failover; a
// broker start-up alone elects none of the others. Before, the node ran the
// offline election after any start-up on every partition led by a broker
// shutting down, too.
func TestOnlyOfflinePartitionsAreElectedAtStartup(t *testing.T) {
	tc := newTestCluster(t, "", []int32{1, 2, 3, 4}, map[int32][]int32{0: {2, 3}}, map[int32]*zkdata.PartitionState{0: ps(2, 0, 2)})
	tc.elect()
	// 2 asks to shut down while it is the only ISR member: it keeps leading.
	if code := tc.shutdown(2); code != 0 {
		t.Fatalf("controlled shutdown of 2: error %d", code)
	}
	tc.isrChange(0, zkdata.PartitionState{Leader: 2, LeaderEpoch: 0, ControllerEpoch: 1, ISR: []int32{2, 3}})
	// A broker starts: the partition is Online (led by 2), not elected.
	tc.registerBroker(5)
	tc.process(evBrokerChange{gen: tc.c.gen})
	if st, _ := tc.zk.state0(history.TP("t", 0)); st.Leader != 2 {
		t.Fatalf("after broker 5 started: state %+v, want leader 2 still (the partition is Online)", st)
	}
	// A broker fails: onReplicasBecomeOffline marks every partition whose
	// leader is not online Offline, this one too, and elects it.
	tc.kill(4)
	if st, _ := tc.zk.state0(history.TP("t", 0)); st.Leader != 3 {
		t.Fatalf("after broker 4 failed: state %+v, want leader 3", st)
	}
}

// Kafka's ZooKeeperClient.handleRequests has no per-request timeout: the
// controller waits for ZooKeeper's answer however long it takes, and only a
// connection loss or an expiry ends a request. A slow answer neither drops
// a decision nor leaves a partition out of the context. (The node's
// controller once bounded each request by --zk-request-timeout, 10 s by
// default, and then logged and dropped the decision.)
func TestControllerWaitsForASlowZooKeeper(t *testing.T) {
	const slow = 300 * time.Millisecond
	statePath := zkdata.PartitionStatePath("t", 0)
	tests := []struct {
		name string
		op   string
		// run acts with the hook in place and returns the leader expected.
		run func(tc *testCluster) int32
	}{
		{"state write during an election", "multi", func(tc *testCluster) int32 {
			tc.elect()
			tc.drainAll()
			tc.kill(2)
			return 3
		}},
		{"state read at failover", "get", func(tc *testCluster) int32 {
			tc.elect()
			return 2
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCluster(t, "", []int32{1, 2, 3}, map[int32][]int32{0: {2, 3}}, map[int32]*zkdata.PartitionState{0: ps(2, 0, 2, 3)})
			slowed := 0
			tc.zk.hook = func(op, p string) error {
				if op == tt.op && strings.Contains(p, statePath) {
					slowed++
					time.Sleep(slow)
				}
				return nil
			}
			want := tt.run(tc)
			if slowed == 0 {
				t.Fatal("no request was slowed")
			}
			if ps := tc.c.ctx.state[history.TP("t", 0)]; ps == nil || ps.st.Leader != want {
				t.Fatalf("cached state %+v, want leader %d", ps, want)
			}
			if got := laiPartitions(tc.drain(want)); len(got) == 0 {
				t.Fatalf("leader %d got no LeaderAndIsr", want)
			}
		})
	}
}

// Election.leaderForControlledShutdown takes every broker that is shutting
// down out of the new ISR, not only the one asking: a leader may have put
// back a follower that is shutting down (it fetches until its process
// exits), and Kafka drops it again when the leader's own shutdown moves the
// partition. The test fails if only the requesting broker leaves the ISR.
func TestControlledShutdownElectionDropsEveryShuttingDownBroker(t *testing.T) {
	tc := newTestCluster(t, "", []int32{1, 2, 3, 4}, map[int32][]int32{0: {2, 3, 4}}, map[int32]*zkdata.PartitionState{0: ps(2, 0, 2, 3, 4)})
	tc.elect()
	if code := tc.shutdown(3); code != 0 {
		t.Fatalf("controlled shutdown of 3: error %d", code)
	}
	if st, _ := tc.zk.state0(history.TP("t", 0)); !slices.Equal(st.ISR, []int32{2, 4}) {
		t.Fatalf("after 3's controlled shutdown: ISR %v, want [2 4]", st.ISR)
	}
	// Leader 2 adds 3 back (Partition.maybeExpandIsr): 3 still fetches.
	tc.isrChange(0, zkdata.PartitionState{Leader: 2, LeaderEpoch: 2, ControllerEpoch: 1, ISR: []int32{2, 4, 3}})
	if code := tc.shutdown(2); code != 0 {
		t.Fatalf("controlled shutdown of 2: error %d", code)
	}
	if st, _ := tc.zk.state0(history.TP("t", 0)); st.Leader != 4 || !slices.Equal(st.ISR, []int32{4}) {
		t.Fatalf("after 2's controlled shutdown: state %+v, want leader 4 ISR [4] (2 and 3 both shutting down)", st)
	}
}
