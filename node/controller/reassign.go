package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

// ---- reassignments that add replicas (KIP-455 as Kafka 2.6.3 has it) -----

// reassignment is ReplicaAssignment while a partition is being reassigned:
// the assignment in force is RS = TRS + ORS (target first), adding is
// TRS - ORS and removing ORS - TRS.
type reassignment struct {
	target, adding, removing []int32
}

// origin is ORS: the replica set before the reassignment.
func (r *reassignment) origin(rs []int32) []int32 {
	return slices.DeleteFunc(slices.Clone(rs), func(x int32) bool { return slices.Contains(r.adding, x) })
}

// reassignTo is ReplicaAssignment.reassignTo: the replica set and the
// reassignment that move ors to target.
func reassignTo(ors, target []int32) ([]int32, *reassignment) {
	rs := slices.Clone(target)
	r := &reassignment{target: slices.Clone(target)}
	for _, x := range ors {
		if !slices.Contains(target, x) {
			rs = append(rs, x)
			r.removing = append(r.removing, x)
		}
	}
	for _, x := range target {
		if !slices.Contains(ors, x) {
			r.adding = append(r.adding, x)
		}
	}
	return rs, r
}

// evReassignISR is PartitionReassignmentIsrChangeHandler: the state znode
// of a partition being reassigned changed.
type evReassignISR struct {
	gen int
	tp  history.TopicPartition
}

func (evReassignISR) name() string      { return "PartitionReassignmentIsrChange" }
func (e evReassignISR) generation() int { return e.gen }

// onPartitionReassignment is KafkaController.onPartitionReassignment for a
// reassignment whose target adds a replica: U1-U2 write RS = TRS + ORS with
// the adding and removing replicas to the topic znode and memory, then
// phase A (the target is not all in the ISR: leader epoch bumped,
// LeaderAndIsr to RS, the adding replicas started as NewReplica) or phase
// B (completeReassignment). The partition's state znode is watched until
// the reassignment completes.
func (c *Controller) onPartitionReassignment(ctx context.Context, tp history.TopicPartition, target []int32) (done bool, err error) {
	cur := c.ctx.assign[tp]
	ors := cur
	if r := c.ctx.reassigning[tp]; r != nil {
		ors = r.origin(cur)
	}
	rs, r := reassignTo(ors, target)
	if !slices.Equal(rs, cur) || !slices.Equal(c.ctx.reassigning[tp].removingOrNil(), r.removing) {
		// U1, U2; U3: replicas of an earlier reassignment the new one
		// drops are stopped.
		if err := c.writeAssignment(ctx, tp, rs, r); err != nil {
			return false, err
		}
		if unneeded := without(cur, rs); len(unneeded) > 0 {
			if err := c.stopRemovedReplicas(ctx, tp, unneeded); err != nil {
				return false, err
			}
		}
	}
	c.ctx.reassigning[tp] = r
	c.watchReassignISR(ctx, tp)
	complete, err := c.reassignmentComplete(ctx, tp, r)
	if err != nil {
		return false, err
	}
	if complete {
		return true, c.completeReassignment(ctx, tp, r, false)
	}
	// A1: a new leader epoch, LeaderAndIsr with RS to every replica of
	// RS (updateLeaderEpochAndSendRequest).
	if err := c.bumpLeaderEpochAndSend(ctx, tp, c.liveReplicas(tp)); err != nil {
		return false, err
	}
	// A2: the adding replicas go to NewReplica: a LeaderAndIsr each,
	// marked new, and UpdateMetadata.
	b := c.newBatch()
	b.leaderAndIsr(liveOf(c, r.adding), tp, true)
	b.updateMetadata(brokerIDs(c.ctx.live), []history.TopicPartition{tp})
	b.send()
	c.log.Printf("reassignment of %s to %v: adding %v, removing %v; waiting for %v to join the ISR", tp, r.target, r.adding, r.removing, r.adding)
	return false, nil
}

func (r *reassignment) removingOrNil() []int32 {
	if r == nil {
		return nil
	}
	return r.removing
}

// reassignmentComplete is isReassignmentComplete: TRS is in the ISR as a
// fresh read of the state znode has it.
func (c *Controller) reassignmentComplete(ctx context.Context, tp history.TopicPartition, r *reassignment) (bool, error) {
	ps, err := c.readState(ctx, tp)
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil // a topic being deleted: never complete
	}
	if err != nil {
		return false, fmt.Errorf("reassignment of %s: %w", tp, err)
	}
	if st := c.ctx.state[tp]; st != nil {
		*st = *ps
	}
	for _, x := range r.target {
		if !slices.Contains(ps.st.ISR, x) {
			return false, nil
		}
	}
	return true, nil
}

