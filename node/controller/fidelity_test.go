package controller

import (
	"context"
	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/node/failpoint"
	"github.com/zkchaos/zkchaos/node/wire"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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

// KafkaController.elect: an error from onControllerFailover other than
// ControllerMovedException triggers a controller move (resign, delete
// /controller under the epoch fence) instead of leaving a controller active
// with a context loaded half-way. Before, the node logged the error and
// stayed active.
func TestFailedFailoverTriggersControllerMove(t *testing.T) {
	tc := newTestCluster(t, "", []int32{1, 2}, map[int32][]int32{0: {1, 2}}, map[int32]*zkdata.PartitionState{0: ps(1, 0, 1, 2)})
	tc.zk.hook = func(op, p string) error {
		if op == "childrenw" && p == zkdata.TopicsPath {
			return zk.ErrNoAuth // not a connection loss: the failover fails
		}
		return nil
	}
	tc.process(evElect{reason: "test"})
	if tc.c.active {
		t.Fatal("controller still active after its failover failed")
	}
	if ok, _, _ := tc.zk.Exists(zkdata.ControllerPath); ok {
		t.Fatalf("%s still exists: no other broker can be elected", zkdata.ControllerPath)
	}
	// The /controller watch brings the next election, which succeeds.
	tc.zk.hook = nil
	tc.process(evControllerChange{})
	if !tc.c.active || tc.c.epoch != 2 {
		t.Fatalf("re-election: active %v epoch %d, want active at epoch 2", tc.c.active, tc.c.epoch)
	}
}

// PartitionStateMachine.electLeaderForPartitions and
// ReplicaStateMachine.removeReplicasFromIsr loop until every partition is
// done: each BADVERSION re-reads the state and decides again, with no cap.
// Before, the node gave up after 5 attempts and the partition kept a dead
// leader until the next event. With KAFKA-16667 on, the cached zkVersion is
// retried as it is (the bug), so the test runs the fixed path only.
func TestStateWriteRetriesEveryBadVersion(t *testing.T) {
	tests := []struct {
		name      string
		conflicts int
	}{
		{"one conflict", 1},
		{"more conflicts than the old cap of 5", 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCluster(t, "", []int32{1, 2, 3}, map[int32][]int32{0: {2, 3, 1}}, map[int32]*zkdata.PartitionState{0: ps(2, 0, 2, 3, 1)})
			tc.elect()
			statePath := zkdata.PartitionStatePath("t", 0)
			left := tt.conflicts
			tc.zk.hook = func(op, p string) error {
				if op == "multi" && strings.Contains(p, statePath) && left > 0 {
					// The leader writes the state (same content, new
					// version) just before the controller's write.
					left--
					d, _, _ := tc.zk.Get(statePath)
					tc.zk.put(statePath, d)
				}
				return nil
			}
			tc.kill(2)
			st, _ := tc.zk.state0(history.TP("t", 0))
			if st.Leader != 3 || left != 0 {
				t.Fatalf("after %d conflicts: state %+v (conflicts left %d), want leader 3", tt.conflicts, st, left)
			}
		})
	}
}

// Kafka 2.6.3 reads partition states (KafkaController.initializeControllerContext,
// the state machines' getTopicPartitionStatesRaw) without a ZooKeeper sync.
// Before, "every fix on" synced before every such read, which is stricter
// than Kafka; the sync is now the opt-in --proposals=zk-sync-before-read proposal,
// and KAFKA-16667 on never syncs.
func TestPartitionStateReadsSyncOnlyWhenProposed(t *testing.T) {
	tests := []struct {
		name      string
		bugs      string
		sync      bool
		wantSyncs bool
	}{
		{"every fix on: no sync, as Kafka 2.6.3", "", false, false},
		{"proposal on", "", true, true},
		{"proposal on, KAFKA-16667 on", "KAFKA-16667", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCluster(t, tt.bugs, []int32{1, 2}, map[int32][]int32{0: {1, 2}}, map[int32]*zkdata.PartitionState{0: ps(1, 0, 1, 2)})
			tc.c.cfg.SyncBeforeRead = tt.sync
			tc.elect()
			tc.isrChange(0, zkdata.PartitionState{Leader: 1, LeaderEpoch: 0, ControllerEpoch: 1, ISR: []int32{1}})
			if got := tc.zk.count("sync ") > 0; got != tt.wantSyncs {
				t.Fatalf("syncs issued: %d, want any: %v", tc.zk.count("sync "), tt.wantSyncs)
			}
		})
	}
}

