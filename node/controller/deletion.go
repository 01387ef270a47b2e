package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

// ---- topic deletion ---------------------------------------------------------
//
// Kafka 2.6.3's TopicDeletionManager with the replica states it drives in
// ReplicaStateMachine. A topic is queued when /admin/delete_topics/<t>
// appears; while queued, its partitions take no part in elections,
// controlled shutdown or preferred elections. Each replica goes
// OfflineReplica (StopReplica without delete, out of the ISR) →
// ReplicaDeletionStarted (StopReplica with delete) → ReplicaDeletionSuccessful
// when the broker answers without error; a replica whose broker is not
// online, or that answers with an error, is ReplicaDeletionIneligible and
// halts the whole topic until one of its brokers starts again. Once every
// replica succeeded the controller deletes the topic's znodes, and the name
// is free for a new incarnation.

// replicaDeletion is a replica's place in the deletion states; a replica
// of a topic queued for deletion without an entry has not started.
type replicaDeletion int

const (
	delStarted    replicaDeletion = iota + 1 // ReplicaDeletionStarted
	delSuccessful                            // ReplicaDeletionSuccessful
	delIneligible                            // ReplicaDeletionIneligible
)

// replicaKey is Kafka's PartitionAndReplica.
type replicaKey struct {
	tp history.TopicPartition
	id int32
}

// deletions is the deletion part of the controller context
// (ControllerContext.topicsToBeDeleted, topicsWithDeletionStarted,
// topicsIneligibleForDeletion and the deletion replica states).
type deletions struct {
	queued     map[string]bool
	started    map[string]bool
	ineligible map[string]bool
	replicas   map[replicaKey]replicaDeletion
}

func newDeletions() deletions {
	return deletions{queued: map[string]bool{}, started: map[string]bool{}, ineligible: map[string]bool{},
		replicas: map[replicaKey]replicaDeletion{}}
}

// queuedTP says whether tp's topic is queued for deletion
// (isTopicQueuedUpForDeletion).
func (x *cctx) queuedTP(tp history.TopicPartition) bool { return x.del.queued[tp.Topic] }

// replicasOf lists every replica of topic's partitions, in partition then
// assignment order (ControllerContext.replicasForTopic).
func (x *cctx) replicasOf(topic string) []replicaKey {
	var out []replicaKey
	for _, tp := range x.sortedTPs() {
		if tp.Topic != topic {
			continue
		}
		for _, r := range x.assign[tp] {
			out = append(out, replicaKey{tp, r})
		}
	}
	return out
}

func (x *cctx) anyReplicaIn(topic string, s replicaDeletion) bool {
	for _, r := range x.replicasOf(topic) {
		if x.del.replicas[r] == s {
			return true
		}
	}
	return false
}

func (x *cctx) allReplicasIn(topic string, s replicaDeletion) bool {
	reps := x.replicasOf(topic)
	for _, r := range reps {
		if x.del.replicas[r] != s {
			return false
		}
	}
	return len(reps) > 0
}

func (x *cctx) partitionsOf(topic string) []int32 {
	var out []int32
	for _, tp := range x.sortedTPs() {
		if tp.Topic == topic {
			out = append(out, tp.Partition)
		}
	}
	return out
}

// logDeletion records one controller step of a topic's deletion.
func (c *Controller) logDeletion(topic, step, reason string) {
	c.log.Emit(history.Event{Kind: history.KindTopicDeletion, Deletion: &history.TopicDeletion{Topic: topic, Step: step,
		Partitions: c.ctx.partitionsOf(topic), ControllerEpoch: c.epoch, Reason: reason}})
}