// completeReassignment is phase B of onPartitionReassignment. unlist:
// remove tp's entry from /admin/reassign_partitions here (B7); the admin
// handler, which rewrites that znode itself once it has been through every
// entry, passes false.
func (c *Controller) completeReassignment(ctx context.Context, tp history.TopicPartition, r *reassignment, unlist bool) error {
	// B1 needs no request; B2: RS = TRS in memory.
	c.ctx.assign[tp] = slices.Clone(r.target)
	// B3: moveReassignedPartitionLeaderIfRequired.
	leader := c.ctx.state[tp].st.Leader
	if !slices.Contains(r.target, leader) || !c.ctx.isLive(leader) {
		// ReassignPartitionLeaderElectionStrategy: the first replica of
		// TRS that is live and in the ISR.
		if err := c.changeAndSend(ctx, []history.TopicPartition{tp}, func(history.TopicPartition) decide {
			return func(cur zkdata.PartitionState) (zkdata.PartitionState, bool) {
				for _, x := range r.target {
					if c.ctx.isLive(x) && slices.Contains(cur.ISR, x) {
						return zkdata.PartitionState{Leader: x, LeaderEpoch: cur.LeaderEpoch + 1, ISR: cur.ISR}, true
					}
				}
				return cur, false
			}
		}, nil); err != nil {
			return err
		}
	} else if err := c.bumpLeaderEpochAndSend(ctx, tp, c.liveReplicas(tp)); err != nil {
		return err
	}
	// B4, B5: the removing replicas leave the ISR and are deleted.
	if err := c.stopRemovedReplicas(ctx, tp, r.removing); err != nil {
		return err
	}
	// B6: RS = TRS in ZooKeeper, no adding or removing replicas.
	if err := c.writeAssignment(ctx, tp, r.target, nil); err != nil {
		return err
	}
	// B7: no longer watched, and out of /admin/reassign_partitions.
	delete(c.ctx.reassigning, tp)
	if unlist {
		if err := c.removeFromZKReassignment(ctx, tp, r.target); err != nil {
			return err
		}
	}
	// B8.
	c.sendUpdateMetadata(brokerIDs(c.ctx.live), []history.TopicPartition{tp})
	c.log.Printf("reassignment of %s to %v complete", tp, r.target)
	// A deletion the reassignment held back goes on.
	return c.resumeDeletionForTopics(ctx, []string{tp.Topic})
}

// bumpLeaderEpochAndSend is updateLeaderEpochAndSendRequest: the leader
// and ISR as they are, at the next leader epoch, and LeaderAndIsr with the
// assignment in memory to brokers.
func (c *Controller) bumpLeaderEpochAndSend(ctx context.Context, tp history.TopicPartition, brokers []int32) error {
	return c.changeAndSendTo(ctx, []history.TopicPartition{tp}, func(history.TopicPartition) decide {
		return func(cur zkdata.PartitionState) (zkdata.PartitionState, bool) {
			return zkdata.PartitionState{Leader: cur.Leader, LeaderEpoch: cur.LeaderEpoch + 1, ISR: cur.ISR}, true
		}
	}, func(history.TopicPartition) []int32 { return brokers }, nil)
}

// stopRemovedReplicas is stopRemovedReplicasOfReassignedPartition: each
// removed replica goes to OfflineReplica (StopReplica without delete, out
// of the ISR with a new leader epoch, LeaderAndIsr to the others), then
// to ReplicaDeletionStarted (StopReplica with delete).
func (c *Controller) stopRemovedReplicas(ctx context.Context, tp history.TopicPartition, removed []int32) error {
	for _, id := range removed {
		others := func(tp history.TopicPartition) []int32 {
			return slices.DeleteFunc(c.liveReplicas(tp), func(r int32) bool { return r == id })
		}
		epoch := c.ctx.state[tp].st.LeaderEpoch
		if err := c.changeAndSendTo(ctx, []history.TopicPartition{tp}, func(history.TopicPartition) decide {
			return func(cur zkdata.PartitionState) (zkdata.PartitionState, bool) { return removeReplicaFromISR(cur, id) }
		}, others, func(b *batch, _ []history.TopicPartition) {
			if _, ok := c.ctx.live[id]; ok {
				b.stopReplica(id, tp, false, epoch)
			}
		}); err != nil {
			return err
		}
		if _, ok := c.ctx.live[id]; ok {
			b := c.newBatch()
			b.stopReplica(id, tp, true, epochDuringDelete)
			b.send()
		}
	}
	return nil
}

