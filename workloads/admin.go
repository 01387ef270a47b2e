package workloads

// The admin workload is the one part of this package that talks to
// ZooKeeper: in ZooKeeper-era Kafka the operators' tools (kafka-topics.sh
// --zookeeper, kafka-reassign-partitions.sh, kafka-preferred-replica-election.sh)
// wrote znodes and the controller's watches did the work, so ZooKeeper is the
// control plane's client protocol here, as the Kafka protocol is the data
// plane's. It reads only the znodes those tools read; it judges nothing.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/zkcall"
	"github.com/zkchaos/zkchaos/zklayout"
)

// AdminOps lists the control-plane operations, in the order weights apply.
var AdminOps = []string{history.FReassign, history.FPreferredElection, history.FCreateTopic, history.FControlledShutdown, history.FDeleteTopic}

// AdminConfig configures the admin workload.
type AdminConfig struct {
	ZKServers      []string
	SessionTimeout time.Duration // default 10s
	// Topic and Partitions name the workload topic, whose partitions get
	// reassigned and preferred-elected (so the controller is busy with the
	// partitions clients use); created topics are named after it.
	Topic      string
	Partitions int32
	// SpreadTopic, when set, names the run's RF-2 topic without clients,
	// whose partitions reassignments may move to a broker outside their
	// replica set (and back).
	SpreadTopic string
	Brokers     []int // broker ids
	// Ops is the subset of AdminOps to draw from; empty means all (without
	// controlled-shutdown when the broker hooks are nil).
	Ops []string
	// Interval is the mean pause between operations (default 2s); the pause
	// is drawn from [Interval/2, 3*Interval/2].
	Interval time.Duration
	// OpTimeout is how long the controller has to complete an operation
	// before it is recorded as info (default 15s).
	OpTimeout time.Duration
	Seed      uint64
	// StopBroker stops a broker the way an operator does (SIGTERM, which
	// makes the node program run its controlled shutdown) and returns once
	// the process has exited; StartBroker starts it again. Both nil disables
	// controlled-shutdown.
	StopBroker  func(ctx context.Context, id int) error
	StartBroker func(ctx context.Context, id int) error
	// Held, when set, says whether something else holds broker id now
	// (a fault in force): a controlled shutdown drawn for it is left out,
	// not invoked, and the draws that follow stay as the seed gives them.
	Held func(id int) bool
	// HeldPartition, when set, says whether something else holds partition
	// p of Topic now (a fault waiting for its leader's ISR to shrink): a
	// reassignment or preferred election drawn for it is left out, as a
	// held broker's controlled shutdown is.
	HeldPartition func(p int32) bool
}

// Admin is the control-plane workload: one operator process issuing one
// admin operation at a time (the tools refused to start a reassignment while
// another was in flight), each recorded as invoke then ok, fail or info.
type Admin struct {
	cfg  AdminConfig
	ops  []string
	open func(name string) (*history.Writer, error)
}

// NewAdmin returns the workload; open creates the history writer of its
// source ("admin").
func NewAdmin(cfg AdminConfig, open func(name string) (*history.Writer, error)) (*Admin, error) {
	if len(cfg.ZKServers) == 0 || cfg.Topic == "" || cfg.Partitions < 1 || len(cfg.Brokers) == 0 {
		return nil, errors.New("admin workload: zookeeper servers, topic, partitions and brokers are required")
	}
	if (cfg.StopBroker == nil) != (cfg.StartBroker == nil) {
		return nil, errors.New("admin workload: StopBroker and StartBroker go together")
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 10 * time.Second
	}
	if cfg.Interval == 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.OpTimeout == 0 {
		cfg.OpTimeout = 15 * time.Second
	}
	ops := cfg.Ops
	if len(ops) == 0 {
		for _, o := range AdminOps {
			if o != history.FControlledShutdown || cfg.StopBroker != nil {
				ops = append(ops, o)
			}
		}
	}
	for _, o := range ops {
		if !slices.Contains(AdminOps, o) {
			return nil, fmt.Errorf("admin workload: unknown operation %q (known: %s)", o, strings.Join(AdminOps, ", "))
		}
		if o == history.FControlledShutdown && cfg.StopBroker == nil {
			return nil, errors.New("admin workload: controlled-shutdown needs StopBroker and StartBroker")
		}
	}
	return &Admin{cfg: cfg, ops: ops, open: open}, nil
}