// onTopicDeletion is KafkaController.processTopicDeletion: the children of
// /admin/delete_topics (re-setting the watch); a request for a topic that
// does not exist is removed, the others are queued and deletion resumes.
func (c *Controller) onTopicDeletion(ctx context.Context) error {
	if !c.active {
		return nil
	}
	gen := c.gen
	topics, err := c.childrenW(ctx, zkdata.DeleteTopicsPath, func() event { return evTopicDeletion{gen: gen} })
	if err != nil {
		return err
	}
	var queue []string
	for _, t := range topics {
		if !c.ctx.topics[t] {
			c.log.Printf("ignoring request to delete non-existing topic %s", t)
			if err := c.deleteZnode(ctx, zkdata.DeleteTopicPath(t)); err != nil {
				return err
			}
			continue
		}
		queue = append(queue, t)
	}
	if len(queue) == 0 {
		return nil
	}
	c.log.Printf("starting topic deletion for topics %v", queue)
	for _, t := range queue {
		c.ctx.del.queued[t] = true
	}
	return c.resumeDeletions(ctx)
}

// initDeletions is the failover's part (fetchTopicDeletionsInProgress,
// TopicDeletionManager.init and ReplicaStateMachine.initializeReplicaState):
// the topics still listed under /admin/delete_topics are queued again, and
// a topic with a replica not online is ineligible from the start. It runs
// before the failover's elections, which leave queued topics alone.
func (c *Controller) initDeletions(ctx context.Context) error {
	gen := c.gen
	topics, err := c.childrenW(ctx, zkdata.DeleteTopicsPath, func() event { return evTopicDeletion{gen: gen} })
	if err != nil {
		return err
	}
	for _, t := range topics {
		if !c.ctx.topics[t] {
			continue // processTopicDeletion removes it once the failover is done
		}
		c.ctx.del.queued[t] = true
		for _, r := range c.ctx.replicasOf(t) {
			if !c.ctx.isLive(r.id) {
				c.ctx.del.replicas[r] = delIneligible
				c.markIneligible(t, "offline replicas at failover")
			}
		}
		// fetchTopicDeletionsInProgress: a topic with a partition being
		// reassigned waits for the reassignment to complete.
		for tp := range c.ctx.reassigning {
			if tp.Topic == t {
				c.markIneligible(t, "topic reassignment in progress")
			}
		}
	}
	return nil
}

// resumeDeletions is TopicDeletionManager.resumeDeletions: a topic whose
// replicas all succeeded is torn down; one with no deletion in flight and
// an ineligible replica has those replicas reset for a retry; and every
// queued topic with no deletion in flight that is not ineligible is
// (re)started.
func (c *Controller) resumeDeletions(ctx context.Context) error {
	queued := make([]string, 0, len(c.ctx.del.queued))
	for t := range c.ctx.del.queued {
		queued = append(queued, t)
	}
	slices.Sort(queued)
	var retry, eligible []string
	for _, t := range queued {
		if c.ctx.allReplicasIn(t, delSuccessful) {
			if err := c.completeDeleteTopic(ctx, t); err != nil {
				return err
			}
			continue
		}
		inFlight := c.ctx.anyReplicaIn(t, delStarted)
		if !inFlight && c.ctx.anyReplicaIn(t, delIneligible) {
			retry = append(retry, t)
		}
		if !inFlight && !c.ctx.del.ineligible[t] {
			eligible = append(eligible, t)
		}
	}
	// retryDeletionForIneligibleReplicas: ReplicaDeletionIneligible →
	// OfflineReplica, which onPartitionDeletion then takes through
	// StopReplica again.
	for _, t := range retry {
		for _, r := range c.ctx.replicasOf(t) {
			if c.ctx.del.replicas[r] == delIneligible {
				delete(c.ctx.del.replicas, r)
			}
		}
	}
	if len(eligible) == 0 {
		return nil
	}
	return c.startTopicDeletion(ctx, eligible)
}

// startTopicDeletion is TopicDeletionManager.onTopicDeletion: a topic seen
// for the first time in this controller's term has its partitions leave
// the partition state machine (OfflinePartition → NonExistentPartition, no
// ZooKeeper write), every live broker is told they are being deleted
// (UpdateMetadata with leader -2), then onPartitionDeletion.
func (c *Controller) startTopicDeletion(ctx context.Context, topics []string) error {
	var tps []history.TopicPartition
	for _, t := range topics {
		if !c.ctx.del.started[t] {
			c.ctx.del.started[t] = true
			c.logDeletion(t, history.DeletionStarted, "")
		}
		for _, tp := range c.ctx.sortedTPs() {
			if tp.Topic == t {
				delete(c.ctx.offline, tp)
				tps = append(tps, tp)
			}
		}
	}
	c.sendUpdateMetadata(brokerIDs(c.ctx.live), tps)
	return c.onPartitionDeletion(ctx, topics)
}