// writeAssignment is updateReplicaAssignmentForPartition: the topic znode
// rewritten with tp's replica set rs (and r's adding and removing
// replicas, nil when none) beside the other partitions' assignments, a
// write fenced by the controller epoch; memory follows.
func (c *Controller) writeAssignment(ctx context.Context, tp history.TopicPartition, rs []int32, r *reassignment) error {
	c.ctx.assign[tp] = slices.Clone(rs)
	as, adding, removing := map[int32][]int32{}, map[int32][]int32{}, map[int32][]int32{}
	for p, x := range c.ctx.assign {
		if p.Topic != tp.Topic {
			continue
		}
		as[p.Partition] = x
		if o := c.ctx.reassigning[p]; o != nil && p != tp {
			adding[p.Partition], removing[p.Partition] = o.adding, o.removing
		}
	}
	if r != nil {
		adding[tp.Partition], removing[tp.Partition] = r.adding, r.removing
	}
	pth := zkdata.TopicPath(tp.Topic)
	data := zkdata.EncodeTopicReassigning(as, adding, removing)
	start := time.Now()
	res, err := c.fenced(ctx, &zk.SetDataRequest{Path: pth, Data: data, Version: -1})
	c.logWrite(start, pth, "set", !c.cfg.Bugs.On(config.BugKafka532), -1, string(data), res.Stat, err, c.epoch, c.epochZkVersion)
	return err
}

// removeFromZKReassignment is maybeRemoveFromZkReassignment for one
// completed partition: /admin/reassign_partitions is rewritten without its
// entry, or deleted when nothing else is left in it.
func (c *Controller) removeFromZKReassignment(ctx context.Context, tp history.TopicPartition, target []int32) error {
	p := zkdata.ReassignPartitionsPath
	d, _, err := c.get(ctx, p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	parts, err := zkdata.DecodeReassignment(d)
	if err != nil {
		return nil
	}
	left := slices.DeleteFunc(parts, func(rp zkdata.ReassignmentPartition) bool {
		return rp.Topic == tp.Topic && rp.Partition == tp.Partition && slices.Equal(rp.Replicas, target)
	})
	start := time.Now()
	if len(left) == 0 {
		_, err = c.fenced(ctx, &zk.DeleteRequest{Path: p, Version: -1})
		c.logWrite(start, p, "delete", !c.cfg.Bugs.On(config.BugKafka532), -1, "", nil, err, c.epoch, c.epochZkVersion)
		return err
	}
	data := zkdata.EncodeReassignment(left)
	res, err := c.fenced(ctx, &zk.SetDataRequest{Path: p, Data: data, Version: -1})
	c.logWrite(start, p, "set", !c.cfg.Bugs.On(config.BugKafka532), -1, string(data), res.Stat, err, c.epoch, c.epochZkVersion)
	return err
}

// watchReassignISR registers the PartitionReassignmentIsrChangeHandler:
// one watch on tp's state znode at a time.
func (c *Controller) watchReassignISR(ctx context.Context, tp history.TopicPartition) {
	if c.ctx.reassignWatched[tp] {
		return
	}
	c.ctx.reassignWatched[tp] = true
	gen := c.gen
	c.watchExists(ctx, zkdata.PartitionStatePath(tp.Topic, tp.Partition), func() event { return evReassignISR{gen: gen, tp: tp} })
}

// onReassignISR is processPartitionReassignmentIsrChange: once the target
// replicas are all in the ISR, the reassignment completes.
func (c *Controller) onReassignISR(ctx context.Context, tp history.TopicPartition) error {
	if !c.active {
		return nil
	}
	delete(c.ctx.reassignWatched, tp)
	r := c.ctx.reassigning[tp]
	if r == nil {
		return nil
	}
	c.watchReassignISR(ctx, tp)
	complete, err := c.reassignmentComplete(ctx, tp, r)
	if err != nil || !complete {
		return err
	}
	c.log.Printf("reassignment of %s: target replicas %v have all caught up with the leader", tp, r.target)
	return c.completeReassignment(ctx, tp, r, true)
}

// resumeReassignments is the failover's maybeResumeReassignments: a
// reassignment the topic znodes show in progress that
// /admin/reassign_partitions does not list (the request's handler resumes
// those) goes on from where it was.
func (c *Controller) resumeReassignments(ctx context.Context) error {
	listed := map[history.TopicPartition]bool{}
	if d, _, err := c.get(ctx, zkdata.ReassignPartitionsPath); err == nil {
		parts, _ := zkdata.DecodeReassignment(d)
		for _, rp := range parts {
			listed[history.TP(rp.Topic, rp.Partition)] = true
		}
	} else if !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	for _, tp := range c.ctx.sortedTPs() {
		r := c.ctx.reassigning[tp]
		// A topic queued for deletion resumes too: the failover made
		// its deletion wait for the reassignment (initDeletions).
		if r == nil || listed[tp] || c.ctx.state[tp] == nil {
			continue
		}
		if _, err := c.onPartitionReassignment(ctx, tp, r.target); err != nil {
			return err
		}
	}
	return nil
}

// without is the members of a not in b.
func without(a, b []int32) []int32 {
	var out []int32
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func liveOf(c *Controller, ids []int32) []int32 {
	var out []int32
	for _, x := range ids {
		if _, ok := c.ctx.live[x]; ok {
			out = append(out, x)
		}
	}
	return out
}