// ReplicaStateMachine's OfflineReplica transition handles one failed broker
// at a time, and removeReplicasFromIsr keeps an ISR of one as it is: when
// every ISR member dies together, the ISR shrinks to the last one
// processed (leader -1), not to nothing and not to the whole old ISR.
// Before, the node kept the whole old ISR.
func TestAllISRMembersDeadLeavesTheLastProcessed(t *testing.T) {
	tests := []struct {
		name    string
		isr     []int32
		leader  int32
		dead    []int32
		wantISR []int32
	}{
		{"leader and follower die together", []int32{2, 3}, 2, []int32{2, 3}, []int32{3}},
		{"ISR in another order", []int32{3, 2}, 3, []int32{2, 3}, []int32{3}},
		{"ISR of one", []int32{2}, 2, []int32{2}, []int32{2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCluster(t, "", []int32{1, 2, 3}, map[int32][]int32{0: {2, 3}}, map[int32]*zkdata.PartitionState{0: ps(tt.leader, 0, tt.isr...)})
			tc.elect()
			for _, id := range tt.dead {
				tc.zk.remove(zkdata.BrokerPath(id))
			}
			tc.process(evBrokerChange{gen: tc.c.gen})
			st, _ := tc.zk.state0(history.TP("t", 0))
			if st.Leader != -1 || !slices.Equal(st.ISR, tt.wantISR) {
				t.Fatalf("state %+v, want leader -1 ISR %v", st, tt.wantISR)
			}
		})
	}
}

// Kafka chooses and tells an offline or new partition's leader among the
// replicas that are online (ControllerContext.isReplicaOnline: live and not
// shutting down): Election.leaderForOffline's liveReplicas are the
// LeaderAndIsr recipients, and initializeLeaderAndIsrForPartitions picks the
// leader and ISR from them and sends to that ISR. Before, the node used
// every live replica, shutting down or not: a shutting-down broker could
// lead a new partition and heard of elections it takes no part in.
func TestShuttingDownBrokerHearsNoElection(t *testing.T) {
	t.Run("new partition", func(t *testing.T) {
		tc := newTestCluster(t, "", []int32{1, 2, 3}, map[int32][]int32{0: {1, 2}}, map[int32]*zkdata.PartitionState{0: ps(1, 0, 1, 2)})
		tc.elect()
		if code := tc.shutdown(3); code != 0 {
			t.Fatalf("controlled shutdown of 3: error %d", code)
		}
		tc.drainAll()
		tc.zk.put(zkdata.TopicPath("u"), zkdata.EncodeTopic(map[int32][]int32{0: {3, 2}}))
		tc.process(evTopicChange{gen: tc.c.gen})
		st, _ := tc.zk.state0(history.TP("u", 0))
		if st.Leader != 2 || !slices.Equal(st.ISR, []int32{2}) {
			t.Fatalf("new partition u-0: state %+v, want leader 2 ISR [2] (3 is shutting down)", st)
		}
		if got := laiPartitions(tc.drain(3)); len(got) != 0 {
			t.Fatalf("shutting-down broker 3 got LeaderAndIsr for %v", got)
		}
	})
	t.Run("offline election", func(t *testing.T) {
		tc := newTestCluster(t, "", []int32{1, 2, 3}, map[int32][]int32{0: {2, 3}}, map[int32]*zkdata.PartitionState{0: ps(2, 0, 2, 3)})
		tc.elect()
		if code := tc.shutdown(3); code != 0 {
			t.Fatalf("controlled shutdown of 3: error %d", code)
		}
		tc.kill(2)
		if st, _ := tc.zk.state0(history.TP("t", 0)); st.Leader != -1 {
			t.Fatalf("after 2 died: state %+v, want offline", st)
		}
		tc.drainAll()
		tc.registerBroker(2)
		tc.process(evBrokerChange{gen: tc.c.gen})
		if st, _ := tc.zk.state0(history.TP("t", 0)); st.Leader != 2 {
			t.Fatalf("after 2 came back: state %+v, want leader 2", st)
		}
		if got := laiPartitions(tc.drain(3)); len(got) != 0 {
			t.Fatalf("shutting-down broker 3 got LeaderAndIsr for %v", got)
		}
	})
}