// onPartitionDeletion is TopicDeletionManager.onPartitionDeletion: replicas
// not online go ReplicaDeletionIneligible and make their topic ineligible;
// the online ones not yet deleted go OfflineReplica (StopReplica without
// delete, out of the ISR) and then ReplicaDeletionStarted (StopReplica with
// delete), every StopReplica carrying the leader epoch -2
// (EpochDuringDelete), which a broker accepts whatever its replica's epoch.
func (c *Controller) onPartitionDeletion(ctx context.Context, topics []string) error {
	var dead, retry []replicaKey
	var halted []string
	for _, t := range topics {
		deadHere := false
		for _, r := range c.ctx.replicasOf(t) {
			switch {
			case !c.ctx.isLive(r.id):
				dead = append(dead, r)
				deadHere = true
			case c.ctx.del.replicas[r] != delSuccessful:
				retry = append(retry, r)
			}
		}
		if deadHere {
			halted = append(halted, t)
		}
	}
	for _, r := range dead {
		c.ctx.del.replicas[r] = delIneligible
	}
	if err := c.deletionOfflineReplicas(ctx, retry); err != nil {
		return err
	}
	b := c.newBatch()
	for _, r := range retry {
		c.ctx.del.replicas[r] = delStarted
		b.stopReplica(r.id, r.tp, true, epochDuringDelete)
	}
	b.send()
	for _, t := range halted {
		c.markIneligible(t, "offline replicas")
	}
	return nil
}

// epochDuringDelete is LeaderAndIsr.EpochDuringDelete, the leader epoch of
// every StopReplica for a topic queued for deletion
// (addStopReplicaRequestForBrokers).
const epochDuringDelete int32 = -2

// leaderDuringDelete is LeaderAndIsr.LeaderDuringDelete, the leader an
// UpdateMetadata names for a partition whose topic is being deleted.
const leaderDuringDelete int32 = -2

// deletionOfflineReplicas is ReplicaStateMachine's OfflineReplica
// transition for replicas of topics queued for deletion: in one batch, a
// StopReplica without delete to each replica, and each replica taken out of
// its partition's ISR in ZooKeeper (leader -1 if it led, leader epoch + 1),
// one broker at a time; no LeaderAndIsr follows, since the topic is being
// deleted.
func (c *Controller) deletionOfflineReplicas(ctx context.Context, reps []replicaKey) error {
	if len(reps) == 0 {
		return nil
	}
	byBroker := map[int32][]history.TopicPartition{}
	for _, r := range reps {
		byBroker[r.id] = append(byBroker[r.id], r.tp)
	}
	b := c.newBatch()
	for _, id := range sortedKeys(byBroker) {
		for _, tp := range byBroker[id] {
			b.stopReplica(id, tp, false, epochDuringDelete)
		}
		if _, err := c.updateStates(ctx, byBroker[id], func(cur zkdata.PartitionState) (zkdata.PartitionState, bool) {
			return removeReplicaFromISR(cur, id)
		}); err != nil {
			return err
		}
	}
	b.send()
	return nil
}

// markIneligible is TopicDeletionManager.markTopicIneligibleForDeletion.
func (c *Controller) markIneligible(topic, reason string) {
	if !c.ctx.del.queued[topic] || c.ctx.del.ineligible[topic] {
		return
	}
	c.ctx.del.ineligible[topic] = true
	c.log.Printf("halted deletion of topic %s due to %s", topic, reason)
	c.logDeletion(topic, history.DeletionIneligible, reason)
}

