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

// ---- topics, ISR notifications, admin paths ---------------------------------

func (c *Controller) onTopicChange(ctx context.Context) error {
	if !c.active {
		return nil
	}
	added, err := c.readTopics(ctx)
	if err != nil {
		return err
	}
	var tps []history.TopicPartition
	for _, tp := range c.ctx.sortedTPs() {
		if slices.Contains(added, tp.Topic) {
			tps = append(tps, tp)
		}
	}
	return c.onNewPartitions(ctx, tps)
}

// onISRChange is KafkaController.processIsrChangeNotification: read the
// notifications, refresh the cached states of the partitions they name from
// ZooKeeper, tell every live broker, and only then delete exactly the
// notifications it read (Kafka's finally block). A notification a leader
// creates meanwhile stays, and the child watch this read set brings it to
// the next event; deleting whatever is there at the end would drop it
// unread, and the controller would keep serving the ISR it replaced.
func (c *Controller) onISRChange(ctx context.Context) error {
	if !c.active {
		return nil
	}
	gen := c.gen
	kids, err := c.childrenW(ctx, zkdata.ISRChangePath, func() event { return evISRChange{gen: gen} })
	if err != nil {
		return err
	}
	slices.Sort(kids)
	var tps []history.TopicPartition
	for _, k := range kids {
		p := zkdata.ISRChangePath + "/" + k
		d, _, err := c.get(ctx, p)
		if err == nil {
			if got, derr := zkdata.DecodeTopicPartitions(p, d); derr == nil {
				for _, tp := range got {
					tps = append(tps, history.TP(tp.Topic, tp.Partition))
				}
			}
		}
	}
	var refreshed []history.TopicPartition
	for _, tp := range tps {
		if _, ok := c.ctx.assign[tp]; !ok || slices.Contains(refreshed, tp) {
			continue
		}
		ps, err := c.readState(ctx, tp)
		if err != nil {
			c.log.Printf("ISR change %s: %v", tp, err)
			continue
		}
		c.ctx.state[tp] = ps
		refreshed = append(refreshed, tp)
	}
	if len(refreshed) > 0 {
		c.sendUpdateMetadata(brokerIDs(c.ctx.live), refreshed)
	}
	return c.deleteISRChangeNotifications(ctx, kids)
}

// deleteISRChangeNotifications is KafkaZkClient.deleteIsrChangeNotifications:
// each named notification (nil: every one there now, as a new controller
// clears them before it reads every partition's state) is deleted under
// the epoch fence; one already gone is fine.
func (c *Controller) deleteISRChangeNotifications(ctx context.Context, kids []string) error {
	if kids == nil {
		all, _, err := zkDo(ctx, c, func(conn zkConn) ([]string, error) {
			all, _, err := conn.Children(zkdata.ISRChangePath)
			return all, err
		})
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("children of %s: %w", zkdata.ISRChangePath, err)
		}
		kids = all
		slices.Sort(kids)
	}
	for _, k := range kids {
		p := zkdata.ISRChangePath + "/" + k
		start := time.Now()
		_, err := c.fenced(ctx, &zk.DeleteRequest{Path: p, Version: -1})
		c.logWrite(start, p, "delete", !c.cfg.Bugs.On(config.BugKafka532), -1, "", nil, err, c.epoch, c.epochZkVersion)
		if errors.Is(err, errControllerMoved) {
			return err
		}
	}
	return nil
}

