package controller

import (
	"context"
	"slices"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/failpoint"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

// ---- broker changes -------------------------------------------------------

func (c *Controller) onBrokerChange(ctx context.Context) error {
	if err := c.fp.Eval(ctx, failpoint.ControllerBeforeBrokerChange); err != nil {
		c.log.Printf("%v: skipping BrokerChange", err)
		return nil
	}
	if !c.active {
		return nil
	}
	cur, err := c.readBrokers(ctx)
	if err != nil {
		return err
	}
	var added, dead, bounced []int32
	for id := range cur {
		if _, ok := c.ctx.live[id]; !ok {
			added = append(added, id)
		}
	}
	for id, old := range c.ctx.live {
		nb, ok := cur[id]
		switch {
		case !ok:
			dead = append(dead, id)
		case nb.Epoch > old.Epoch && !c.cfg.Bugs.On(config.BugKafka7235):
			// KIP-380: same id, newer czxid: it restarted between two
			// reads of /brokers/ids.
			bounced = append(bounced, id)
		}
	}
	slices.Sort(added)
	slices.Sort(dead)
	slices.Sort(bounced)
	c.log.Printf("BrokerChange: live %v → %v; new %v, dead %v, bounced %v", brokerIDs(c.ctx.live), brokerIDs(cur), added, dead, bounced)
	if len(bounced) > 0 {
		c.statusMu.Lock()
		c.status.Bounces += len(bounced)
		c.statusMu.Unlock()
	}
	for _, id := range added {
		c.ctx.live[id] = cur[id]
		c.chans.addBroker(cur[id])
	}
	if err := c.onBrokerStartup(ctx, added); err != nil {
		return err
	}
	if len(bounced) > 0 {
		// onBrokerFailure with the old epochs, then a fresh queue and
		// onBrokerStartup with the new ones.
		for _, id := range bounced {
			delete(c.ctx.live, id)
			c.chans.removeBroker(id)
		}
		if err := c.onBrokerFailure(ctx, bounced); err != nil {
			return err
		}
		for _, id := range bounced {
			c.ctx.live[id] = cur[id]
			c.chans.addBroker(cur[id])
		}
		if err := c.onBrokerStartup(ctx, bounced); err != nil {
			return err
		}
	}
	for _, id := range dead {
		delete(c.ctx.live, id)
		c.chans.removeBroker(id)
	}
	return c.onBrokerFailure(ctx, dead)
}

func (c *Controller) onBrokerStartup(ctx context.Context, ids []int32) error {
	if len(ids) == 0 {
		return nil
	}
	c.sendUpdateMetadata(brokerIDs(c.ctx.live), nil)
	b := c.newBatch()
	for _, tp := range c.ctx.sortedTPs() {
		if c.ctx.state[tp] == nil {
			continue
		}
		var to []int32
		for _, r := range c.ctx.assign[tp] {
			// OnlineReplica is not a valid transition from
			// ReplicaDeletionSuccessful: a replica already deleted
			// hears nothing more of its topic.
			if slices.Contains(ids, r) && c.ctx.del.replicas[replicaKey{tp, r}] != delSuccessful {
				to = append(to, r)
			}
		}
		b.leaderAndIsr(to, tp, false)
	}
	b.send()
	// Partitions without state may now be creatable, offline ones electable.
	var newParts []history.TopicPartition
	for _, tp := range c.ctx.sortedTPs() {
		if c.ctx.state[tp] == nil {
			newParts = append(newParts, tp)
		}
	}
	if err := c.onNewPartitions(ctx, newParts); err != nil {
		return err
	}
	if err := c.electOffline(ctx); err != nil {
		return err
	}
	// Replicas of topics being deleted on the started brokers may now be
	// deleted (onBrokerStartup's resumeDeletionForTopics).
	return c.resumeDeletionForTopics(ctx, c.deletingTopicsOn(ids))
}

// onBrokerFailure is KafkaController.onBrokerFailure and
// onReplicasBecomeOffline: partitions without a live leader are elected
// (triggerOnlinePartitionStateChange), then each failed broker's replicas
// go to OfflineReplica, one broker at a time (ReplicaStateMachine groups
// the replicas by broker).
func (c *Controller) onBrokerFailure(ctx context.Context, ids []int32) error {
	if len(ids) == 0 {
		return nil
	}
	// KafkaController.onBrokerFailure: a failed broker is no longer
	// shutting down, whether it died or bounced (processBrokerChange calls
	// this for bounced brokers too), so a bounced broker's new process is
	// electable.
	for _, id := range ids {
		delete(c.ctx.shuttingDown, id)
	}
	// onReplicasBecomeOffline: every partition whose leader is not online
	// goes Offline, those led by a broker shutting down included.
	c.ctx.markOffline()
	if err := c.electOffline(ctx); err != nil {
		return err
	}
	for _, id := range ids {
		if err := c.offlineReplica(ctx, id); err != nil {
			return err
		}
	}
	// onReplicasBecomeOffline: the failed brokers' replicas of topics
	// being deleted cannot answer, so their deletion fails and the topics
	// wait for the brokers to return.
	return c.failReplicaDeletion(ctx, c.deletionReplicasOn(ids), "offline replicas")
}

// offlineReplica is ReplicaStateMachine's OfflineReplica transition for
// broker id's replicas: removeReplicasFromIsr takes id out of each ISR
// (leader -1 if it led) but keeps an ISR of one as it is, and every
// partition with a replica on id, changed or not (doRemoveReplicasFromIsr
// returns the unchanged ones with their current state), gets a LeaderAndIsr
// to its other replicas and an UpdateMetadata to every live broker. Before,
// a dead broker that led nothing and was in no ISR (it had not caught up
// yet) made the controller send nothing at all.
func (c *Controller) offlineReplica(ctx context.Context, id int32) error {
	var tps []history.TopicPartition
	for _, tp := range c.ctx.sortedTPs() {
		if c.ctx.state[tp] != nil && slices.Contains(c.ctx.assign[tp], id) && !c.ctx.queuedTP(tp) {
			tps = append(tps, tp)
		}
	}
	if len(tps) == 0 {
		return nil
	}
	others := func(tp history.TopicPartition) []int32 {
		return slices.DeleteFunc(c.liveReplicas(tp), func(r int32) bool { return r == id })
	}
	return c.changeAndSendTo(ctx, tps, func(history.TopicPartition) decide {
		return func(cur zkdata.PartitionState) (zkdata.PartitionState, bool) { return removeReplicaFromISR(cur, id) }
	}, others, func(b *batch, changed []history.TopicPartition) {
		var same []history.TopicPartition
		for _, tp := range tps {
			if !slices.Contains(changed, tp) {
				same = append(same, tp)
				b.leaderAndIsr(others(tp), tp, false)
			}
		}
		if len(same) > 0 {
			b.updateMetadata(brokerIDs(c.ctx.live), same)
		}
	})
}

// removeReplicaFromISR is ReplicaStateMachine.doRemoveReplicasFromIsr for
// one partition: if id is in the ISR, it leaves it (unless it is the only
// member: an ISR of one is kept as it is) and stops leading (leader -1);
// the leader epoch goes up either way. ok=false: id is not in the ISR.
func removeReplicaFromISR(cur zkdata.PartitionState, id int32) (zkdata.PartitionState, bool) {
	if !slices.Contains(cur.ISR, id) {
		return cur, false
	}
	leader := cur.Leader
	if leader == id {
		leader = -1
	}
	isr := slices.Clone(cur.ISR)
	if len(isr) > 1 {
		isr = slices.DeleteFunc(isr, func(r int32) bool { return r == id })
	}
	return zkdata.PartitionState{Leader: leader, LeaderEpoch: cur.LeaderEpoch + 1, ISR: isr}, true
}

// removeFromISR drops ids from isr unless that would empty it.
func removeFromISR(isr, ids []int32) []int32 {
	var out []int32
	for _, r := range isr {
		if !slices.Contains(ids, r) {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return slices.Clone(isr)
	}
	return out
}