// KafkaZkClient.retryRequestsUntilConnected re-issues a request whose
// connection was lost once ZooKeeperClient.waitUntilConnected sees the
// session again, however long that takes; a session found expired abandons
// the event (ZooKeeperClientExpiredException) and writes nothing more on the
// new session. Before, the controller gave up after one request timeout,
// dropping the decision, and retried across an expiry.
func TestControllerRequestsWaitForTheSession(t *testing.T) {
	tests := []struct {
		name       string
		expire     bool
		wantLeader int32
	}{
		{"connection lost, session back", false, 3},
		{"session expired meanwhile", true, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCluster(t, "", []int32{1, 2, 3}, map[int32][]int32{0: {2, 3}}, map[int32]*zkdata.PartitionState{0: ps(2, 0, 2, 3)})
			tc.elect()
			statePath := zkdata.PartitionStatePath("t", 0)
			lost := false
			var reconnected sync.WaitGroup
			tc.zk.hook = func(op, p string) error {
				if op != "multi" || !strings.Contains(p, statePath) || lost {
					return nil
				}
				lost = true
				tc.zk.mu.Lock()
				tc.zk.state = zk.StateConnecting
				tc.zk.mu.Unlock()
				reconnected.Add(1)
				go func() {
					defer reconnected.Done()
					// Longer than any request timeout the node had.
					time.Sleep(300 * time.Millisecond)
					tc.zk.mu.Lock()
					defer tc.zk.mu.Unlock()
					tc.zk.state = zk.StateHasSession
					if tt.expire {
						tc.zk.session++
					}
				}()
				return zk.ErrConnectionClosed
			}
			tc.kill(2)
			reconnected.Wait()
			st, _ := tc.zk.state0(history.TP("t", 0))
			if !lost || st.Leader != tt.wantLeader {
				t.Fatalf("state %+v (connection lost: %v), want leader %d", st, lost, tt.wantLeader)
			}
		})
	}
}

