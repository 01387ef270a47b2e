package controller

import (
	"context"
	"errors"
	"path"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/failpoint"
	"github.com/zkchaos/zkchaos/node/zkdata"
	"github.com/zkchaos/zkchaos/node/zkutil"
)

// ---- partition creation ---------------------------------------------------

// onNewPartitions moves NewPartition → OnlinePartition
// (PartitionStateMachine.initializeLeaderAndIsrForPartitions): leader = first
// online replica, ISR = the online replicas (isReplicaOnline: live and not
// shutting down), leader epoch 0, state znode created under the epoch
// fence; the LeaderAndIsr goes to that ISR.
func (c *Controller) onNewPartitions(ctx context.Context, tps []history.TopicPartition) error {
	b := c.newBatch()
	var created []history.TopicPartition
	for _, tp := range tps {
		if c.ctx.queuedTP(tp) {
			// triggerOnlinePartitionStateChange leaves topics queued for
			// deletion alone.
			continue
		}
		live := c.onlineReplicas(tp)
		if len(live) == 0 {
			c.log.Printf("new partition %s: no live replica among %v, stays new", tp, c.ctx.assign[tp])
			continue
		}
		st := zkdata.PartitionState{Leader: live[0], LeaderEpoch: 0, ControllerEpoch: c.epoch, ISR: live}
		p := zkdata.PartitionStatePath(tp.Topic, tp.Partition)
		if err := zkutil.EnsurePathOn(ctx, c.zk, path.Dir(p)); err != nil {
			return err
		}
		data := zkdata.EncodePartitionState(st)
		start := time.Now()
		_, err := c.fenced(ctx, &zk.CreateRequest{Path: p, Data: data, Acl: zk.WorldACL(zk.PermAll)})
		hs := toHistoryState(tp, st, c.ctx.assign[tp])
		w := history.ZKWrite{Start: start.UnixNano(), Path: p, Op: "create", Conditional: !c.cfg.Bugs.On(config.BugKafka532),
			ControllerEpoch: c.epoch, EpochZkVersion: c.epochZkVersion, ExpectedVersion: -1, Outcome: zkutil.Outcome(err), State: &hs}
		if errors.Is(err, errControllerMoved) {
			w.Outcome = history.ZKBadVersion
		}
		if err != nil {
			w.Error = err.Error()
		}
		c.log.ZKWrite(w)
		switch {
		case err == nil:
			c.ctx.state[tp] = &partState{st: st, ver: 0}
			created = append(created, tp)
		case errors.Is(err, errControllerMoved):
			return err
		case errors.Is(err, zk.ErrNodeExists):
			if ps, rerr := c.readState(ctx, tp); rerr == nil {
				c.ctx.state[tp] = ps
			}
		default:
			c.log.Printf("create state of %s: %v", tp, err)
		}
	}
	if len(created) == 0 {
		return nil
	}
	if err := c.fp.Eval(ctx, failpoint.ControllerAfterZKWrite); err != nil {
		c.log.Printf("%v: not sending requests for new partitions", err)
		return nil
	}
	for _, tp := range created {
		b.leaderAndIsr(c.ctx.state[tp].st.ISR, tp, true)
	}
	b.updateMetadata(brokerIDs(c.ctx.live), created)
	b.send()
	return nil
}