// failReplicaDeletion is TopicDeletionManager.failReplicaDeletion: the
// replicas (of queued topics) go ReplicaDeletionIneligible, their topics
// are halted, and deletion resumes for the others.
func (c *Controller) failReplicaDeletion(ctx context.Context, reps []replicaKey, reason string) error {
	var topics []string
	for _, r := range reps {
		if !c.ctx.queuedTP(r.tp) || c.ctx.del.replicas[r] == delSuccessful {
			// ReplicaDeletionSuccessful → ReplicaDeletionIneligible is
			// not a valid transition: a deleted replica stays deleted.
			continue
		}
		c.ctx.del.replicas[r] = delIneligible
		if !slices.Contains(topics, r.tp.Topic) {
			topics = append(topics, r.tp.Topic)
		}
	}
	if len(topics) == 0 {
		return nil
	}
	for _, t := range topics {
		c.markIneligible(t, reason)
	}
	return c.resumeDeletions(ctx)
}

// resumeDeletionForTopics is TopicDeletionManager.resumeDeletionForTopics:
// a broker hosting replicas of these topics started, so they are eligible
// again.
func (c *Controller) resumeDeletionForTopics(ctx context.Context, topics []string) error {
	resume := false
	for _, t := range topics {
		if c.ctx.del.queued[t] {
			delete(c.ctx.del.ineligible, t)
			resume = true
		}
	}
	if !resume {
		return nil
	}
	return c.resumeDeletions(ctx)
}

// deletingTopicsOn lists the queued topics with a replica on one of ids.
func (c *Controller) deletingTopicsOn(ids []int32) []string {
	var out []string
	for _, tp := range c.ctx.sortedTPs() {
		if !c.ctx.queuedTP(tp) || slices.Contains(out, tp.Topic) {
			continue
		}
		for _, r := range c.ctx.assign[tp] {
			if slices.Contains(ids, r) {
				out = append(out, tp.Topic)
				break
			}
		}
	}
	return out
}

// deletionReplicasOn lists the replicas of queued topics on broker ids
// (onReplicasBecomeOffline's newOfflineReplicasForDeletion).
func (c *Controller) deletionReplicasOn(ids []int32) []replicaKey {
	var out []replicaKey
	for _, tp := range c.ctx.sortedTPs() {
		if !c.ctx.queuedTP(tp) {
			continue
		}
		for _, r := range c.ctx.assign[tp] {
			if slices.Contains(ids, r) {
				out = append(out, replicaKey{tp, r})
			}
		}
	}
	return out
}

// onDeletionResponse is processTopicDeletionStopReplicaResponseReceived:
// the partitions a broker answered in error (all of them when the whole
// request was refused) fail, the others succeed, for the replicas whose
// deletion is in flight.
func (c *Controller) onDeletionResponse(ctx context.Context, e evDeletionResponse) error {
	if !c.active {
		return nil
	}
	var failed, deleted []replicaKey
	for _, p := range e.partitions {
		r := replicaKey{p.tp, e.broker}
		if !c.ctx.queuedTP(p.tp) || !c.ctx.anyReplicaIn(p.tp.Topic, delStarted) {
			continue
		}
		if e.requestError != 0 || p.code != 0 {
			failed = append(failed, r)
		} else if c.ctx.del.replicas[r] == delStarted {
			deleted = append(deleted, r)
		}
	}
	if err := c.failReplicaDeletion(ctx, failed, fmt.Sprintf("broker %d answered StopReplica with an error", e.broker)); err != nil {
		return err
	}
	if len(deleted) == 0 {
		return nil
	}
	for _, r := range deleted {
		c.ctx.del.replicas[r] = delSuccessful
	}
	return c.resumeDeletions(ctx)
}

