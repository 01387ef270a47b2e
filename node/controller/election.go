package controller

import (
	"context"
	"slices"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/failpoint"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

// ---- leader election ------------------------------------------------------

// offlineLeader is OfflinePartitionLeaderElectionStrategy with the
// KAFKA-3861 policy for the no-live-ISR case.
func (c *Controller) offlineLeader(ctx context.Context, tp history.TopicPartition, cur zkdata.PartitionState) (leader int32, isr []int32, ok bool) {
	assign := c.ctx.assign[tp]
	for _, r := range assign {
		if c.ctx.isLive(r) && slices.Contains(cur.ISR, r) {
			for _, i := range cur.ISR {
				if c.ctx.isLive(i) {
					isr = append(isr, i)
				}
			}
			return r, isr, true
		}
	}
	switch c.cfg.OfflinePolicy {
	case config.PolicyUnclean:
		for _, r := range assign {
			if c.ctx.isLive(r) {
				c.log.Printf("unclean election of %s: leader %d (ISR %v had no live member)", tp, r, cur.ISR)
				return r, []int32{r}, true
			}
		}
	case config.PolicyQueryLEO:
		// Ask every replica; elect the largest LEO only if all answer. The
		// bug report's exception: an ISR smaller than min.insync.replicas
		// acknowledged no acks=all write on its own, so every acknowledged
		// record is on a replica outside it, and its dead members need not
		// answer.
		shrunk := len(cur.ISR) < c.cfg.MinInsync
		best, bestLEO := int32(-1), int64(-1)
		for _, r := range assign {
			if shrunk && slices.Contains(cur.ISR, r) && !c.ctx.isLive(r) {
				continue
			}
			b, live := c.ctx.live[r]
			if !live || c.ctx.shuttingDown[r] || c.cfg.LEOQuery == nil {
				c.log.Printf("query-leo for %s: replica %d cannot answer; partition stays offline", tp, r)
				return -1, nil, false
			}
			qctx, cancel := context.WithTimeout(ctx, c.cfg.SocketTimeout)
			leo, err := c.cfg.LEOQuery(qctx, ReplicaEndpoint{ID: b.ID, Host: b.Host, Port: b.Port}, tp)
			cancel()
			if err != nil {
				c.log.Printf("query-leo for %s: replica %d: %v; partition stays offline", tp, r, err)
				return -1, nil, false
			}
			if leo > bestLEO {
				best, bestLEO = r, leo
			}
		}
		if best >= 0 {
			c.log.Printf("query-leo election of %s: leader %d with LEO %d", tp, best, bestLEO)
			return best, []int32{best}, true
		}
	}
	return -1, nil, false
}

// electOffline runs triggerOnlinePartitionStateChange: every partition in
// the Offline state gets a leader if the policy allows
// (OfflinePartitionLeaderElectionStrategy). A partition led by a broker
// that is shutting down is Offline only once a broker failure marked it
// (cctx.markOffline); a broker start-up alone does not move it.
func (c *Controller) electOffline(ctx context.Context) error {
	var tps []history.TopicPartition
	for _, tp := range c.ctx.sortedTPs() {
		if c.ctx.state[tp] != nil && c.ctx.offline[tp] && !c.ctx.queuedTP(tp) {
			tps = append(tps, tp)
		}
	}
	// The LeaderAndIsr goes to the replicas that are online, not those
	// shutting down (Election.leaderForOffline's liveReplicas).
	return c.changeAndSendTo(ctx, tps, func(tp history.TopicPartition) decide {
		return func(cur zkdata.PartitionState) (zkdata.PartitionState, bool) {
			// Election.leaderForOffline does not ask whether the
			// current leader is live: a round after a write that
			// landed unheard elects again (leader epoch + 1).
			l, isr, ok := c.offlineLeader(ctx, tp, cur)
			if !ok {
				return cur, false
			}
			return zkdata.PartitionState{Leader: l, LeaderEpoch: cur.LeaderEpoch + 1, ISR: isr}, true
		}
	}, c.onlineReplicas, nil)
}

// changeAndSend writes per-partition decisions, then (past the
// after-ZK-write failpoint) sends LeaderAndIsr to the live replicas of the
// changed partitions and UpdateMetadata to every live broker. extra adds
// more requests to the same batch.
func (c *Controller) changeAndSend(ctx context.Context, tps []history.TopicPartition, mk func(tp history.TopicPartition) decide, extra func(b *batch, changed []history.TopicPartition)) error {
	return c.changeAndSendTo(ctx, tps, mk, c.liveReplicas, extra)
}

// changeAndSendTo is changeAndSend with the LeaderAndIsr recipients of each
// changed partition given by to (Kafka's state machines choose them per
// transition: ReplicaStateMachine's OfflineReplica leaves the replica out).
func (c *Controller) changeAndSendTo(ctx context.Context, tps []history.TopicPartition, mk func(tp history.TopicPartition) decide,
	to func(tp history.TopicPartition) []int32, extra func(b *batch, changed []history.TopicPartition)) error {
	var changed []history.TopicPartition
	for _, tp := range tps {
		done, err := c.updateStates(ctx, []history.TopicPartition{tp}, mk(tp))
		changed = append(changed, done...)
		for _, tp := range done {
			// A partition given a live leader is Online again
			// (doHandleStateChanges after a successful election).
			if c.ctx.isLive(c.ctx.state[tp].st.Leader) {
				delete(c.ctx.offline, tp)
			}
		}
		if err != nil {
			return err
		}
	}
	if len(changed) == 0 && extra == nil {
		return nil
	}
	if len(changed) > 0 {
		if err := c.fp.Eval(ctx, failpoint.ControllerAfterZKWrite); err != nil {
			c.log.Printf("%v: not sending LeaderAndIsr for %v", err, changed)
			return nil
		}
	}
	b := c.newBatch()
	for _, tp := range changed {
		b.leaderAndIsr(to(tp), tp, false)
	}
	if extra != nil {
		extra(b, changed)
	}
	b.updateMetadata(brokerIDs(c.ctx.live), changed)
	b.send()
	return nil
}
