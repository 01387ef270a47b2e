package controller

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/failpoint"
	"github.com/zkchaos/zkchaos/node/wire"
	"github.com/zkchaos/zkchaos/node/zkdata"
	"github.com/zkchaos/zkchaos/node/zkutil"
)

// ---- reading ZooKeeper --------------------------------------------------

func (c *Controller) childrenW(ctx context.Context, p string, mk func() event) ([]string, error) {
	type r struct {
		kids []string
		ch   <-chan zk.Event
	}
	v, _, err := zkutil.Retry(ctx, c.sess, c.sess.RequestTimeout, func(conn *zk.Conn, _ int) (r, error) {
		kids, _, ch, err := conn.ChildrenW(p)
		return r{kids, ch}, err
	})
	if err != nil {
		return nil, fmt.Errorf("children of %s: %w", p, err)
	}
	c.waitWatch(v.ch, mk)
	slices.Sort(v.kids)
	return v.kids, nil
}

func (c *Controller) get(ctx context.Context, p string) ([]byte, *zk.Stat, error) {
	type r struct {
		d  []byte
		st *zk.Stat
	}
	v, _, err := zkutil.Retry(ctx, c.sess, c.sess.RequestTimeout, func(conn *zk.Conn, _ int) (r, error) {
		d, st, err := conn.Get(p)
		return r{d, st}, err
	})
	return v.d, v.st, err
}

// readBrokers lists /brokers/ids (setting the BrokerChange watch) with each
// broker's registration and czxid.
func (c *Controller) readBrokers(ctx context.Context) (map[int32]brokerInfo, error) {
	gen := c.gen
	kids, err := c.childrenW(ctx, zkdata.BrokerIDsPath, func() event { return evBrokerChange{gen: gen} })
	if err != nil {
		return nil, err
	}
	out := map[int32]brokerInfo{}
	for _, k := range kids {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			c.log.Printf("ignoring malformed broker znode %s/%s", zkdata.BrokerIDsPath, k)
			continue
		}
		d, st, err := c.get(ctx, zkdata.BrokerPath(int32(id)))
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		reg, err := zkdata.DecodeBroker(int32(id), d)
		if err != nil {
			c.log.Printf("ignoring broker %d: %v", id, err)
			continue
		}
		out[int32(id)] = brokerInfo{ID: int32(id), Epoch: st.Czxid, Host: reg.Host, Port: reg.Port}
	}
	return out, nil
}

// readTopics lists /brokers/topics (setting the TopicChange watch) and reads
// the assignment of every topic not yet known.
func (c *Controller) readTopics(ctx context.Context) ([]string, error) {
	gen := c.gen
	kids, err := c.childrenW(ctx, zkdata.TopicsPath, func() event { return evTopicChange{gen: gen} })
	if err != nil {
		return nil, err
	}
	var added []string
	for _, t := range kids {
		if c.ctx.topics[t] {
			continue
		}
		d, _, err := c.get(ctx, zkdata.TopicPath(t))
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return added, err
		}
		as, err := zkdata.DecodeTopic(t, d)
		if err != nil {
			c.log.Printf("ignoring topic: %v", err)
			continue
		}
		c.ctx.topics[t] = true
		for p, r := range as {
			c.ctx.assign[history.TP(t, p)] = r
		}
		added = append(added, t)
	}
	return added, nil
}

// ---- failover -----------------------------------------------------------