// controller-before-controlled-shutdown holds a ControlledShutdown request
// before it reaches the event loop, which goes on. A restart of the
// requesting broker meanwhile is seen first (bounce, new broker epoch), so
// when the request is let go it carries the previous process's epoch and the
// controller refuses it with STALE_BROKER_EPOCH
// (KafkaController.doControlledShutdown), leaving the new process's
// partitions alone. With KAFKA-7235 on there is no broker epoch to compare
// and it is accepted.
func TestHeldControlledShutdownOfARestartedBroker(t *testing.T) {
	tests := []struct {
		bugs     string
		wantCode int16
	}{
		{"", kerr.StaleBrokerEpoch.Code},
		{"KAFKA-7235", 0},
	}
	for _, tt := range tests {
		t.Run("bugs="+tt.bugs, func(t *testing.T) {
			tc := newTestCluster(t, tt.bugs, []int32{1, 2, 3}, map[int32][]int32{0: {2, 3}}, map[int32]*zkdata.PartitionState{0: ps(2, 0, 2, 3)})
			fp := failpoint.New()
			held := make(chan struct{}, 1)
			fp.OnHit = func(h failpoint.Hit) {
				if h.Phase == "start" {
					held <- struct{}{}
				}
			}
			if err := fp.Arm(failpoint.ControllerBeforeControlledShutdown, failpoint.Action{Kind: failpoint.ActPause}); err != nil {
				t.Fatal(err)
			}
			tc.c.fp = fp
			ctx, cancel := context.WithCancel(context.Background())
			defer func() { cancel(); <-tc.c.Done() }()
			go tc.c.Run(ctx)
			waitFor(t, "election", func() bool { return tc.c.Status().Active })
			_, st, _ := tc.zk.Get(zkdata.BrokerPath(2))
			oldEpoch := st.Czxid
			req := kmsg.NewPtrControlledShutdownRequest()
			req.SetVersion(3)
			req.BrokerID, req.BrokerEpoch = 2, oldEpoch
			answer := make(chan *kmsg.ControlledShutdownResponse, 1)
			go func() { answer <- tc.c.ControlledShutdown(ctx, wire.RequestHeader{CorrelationID: 7}, req) }()
			select {
			case <-held:
			case <-time.After(5 * time.Second):
				t.Fatal("the request never reached the failpoint")
			}
			// Broker 2 restarts while its request is held.
			tc.zk.remove(zkdata.BrokerPath(2))
			newEpoch := tc.registerBroker(2)
			if tt.bugs == "" {
				waitFor(t, "the bounce", func() bool { return tc.c.Status().LiveBrokers[2] == newEpoch })
			} else {
				waitFor(t, "the broker change", func() bool { return tc.c.events.len() == 0 && tc.c.Status().Active })
				time.Sleep(50 * time.Millisecond)
			}
			if err := fp.Release(failpoint.ControllerBeforeControlledShutdown); err != nil {
				t.Fatal(err)
			}
			select {
			case r := <-answer:
				if r.ErrorCode != tt.wantCode {
					t.Fatalf("answer error %d, want %d", r.ErrorCode, tt.wantCode)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no answer after release")
			}
		})
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 5s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// KafkaController.doControlledShutdown looks the requester's broker epoch up
// with controllerContext.liveBrokerIdAndEpochs(id) before anything else: for
// an id that is not live (nor shutting down) that is a Scala Map.apply on a
// missing key, a NoSuchElementException, which Errors.forException answers
// as UNKNOWN_SERVER_ERROR. Only a request without a broker epoch (v0/v1, or
// -1) skips the lookup and reaches the BrokerNotAvailableException. Before,
// the node answered BROKER_NOT_AVAILABLE to both.
func TestControlledShutdownFromABrokerNotLive(t *testing.T) {
	tests := []struct {
		name     string
		bugs     string
		epoch    int64
		wantCode int16
	}{
		{"with a broker epoch", "", 5, kerr.UnknownServerError.Code},
		{"without a broker epoch", "", -1, kerr.BrokerNotAvailable.Code},
		{"KAFKA-7235: no epoch lookup", "KAFKA-7235", 5, kerr.BrokerNotAvailable.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCluster(t, tt.bugs, []int32{1, 2}, map[int32][]int32{0: {1, 2}}, map[int32]*zkdata.PartitionState{0: ps(1, 0, 1, 2)})
			tc.elect()
			reply := make(chan *kmsg.ControlledShutdownResponse, 1)
			tc.process(evShutdown{id: 3, epoch: tt.epoch, reply: reply})
			if got := (<-reply).ErrorCode; got != tt.wantCode {
				t.Fatalf("answer error %d, want %d", got, tt.wantCode)
			}
			if tc.c.ctx.shuttingDown[3] {
				t.Fatal("broker 3, not live, was marked shutting down")
			}
		})
	}
}

// KafkaController's beforeInitializingSession puts Expire with clearAndPut:
// events queued before the expiry are dropped (a ControlledShutdown among
// them answered STALE_CONTROLLER_EPOCH by its preempt), and the new session waits
// until processExpire has resigned. Before, the node reacted only once the
// new session existed, queueing behind the pending events, so the
// controller handled them under its old epoch first: here, electing a new
// leader for a partition whose leader died.
func TestSessionExpiryDropsQueuedEventsAndResigns(t *testing.T) {
	tests := []struct {
		name       string
		bugs       string
		wantActive bool  // right after the expiry is handled
		wantCode   int16 // the queued ControlledShutdown's answer
		wantLeader int32 // t-0's leader once the queue has run
	}{
		{"Kafka 2.6.3", "", false, kerr.StaleControllerEpoch.Code, 2},
		{"KAFKA-532: the 0.8 controller hears of it on the new session", "KAFKA-532", true, 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCluster(t, tt.bugs, []int32{1, 2, 3}, map[int32][]int32{0: {2, 3}}, map[int32]*zkdata.PartitionState{0: ps(2, 0, 2, 3)})
			tc.elect()
			// Queued while the loop is busy: broker 2 died, broker 3 asks
			// to shut down.
			tc.zk.remove(zkdata.BrokerPath(2))
			tc.c.events.push(evBrokerChange{gen: tc.c.gen})
			reply := make(chan *kmsg.ControlledShutdownResponse, 1)
			_, st, _ := tc.zk.Get(zkdata.BrokerPath(3))
			tc.c.events.push(evShutdown{id: 3, epoch: st.Czxid, reply: reply})
			// The client finds the session expired.
			tc.zk.mu.Lock()
			tc.zk.state, tc.zk.session = zk.StateExpired, 0
			tc.zk.mu.Unlock()
			handled := make(chan struct{})
			go func() { tc.c.SessionExpired(); close(handled) }()
			select {
			case <-handled:
				// Nothing held the new session back: it comes at once.
				tc.zk.mu.Lock()
				tc.zk.state, tc.zk.session = zk.StateHasSession, 0x200
				tc.zk.mu.Unlock()
			case <-time.After(100 * time.Millisecond):
				// The queue is cleared before the preempted answer is sent.
				waitFor(t, "the preempted answer", func() bool { return len(reply) == 1 })
			}
			// The event loop runs what is queued now.
			tc.runQueued()
			select {
			case <-handled:
			case <-time.After(5 * time.Second):
				t.Fatal("SessionExpired still waiting after the queue ran")
			}
			if tc.c.active != tt.wantActive {
				t.Fatalf("after the expiry: active %v, want %v", tc.c.active, tt.wantActive)
			}
			select {
			case r := <-reply:
				if r.ErrorCode != tt.wantCode {
					t.Fatalf("queued ControlledShutdown answered %d, want %d", r.ErrorCode, tt.wantCode)
				}
			default:
				t.Fatal("queued ControlledShutdown not answered")
			}
			if st, _ := tc.zk.state0(history.TP("t", 0)); st.Leader != tt.wantLeader {
				t.Fatalf("t-0 %+v, want leader %d", st, tt.wantLeader)
			}
		})
	}
}

// A ControlledShutdown that fails with ControllerMovedException is answered
// STALE_CONTROLLER_EPOCH: Errors.forException maps that exception to code
// 11 (NOT_CONTROLLER, 41, is NotControllerException's). doControlledShutdown
// throws it on a controller that is not active. Before, the node answered
// NOT_CONTROLLER.
func TestControlledShutdownToAControllerNotActive(t *testing.T) {
	tests := []struct {
		name   string
		active bool
		want   int16
	}{
		{"not active", false, kerr.StaleControllerEpoch.Code},
		{"active", true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCluster(t, "", []int32{1, 2}, map[int32][]int32{0: {1, 2}}, map[int32]*zkdata.PartitionState{0: ps(1, 0, 1, 2)})
			if tt.active {
				tc.elect()
			}
			if got := tc.shutdown(2); got != tt.want {
				t.Fatalf("answer error %d, want %d", got, tt.want)
			}
		})
	}
}