// completeDeleteTopic is TopicDeletionManager.completeDeleteTopic with
// ControllerDeletionClient.deleteTopic: /brokers/topics/<t> (with its
// partitions), /config/topics/<t> and /admin/delete_topics/<t> are deleted
// under the epoch fence, then the topic leaves the context. A write that
// fails leaves the topic queued, to be finished by the next resumption.
func (c *Controller) completeDeleteTopic(ctx context.Context, t string) error {
	for _, p := range []string{zkdata.TopicPath(t), zkdata.TopicConfigPath(t)} {
		if err := c.deleteRecursive(ctx, p); err != nil {
			return err
		}
	}
	if err := c.deleteZnode(ctx, zkdata.DeleteTopicPath(t)); err != nil {
		return err
	}
	c.logDeletion(t, history.DeletionCompleted, "")
	c.log.Printf("deletion of topic %s successfully completed", t)
	for _, tp := range c.ctx.sortedTPs() {
		if tp.Topic != t {
			continue
		}
		for _, r := range c.ctx.assign[tp] {
			delete(c.ctx.del.replicas, replicaKey{tp, r})
		}
		delete(c.ctx.assign, tp)
		delete(c.ctx.state, tp)
		delete(c.ctx.offline, tp)
		// Kafka's ControllerContext.removeTopic leaves the partition
		// among those being reassigned, whose entry then speaks of the
		// next incarnation's assignment; the node forgets it, so no
		// replica of a new incarnation is removed for the old one.
		delete(c.ctx.reassigning, tp)
	}
	delete(c.ctx.topics, t)
	delete(c.ctx.del.queued, t)
	delete(c.ctx.del.started, t)
	delete(c.ctx.del.ineligible, t)
	return nil
}

// deleteRecursive is KafkaZkClient.deleteRecursive: the children first,
// then the znode, each delete under the epoch fence; a znode already gone
// is fine.
func (c *Controller) deleteRecursive(ctx context.Context, p string) error {
	kids, _, err := zkDo(ctx, c, func(conn zkConn) ([]string, error) {
		kids, _, err := conn.Children(p)
		return kids, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("children of %s: %w", p, err)
	}
	slices.Sort(kids)
	for _, k := range kids {
		if err := c.deleteRecursive(ctx, p+"/"+k); err != nil {
			return err
		}
	}
	return c.deleteZnode(ctx, p)
}

// deleteZnode deletes p at any version under the epoch fence, logging the
// write; NONODE is success.
func (c *Controller) deleteZnode(ctx context.Context, p string) error {
	start := time.Now()
	_, err := c.fenced(ctx, &zk.DeleteRequest{Path: p, Version: -1})
	c.logWrite(start, p, "delete", !c.cfg.Bugs.On(config.BugKafka532), -1, "", nil, err, c.epoch, c.epochZkVersion)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("delete %s: %w", p, err)
	}
	return nil
}

// deletionAnswer is one partition of a StopReplica response.
type deletionAnswer struct {
	tp   history.TopicPartition
	code int16
}

// deletionResponse turns a StopReplica answer into the event that moves
// its deleted replicas on (the response callback sendStopReplicaRequests
// registers); nil when the request deleted nothing.
func deletionResponse(gen int, broker int32, req *kmsg.StopReplicaRequest, resp *kmsg.StopReplicaResponse) event {
	deleting := map[history.TopicPartition]bool{}
	for _, t := range req.Topics {
		for _, p := range t.PartitionStates {
			if p.Delete {
				deleting[history.TP(t.Topic, p.Partition)] = true
			}
		}
	}
	if len(deleting) == 0 {
		return nil
	}
	e := evDeletionResponse{gen: gen, broker: broker, requestError: resp.ErrorCode}
	answered := map[history.TopicPartition]bool{}
	for _, p := range resp.Partitions {
		tp := history.TP(p.Topic, p.Partition)
		if deleting[tp] {
			answered[tp] = true
			e.partitions = append(e.partitions, deletionAnswer{tp, p.ErrorCode})
		}
	}
	if resp.ErrorCode != 0 {
		// A refused request lists no partitions: every one asked failed.
		for tp := range deleting {
			if !answered[tp] {
				e.partitions = append(e.partitions, deletionAnswer{tp, resp.ErrorCode})
			}
		}
	}
	slices.SortFunc(e.partitions, func(a, b deletionAnswer) int { return a.tp.Compare(b.tp) })
	return e
}
