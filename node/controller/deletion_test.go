package controller

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

// stopSent is one StopReplica partition as the controller queued it.
type stopSent struct {
	tp          history.TopicPartition
	del         bool
	leaderEpoch int32
}

// stops lists the StopReplica partitions in reqs, in order.
func stops(reqs []kmsg.Request) []stopSent {
	var out []stopSent
	for _, r := range reqs {
		if s, ok := r.(*kmsg.StopReplicaRequest); ok {
			for _, t := range s.Topics {
				for _, p := range t.PartitionStates {
					out = append(out, stopSent{history.TP(t.Topic, p.Partition), p.Delete, p.LeaderEpoch})
				}
			}
		}
	}
	return out
}

// requestDeletion creates /admin/delete_topics/<topic>, as kafka-topics
// --delete does, and delivers the watch's event.
func (tc *testCluster) requestDeletion(topic string) {
	tc.t.Helper()
	tc.zk.put(zkdata.DeleteTopicPath(topic), nil)
	tc.process(evTopicDeletion{gen: tc.c.gen})
}

// answer drains broker id's queue and answers each StopReplica in it with
// code for every partition, as the broker's send thread would deliver the
// answer, then runs the events that follow. It returns what was drained.
func (tc *testCluster) answer(id int32, code int16) []kmsg.Request {
	tc.t.Helper()
	reqs := tc.drain(id)
	for _, r := range reqs {
		sr, ok := r.(*kmsg.StopReplicaRequest)
		if !ok {
			continue
		}
		resp := kmsg.NewPtrStopReplicaResponse()
		for _, t := range sr.Topics {
			for _, p := range t.PartitionStates {
				resp.Partitions = append(resp.Partitions, kmsg.StopReplicaResponsePartition{Topic: t.Topic, Partition: p.Partition, ErrorCode: code})
			}
		}
		tc.c.onResponse(tc.c.chans.gen, id, sr, resp)
	}
	tc.runQueued()
	return reqs
}

func (tc *testCluster) exists(p string) bool {
	ok, _, _ := tc.zk.Exists(p)
	return ok
}

// TopicDeletionManager.onPartitionDeletion: each live replica goes
// OfflineReplica (StopReplica without delete, out of the ISR in ZooKeeper,
// no LeaderAndIsr) and then ReplicaDeletionStarted (StopReplica with
// delete), both at EpochDuringDelete (-2); completeDeleteTopic removes the
// topic's znodes only once every replica answered (resumeDeletions:
// areAllReplicasInState ReplicaDeletionSuccessful).
func TestTopicDeletionWaitsForEveryReplica(t *testing.T) {
	tc := newTestCluster(t, "", []int32{1, 2, 3}, map[int32][]int32{0: {1, 2, 3}, 1: {2, 3, 1}},
		map[int32]*zkdata.PartitionState{0: ps(1, 0, 1, 2, 3), 1: ps(2, 0, 2, 3, 1)})
	tc.elect()
	tc.drainAll()
	tc.zk.put(zkdata.TopicConfigPath("t"), []byte(`{"version":1,"config":{}}`))
	tc.requestDeletion("t")

	for _, id := range []int32{1, 2} {
		reqs := tc.answer(id, 0)
		if n := len(laiPartitions(reqs)); n != 0 {
			t.Fatalf("broker %d got LeaderAndIsr for %d partitions of a topic being deleted", id, n)
		}
		want := []stopSent{
			{history.TP("t", 0), false, -2}, {history.TP("t", 1), false, -2},
			{history.TP("t", 0), true, -2}, {history.TP("t", 1), true, -2},
		}
		if got := stops(reqs); !slices.Equal(got, want) {
			t.Fatalf("broker %d StopReplicas %v, want %v", id, got, want)
		}
	}
	// The ISR removals were written, one broker at a time: the last
	// member keeps an ISR of one, nobody leads.
	for p := range int32(2) {
		st, _ := tc.zk.state0(history.TP("t", p))
		if st.Leader != -1 || len(st.ISR) != 1 || st.LeaderEpoch != 3 {
			t.Fatalf("t-%d state %+v, want leader -1, an ISR of one, leader epoch 3", p, st)
		}
	}
	if !tc.exists(zkdata.TopicPath("t")) || !tc.exists(zkdata.DeleteTopicPath("t")) {
		t.Fatal("topic znodes deleted before broker 3 answered")
	}
	tc.answer(3, 0)
	for _, p := range []string{zkdata.TopicPath("t"), zkdata.TopicConfigPath("t"), zkdata.DeleteTopicPath("t")} {
		if tc.exists(p) {
			t.Fatalf("%s still exists after every replica was deleted", p)
		}
	}
	if tc.c.ctx.topics["t"] || len(tc.c.ctx.assign) != 0 || tc.c.ctx.del.queued["t"] {
		t.Fatalf("context still holds t: topics %v assign %v queued %v", tc.c.ctx.topics, tc.c.ctx.assign, tc.c.ctx.del.queued)
	}
}

