package controller

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/failpoint"
	"github.com/zkchaos/zkchaos/node/wire"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

// ---- controlled shutdown ----------------------------------------------------

// ControlledShutdown is the wire handler: it runs the request on the event
// loop and waits for the answer.
func (c *Controller) ControlledShutdown(ctx context.Context, hdr wire.RequestHeader, req *kmsg.ControlledShutdownRequest) *kmsg.ControlledShutdownResponse {
	epoch := req.BrokerEpoch
	if req.Version < 2 {
		epoch = -1
	}
	c.log.Printf("ControlledShutdown request from broker %d (broker epoch %d, correlation id %d) received", req.BrokerID, epoch, hdr.CorrelationID)
	// Held here, the request waits while the event loop goes on; it is
	// handled even if the broker hung up meanwhile, as Kafka's is.
	if err := c.fp.Eval(context.WithoutCancel(ctx), failpoint.ControllerBeforeControlledShutdown); err != nil {
		c.log.Printf("ControlledShutdown from broker %d: %v (handling it anyway)", req.BrokerID, err)
	}
	reply := make(chan *kmsg.ControlledShutdownResponse, 1)
	c.events.push(evShutdown{id: req.BrokerID, epoch: epoch, corr: hdr.CorrelationID, reply: reply})
	select {
	case r := <-reply:
		return r
	case <-ctx.Done():
	case <-time.After(60 * time.Second):
	}
	r := kmsg.NewPtrControlledShutdownResponse()
	r.ErrorCode = kerr.UnknownServerError.Code
	return r
}

// errControllerMovedCode is what Kafka answers a ControlledShutdown with
// when it fails with a ControllerMovedException (not active, moved while
// handling it, or dropped by an expiry): Errors.forException maps that
// exception to STALE_CONTROLLER_EPOCH, not NOT_CONTROLLER.
var errControllerMovedCode = kerr.StaleControllerEpoch.Code

// preemptShutdown answers a ControlledShutdown dropped from the queue by an
// expiry as KafkaController.preemptControlledShutdown does (a
// ControllerMovedException). epoch is the controller epoch last published.
func (c *Controller) preemptShutdown(e evShutdown, epoch int32) {
	resp := kmsg.NewPtrControlledShutdownResponse()
	resp.ErrorCode = errControllerMovedCode
	c.log.Emit(history.Event{Kind: history.KindControlledShutdown, Shutdown: &history.Shutdown{BrokerID: e.id, BrokerEpoch: e.epoch,
		ControllerEpoch: epoch, CorrelationID: e.corr, CachedBrokerEpoch: -1, ErrorCode: resp.ErrorCode, Verdict: history.VerdictRejected}})
	e.reply <- resp
}

func (c *Controller) onControlledShutdown(ctx context.Context, e evShutdown) *kmsg.ControlledShutdownResponse {
	resp := kmsg.NewPtrControlledShutdownResponse()
	ev := history.Shutdown{BrokerID: e.id, BrokerEpoch: e.epoch, ControllerEpoch: c.epoch, CorrelationID: e.corr, CachedBrokerEpoch: -1}
	finish := func(code int16) *kmsg.ControlledShutdownResponse {
		resp.ErrorCode = code
		ev.ErrorCode = code
		ev.Verdict = history.VerdictAccepted
		if code != 0 {
			ev.Verdict = history.VerdictRejected
		}
		c.log.Emit(history.Event{Kind: history.KindControlledShutdown, Shutdown: &ev})
		return resp
	}
	if !c.active {
		// doControlledShutdown: ControllerMovedException.
		return finish(errControllerMovedCode)
	}
	b, live := c.ctx.live[e.id]
	if live {
		ev.CachedBrokerEpoch = b.Epoch
	}
	if !c.cfg.Bugs.On(config.BugKafka7235) && e.epoch != -1 {
		// doControlledShutdown reads liveBrokerIdAndEpochs(id) first: a
		// Map.apply that throws NoSuchElementException for an id not live
		// (nor shutting down), answered UNKNOWN_SERVER_ERROR by
		// Errors.forException.
		if !live {
			return finish(kerr.UnknownServerError.Code)
		}
		if e.epoch < b.Epoch {
			return finish(kerr.StaleBrokerEpoch.Code)
		}
	}
	if !live {
		return finish(kerr.BrokerNotAvailable.Code)
	}
	c.ctx.shuttingDown[e.id] = true
	var led, followed []history.TopicPartition
	for _, tp := range c.ctx.sortedTPs() {
		ps := c.ctx.state[tp]
		if ps == nil || len(c.ctx.assign[tp]) < 2 || !slices.Contains(c.ctx.assign[tp], e.id) || c.ctx.queuedTP(tp) {
			continue
		}
		if ps.st.Leader == e.id {
			led = append(led, tp)
		} else {
			followed = append(followed, tp)
		}
	}
	// Partitions it leads: partitionStateMachine.handleStateChanges(...,
	// OnlinePartition, ControlledShutdownPartitionLeaderElectionStrategy):
	// the next live ISR member that is not shutting down leads, the
	// broker leaves the ISR (leader epoch + 1), and the LeaderAndIsr goes
	// to the replicas live or shutting down (PartitionStateMachine's
	// leaderForControlledShutdown recipients), the broker included: it
	// becomes a follower at the new epoch.
	err := c.changeAndSend(ctx, led, func(tp history.TopicPartition) decide {
		return func(cur zkdata.PartitionState) (zkdata.PartitionState, bool) {
			// Election.leaderForControlledShutdown: every shutting-down
			// broker leaves the ISR, not only this one.
			isr := removeFromISR(cur.ISR, sortedKeys(c.ctx.shuttingDown))
			for _, r := range c.ctx.assign[tp] {
				if r != e.id && c.ctx.isLive(r) && slices.Contains(isr, r) {
					return zkdata.PartitionState{Leader: r, LeaderEpoch: cur.LeaderEpoch + 1, ISR: isr}, true
				}
			}
			return cur, false
		}
	}, nil)
	if err == nil && len(followed) > 0 {
		err = c.shutDownFollowers(ctx, e.id, followed)
	}
	if errors.Is(err, errControllerMoved) {
		// processControlledShutdown's Try answers the
		// ControllerMovedException; the /controller watch resigns.
		c.events.push(evControllerChange{})
		return finish(errControllerMovedCode)
	}
	for _, tp := range led {
		if c.ctx.state[tp].st.Leader == e.id {
			resp.PartitionsRemaining = append(resp.PartitionsRemaining, kmsg.ControlledShutdownResponsePartitionsRemaining{Topic: tp.Topic, Partition: tp.Partition})
		}
	}
	return finish(0)
}