// onControllerFailover loads the context, starts the send queues and tells
// every broker the current state with this controller's epoch.
func (c *Controller) onControllerFailover(ctx context.Context) error {
	c.gen++
	c.ctx = newContext()
	c.chans = newChannelManager(c)
	gen := c.gen
	for _, p := range []string{zkdata.ISRChangePath, zkdata.AdminPath} {
		if err := zkutil.EnsurePath(ctx, c.sess, p); err != nil {
			return err
		}
	}
	live, err := c.readBrokers(ctx)
	if err != nil {
		return err
	}
	c.ctx.live = live
	if _, err := c.readTopics(ctx); err != nil {
		return err
	}
	// Partition states. Fixed: Sync first so the read is not older than
	// the election. KAFKA-16667: read through our session as it is.
	sync := !c.cfg.Bugs.On(config.BugKafka16667)
	var newParts []history.TopicPartition
	for _, tp := range c.ctx.sortedTPs() {
		ps, err := c.readState(ctx, tp, sync)
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

	c.sendUpdateMetadata(brokerIDs(live), nil)
	if err := c.onNewPartitions(ctx, newParts); err != nil {
		return err
	}
	// ReplicaStateMachine.startup moves replicas on dead brokers to
	// OfflineReplica (out of the ISR, leader -1 if they led), then
	// PartitionStateMachine.startup elects where it can.
	var dead []int32
	for _, tp := range c.ctx.sortedTPs() {
		for _, r := range c.ctx.assign[tp] {
			if _, ok := c.ctx.live[r]; !ok && !slices.Contains(dead, r) {
				dead = append(dead, r)
			}
		}
	}
	slices.Sort(dead)
	if err := c.onBrokerFailure(ctx, dead); err != nil {
		return err
	}
	if err := c.electOffline(ctx); err != nil {
		return err
	}
	// ReplicaStateMachine.startup: every live replica learns the current
	// state of its partitions from this controller.
	b := c.newBatch()
	for _, tp := range c.ctx.sortedTPs() {
		if c.ctx.state[tp] != nil {
			b.leaderAndIsr(c.liveReplicas(tp), tp, false)
		}
	}
	b.send()
	c.events.push(evISRChange{gen: gen})
	c.events.push(evPreferred{gen: gen})
	c.events.push(evReassign{gen: gen})
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

func (c *Controller) liveReplicas(tp history.TopicPartition) []int32 {
	var out []int32
	for _, r := range c.ctx.assign[tp] {
		if _, ok := c.ctx.live[r]; ok {
			out = append(out, r)
		}
	}
	return out
}

// ---- partition creation ---------------------------------------------------

// onNewPartitions moves NewPartition → OnlinePartition: leader = first live
// replica, ISR = live replicas, leader epoch 0, state znode created under the
// epoch fence.
func (c *Controller) onNewPartitions(ctx context.Context, tps []history.TopicPartition) error {
	b := c.newBatch()
	var created []history.TopicPartition
	for _, tp := range tps {
		live := c.liveReplicas(tp)
		if len(live) == 0 {
			c.log.Printf("new partition %s: no live replica among %v, stays new", tp, c.ctx.assign[tp])
			continue
		}
		st := zkdata.PartitionState{Leader: live[0], LeaderEpoch: 0, ControllerEpoch: c.epoch, ISR: live}
		p := zkdata.PartitionStatePath(tp.Topic, tp.Partition)
		if err := zkutil.EnsurePath(ctx, c.sess, path.Dir(p)); err != nil {
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
			if ps, rerr := c.readState(ctx, tp, true); rerr == nil {
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
		b.leaderAndIsr(c.liveReplicas(tp), tp, true)
	}
	b.updateMetadata(brokerIDs(c.ctx.live), created)
	b.send()
	return nil
}

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

// electOffline runs triggerOnlinePartitionStateChange: every partition
// without a live leader gets one if the policy allows.
func (c *Controller) electOffline(ctx context.Context) error {
	var tps []history.TopicPartition
	for _, tp := range c.ctx.sortedTPs() {
		ps := c.ctx.state[tp]
		if ps != nil && !c.ctx.isLive(ps.st.Leader) {
			tps = append(tps, tp)
		}
	}
	return c.changeAndSend(ctx, tps, func(tp history.TopicPartition) decide {
		return func(cur zkdata.PartitionState) (zkdata.PartitionState, bool) {
			if c.ctx.isLive(cur.Leader) {
				return cur, false
			}
			l, isr, ok := c.offlineLeader(ctx, tp, cur)
			if !ok {
				return cur, false
			}
			return zkdata.PartitionState{Leader: l, LeaderEpoch: cur.LeaderEpoch + 1, ISR: isr}, true
		}
	}, nil)
}

// changeAndSend writes per-partition decisions, then (past the
// after-ZK-write failpoint) sends LeaderAndIsr to the live replicas of the
// changed partitions and UpdateMetadata to every live broker. extra adds
// more requests to the same batch.
func (c *Controller) changeAndSend(ctx context.Context, tps []history.TopicPartition, mk func(tp history.TopicPartition) decide, extra func(b *batch, changed []history.TopicPartition)) error {
	var changed []history.TopicPartition
	for _, tp := range tps {
		done, err := c.updateStates(ctx, []history.TopicPartition{tp}, mk(tp))
		changed = append(changed, done...)
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
		b.leaderAndIsr(c.liveReplicas(tp), tp, false)
	}
	if extra != nil {
		extra(b, changed)
	}
	b.updateMetadata(brokerIDs(c.ctx.live), changed)
	b.send()
	return nil
}

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
		delete(c.ctx.shuttingDown, id)
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

func (c *Controller) onISRChange(ctx context.Context) error {
	if !c.active {
		return nil
	}
	gen := c.gen
	kids, err := c.childrenW(ctx, zkdata.ISRChangePath, func() event { return evISRChange{gen: gen} })
	if err != nil {
		return err
	}
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
		start := time.Now()
		_, err = c.fenced(ctx, &zk.DeleteRequest{Path: p, Version: -1})
		c.logWrite(start, p, "delete", !c.cfg.Bugs.On(config.BugKafka532), -1, "", nil, err, c.epoch, c.epochZkVersion)
		if errors.Is(err, errControllerMoved) {
			return err
		}
	}
	if len(tps) == 0 {
		return nil
	}
	var refreshed []history.TopicPartition
	for _, tp := range tps {
		if _, ok := c.ctx.assign[tp]; !ok {
			continue
		}
		ps, err := c.readState(ctx, tp, !c.cfg.Bugs.On(config.BugKafka16667))
		if err != nil {
			c.log.Printf("ISR change %s: %v", tp, err)
			continue
		}
		c.ctx.state[tp] = ps
		refreshed = append(refreshed, tp)
	}
	c.sendUpdateMetadata(brokerIDs(c.ctx.live), refreshed)
	return nil
}

func (c *Controller) onPreferredElection(ctx context.Context) error {
	if !c.active {
		return nil
	}
	gen := c.gen
	defer c.watchExists(ctx, zkdata.PreferredElectionPath, func() event { return evPreferred{gen: gen} })
	d, st, err := c.get(ctx, zkdata.PreferredElectionPath)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	tps, perr := zkdata.DecodeTopicPartitions(zkdata.PreferredElectionPath, d)
	if perr != nil {
		c.log.Printf("%v (deleting it)", perr)
	}
	var list []history.TopicPartition
	for _, tp := range tps {
		list = append(list, history.TP(tp.Topic, tp.Partition))
	}
	sortTPs(list)
	err = c.changeAndSend(ctx, list, func(tp history.TopicPartition) decide {
		return func(cur zkdata.PartitionState) (zkdata.PartitionState, bool) {
			as := c.ctx.assign[tp]
			if len(as) == 0 || cur.Leader == as[0] || !c.ctx.isLive(as[0]) || !slices.Contains(cur.ISR, as[0]) {
				return cur, false
			}
			return zkdata.PartitionState{Leader: as[0], LeaderEpoch: cur.LeaderEpoch + 1, ISR: cur.ISR}, true
		}
	}, nil)
	if err != nil {
		return err
	}
	start := time.Now()
	_, err = c.fenced(ctx, &zk.DeleteRequest{Path: zkdata.PreferredElectionPath, Version: st.Version})
	c.logWrite(start, zkdata.PreferredElectionPath, "delete", !c.cfg.Bugs.On(config.BugKafka532), st.Version, "", nil, err, c.epoch, c.epochZkVersion)
	return err
}

// onReassignment handles /admin/reassign_partitions for partitions whose new
// replica set is a reordering or subset of the current one (no data to
// move): assignment rewritten, leader moved if it is not in the new set,
// removed replicas stopped and deleted. A reassignment that adds replicas
// needs replica catch-up (the data plane, part 2) and is left in place.
func (c *Controller) onReassignment(ctx context.Context) error {
	if !c.active {
		return nil
	}
	gen := c.gen
	defer c.watchExists(ctx, zkdata.ReassignPartitionsPath, func() event { return evReassign{gen: gen} })
	d, st, err := c.get(ctx, zkdata.ReassignPartitionsPath)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	parts, err := zkdata.DecodeReassignment(d)
	if err != nil {
		c.log.Printf("%v", err)
		return nil
	}
	pending := false
	for _, rp := range parts {
		tp := history.TP(rp.Topic, rp.Partition)
		old, ok := c.ctx.assign[tp]
		if !ok {
			continue
		}
		grows := false
		for _, r := range rp.Replicas {
			if !slices.Contains(old, r) {
				grows = true
			}
		}
		if grows {
			c.log.Printf("reassignment of %s to %v adds replicas: needs the data plane (part 2); left pending", tp, rp.Replicas)
			pending = true
			continue
		}
		if err := c.reassignShrink(ctx, tp, old, rp.Replicas); err != nil {
			return err
		}
	}
	if pending {
		return nil
	}
	start := time.Now()
	_, err = c.fenced(ctx, &zk.DeleteRequest{Path: zkdata.ReassignPartitionsPath, Version: st.Version})
	c.logWrite(start, zkdata.ReassignPartitionsPath, "delete", !c.cfg.Bugs.On(config.BugKafka532), st.Version, "", nil, err, c.epoch, c.epochZkVersion)
	return err
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
	r.ErrorCode = wire.ErrUnknownServerError
	return r
}

func (c *Controller) onControlledShutdown(ctx context.Context, e evShutdown) *kmsg.ControlledShutdownResponse {
	resp := kmsg.NewPtrControlledShutdownResponse()
	ev := history.Shutdown{BrokerID: e.id, BrokerEpoch: e.epoch, ControllerEpoch: c.epoch, CorrelationID: e.corr, CachedBrokerEpoch: -1}
	finish := func(code int16) *kmsg.ControlledShutdownResponse {
		resp.ErrorCode = code
		ev.ErrorCode = code
		ev.Verdict = history.VerdictAccepted
		if code != wire.ErrNone {
			ev.Verdict = history.VerdictRejected
		}
		c.log.ControlledShutdown(ev)
		return resp
	}
	if !c.active {
		return finish(wire.ErrNotController)
	}
	b, live := c.ctx.live[e.id]
	if live {
		ev.CachedBrokerEpoch = b.Epoch
	}
	if !c.cfg.Bugs.On(config.BugKafka7235) && e.epoch != -1 && live && e.epoch < b.Epoch {
		return finish(wire.ErrStaleBrokerEpoch)
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
		return finish(wire.ErrNotController)
	}
	for _, tp := range led {
		if c.ctx.state[tp].st.Leader == e.id {
			resp.PartitionsRemaining = append(resp.PartitionsRemaining, kmsg.ControlledShutdownResponsePartitionsRemaining{Topic: tp.Topic, Partition: tp.Partition})
		}
	}
	return finish(wire.ErrNone)
}

// ---- request batches ----------------------------------------------------------

// batch is ControllerBrokerRequestBatch: requests per broker, sent together
// with this controller's epoch and each broker's cached broker epoch.
type batch struct {
	c     *Controller
	lai   map[int32]map[history.TopicPartition]bool // broker → partitions (isNew)
	stop  map[int32][]kmsg.StopReplicaRequestTopic
	um    map[int32][]history.TopicPartition
	umAll map[int32]bool
}

func (c *Controller) newBatch() *batch {
	return &batch{c: c, lai: map[int32]map[history.TopicPartition]bool{}, stop: map[int32][]kmsg.StopReplicaRequestTopic{},
		um: map[int32][]history.TopicPartition{}, umAll: map[int32]bool{}}
}

func (b *batch) leaderAndIsr(brokers []int32, tp history.TopicPartition, isNew bool) {
	for _, id := range brokers {
		if b.lai[id] == nil {
			b.lai[id] = map[history.TopicPartition]bool{}
		}
		b.lai[id][tp] = isNew
	}
}

func (b *batch) stopReplica(id int32, tp history.TopicPartition, del bool, leaderEpoch int32) {
	t := kmsg.NewStopReplicaRequestTopic()
	t.Topic = tp.Topic
	ps := kmsg.NewStopReplicaRequestTopicPartitionState()
	ps.Partition, ps.LeaderEpoch, ps.Delete = tp.Partition, leaderEpoch, del
	t.PartitionStates = append(t.PartitionStates, ps)
	b.stop[id] = append(b.stop[id], t)
}

// updateMetadata adds partitions (nil: all) for brokers.
func (b *batch) updateMetadata(brokers []int32, tps []history.TopicPartition) {
	for _, id := range brokers {
		if tps == nil {
			b.umAll[id] = true
		}
		b.um[id] = append(b.um[id], tps...)
	}
}

func (c *Controller) sendUpdateMetadata(brokers []int32, tps []history.TopicPartition) {
	b := c.newBatch()
	b.updateMetadata(brokers, tps)
	b.send()
}

func (b *batch) brokerEpoch(id int32) int64 {
	c := b.c
	if c.cfg.Bugs.On(config.BugKafka7235) {
		return -1 // no broker epoch before KIP-380
	}
	if bi, ok := c.ctx.live[id]; ok {
		return bi.Epoch
	}
	return -1
}

func (b *batch) send() {
	c := b.c
	liveLeaders := func() []kmsg.LeaderAndISRRequestLiveLeader {
		var out []kmsg.LeaderAndISRRequestLiveLeader
		for _, id := range brokerIDs(c.ctx.live) {
			bi := c.ctx.live[id]
			l := kmsg.NewLeaderAndISRRequestLiveLeader()
			l.BrokerID, l.Host, l.Port = bi.ID, bi.Host, bi.Port
			out = append(out, l)
		}
		return out
	}
	for _, id := range sortedKeys(b.lai) {
		req := kmsg.NewPtrLeaderAndISRRequest()
		req.SetVersion(4)
		req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = c.cfg.BrokerID, c.epoch, b.brokerEpoch(id)
		byTopic := map[string]*kmsg.LeaderAndISRRequestTopicState{}
		var order []string
		tps := make([]history.TopicPartition, 0, len(b.lai[id]))
		for tp := range b.lai[id] {
			tps = append(tps, tp)
		}
		sortTPs(tps)
		for _, tp := range tps {
			ps := c.ctx.state[tp]
			if ps == nil {
				continue
			}
			ts, ok := byTopic[tp.Topic]
			if !ok {
				t := kmsg.NewLeaderAndISRRequestTopicState()
				t.Topic = tp.Topic
				ts = &t
				byTopic[tp.Topic] = ts
				order = append(order, tp.Topic)
			}
			p := kmsg.NewLeaderAndISRRequestTopicPartition()
			p.Partition, p.ControllerEpoch, p.Leader, p.LeaderEpoch = tp.Partition, ps.st.ControllerEpoch, ps.st.Leader, ps.st.LeaderEpoch
			p.ISR, p.ZKVersion, p.Replicas, p.IsNew = slices.Clone(ps.st.ISR), ps.ver, slices.Clone(c.ctx.assign[tp]), b.lai[id][tp]
			ts.PartitionStates = append(ts.PartitionStates, p)
		}
		for _, t := range order {
			req.TopicStates = append(req.TopicStates, *byTopic[t])
		}
		req.LiveLeaders = liveLeaders()
		if len(req.TopicStates) > 0 {
			c.chans.send(id, req)
		}
	}
	for _, id := range sortedKeys(b.stop) {
		req := kmsg.NewPtrStopReplicaRequest()
		req.SetVersion(3)
		req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = c.cfg.BrokerID, c.epoch, b.brokerEpoch(id)
		req.Topics = b.stop[id]
		c.chans.send(id, req)
	}
	for _, id := range sortedKeys(b.um) {
		req := kmsg.NewPtrUpdateMetadataRequest()
		req.SetVersion(6)
		req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = c.cfg.BrokerID, c.epoch, b.brokerEpoch(id)
		tps := b.um[id]
		if b.umAll[id] {
			tps = c.ctx.sortedTPs()
		}
		byTopic := map[string]int{}
		for _, tp := range tps {
			ps := c.ctx.state[tp]
			if ps == nil {
				continue
			}
			i, ok := byTopic[tp.Topic]
			if !ok {
				t := kmsg.NewUpdateMetadataRequestTopicState()
				t.Topic = tp.Topic
				req.TopicStates = append(req.TopicStates, t)
				i = len(req.TopicStates) - 1
				byTopic[tp.Topic] = i
			}
			p := kmsg.NewUpdateMetadataRequestTopicPartition()
			p.Topic, p.Partition, p.ControllerEpoch, p.Leader, p.LeaderEpoch = tp.Topic, tp.Partition, ps.st.ControllerEpoch, ps.st.Leader, ps.st.LeaderEpoch
			p.ISR, p.ZKVersion, p.Replicas = slices.Clone(ps.st.ISR), ps.ver, slices.Clone(c.ctx.assign[tp])
			for _, r := range c.ctx.assign[tp] {
				if _, ok := c.ctx.live[r]; !ok {
					p.OfflineReplicas = append(p.OfflineReplicas, r)
				}
			}
			req.TopicStates[i].PartitionStates = append(req.TopicStates[i].PartitionStates, p)
		}
		for _, lid := range brokerIDs(c.ctx.live) {
			bi := c.ctx.live[lid]
			lb := kmsg.NewUpdateMetadataRequestLiveBroker()
			lb.ID = bi.ID
			ep := kmsg.NewUpdateMetadataRequestLiveBrokerEndpoint()
			ep.Host, ep.Port, ep.ListenerName, ep.SecurityProtocol = bi.Host, bi.Port, "PLAINTEXT", 0
			lb.Endpoints = append(lb.Endpoints, ep)
			req.LiveBrokers = append(req.LiveBrokers, lb)
		}
		c.chans.send(id, req)
	}
}

func sortedKeys[V any](m map[int32]V) []int32 {
	out := make([]int32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// onResponse is called by send threads; responses are only logged (Kafka's
// controller uses them for topic deletion, which the node does not model).
func (c *Controller) onResponse(broker int32, req kmsg.Request, resp kmsg.Response) {
	var code int16
	switch r := resp.(type) {
	case *kmsg.LeaderAndISRResponse:
		code = r.ErrorCode
	case *kmsg.StopReplicaResponse:
		code = r.ErrorCode
	case *kmsg.UpdateMetadataResponse:
		code = r.ErrorCode
	}
	if code != 0 {
		c.log.Printf("broker %d answered %s with error %d", broker, kmsg.NameForKey(req.Key()), code)
	}
}

// Close stops watch goroutines and send threads; call after Run returned.
func (c *Controller) Close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	if c.chans != nil {
		c.chans.shutdown()
	}
}
