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
		return finish(kerr.NotController.Code)
	}
	b, live := c.ctx.live[e.id]
	if live {
		ev.CachedBrokerEpoch = b.Epoch
	}
	if !c.cfg.Bugs.On(config.BugKafka7235) && e.epoch != -1 && live && e.epoch < b.Epoch {
		return finish(kerr.StaleBrokerEpoch.Code)
	}
	if !live {
		return finish(8) // BROKER_NOT_AVAILABLE
	}
	c.ctx.shuttingDown[e.id] = true
	var led, followed []history.TopicPartition
	for _, tp := range c.ctx.sortedTPs() {
		ps := c.ctx.state[tp]
		if ps == nil || len(c.ctx.assign[tp]) < 2 || !slices.Contains(c.ctx.assign[tp], e.id) {
			continue
		}
		if ps.st.Leader == e.id {
			led = append(led, tp)
		} else {
			followed = append(followed, tp)
		}
	}
	// ControlledShutdownPartitionLeaderElectionStrategy: next live ISR
	// member that is not shutting down.
	err := c.changeAndSend(ctx, led, func(tp history.TopicPartition) decide {
		return func(cur zkdata.PartitionState) (zkdata.PartitionState, bool) {
			isr := removeFromISR(cur.ISR, []int32{e.id})
			for _, r := range c.ctx.assign[tp] {
				if r != e.id && c.ctx.isLive(r) && slices.Contains(isr, r) {
					return zkdata.PartitionState{Leader: r, LeaderEpoch: cur.LeaderEpoch + 1, ISR: isr}, true
				}
			}
			return cur, false
		}
	}, nil)
	if err == nil {
		// Followers on the broker: out of the ISR, then StopReplica
		// (delete=false) carrying the new leader epoch.
		err = c.changeAndSend(ctx, followed, func(tp history.TopicPartition) decide {
			return func(cur zkdata.PartitionState) (zkdata.PartitionState, bool) {
				isr := removeFromISR(cur.ISR, []int32{e.id})
				if slices.Equal(isr, cur.ISR) {
					return cur, false
				}
				return zkdata.PartitionState{Leader: cur.Leader, LeaderEpoch: cur.LeaderEpoch + 1, ISR: isr}, true
			}
		}, func(b *batch, _ []history.TopicPartition) {
			for _, tp := range followed {
				b.stopReplica(e.id, tp, false, c.ctx.state[tp].st.LeaderEpoch)
			}
		})
	}
	if errors.Is(err, errControllerMoved) {
		c.events.push(evControllerChange{})
		return finish(kerr.NotController.Code)
	}
	for _, tp := range led {
		if c.ctx.state[tp].st.Leader == e.id {
			resp.PartitionsRemaining = append(resp.PartitionsRemaining, kmsg.ControlledShutdownResponsePartitionsRemaining{Topic: tp.Topic, Partition: tp.Partition})
		}
	}
	return finish(0)
}
