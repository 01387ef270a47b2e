package controller

import (
	"context"
	"errors"
	"slices"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/zkdata"
	"github.com/zkchaos/zkchaos/node/zkutil"
)

// ---- failover -----------------------------------------------------------

// onControllerFailover loads the context, starts the send queues and tells
// every broker the current state with this controller's epoch.
func (c *Controller) onControllerFailover(ctx context.Context) error {
	c.gen++
	c.ctx = newContext()
	c.chans = c.newChans(c)
	gen := c.gen
	for _, p := range []string{zkdata.ISRChangePath, zkdata.AdminPath, zkdata.DeleteTopicsPath} {
		if err := zkutil.EnsurePathOn(ctx, c.zk, p); err != nil {
			return err
		}
	}
	// Notifications already there name changes that the partition states
	// read below include, so a new controller deletes them unread, before
	// it reads (onControllerFailover, then initializeControllerContext).
	if err := c.deleteISRChangeNotifications(ctx, nil); err != nil {
		return err
	}
	live, err := c.readBrokers(ctx)
	if err != nil {
		return err
	}
	c.ctx.live = live
	if _, err := c.readTopics(ctx); err != nil {
		return err
	}
	// Partition states (ControllerContext.partitionLeadershipInfo), read
	// through our session's server as KafkaController.initializeControllerContext
	// does: possibly older than the election (KAFKA-16667).
	var newParts []history.TopicPartition
	for _, tp := range c.ctx.sortedTPs() {
		ps, err := c.readState(ctx, tp)
		if errors.Is(err, zk.ErrNoNode) {
			newParts = append(newParts, tp)
			continue
		}
		if err != nil {
			c.log.Printf("failover: %s: %v", tp, err)
			continue
		}
		c.ctx.state[tp] = ps
	}
	for _, b := range live {
		c.chans.addBroker(b)
	}
	c.log.Printf("controller failover: epoch %d, live brokers %v, %d partitions", c.epoch, brokerIDs(live), len(c.ctx.assign))
	// Watches for the admin paths and ISR notifications.
	if _, err := c.childrenW(ctx, zkdata.ISRChangePath, func() event { return evISRChange{gen: gen} }); err != nil {
		return err
	}
	c.watchExists(ctx, zkdata.PreferredElectionPath, func() event { return evPreferred{gen: gen} })
	c.watchExists(ctx, zkdata.ReassignPartitionsPath, func() event { return evReassign{gen: gen} })

	// fetchTopicDeletionsInProgress and TopicDeletionManager.init come
	// before the state machines start, so the elections below leave the
	// topics being deleted alone.
	if err := c.initDeletions(ctx); err != nil {
		return err
	}
	c.sendUpdateMetadata(brokerIDs(live), nil)
	// ReplicaStateMachine.startup, online replicas first: every live
	// replica learns the state ZooKeeper held at the election, in one
	// LeaderAndIsr per broker, before any change this failover makes. A
	// restarted broker's first LeaderAndIsr starts its high-watermark
	// checkpoint thread, and the checkpoint holds only the partitions in
	// its memory; Kafka relies on that first request carrying all of them.
	b := c.newBatch()
	for _, tp := range c.ctx.sortedTPs() {
		if c.ctx.state[tp] != nil {
			b.leaderAndIsr(c.liveReplicas(tp), tp, false)
		}
	}
	b.send()
	// ReplicaStateMachine.startup, then the offline replicas: replicas on
	// dead brokers go to OfflineReplica (out of the ISR, leader -1 if they
	// led), each change sent to the partition's other live replicas.
	var dead []int32
	for _, tp := range c.ctx.sortedTPs() {
		for _, r := range c.ctx.assign[tp] {
			if _, ok := c.ctx.live[r]; !ok && !slices.Contains(dead, r) {
				dead = append(dead, r)
			}
		}
	}
	slices.Sort(dead)
	for _, id := range dead {
		if err := c.offlineReplica(ctx, id); err != nil {
			return err
		}
	}
	// PartitionStateMachine.startup: initializePartitionState (a partition
	// whose leader is not online starts Offline, one without a state New),
	// then triggerOnlinePartitionStateChange creates the new partitions
	// and elects the offline ones where it can.
	c.ctx.markOffline()
	if err := c.onNewPartitions(ctx, newParts); err != nil {
		return err
	}
	if err := c.electOffline(ctx); err != nil {
		return err
	}
	// TopicDeletionManager.tryTopicDeletion: a deletion a previous
	// controller left unfinished (its /admin/delete_topics child is still
	// there) resumes.
	if err := c.resumeDeletions(ctx); err != nil {
		return err
	}
	if err := c.resumeReassignments(ctx); err != nil {
		return err
	}
	c.events.push(evISRChange{gen: gen})
	c.events.push(evPreferred{gen: gen})
	c.events.push(evReassign{gen: gen})
	c.events.push(evTopicDeletion{gen: gen})
	return nil
}

func (c *Controller) watchExists(ctx context.Context, p string, mk func() event) {
	_, _, ch, err := c.existsW(ctx, p)
	if err != nil {
		c.log.Printf("watch %s: %v", p, err)
		return
	}
	c.waitWatch(ch, mk)
}

func brokerIDs(m map[int32]brokerInfo) []int32 {
	out := make([]int32, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// onlineReplicas are tp's replicas on live brokers that are not shutting
// down (ControllerContext.isReplicaOnline): the ones an offline or new
// partition's leader is chosen from and that hear of the choice.
func (c *Controller) onlineReplicas(tp history.TopicPartition) []int32 {
	var out []int32
	for _, r := range c.ctx.assign[tp] {
		if c.ctx.isLive(r) {
			out = append(out, r)
		}
	}
	return out
}

// liveReplicas are tp's replicas on live brokers, shutting down or not
// (ControllerContext.liveOrShuttingDownBrokerIds): the ones a request
// batch reaches.
func (c *Controller) liveReplicas(tp history.TopicPartition) []int32 {
	var out []int32
	for _, r := range c.ctx.assign[tp] {
		if _, ok := c.ctx.live[r]; ok {
			out = append(out, r)
		}
	}
	return out
}