// opWeight makes partition moves (the controller work the seed bugs need)
// more frequent than topic creation and broker restarts.
var opWeight = map[string]int{history.FReassign: 3, history.FPreferredElection: 3, history.FCreateTopic: 1, history.FControlledShutdown: 1,
	history.FDeleteTopic: 1}

// pickOp draws the next operation; the same seed gives the same sequence.
func pickOp(r *rand.Rand, ops []string) string {
	total := 0
	for _, o := range ops {
		total += opWeight[o]
	}
	n := r.IntN(total)
	for _, o := range ops {
		if n < opWeight[o] {
			return o
		}
		n -= opWeight[o]
	}
	return ops[len(ops)-1]
}

// Run issues operations until ctx ends. An operation cut short by ctx is
// recorded as info: it may still complete.
func (a *Admin) Run(ctx context.Context) error {
	w, err := a.open("admin")
	if err != nil {
		return err
	}
	defer w.Close()
	conn, _, err := zk.Connect(a.cfg.ZKServers, a.cfg.SessionTimeout, zk.WithLogger(quietZK{}))
	if err != nil {
		return fmt.Errorf("admin workload: connect zookeeper: %w", err)
	}
	defer conn.Close()
	op := &adminOp{cfg: a.cfg, conn: conn, w: w, rng: rand.New(rand.NewPCG(a.cfg.Seed, 0xad317))}
	for {
		gap := a.cfg.Interval/2 + time.Duration(op.rng.Int64N(int64(a.cfg.Interval)+1))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(gap):
		}
		f := pickOp(op.rng, a.ops)
		switch f {
		case history.FReassign:
			op.reassign(ctx)
		case history.FPreferredElection:
			op.preferred(ctx)
		case history.FCreateTopic:
			op.createTopic(ctx)
		case history.FControlledShutdown:
			op.controlledShutdown(ctx)
		case history.FDeleteTopic:
			op.deleteAndRecreate(ctx)
		}
	}
}

type adminOp struct {
	cfg    AdminConfig
	conn   *zk.Conn
	w      *history.Writer
	rng    *rand.Rand
	proc   int // bumped after an info: that process may still have an op in flight
	topics int // topics created so far, for their names
	// created are the topics this workload created that exist now, the
	// ones it may delete (never the workload topic, whose records the
	// checkers follow).
	created []string
	// swapped holds, per spread topic partition whose replica swapSpread
	// replaced, the replicas it had before, to move it back to.
	swapped map[int32][]int
}

func (o *adminOp) record(typ history.OpType, op history.ClientOp) {
	op.Type, op.Process = typ, o.proc
	o.w.Write(history.Event{Kind: history.KindOp, Op: &op})
	o.w.Sync()
	if typ == history.OpInfo {
		o.proc++
	}
}

func (o *adminOp) get(ctx context.Context, p string) ([]byte, *zk.Stat, error) {
	type gs struct {
		b  []byte
		st *zk.Stat
	}
	r, err := zkcall.Do(ctx, 5*time.Second, func() (gs, error) {
		b, st, err := o.conn.Get(p)
		return gs{b, st}, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", p, err)
	}
	return r.b, r.st, nil
}

func (o *adminOp) exists(ctx context.Context, p string) (bool, error) {
	return zkcall.Do(ctx, 5*time.Second, func() (bool, error) {
		ok, _, err := o.conn.Exists(p)
		return ok, err
	})
}

func (o *adminOp) create(ctx context.Context, p string, data []byte) error {
	_, err := zkcall.Do(ctx, 5*time.Second, func() (string, error) {
		return o.conn.Create(p, data, 0, zk.WorldACL(zk.PermAll))
	})
	return err
}

// createCertainlyFailed reports whether a create that returned err certainly
// did not happen: ZooKeeper answered with a refusal. A timeout or a lost
// connection leaves the create's fate unknown.
func createCertainlyFailed(err error) bool {
	return errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadArguments) || errors.Is(err, zk.ErrNoAuth)
}

