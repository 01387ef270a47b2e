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
			if slices.Contains(ids, r) {
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
	return c.electOffline(ctx)
}

// onBrokerFailure: partitions led by a dead broker get a new leader (or
// leader -1), dead followers leave the ISR (never emptying it).
//
// Every surviving replica of every partition with a replica on a dead broker
// gets a LeaderAndIsr, whether or not its state changed, as Kafka's
// OfflineReplica transition sends one for the partitions where the dead
// replica was not in the ISR too (doRemoveReplicasFromIsr returns them with
// their current state), and UpdateMetadata goes to every live broker either
// way. Before, a dead broker that led nothing and was in no ISR (it had not
// caught up yet) made the controller send nothing at all, so the other
// brokers never heard of the death from it.
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
	var tps []history.TopicPartition
	for _, tp := range c.ctx.sortedTPs() {
		for _, r := range c.ctx.assign[tp] {
			if slices.Contains(ids, r) {
				tps = append(tps, tp)
				break
			}
		}
	}
	return c.changeAndSend(ctx, tps, func(tp history.TopicPartition) decide {
		return func(cur zkdata.PartitionState) (zkdata.PartitionState, bool) {
			if !c.ctx.isLive(cur.Leader) {
				if l, isr, ok := c.offlineLeader(ctx, tp, cur); ok {
					return zkdata.PartitionState{Leader: l, LeaderEpoch: cur.LeaderEpoch + 1, ISR: isr}, true
				}
				isr := removeFromISR(cur.ISR, ids)
				if cur.Leader == -1 && slices.Equal(isr, cur.ISR) {
					return cur, false
				}
				return zkdata.PartitionState{Leader: -1, LeaderEpoch: cur.LeaderEpoch + 1, ISR: isr}, true
			}
			isr := removeFromISR(cur.ISR, ids)
			if slices.Equal(isr, cur.ISR) {
				return cur, false
			}
			return zkdata.PartitionState{Leader: cur.Leader, LeaderEpoch: cur.LeaderEpoch + 1, ISR: isr}, true
		}
	}, func(b *batch, changed []history.TopicPartition) {
		for _, tp := range tps {
			if c.ctx.state[tp] != nil && !slices.Contains(changed, tp) {
				b.leaderAndIsr(c.liveReplicas(tp), tp, false)
			}
		}
	})
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