// KafkaZkClient.updateLeaderAndIsr goes through ZooKeeperClient.handleRequests,
// which waits for ZooKeeper's answer with no deadline of its own: a slow
// answer is still the answer. A state write ZooKeeper holds (a stalled
// server, a slow quorum) lands when it is answered, so a controller that gave
// it up as failed after a deadline would leave ZooKeeper naming a leader that
// nobody told, and its own cache a zkVersion behind.
func TestSlowStateWriteIsWaitedFor(t *testing.T) {
	tests := []struct {
		name string
		hold time.Duration
	}{
		{"answered at once", 0},
		{"held a second, then answered", time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCluster(t, "", []int32{1, 2, 3}, map[int32][]int32{0: {2, 3, 1}}, map[int32]*zkdata.PartitionState{0: ps(2, 0, 2, 3, 1)})
			tc.elect()
			tc.drainAll()
			statePath := zkdata.PartitionStatePath("t", 0)
			tc.zk.hook = func(op, p string) error {
				if op == "multi" && strings.Contains(p, statePath) {
					time.Sleep(tt.hold)
				}
				return nil
			}
			tc.kill(2)
			tc.zk.hook = nil
			st, ver := tc.zk.state0(history.TP("t", 0))
			if st.Leader != 3 {
				t.Fatalf("state in ZooKeeper %+v, want leader 3", st)
			}
			if got := tc.c.ctx.state[history.TP("t", 0)]; got == nil || got.ver != ver || got.st.Leader != 3 {
				t.Fatalf("controller's cached state %+v, want leader 3 at zkVersion %d (ZooKeeper's)", got, ver)
			}
			told := false
			for _, r := range tc.drain(3) {
				if l, ok := r.(*kmsg.LeaderAndISRRequest); ok {
					for _, ts := range l.TopicStates {
						for _, p := range ts.PartitionStates {
							told = told || (p.Partition == 0 && p.Leader == 3 && p.LeaderEpoch == st.LeaderEpoch)
						}
					}
				}
			}
			if !told {
				t.Fatalf("no LeaderAndIsr told broker 3 it leads t-0 at leader epoch %d", st.LeaderEpoch)
			}
		})
	}
}

// An election's new state reaches every live broker's metadata, not only
// the partition's replicas: Kafka 2.6.3's
// ControllerBrokerRequestBatch.addLeaderAndIsrRequestForBrokers adds an
// UpdateMetadata of the partition for every live or shutting-down broker.
// Broker 1 hosts no replica of t-0 and still answers clients' metadata
// requests for it.
func TestElectionUpdatesEveryLiveBrokersMetadata(t *testing.T) {
	for _, tt := range electionsFrom2To3 {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCluster(t, "", []int32{1, 2, 3}, map[int32][]int32{0: tt.assign}, map[int32]*zkdata.PartitionState{0: ps(2, 0, 2, 3)})
			tc.elect()
			tc.drainAll()
			tt.act(tc)
			st, _ := tc.zk.state0(history.TP("t", 0))
			if st.Leader != 3 {
				t.Fatalf("state in ZooKeeper %+v, want leader 3", st)
			}
			got := umState(tc.drain(1), 0)
			if got == nil || got.Leader != 3 || got.LeaderEpoch != st.LeaderEpoch {
				t.Errorf("broker 1's UpdateMetadata for t-0: %+v, want leader 3 at leader epoch %d", got, st.LeaderEpoch)
			}
		})
	}
}