// onAdminRequest handles the admin request znode p: handle gets its
// content, and once handle says the request is done the znode is deleted
// (a fenced write) so the next request can be made. Whatever happens, p is
// watched again afterwards, mk making the event that will bring it back.
func (c *Controller) onAdminRequest(ctx context.Context, p string, mk func(gen int) event, handle func(ctx context.Context, d []byte) (done bool, err error)) error {
	if !c.active {
		return nil
	}
	gen := c.gen
	defer c.watchExists(ctx, p, func() event { return mk(gen) })
	d, st, err := c.get(ctx, p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	if done, err := handle(ctx, d); err != nil || !done {
		return err
	}
	start := time.Now()
	_, err = c.fenced(ctx, &zk.DeleteRequest{Path: p, Version: st.Version})
	c.logWrite(start, p, "delete", !c.cfg.Bugs.On(config.BugKafka532), st.Version, "", nil, err, c.epoch, c.epochZkVersion)
	return err
}

func (c *Controller) onPreferredElection(ctx context.Context) error {
	return c.onAdminRequest(ctx, zkdata.PreferredElectionPath, func(gen int) event { return evPreferred{gen: gen} }, c.preferredElection)
}

// preferredElection moves each listed partition's leadership to its
// preferred (first) replica when that replica is live and in the ISR.
func (c *Controller) preferredElection(ctx context.Context, d []byte) (done bool, err error) {
	tps, perr := zkdata.DecodeTopicPartitions(zkdata.PreferredElectionPath, d)
	if perr != nil {
		c.log.Printf("%v (deleting it)", perr)
	}
	// KafkaController.onReplicaElection picks the partitions whose cached
	// leader is not the preferred replica; Election.leaderForPreferredReplica
	// then elects on the fresh state without asking who leads, so a round
	// after a write that landed unheard elects again (leader epoch + 1).
	var list []history.TopicPartition
	for _, tp := range tps {
		tp := history.TP(tp.Topic, tp.Partition)
		as, st := c.ctx.assign[tp], c.ctx.state[tp]
		if len(as) > 0 && st != nil && st.st.Leader != as[0] && !c.ctx.queuedTP(tp) {
			list = append(list, tp)
		}
	}
	sortTPs(list)
	err = c.changeAndSend(ctx, list, func(tp history.TopicPartition) decide {
		return func(cur zkdata.PartitionState) (zkdata.PartitionState, bool) {
			as := c.ctx.assign[tp]
			if !c.ctx.isLive(as[0]) || !slices.Contains(cur.ISR, as[0]) {
				return cur, false
			}
			return zkdata.PartitionState{Leader: as[0], LeaderEpoch: cur.LeaderEpoch + 1, ISR: cur.ISR}, true
		}
	}, nil)
	return err == nil, err
}

// onReassignment handles /admin/reassign_partitions. A reassignment whose
// replica set is a reordering or subset of the current one (no data to
// move) is applied at once: assignment rewritten, leader moved if it is not
// in the new set, removed replicas stopped and deleted. One that adds a
// replica follows KafkaController.onPartitionReassignment (reassign.go):
// it stays in the znode until its new replicas have joined the ISR.
func (c *Controller) onReassignment(ctx context.Context) error {
	return c.onAdminRequest(ctx, zkdata.ReassignPartitionsPath, func(gen int) event { return evReassign{gen: gen} }, c.reassign)
}

// reassign applies the listed reassignments; it is done when none is left
// pending, and otherwise rewrites the znode with the pending ones only, as
// Kafka removes each completed partition from it.
func (c *Controller) reassign(ctx context.Context, d []byte) (done bool, err error) {
	parts, err := zkdata.DecodeReassignment(d)
	if err != nil {
		c.log.Printf("%v", err)
		return false, nil
	}
	var pending []zkdata.ReassignmentPartition
	for _, rp := range parts {
		tp := history.TP(rp.Topic, rp.Partition)
		old, ok := c.ctx.assign[tp]
		if !ok || c.ctx.queuedTP(tp) {
			// KafkaController.onPartitionReassignment refuses a topic
			// being deleted.
			continue
		}
		if r := c.ctx.reassigning[tp]; r != nil {
			old = r.origin(old)
		}
		if len(without(rp.Replicas, old)) > 0 || c.ctx.reassigning[tp] != nil {
			complete, err := c.onPartitionReassignment(ctx, tp, rp.Replicas)
			if err != nil {
				return false, err
			}
			if !complete {
				pending = append(pending, rp)
			}
			continue
		}
		if err := c.reassignShrink(ctx, tp, old, rp.Replicas); err != nil {
			return false, err
		}
	}
	if len(pending) == 0 {
		return true, nil
	}
	if len(pending) < len(parts) {
		p := zkdata.ReassignPartitionsPath
		data := zkdata.EncodeReassignment(pending)
		start := time.Now()
		res, err := c.fenced(ctx, &zk.SetDataRequest{Path: p, Data: data, Version: -1})
		c.logWrite(start, p, "set", !c.cfg.Bugs.On(config.BugKafka532), -1, string(data), res.Stat, err, c.epoch, c.epochZkVersion)
		if err != nil {
			return false, err
		}
	}
	return false, nil
}

func (c *Controller) reassignShrink(ctx context.Context, tp history.TopicPartition, old, target []int32) error {
	removed := []int32{}
	for _, r := range old {
		if !slices.Contains(target, r) {
			removed = append(removed, r)
		}
	}
	err := c.changeAndSend(ctx, []history.TopicPartition{tp}, func(tp history.TopicPartition) decide {
		return func(cur zkdata.PartitionState) (zkdata.PartitionState, bool) {
			isr := []int32{}
			for _, r := range cur.ISR {
				if slices.Contains(target, r) {
					isr = append(isr, r)
				}
			}
			leader := cur.Leader
			if !slices.Contains(target, leader) {
				leader = -1
				for _, r := range target {
					if c.ctx.isLive(r) && slices.Contains(isr, r) {
						leader = r
						break
					}
				}
			}
			if len(isr) == 0 {
				return cur, false
			}
			return zkdata.PartitionState{Leader: leader, LeaderEpoch: cur.LeaderEpoch + 1, ISR: isr}, true
		}
	}, func(b *batch, changed []history.TopicPartition) {
		for _, r := range removed {
			if _, ok := c.ctx.live[r]; ok {
				b.stopReplica(r, tp, true, c.ctx.state[tp].st.LeaderEpoch)
			}
		}
	})
	if err != nil {
		return err
	}
	// Rewrite the topic's assignment.
	c.ctx.assign[tp] = slices.Clone(target)
	as := map[int32][]int32{}
	for p, r := range c.ctx.assign {
		if p.Topic == tp.Topic {
			as[p.Partition] = r
		}
	}
	pth := zkdata.TopicPath(tp.Topic)
	data := zkdata.EncodeTopic(as)
	start := time.Now()
	res, err := c.fenced(ctx, &zk.SetDataRequest{Path: pth, Data: data, Version: -1})
	c.logWrite(start, pth, "set", !c.cfg.Bugs.On(config.BugKafka532), -1, string(data), res.Stat, err, c.epoch, c.epochZkVersion)
	return err
}