// assignment is /brokers/topics/<t>'s partition → replicas.
func (o *adminOp) assignment(ctx context.Context, topic string) (zklayout.Assignment, error) {
	p := zklayout.TopicPath(topic)
	b, _, err := o.get(ctx, p)
	if err != nil {
		return nil, err
	}
	return zklayout.DecodeAssignment(p, b)
}

func (o *adminOp) state(ctx context.Context, topic string, partition int32) (zklayout.PartitionState, error) {
	p := zklayout.StatePath(topic, partition)
	b, _, err := o.get(ctx, p)
	if err != nil {
		return zklayout.PartitionState{}, err
	}
	return zklayout.DecodePartitionState(p, b)
}

// waitFor polls done until it reports true, the operation times out or ctx
// ends; it returns the last detail done gave and whether it finished.
func (o *adminOp) waitFor(ctx context.Context, done func() (bool, string)) (bool, string) {
	deadline := time.Now().Add(o.cfg.OpTimeout)
	last := ""
	for {
		ok, detail := done()
		if detail != "" {
			last = detail
		}
		if ok {
			return true, last
		}
		if time.Now().After(deadline) {
			return false, last
		}
		select {
		case <-ctx.Done():
			return false, last
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func joinInts(rs []int) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = strconv.Itoa(r)
	}
	return strings.Join(s, ",")
}

// rotate moves the first replica to the end: a reassignment with the same
// replicas (no data to move) and a different preferred leader.
func rotate(rs []int) []int { return append(slices.Clone(rs[1:]), rs[0]) }

// unfinished records info for an operation that did not complete in time.
func (o *adminOp) unfinished(ctx context.Context, inv history.ClientOp, what, detail string) {
	inv.Error = fmt.Sprintf("%s not completed within %s", what, o.cfg.OpTimeout)
	if ctx.Err() != nil {
		inv.Error = what + " not completed when the workload ended"
	}
	if detail != "" {
		inv.Error += ": " + detail
	}
	o.record(history.OpInfo, inv)
}

// request invokes inv, writes body to the znode p and finishes inv when
// done says the controller completed it.
func (o *adminOp) request(ctx context.Context, inv history.ClientOp, p string, body []byte, what string, done func() (bool, string)) {
	o.record(history.OpInvoke, inv)
	if err := o.create(ctx, p, body); err != nil {
		o.createFailed(inv, p, err)
		return
	}
	o.finish(ctx, inv, what, done)
}

// finish waits until done reports the invoked inv completed and records
// it ok, with done's detail as its Value, or unfinished (what names the
// step it waited for).
func (o *adminOp) finish(ctx context.Context, inv history.ClientOp, what string, done func() (bool, string)) {
	ok, detail := o.waitFor(ctx, done)
	if !ok {
		o.unfinished(ctx, inv, what, detail)
		return
	}
	inv.Value = detail
	o.record(history.OpOK, inv)
}

// consumed is then, once the controller has deleted the admin znode p (it
// deletes the request when it has acted on it).
func (o *adminOp) consumed(ctx context.Context, p string, then func() (bool, string)) func() (bool, string) {
	return func() (bool, string) {
		pending, err := o.exists(ctx, p)
		if err != nil {
			return false, err.Error()
		}
		if pending {
			return false, p + " still present"
		}
		return then()
	}
}

// createFailed records the outcome of an admin znode create that failed.
func (o *adminOp) createFailed(inv history.ClientOp, p string, err error) {
	inv.Error = fmt.Sprintf("create %s: %v", p, err)
	if createCertainlyFailed(err) {
		o.record(history.OpFail, inv)
		return
	}
	o.record(history.OpInfo, inv)
}

// reassign writes /admin/reassign_partitions for one partition: with a
// spread topic, half the draws swap one replica of a spread partition
// (swapSpread); otherwise a partition of the workload topic gets its
// replicas rotated. ok once the controller deleted the znode and the
// topic's assignment shows the new replicas.
func (o *adminOp) reassign(ctx context.Context) {
	if o.cfg.SpreadTopic != "" && o.rng.IntN(2) == 0 {
		o.swapSpread(ctx)
		return
	}
	tp := int32(o.rng.IntN(int(o.cfg.Partitions)))
	if o.partitionHeld(tp) {
		return
	}
	as, err := o.assignment(ctx, o.cfg.Topic)
	if err != nil || len(as[tp]) < 2 {
		return // nothing to reassign: no operation is invoked
	}
	o.reassignPartition(ctx, o.cfg.Topic, tp, rotate(as[tp]))
}

// swapSpread moves a spread topic partition's replica to the broker
// outside its replica set, a reassignment that adds a replica (the new one
// must catch up and join the ISR before the old one is removed), or moves a
// partition it swapped before back to its replicas then. The workload
// topic is never swapped: its replicas are every broker of a 3-broker run.
func (o *adminOp) swapSpread(ctx context.Context) {
	topic := o.cfg.SpreadTopic
	as, err := o.assignment(ctx, topic)
	if err != nil || len(as) == 0 {
		return // the topic is being deleted and created again
	}
	tp := int32(o.rng.IntN(len(as)))
	pick := o.rng.IntN(len(o.cfg.Brokers))
	cur := as[tp]
	if len(cur) == 0 {
		return
	}
	target, ok := o.swapped[tp]
	if !ok || slices.Equal(target, cur) {
		var outside []int
		for _, b := range o.cfg.Brokers {
			if !slices.Contains(cur, b) {
				outside = append(outside, b)
			}
		}
		if len(outside) == 0 {
			return
		}
		// The replica at pick's position is replaced in place, so the
		// preferred leader moves with it when pick names the first.
		target = slices.Clone(cur)
		target[pick%len(cur)] = outside[pick%len(outside)]
		if o.swapped == nil {
			o.swapped = map[int32][]int{}
		}
		o.swapped[tp] = slices.Clone(cur)
	} else {
		delete(o.swapped, tp)
	}
	o.reassignPartition(ctx, topic, tp, target)
}

// reassignPartition asks for topic's partition tp to be moved to target
// and waits until the controller did.
func (o *adminOp) reassignPartition(ctx context.Context, topic string, tp int32, target []int) {
	inv := history.ClientOp{F: history.FReassign, Topic: topic, Partition: tp, Value: joinInts(target)}
	body, err := zklayout.EncodeReassignment([]zklayout.Reassignment{{Topic: topic, Partition: tp, Replicas: target}})
	if err != nil {
		return // a list of replicas always encodes
	}
	o.request(ctx, inv, zklayout.ReassignPath, body, "reassignment", o.consumed(ctx, zklayout.ReassignPath, func() (bool, string) {
		now, err := o.assignment(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		if !slices.Equal(now[tp], target) {
			return false, fmt.Sprintf("%s deleted but replicas are %s", zklayout.ReassignPath, joinInts(now[tp]))
		}
		st, err := o.state(ctx, topic, tp)
		if err != nil {
			return false, err.Error()
		}
		return true, fmt.Sprintf("replicas %s, leader %d, leader epoch %d, isr %s", joinInts(target), st.Leader, st.LeaderEpoch, joinInts(st.ISR))
	}))
}

// partitionHeld reports whether a fault holds partition tp of the workload
// topic (AdminConfig.HeldPartition).
func (o *adminOp) partitionHeld(tp int32) bool {
	return o.cfg.HeldPartition != nil && o.cfg.HeldPartition(tp)
}

// preferred writes /admin/preferred_replica_election for one partition; ok
// once the controller deleted the znode (the election ran; the leader moves
// only if the preferred replica is alive and in the ISR).
func (o *adminOp) preferred(ctx context.Context) {
	tp := int32(o.rng.IntN(int(o.cfg.Partitions)))
	if o.partitionHeld(tp) {
		return
	}
	inv := history.ClientOp{F: history.FPreferredElection, Topic: o.cfg.Topic, Partition: tp}
	body, err := zklayout.EncodePreferredElection(o.cfg.Topic, []int32{tp})
	if err != nil {
		return // one partition always encodes
	}
	o.request(ctx, inv, zklayout.PreferredElectionPath, body, "preferred election", o.consumed(ctx, zklayout.PreferredElectionPath, func() (bool, string) {
		as, err := o.assignment(ctx, o.cfg.Topic)
		if err != nil {
			return false, err.Error()
		}
		st, err := o.state(ctx, o.cfg.Topic, tp)
		if err != nil {
			return false, err.Error()
		}
		pref := -1
		if len(as[tp]) > 0 {
			pref = as[tp][0]
		}
		return true, fmt.Sprintf("leader %d (preferred %d), leader epoch %d, isr %s", st.Leader, pref, st.LeaderEpoch, joinInts(st.ISR))
	}))
}

// createTopic writes /brokers/topics/<topic>-admin-<n> with one partition on
// up to three brokers; ok once its state znode names a leader.
func (o *adminOp) createTopic(ctx context.Context) {
	o.topics++
	o.createNamed(ctx, fmt.Sprintf("%s-admin-%d", o.cfg.Topic, o.topics))
}

// createNamed creates topic name (createTopic), remembering it once it
// exists.
func (o *adminOp) createNamed(ctx context.Context, name string) {
	brokers := slices.Clone(o.cfg.Brokers)
	sort.Ints(brokers)
	start := o.rng.IntN(len(brokers))
	rf := min(3, len(brokers))
	var replicas []int
	for i := 0; i < rf; i++ {
		replicas = append(replicas, brokers[(start+i)%len(brokers)])
	}
	inv := history.ClientOp{F: history.FCreateTopic, Topic: name, Value: "0:" + joinInts(replicas)}
	body, err := zklayout.EncodeAssignment(zklayout.Assignment{0: replicas})
	if err != nil {
		return // no broker to place the partition on: no operation is invoked
	}
	o.request(ctx, inv, zklayout.TopicPath(name), body, "topic creation", func() (bool, string) {
		st, err := o.state(ctx, name, 0)
		if err != nil {
			return false, err.Error()
		}
		if st.Leader < 0 {
			return false, fmt.Sprintf("partition 0 has no leader (leader epoch %d)", st.LeaderEpoch)
		}
		return true, fmt.Sprintf("leader %d, leader epoch %d, isr %s", st.Leader, st.LeaderEpoch, joinInts(st.ISR))
	})
	if ok, _ := o.exists(ctx, zklayout.TopicPath(name)); ok && !slices.Contains(o.created, name) {
		o.created = append(o.created, name)
	}
}

// deleteAndRecreate deletes one of the topics this workload created
// (/admin/delete_topics/<t>, as kafka-topics.sh --delete did), ok once the
// controller removed the topic's znodes and the request, then creates it
// again at the same name: a new incarnation, whose leader epochs and
// offsets start again at 0. Nothing is invoked before a topic was created.
func (o *adminOp) deleteAndRecreate(ctx context.Context) {
	// One draw whatever the list holds, so the draws that follow stay as
	// the seed gives them.
	n := o.rng.IntN(1 << 30)
	if len(o.created) == 0 {
		return
	}
	name := o.created[n%len(o.created)]
	o.created = slices.DeleteFunc(o.created, func(t string) bool { return t == name })
	inv := history.ClientOp{F: history.FDeleteTopic, Topic: name}
	o.record(history.OpInvoke, inv)
	if err := o.create(ctx, zklayout.DeleteTopicPath(name), nil); err != nil {
		o.createFailed(inv, zklayout.DeleteTopicPath(name), err)
		return
	}
	gone := false
	o.finish(ctx, inv, "topic deletion", o.consumed(ctx, zklayout.DeleteTopicPath(name), func() (bool, string) {
		still, err := o.exists(ctx, zklayout.TopicPath(name))
		if err != nil {
			return false, err.Error()
		}
		if still {
			return false, zklayout.TopicPath(name) + " still present"
		}
		gone = true
		return true, "topic znodes removed"
	}))
	if gone {
		o.createNamed(ctx, name)
	}
}

// controlledShutdown stops a broker with SIGTERM (its controlled shutdown)
// and starts it again. ok once, after the process exited, no partition of the
// workload topic is led by it unless it was that partition's only ISR
// member, and it registered again with a new broker epoch (czxid). Whether
// the controller accepted the ControlledShutdown request itself is in the
// node's event log (controlled_shutdown), for checkers.
func (o *adminOp) controlledShutdown(ctx context.Context) {
	id := o.cfg.Brokers[o.rng.IntN(len(o.cfg.Brokers))]
	if o.cfg.Held != nil && o.cfg.Held(id) {
		return
	}
	reg := zklayout.BrokerPath(id)
	inv := history.ClientOp{F: history.FControlledShutdown, Broker: int32(id), Topic: o.cfg.Topic, Partition: -1}
	_, before, err := o.get(ctx, reg)
	if err != nil {
		return // not registered now (down or restarting): nothing to shut down
	}
	o.record(history.OpInvoke, inv)
	if err := o.cfg.StopBroker(ctx, id); err != nil {
		if ctx.Err() != nil {
			// The run ended while the broker was shutting down: the
			// operation is unfinished, and the broker is left as the
			// end of the run found it (its controlled shutdown has
			// moved its leaderships away).
			o.unfinished(ctx, inv, fmt.Sprintf("stop broker %d", id), err.Error())
			return
		}
		inv.Error = fmt.Sprintf("stop broker %d: %v", id, err)
		o.record(history.OpInfo, inv)
		return
	}
	moved, detail := o.waitFor(ctx, func() (bool, string) {
		var still []string
		for p := int32(0); p < o.cfg.Partitions; p++ {
			st, err := o.state(ctx, o.cfg.Topic, p)
			if err != nil {
				return false, err.Error()
			}
			if st.Leader == id && !slices.Equal(st.ISR, []int{id}) {
				still = append(still, fmt.Sprintf("%s-%d", o.cfg.Topic, p))
			}
		}
		if len(still) > 0 {
			return false, fmt.Sprintf("broker %d exited and still leads %s", id, strings.Join(still, ", "))
		}
		return true, ""
	})
	// Start it again whatever happened: the workload must not leave a
	// broker down.
	if err := o.cfg.StartBroker(context.WithoutCancel(ctx), id); err != nil {
		inv.Error = fmt.Sprintf("start broker %d again: %v", id, err)
		o.record(history.OpInfo, inv)
		return
	}
	if !moved {
		o.unfinished(ctx, inv, "leadership move", detail)
		return
	}
	o.finish(ctx, inv, "re-registration", func() (bool, string) {
		_, st, err := o.get(ctx, reg)
		if err != nil {
			return false, err.Error()
		}
		if st.Czxid == before.Czxid {
			return false, fmt.Sprintf("%s still has the old broker epoch %d", reg, before.Czxid)
		}
		return true, fmt.Sprintf("broker %d registered again: broker epoch %d → %d", id, before.Czxid, st.Czxid)
	})
}

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}