// A topic created again at a deleted topic's name is a new topic
// (processTopicChange → onNewPartitionCreation): its partitions start at
// leader epoch 0 with IsNew LeaderAndIsr, whatever epoch the deleted
// incarnation had reached.
func TestRecreatedTopicStartsAtLeaderEpochZero(t *testing.T) {
	tc := electedPair(t, 7)
	tc.requestDeletion("t")
	tc.answer(1, 0)
	tc.answer(2, 0)
	if tc.exists(zkdata.TopicPath("t")) {
		t.Fatal("t not deleted")
	}
	tc.zk.put(zkdata.TopicPath("t"), zkdata.EncodeTopic(map[int32][]int32{0: {2, 1}}))
	tc.process(evTopicChange{gen: tc.c.gen})
	st, ver := tc.zk.state0(history.TP("t", 0))
	if st.Leader != 2 || st.LeaderEpoch != 0 || ver != 0 || !slices.Equal(st.ISR, []int32{2, 1}) {
		t.Fatalf("re-created t-0: state %+v version %d, want leader 2, leader epoch 0, version 0, ISR [2 1]", st, ver)
	}
	reqs := tc.drain(2)
	var isNew bool
	for _, r := range reqs {
		if l, ok := r.(*kmsg.LeaderAndISRRequest); ok {
			isNew = l.TopicStates[0].PartitionStates[0].IsNew && l.TopicStates[0].PartitionStates[0].LeaderEpoch == 0
		}
	}
	if !isNew {
		t.Fatalf("broker 2 got no IsNew LeaderAndIsr at leader epoch 0: %v", reqs)
	}
}

// onPartitionDeletion moves the replicas on brokers that are not online to
// ReplicaDeletionIneligible and halts the topic (markTopicIneligibleForDeletion,
// "offline replicas"); the broker's return (onBrokerStartup →
// resumeDeletionForTopics) retries its replicas, and only then is the topic
// deleted. The partition takes no part in elections meanwhile.
func TestTopicDeletionIneligibleWhileABrokerIsDown(t *testing.T) {
	tc := newTestCluster(t, "", []int32{1, 2, 3}, map[int32][]int32{0: {1, 2, 3}}, map[int32]*zkdata.PartitionState{0: ps(1, 0, 1, 2, 3)})
	tc.elect()
	tc.kill(3)
	tc.drainAll()
	tc.requestDeletion("t")
	if !tc.c.ctx.del.ineligible["t"] {
		t.Fatal("deletion of t not halted while broker 3 is down")
	}
	tc.answer(1, 0)
	tc.answer(2, 0)
	if !tc.exists(zkdata.TopicPath("t")) {
		t.Fatal("t deleted while broker 3, which holds a replica, was down")
	}
	writes := tc.zk.count("multi " + zkdata.ControllerEpochPath + "," + zkdata.PartitionStatePath("t", 0))
	tc.kill(2) // no election for a partition of a topic being deleted
	if n := tc.zk.count("multi " + zkdata.ControllerEpochPath + "," + zkdata.PartitionStatePath("t", 0)); n != writes {
		t.Fatalf("%d state writes for t-0 after broker 2 died, want none", n-writes)
	}
	tc.registerBroker(2)
	tc.registerBroker(3)
	tc.process(evBrokerChange{gen: tc.c.gen})
	if got := stops(tc.answer(2, 0)); len(got) != 0 {
		t.Fatalf("broker 2, whose replica was already deleted, got StopReplicas %v", got)
	}
	reqs := tc.answer(3, 0)
	if got := stops(reqs); len(got) != 2 || got[0].del || !got[1].del {
		t.Fatalf("returning broker 3 got StopReplicas %v, want one without and one with delete", got)
	}
	if tc.exists(zkdata.TopicPath("t")) {
		t.Fatal("t not deleted once every replica's broker was back and answered")
	}
}