// shutDownFollowers takes the shutting-down broker id off the partitions it
// follows, as Kafka 2.x's KafkaController.doControlledShutdown does (read
// at 2.7.0; 2.4 to 3.4 agree):
//
//  1. A batch of its own, before any ZooKeeper write: StopReplica
//     (deletePartition=false) to id for every followed partition
//     (brokerRequestBatch.addStopReplicaRequestForBrokers, then
//     sendRequestsToBrokers).
//  2. replicaStateMachine.handleStateChanges(..., OfflineReplica): in one
//     batch, StopReplica (deletePartition=false) to id again, added before
//     removeReplicasFromIsr, so both carry the leader epoch from before the
//     shrink (addStopReplicaRequestForBrokers reads
//     partitionLeadershipInfo when it is called); then the ISR shrink
//     written to ZooKeeper (newLeaderAndIsr: leader epoch + 1); then
//     LeaderAndIsr to the partition's replicas other than id
//     (partitionReplicaAssignment.filterNot(_ == replicaId), sent to those
//     live or shutting down) for every partition, shrunk or not (a
//     partition whose ISR lacked id keeps its state but is still in
//     doRemoveReplicasFromIsr's answer), and UpdateMetadata for them to
//     every live or shutting-down broker.
//
// So the shutting-down broker never hears of the shrink (no LeaderAndIsr):
// its replica keeps the pre-shrink leader epoch, and both StopReplicas
// carry that same epoch, which a 2.x broker refuses with
// FENCED_LEADER_EPOCH (ReplicaManager.stopReplicas stops a replica only for
// a larger epoch before KAFKA-13972, 3.5). The broker stops its replicas
// when it exits. The second StopReplica is sent after the ZooKeeper write:
// held there (controller-after-zk-write) while the broker restarts, it
// reaches the new process with the previous process's broker epoch, and
// only the broker-epoch check (KIP-380) keeps it from stopping a replica
// there.
func (c *Controller) shutDownFollowers(ctx context.Context, id int32, followed []history.TopicPartition) error {
	pre := c.newBatch()
	epochs := make(map[history.TopicPartition]int32, len(followed))
	for _, tp := range followed {
		epochs[tp] = c.ctx.state[tp].st.LeaderEpoch
		pre.stopReplica(id, tp, false, epochs[tp])
	}
	pre.send()
	others := func(tp history.TopicPartition) []int32 {
		return slices.DeleteFunc(c.liveReplicas(tp), func(r int32) bool { return r == id })
	}
	return c.changeAndSendTo(ctx, followed, func(tp history.TopicPartition) decide {
		// ReplicaStateMachine.doRemoveReplicasFromIsr, as for a dead
		// broker.
		return func(cur zkdata.PartitionState) (zkdata.PartitionState, bool) { return removeReplicaFromISR(cur, id) }
	}, others, func(b *batch, changed []history.TopicPartition) {
		var same []history.TopicPartition
		for _, tp := range followed {
			b.stopReplica(id, tp, false, epochs[tp])
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