// processTopicDeletionStopReplicaResponseReceived: a replica answered in
// error goes ReplicaDeletionIneligible (failReplicaDeletion) and the topic
// waits; no StopReplica is sent again until a broker hosting it starts
// (resumeDeletionForTopics), here broker 2 bouncing.
func TestTopicDeletionErrorWaitsForABrokerStartup(t *testing.T) {
	tc := electedPair(t, 0)
	tc.requestDeletion("t")
	tc.answer(1, 0)
	tc.answer(2, kerr.KafkaStorageError.Code)
	if !tc.c.ctx.del.ineligible["t"] || !tc.exists(zkdata.TopicPath("t")) {
		t.Fatalf("after an error: ineligible %v, topic exists %v; want halted and kept", tc.c.ctx.del.ineligible["t"], tc.exists(zkdata.TopicPath("t")))
	}
	if got := stops(tc.drain(1)); len(got) != 0 {
		t.Fatalf("StopReplicas sent again before any broker started: %v", got)
	}
	tc.bounce(2)
	tc.drain(1)
	if got := stops(tc.answer(2, 0)); len(got) != 2 {
		t.Fatalf("bounced broker 2 got StopReplicas %v, want the deletion retried", got)
	}
	if tc.exists(zkdata.TopicPath("t")) {
		t.Fatal("t not deleted after the retry succeeded")
	}
}

// A new controller resumes a deletion its predecessor left unfinished:
// /admin/delete_topics/<t> is still there (fetchTopicDeletionsInProgress,
// TopicDeletionManager.init, tryTopicDeletion), and the failover's
// elections leave the topic alone.
func TestTopicDeletionResumedAtFailover(t *testing.T) {
	tc := newTestCluster(t, "", []int32{1, 2}, map[int32][]int32{0: {1, 2}}, map[int32]*zkdata.PartitionState{0: ps(-1, 4, 2)})
	tc.zk.put(zkdata.DeleteTopicPath("t"), nil)
	tc.elect()
	if st, _ := tc.zk.state0(history.TP("t", 0)); st.Leader != -1 {
		t.Fatalf("failover elected %d for a partition of a topic being deleted", st.Leader)
	}
	if !tc.c.ctx.del.started["t"] {
		t.Fatal("deletion not resumed at failover")
	}
	for _, id := range []int32{1, 2} {
		if got := stops(tc.answer(id, 0)); len(got) != 2 {
			t.Fatalf("broker %d got StopReplicas %v, want two", id, got)
		}
	}
	if tc.exists(zkdata.TopicPath("t")) || tc.exists(zkdata.DeleteTopicPath("t")) {
		t.Fatal("resumed deletion did not finish")
	}
}

// A StopReplica answer from the queues of an earlier controller term
// (before a resignation) is dropped, as processTopicDeletionStopReplicaResponseReceived
// returns when the controller is not active, and a request to delete a
// topic that does not exist is removed (processTopicDeletion).
func TestTopicDeletionIgnoresStaleAnswersAndUnknownTopics(t *testing.T) {
	tc := electedPair(t, 0)
	tc.requestDeletion("nope")
	if tc.exists(zkdata.DeleteTopicPath("nope")) {
		t.Fatal("request to delete a topic that does not exist kept")
	}
	tc.requestDeletion("t")
	stale := evDeletionResponse{gen: tc.c.gen - 1, broker: 1, partitions: []deletionAnswer{{history.TP("t", 0), 0}}}
	tc.process(stale)
	if tc.c.ctx.del.replicas[replicaKey{history.TP("t", 0), 1}] != delStarted {
		t.Fatal("an answer from an earlier term moved the replica's deletion on")
	}
}

// electedPair is the deletion tests' usual start: topic t's one partition
// on brokers 1 and 2, led by broker 1 at leaderEpoch, with the controller
// elected and its start-up requests answered.
func electedPair(t *testing.T, leaderEpoch int32) *testCluster {
	t.Helper()
	tc := newTestCluster(t, "", []int32{1, 2}, map[int32][]int32{0: {1, 2}}, map[int32]*zkdata.PartitionState{0: ps(1, leaderEpoch, 1, 2)})
	tc.elect()
	tc.drainAll()
	return tc
}
