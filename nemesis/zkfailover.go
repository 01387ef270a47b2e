package nemesis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zkchaos/zkchaos/fourletter"
	"github.com/zkchaos/zkchaos/schedule"
	"github.com/zkchaos/zkchaos/zklayout"
)

// FailoverOnLaggingZK is the fault of KAFKA-16667's window: the controller
// fails over to a broker whose ZooKeeper server lags the ZooKeeper leader,
// and a partition state changes between the successor's election and its
// reads. Roles are resolved when it starts: the controller C, the ZooKeeper
// leader L, and which server serves each broker's session (asked of every
// server with the `cons` four-letter word, so it works whether the brokers'
// sessions are pinned or not). The successor W is a surviving broker served
// by a follower F whose fellow survivor O leads a partition with C in its
// ISR (best: O served by another server than F). The plan is made again
// for up to two session timeouts until there is such an O (a broker back
// from a controlled shutdown has no session and leads nothing at first),
// and a survivor fit to be W but served by L is cut from L until its
// session moves to a follower. The other survivors are held out of the election
// (controller-before-elect) and W is held right after winning it
// (controller-after-elected), then C is cut from ZooKeeper: its session
// expires (the failover) while its replicas keep fetching. Once W holds,
// the link L → F is slowed, the others are let go and C is cut from them
// too, but not from W: the others' partitions stop hearing from C and
// shrink it out of their ISRs replica.lag.time.max later, while W's keep it,
// so W's own session has no ISR write pending on F (its reads would wait
// behind it and come back fresh; a kill makes every leader shrink C, W too,
// which `chaos repro KAFKA-16667` avoids with RF 2). When one of the others
// shrinks C out of an ISR (a write committed through the leader that F
// applies late; watched by reads through L, and checked against F's
// applied zxid from `srvr`: a shrink F already has is no window, and the
// watch goes on), W is released (it reads partition state through F, C
// unregistered) and every link is healed, so W's writes come back; it
// removes C from the ISRs with the stale zkVersion. With
// KAFKA-16667 W retries that write with BADVERSION forever (liveness);
// fixed, it Syncs and re-reads.
//
// The fault writes nothing to ZooKeeper: the state change is the partition
// leader's own ISR shrink (replica.lag.time.max after C's death), and the
// election is the brokers' own.
const FailoverOnLaggingZK = schedule.FailoverOnLaggingZK

// FailoverOnLaggingZKDoc describes the fault for the catalogue.
const FailoverOnLaggingZKDoc = "cut the controller from ZooKeeper while its successor's ZooKeeper server lags the leader (the successor held after its election until a partition's ISR shrinks)"

// The node's failpoint windows around an election (node/failpoint).
const (
	fpBeforeElect  = "controller-before-elect"
	fpAfterElected = "controller-after-elected"
)

// laggingZKSlow is the shaping of L → F: a low rate and no loss, so F's
// backlog (pings, proposals, commits) grows steadily and its reads fall
// behind without a gap long enough to expire the sessions it serves (the
// shaping `chaos repro KAFKA-16667` uses).
var laggingZKSlow = SlowSpec{RateKbit: 4}

// zkClientPort is the servers' client port (cluster's zoo.cfg), where the
// four-letter words are answered.
const zkClientPort = 2181

// needFailoverOnLaggingZK: a successor and a third broker whose ISR shrink
// is the state change, and an ensemble that commits without the slowed
// follower.
func needFailoverOnLaggingZK(t Topology) error {
	if err := needNodes(3)(t); err != nil {
		return err
	}
	return needZK(3)(t)
}

// zkfOps is what the fault does to processes and links, and how it learns
// which server serves whom: the Nemesis, or a fake in tests.
type zkfOps interface {
	procs
	slow(ctx context.Context, from, to Target, s SlowSpec) error
	partition(ctx context.Context, name string, a, b []Target) error
	healNet(ctx context.Context) error
	// sessions maps a broker's name to the name of the ZooKeeper server
	// its session is connected to now; brokers not found are absent.
	sessions(ctx context.Context, nodes, zks []Target) map[string]string
	// stateAt reads a partition's state through ZooKeeper server zk
	// alone, without Sync, with the zxid of its last change.
	stateAt(ctx context.Context, zk Target, topic string, partition int32) (PartitionState, error)
	// appliedZxid is the last zxid ZooKeeper server zk has applied (`srvr`).
	appliedZxid(ctx context.Context, zk Target) (int64, error)
	// electPreferred asks the controller, as an operator would, to move
	// the leadership of partitions to their preferred replicas, and
	// returns once it took the request.
	// ctl is the controller that leads them, named in the history.
	electPreferred(ctx context.Context, ctl Target, topic string, partitions []int32) error
}

// PreferredElector is a World that can ask the controller for a preferred
// replica election (/admin/preferred_replica_election) and wait until it
// took the request.
type PreferredElector interface {
	ElectPreferred(ctx context.Context, topic string, partitions []int32) error
}

// PartitionState is a partition's state znode as one ZooKeeper server has
// it (decoded by zklayout) with the zxid of the write that set it; Mzxid
// is 0 when that is unknown.
type PartitionState struct {
	zklayout.PartitionState
	Mzxid int64
}

// ZKStateReader is a World that reads a partition's state through one given
// ZooKeeper server. failover-on-lagging-zk reads the shrink it waits for
// through the ZooKeeper leader: a read through the run's shared session (on
// any server, after Sync) comes back through the slowed follower a third of
// the time, and so only once that follower has applied the shrink, when the
// window is already closed.
type ZKStateReader interface {
	PartitionStateVia(ctx context.Context, zk int, topic string, partition int32) (PartitionState, error)
}

type zkfNemesis struct{ nemesisProcs }

func (o zkfNemesis) slow(ctx context.Context, from, to Target, s SlowSpec) error {
	return o.n.SlowLink(ctx, from, to, s)
}
func (o zkfNemesis) partition(ctx context.Context, name string, a, b []Target) error {
	return o.n.PartitionTargets(ctx, name, a, b)
}
func (o zkfNemesis) healNet(ctx context.Context) error { return o.n.HealNet(ctx) }
func (o zkfNemesis) sessions(ctx context.Context, nodes, zks []Target) map[string]string {
	return consSessions(ctx, nodes, zks)
}
func (o zkfNemesis) stateAt(ctx context.Context, zk Target, topic string, partition int32) (PartitionState, error) {
	r, ok := o.n.World.(ZKStateReader)
	if !ok {
		return PartitionState{}, errors.New("the run's world cannot read through one ZooKeeper server")
	}
	var id int
	if _, err := fmt.Sscanf(zk.Name, "zk%d", &id); err != nil {
		return PartitionState{}, fmt.Errorf("ZooKeeper server %q: %w", zk.Name, err)
	}
	return r.PartitionStateVia(ctx, id, topic, partition)
}

// electPreferred is recorded as a fault of its own: it changes roles.
func (o zkfNemesis) electPreferred(ctx context.Context, ctl Target, topic string, partitions []int32) error {
	e, ok := o.n.World.(PreferredElector)
	if !ok {
		return errors.New("the run's world cannot ask for a preferred replica election")
	}
	parts := make([]string, len(partitions))
	for i, q := range partitions {
		parts[i] = fmt.Sprintf("%s-%d", topic, q)
	}
	detail := fmt.Sprintf("%s led by the controller %s: moved to their preferred replicas, so a survivor shrinks %s out of an ISR once it is cut off",
		strings.Join(parts, ", "), ctl.Name, ctl.Name)
	f, err := o.n.record("preferred-election", []string{ctl.Name}, detail, func() error { return e.ElectPreferred(ctx, topic, partitions) })
	if err == nil {
		o.n.Rec.Stop(f.id, f.name, f.targets, nil)
	}
	return err
}

func (o zkfNemesis) appliedZxid(ctx context.Context, zk Target) (int64, error) {
	if zk.Container == nil {
		return 0, fmt.Errorf("%s has no container", zk.Name)
	}
	st, err := fourletter.Srvr(ctx, netip.AddrPortFrom(zk.Container.IP, zkClientPort).String(), time.Second)
	if err != nil {
		return 0, err
	}
	return st.Zxid, nil
}

func failoverOnLaggingZK(ctx context.Context, n *Nemesis, k FaultKind, pick int) (Heal, error) {
	return injectZKFailover(ctx, n, n.World, n.Rec, zkfNemesis{nemesisProcs{n}}, k, pick)
}

// zkfBusy holds the runs (by their Nemesis) with a failover-on-lagging-zk in
// progress: a second one started meanwhile (a dense schedule drawing it
// twice) would cut off the successor the first one holds and arm the same
// windows, and neither would open its window.
var zkfBusy sync.Map

// zkfPlan is who plays which part, resolved when the fault starts.
type zkfPlan struct {
	ctl     Target   // the controller, cut off
	succ    Target   // its successor, served by lagging
	others  []Target // the other survivors, kept out of the election
	leader  Target   // the ZooKeeper leader
	lagging Target   // the follower serving succ
	// watch: the partitions whose ISR shrink of ctl is the state change
	// under succ; empty when no survivor but succ leads one.
	watch []shrinkWatch
	// move, when set, is a survivor on the ZooKeeper leader that would
	// be a better successor than any on a follower.
	move Target
	// ctlLeads: the workload partitions the controller leads.
	ctlLeads []int32
}

// planZKFailover resolves the roles now; pick chooses the successor among
// the best candidates (survivors served by a follower), so a replayed step
// picks the same position among them.
func planZKFailover(ctx context.Context, w World, ops zkfOps, k FaultKind, pick int) (zkfPlan, error) {
	var p zkfPlan
	nodes, zks := w.Nodes(), w.ZKServers()
	cid, err := w.Controller(ctx)
	if err != nil {
		return p, fmt.Errorf("%s: %w", k, err)
	}
	if p.ctl, err = byName(nodes, fmt.Sprintf("n%d", cid)); err != nil {
		return p, fmt.Errorf("%s: controller: %w", k, err)
	}
	lid, err := w.ZKLeader(ctx)
	if err != nil {
		return p, fmt.Errorf("%s: %w", k, err)
	}
	if p.leader, err = byName(zks, fmt.Sprintf("zk%d", lid)); err != nil {
		return p, fmt.Errorf("%s: ZooKeeper leader: %w", k, err)
	}
	served := ops.sessions(ctx, nodes, zks)
	// The state change under the successor is another survivor's ISR
	// shrink of the controller: a successor whose fellow survivors lead no
	// partition with the controller in its ISR (leadership piled on it by
	// earlier faults or a controlled shutdown) waits for a shrink that
	// never comes. Best is a shrinking leader whose own session is on
	// another server than the successor's: its write is answered without
	// waiting for the slowed server. Prefer the best candidates; with
	// none, any.
	var parts []shrinkWatch // partitions led by a survivor, the controller in their ISR
	if fw, ok := w.(FailpointWorld); ok {
		topic, n := fw.WorkloadTopic()
		for q := range n {
			l, isr, err := fw.PartitionISR(ctx, topic, q)
			switch {
			case err != nil || l < 0:
			case l == cid:
				p.ctlLeads = append(p.ctlLeads, q)
			case slices.Contains(isr, cid):
				parts = append(parts, shrinkWatch{q, l})
			}
		}
	}
	score := func(c Target) int {
		best := 0
		for _, q := range parts {
			if q.leader == nodeID(c) {
				continue
			}
			best = max(best, 1)
			if s, ok := served[fmt.Sprintf("n%d", q.leader)]; ok && s != served[c.Name] {
				best = 2
			}
		}
		return best
	}
	var cands, onLeader []Target
	top := 0
	for _, t := range without(nodes, p.ctl) {
		switch s, ok := served[t.Name]; {
		case ok && s != p.leader.Name:
			cands = append(cands, t)
			top = max(top, score(t))
		case ok && score(t) > 0:
			onLeader = append(onLeader, t)
		}
	}
	// A survivor that would leave a shrinking leader but is served by the
	// ZooKeeper leader (the leader's reads are never stale) is worth
	// moving when no candidate is as good: planZKFailoverSoon cuts it
	// from the leader until its session moves to a follower.
	if top == 0 && len(onLeader) > 0 {
		p.move = onLeader[pick%len(onLeader)]
	}
	if len(cands) == 0 {
		return p, fmt.Errorf("%s: no broker but the controller %s has its session on a ZooKeeper follower (leader %s, sessions %v)",
			k, p.ctl.Name, p.leader.Name, served)
	}
	var best []Target
	for _, c := range cands {
		if score(c) == top {
			best = append(best, c)
		}
	}
	p.succ = best[pick%len(best)]
	if p.lagging, err = byName(zks, served[p.succ.Name]); err != nil {
		return p, fmt.Errorf("%s: %w", k, err)
	}
	p.others = without(without(nodes, p.ctl), p.succ)
	for _, q := range parts {
		if q.leader != nodeID(p.succ) {
			p.watch = append(p.watch, q)
		}
	}
	return p, nil
}

// shrinkWatch is a partition of the workload topic led by a survivor other
// than the successor with the controller in its ISR: that leader shrinks
// the cut-off controller out of it.
type shrinkWatch struct {
	partition int32
	leader    int
}

// BadVersionWorld is a World that counts a node's conditional ZooKeeper
// writes that failed with BADVERSION since a time (from the node's event
// log).
type BadVersionWorld interface {
	BadVersions(ctx context.Context, node int, since time.Time) (int, error)
}

// zkfStuckWithin and zkfStuckCount: a controller with this many BADVERSION
// failures this recently is retrying a stale zkVersion (the node retries
// every 500 ms; a fixed controller re-reads after the first).
const (
	zkfStuckWithin = 3 * time.Second
	zkfStuckCount  = 3
)

// controllerStuck says whether controller cid is retrying a failed
// conditional write now, and how often it failed within zkfStuckWithin.
func controllerStuck(ctx context.Context, w World, cid int) (int, bool) {
	bw, ok := w.(BadVersionWorld)
	if !ok {
		return 0, false
	}
	n, err := bw.BadVersions(ctx, cid, time.Now().Add(-zkfStuckWithin))
	return n, err == nil && n >= zkfStuckCount
}

// ReplicaLagWorld is a World that knows the nodes' replica.lag.time.max:
// failover-on-lagging-zk times the slowing and its watch by it.
type ReplicaLagWorld interface {
	ReplicaLagTime() time.Duration
}

// replicaLag is w's replica.lag.time.max, 0 when unknown.
func replicaLag(w World) time.Duration {
	if r, ok := w.(ReplicaLagWorld); ok {
		return r.ReplicaLagTime()
	}
	return 0
}

// zkfSlowAhead is how long before the others' ISR shrinks are due the link
// to the successor's server is slowed (at once when replica.lag.time.max
// is this short or shorter, as in the power table's KAFKA-16667 row).
const zkfSlowAhead = 2 * time.Second

// zkfPlanWithin is how long the fault waits for a plan with a partition to
// watch (a broker restarting, say after an operator's controlled shutdown,
// has no session to place yet and leads nothing), as a multiple of the
// session timeout.
const zkfPlanWithin = 2

// zkfMaxMoves bounds the sessions one fault moves: the controller may
// change while the first moves (an operator's controlled shutdown), and the
// new one's successor be on the leader again.
const zkfMaxMoves = 2

// planZKFailoverSoon plans until the plan has a partition to watch or
// zkfPlanWithin session timeouts have passed, and returns the last plan.
// Up to zkfMaxMoves times, it moves the session of a survivor the plan
// wants moved off the ZooKeeper leader.
func planZKFailoverSoon(ctx context.Context, fw FailpointWorld, ops zkfOps, k FaultKind, pick int) (zkfPlan, error) {
	deadline := time.Now().Add(zkfPlanWithin * fw.SessionTimeout())
	moves, elected := 0, false
	for {
		p, err := planZKFailover(ctx, fw, ops, k, pick)
		if err == nil && len(p.watch) == 0 && len(p.ctlLeads) > 0 && !elected {
			// The controller leads the partitions, so no survivor will
			// shrink it out of an ISR once it is cut off (the usual
			// state after a leader came back to partitions that waited
			// offline for it). An operator's preferred replica election
			// hands the partitions whose preferred replica is another
			// broker back to it; plan again once the controller took it.
			elected = true
			topic, _ := fw.WorkloadTopic()
			if ops.electPreferred(ctx, p.ctl, topic, p.ctlLeads) == nil {
				if d := time.Now().Add(fw.SessionTimeout()); d.After(deadline) {
					deadline = d
				}
				continue
			}
		}
		if p.move.Name != "" && moves < zkfMaxMoves {
			// Planned again whatever came of it: roles may have
			// changed meanwhile (a new controller wants another
			// survivor moved).
			moves++
			moveSession(ctx, fw, ops, p.move, p.leader, zkfPlanWithin*fw.SessionTimeout())
			if d := time.Now().Add(fw.SessionTimeout()); d.After(deadline) {
				deadline = d
			}
			continue
		}
		if err == nil && len(p.watch) > 0 || time.Now().After(deadline) || !sleepUntil(ctx, time.Now().Add(200*time.Millisecond)) {
			return p, err
		}
	}
}

// moveSession cuts broker t from ZooKeeper server leader until t's session
// is served by another server, then heals the cut. The broker's client
// notices the dead connection within two thirds of its session timeout and
// goes on to the next server of its list, never the one it left, so the
// session moves without expiring.
func moveSession(ctx context.Context, w World, ops zkfOps, t, leader Target, within time.Duration) error {
	if err := ops.partition(ctx, "partition", []Target{t}, []Target{leader}); err != nil {
		return errors.Join(err, ops.healNet(context.WithoutCancel(ctx)))
	}
	deadline := time.Now().Add(within)
	var err error
	for {
		if s, ok := ops.sessions(ctx, w.Nodes(), w.ZKServers())[t.Name]; ok && s != leader.Name {
			break
		}
		if time.Now().After(deadline) || !sleepUntil(ctx, time.Now().Add(200*time.Millisecond)) {
			err = fmt.Errorf("%s's session still not on a follower %s after its cut from %s", t.Name, within, leader.Name)
			break
		}
	}
	return errors.Join(err, ops.healNet(context.WithoutCancel(ctx)))
}

func injectZKFailover(ctx context.Context, run any, w World, rec *Recorder, ops zkfOps, k FaultKind, pick int) (heal Heal, err error) {
	fw, ok := w.(FailpointWorld)
	if !ok {
		return nil, fmt.Errorf("%s: the run's world cannot hold the election (no FailpointWorld)", k)
	}
	if _, busy := zkfBusy.LoadOrStore(run, true); busy {
		return nil, fmt.Errorf("%s: another one is in progress", k)
	}
	defer func() {
		if heal == nil {
			zkfBusy.Delete(run)
		}
	}()
	// A controller already stuck retrying a stale zkVersion (an earlier
	// fault opened the window) is left alone: failing it over would end
	// the harm this fault is after.
	if cid, err := fw.Controller(ctx); err == nil {
		if n, ok := controllerStuck(ctx, fw, cid); ok {
			targets := []string{fmt.Sprintf("n%d", cid)}
			fid := rec.Start(string(k), targets, "")
			rec.stopDetail(fid, string(k), targets, fmt.Sprintf("left alone: controller n%d is already retrying a failed conditional write (%d BADVERSION in the last %s)", cid, n, zkfStuckWithin), nil)
			return func(context.Context) error { zkfBusy.Delete(run); return nil }, nil
		}
	}
	p, err := planZKFailoverSoon(ctx, fw, ops, k, pick)
	if err != nil {
		return nil, err
	}
	cid, sid := nodeID(p.ctl), nodeID(p.succ)
	targets := append([]string{p.ctl.Name, p.succ.Name}, p.leader.Name, "->", p.lagging.Name)
	detail := fmt.Sprintf("controller %s cut from ZooKeeper, then from %s; %s (on follower %s) takes over and is held after its election; %s → %s slowed to %d kbit/s; held out of the election: %s",
		p.ctl.Name, strings.Join(targetNames(p.others), ", "), p.succ.Name, p.lagging.Name, p.leader.Name, p.lagging.Name, laggingZKSlow.RateKbit, strings.Join(targetNames(p.others), ", "))
	fid := rec.Start(string(k), targets, detail)
	stop := func(outcome string, err error) { rec.stopDetail(fid, string(k), targets, outcome, err) }

	// Which partitions will change under the successor (read by the plan
	// before the cut, while ZooKeeper names the controller's ISR
	// memberships). A first read through the ZooKeeper leader opens the
	// session the watch reads through while the link is still fast.
	topic, parts := fw.WorkloadTopic()
	watch := p.watch
	ops.stateAt(ctx, p.leader, topic, 0)

	armed := map[string]bool{} // "id name" of every failpoint armed
	disarmAll := func(ctx context.Context) error {
		var errs []error
		for _, key := range slices.Sorted(maps.Keys(armed)) {
			idS, name, _ := strings.Cut(key, " ")
			id, _ := strconv.Atoi(idS)
			// Retried past a pause another fault holds (a paused node
			// keeps its failpoint armed, and would hold in it later with
			// nobody to release it); a node killed meanwhile took it with
			// its process.
			if err := disarmSoon(ctx, fw, id, name, 15*time.Second); err != nil && !targetGone(ctx, fw.Nodes(), id) {
				errs = append(errs, err)
			}
			delete(armed, key)
		}
		return errors.Join(errs...)
	}
	arm := func(t Target, name string) error {
		id := nodeID(t)
		if err := fw.ArmFailpoint(ctx, id, name, "1*pause"); err != nil {
			return fmt.Errorf("%s: arm %s on %s: %w", k, name, t.Name, err)
		}
		armed[fmt.Sprintf("%d %s", id, name)] = true
		return nil
	}
	var setupErr error
	for _, o := range p.others {
		if setupErr = arm(o, fpBeforeElect); setupErr != nil {
			break
		}
	}
	if setupErr == nil {
		setupErr = arm(p.succ, fpAfterElected)
	}
	if setupErr == nil {
		setupErr = ops.partition(ctx, "partition", []Target{p.ctl}, fw.ZKServers())
	}
	if setupErr != nil {
		err := errors.Join(setupErr, ops.healNet(context.WithoutCancel(ctx)), disarmAll(context.WithoutCancel(ctx)))
		stop("not started", err)
		return nil, err
	}
	since := time.Now()

	// The window plays out in the background and may outlive the step's
	// hold (the successor's election waits for the controller's session
	// to expire, the shrink for replica.lag.time.max); heal waits for it.
	// The cut is healed with the slow link when the successor is
	// released: it has read /brokers/ids by the time the controller's new
	// session registers again.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var (
		mu        sync.Mutex
		outcome   = "successor not held after its election"
		netHealed bool
		werr      error
	)
	set := func(f func()) { mu.Lock(); f(); mu.Unlock() }
	done := make(chan struct{})
	go func() {
		defer close(done)
		if !waitReached(wctx, fw, sid, fpAfterElected, since, reachWithin(fw)) {
			return
		}
		// The link is slowed about zkfSlowAhead before the shrink is due:
		// long enough for a backlog that outlasts the successor's read,
		// short enough that the follower acknowledges the shrink's
		// proposal within syncLimit (else the leader drops it, and its
		// sessions move to an up-to-date server).
		lag := replicaLag(fw)
		ahead := max(0, lag-zkfSlowAhead)
		slow := func() bool {
			if err := ops.slow(wctx, p.leader, p.lagging, laggingZKSlow); err != nil {
				set(func() { outcome, werr = "successor held; slowing the link failed", err })
				return false
			}
			return true
		}
		if ahead == 0 && !slow() {
			return
		}
		// The others may elect now: they find the successor in
		// /controller.
		for _, o := range p.others {
			if err := fw.DisarmFailpoint(wctx, nodeID(o), fpBeforeElect); err == nil {
				set(func() { delete(armed, fmt.Sprintf("%d %s", nodeID(o), fpBeforeElect)) })
			}
		}
		// Only now do the others stop hearing from the controller's
		// replicas: their ISR shrinks come replica.lag.time.max from
		// here, while the link is slowed, and the follower's backlog stays
		// short enough to keep it in the quorum (a proposal unacknowledged
		// for syncLimit ticks drops it, and its sessions with it).
		// Leadership may have moved since the plan (an operator's
		// preferred election, say, off the controller that led every
		// partition): watch what the survivors lead now.
		if now := watchNow(wctx, ops, p.leader, topic, parts, cid, sid); len(now) > 0 {
			set(func() { watch = now })
		}
		if err := ops.partition(wctx, "partition", []Target{p.ctl}, p.others); err != nil {
			set(func() { werr = err })
		}
		if ahead > 0 && (!sleepUntil(wctx, time.Now().Add(ahead)) || !slow()) {
			return
		}
		mu.Lock()
		watching := watch
		mu.Unlock()
		shrunk, stale, mzxid := waitStaleShrink(wctx, fw, ops, p, watching, topic, cid, max(reachWithin(fw), lag+zkfPlanWithin*fw.SessionTimeout()))
		seen := time.Now()
		// Released, the successor reads partition state through the
		// lagging follower at once; unslowed right after, its writes are
		// answered without the backlog (a session whose request waits
		// behind it loses its connection).
		rerr := fw.DisarmFailpoint(wctx, sid, fpAfterElected)
		if rerr == nil {
			set(func() { delete(armed, fmt.Sprintf("%d %s", sid, fpAfterElected)) })
		}
		// Was the window still open once the successor went on? (It
		// reads at once; the slowed server applies the shrink later.)
		// And how long after the leader had it did the slowed server
		// apply it (the link unslowed meanwhile): the window's margin,
		// measured beside the heal.
		applied := make(chan string, 1)
		if stale && mzxid > 0 {
			if z, err := ops.appliedZxid(wctx, p.lagging); err == nil {
				shrunk += fmt.Sprintf(" (%#x once %s was released", z, p.succ.Name)
			}
			go func() { applied <- appliedAfter(wctx, ops, p.lagging, mzxid, seen, 3*time.Second) }()
		} else {
			applied <- ""
		}
		herr := ops.healNet(wctx)
		if a := <-applied; a != "" {
			shrunk += "; " + a + ")"
		} else if stale && mzxid > 0 {
			shrunk += ")"
		}
		set(func() {
			netHealed = herr == nil
			werr = errors.Join(rerr, herr)
			switch {
			case stale:
				outcome = fmt.Sprintf("window reached: %s released after %s", p.succ.Name, shrunk)
			case shrunk != "":
				outcome = fmt.Sprintf("window missed: %s released after %s", p.succ.Name, shrunk)
			case len(watch) == 0:
				outcome = fmt.Sprintf("successor held; no survivor but %s leads a partition with %s in its ISR, %s released", p.succ.Name, p.ctl.Name, p.succ.Name)
			default:
				outcome = fmt.Sprintf("successor held; no ISR shrink seen within %s, %s released", reachWithin(fw), p.succ.Name)
			}
		})
	}()
	return func(ctx context.Context) error {
		joinWatch(ctx, done, cancel)
		mu.Lock()
		out, healed, we := outcome, netHealed, werr
		mu.Unlock()
		errs := []error{we}
		if !healed {
			errs = append(errs, ops.healNet(ctx))
		}
		// A failpoint left armed would hold its node later with nobody
		// to release it; disarming waits out another fault that keeps
		// the admin port away.
		errs = append(errs, disarmAll(ctx))
		err := errors.Join(errs...)
		stop(out, err)
		zkfBusy.Delete(run)
		return err
	}, nil
}

// targetGone reports whether broker id's container is down.
func targetGone(ctx context.Context, nodes []Target, id int) bool {
	t, err := byName(nodes, fmt.Sprintf("n%d", id))
	return err == nil && t.Container != nil && gone(ctx, t.Container)
}

// waitStaleShrink polls the watched partitions through the ZooKeeper
// leader until one's leader has shrunk the cut-off controller out of its
// ISR, or within has passed. It says which, and whether the lagging server
// had not applied that write yet (by its `srvr` zxid against the state's
// mzxid): then the successor, released now, reads the state from before
// it. A shrink the lagging server has already applied is no window: the
// watch goes on with the other partitions. Without a read through the
// leader it falls back to the run's own reads, unchecked.
func waitStaleShrink(ctx context.Context, fw FailpointWorld, ops zkfOps, p zkfPlan, watch []shrinkWatch, topic string, dead int, within time.Duration) (what string, stale bool, mzxid int64) {
	watch = slices.Clone(watch)
	var missed []string
	deadline := time.Now().Add(within)
	for len(watch) > 0 {
		for i := 0; i < len(watch); i++ {
			s := watch[i]
			st, err := ops.stateAt(ctx, p.leader, topic, s.partition)
			if err != nil {
				l, isr, ierr := fw.PartitionISR(ctx, topic, s.partition)
				if ierr != nil {
					continue
				}
				st = PartitionState{PartitionState: zklayout.PartitionState{Leader: l, ISR: isr}}
			}
			if st.Leader != s.leader || slices.Contains(st.ISR, dead) {
				continue
			}
			what := fmt.Sprintf("n%d shrank %s-%d to %v", st.Leader, topic, s.partition, st.ISR)
			if st.Mzxid == 0 {
				return what, true, 0
			}
			applied, err := ops.appliedZxid(ctx, p.lagging)
			if err != nil {
				return fmt.Sprintf("%s at zxid %#x (%s's zxid unknown: %v)", what, st.Mzxid, p.lagging.Name, err), true, st.Mzxid
			}
			what = fmt.Sprintf("%s at zxid %#x, %s at %#x", what, st.Mzxid, p.lagging.Name, applied)
			if applied < st.Mzxid {
				return what, true, st.Mzxid
			}
			missed = append(missed, what)
			watch = slices.Delete(watch, i, i+1)
			i--
		}
		if len(watch) == 0 || time.Now().After(deadline) || !sleepUntil(ctx, time.Now().Add(50*time.Millisecond)) {
			break
		}
	}
	return strings.Join(missed, "; "), false, 0
}

// watchNow lists the partitions of topic that a broker other than the
// controller and the successor leads with the controller in its ISR, read
// through ZooKeeper server zk (the leader); nil when none or unreadable.
func watchNow(ctx context.Context, ops zkfOps, zk Target, topic string, parts int32, ctl, succ int) []shrinkWatch {
	var out []shrinkWatch
	for q := range parts {
		st, err := ops.stateAt(ctx, zk, topic, q)
		if err == nil && st.Leader >= 0 && st.Leader != ctl && st.Leader != succ && slices.Contains(st.ISR, ctl) {
			out = append(out, shrinkWatch{q, st.Leader})
		}
	}
	return out
}

// appliedAfter polls zk until it has applied zxid, up to within, and says
// how long after since that was.
func appliedAfter(ctx context.Context, ops zkfOps, zk Target, zxid int64, since time.Time, within time.Duration) string {
	deadline := since.Add(within)
	for {
		if z, err := ops.appliedZxid(ctx, zk); err == nil && z >= zxid {
			return fmt.Sprintf("%s applied it %s after the leader had it", zk.Name, time.Since(since).Round(10*time.Millisecond))
		}
		if time.Now().After(deadline) || !sleepUntil(ctx, time.Now().Add(20*time.Millisecond)) {
			return fmt.Sprintf("%s had not applied it %s after the leader had it", zk.Name, within)
		}
	}
}

// consSessions asks every ZooKeeper server for its client connections
// (`cons`) and maps each broker to the server it is connected to. A server
// that does not answer (paused, cut off) serves nobody it can name. A
// broker seen on two servers has moved: the server that still lists its
// old connection (cut off, it never learnt the client left) established it
// earlier, so the latest established one wins; with no times to tell, the
// broker is left out.
func consSessions(ctx context.Context, nodes, zks []Target) map[string]string {
	byIP := map[netip.Addr]string{}
	for _, t := range nodes {
		if t.Container != nil {
			byIP[t.Container.IP] = t.Name
		}
	}
	var outs []serverCons
	for _, z := range zks {
		if z.Container == nil {
			continue
		}
		out, err := fourletter.Ask(ctx, netip.AddrPortFrom(z.Container.IP, zkClientPort).String(), "cons", time.Second)
		if err == nil {
			outs = append(outs, serverCons{z.Name, out})
		}
	}
	return servedBy(byIP, outs)
}

// serverCons is one server's `cons` reply.
type serverCons struct{ server, out string }

// servedBy maps each broker (by address) to the server of its latest
// established connection.
func servedBy(byIP map[netip.Addr]string, outs []serverCons) map[string]string {
	type seen struct {
		server string
		est    int64
		tie    bool // another server's connection has the same est
	}
	latest := map[string]*seen{}
	for _, o := range outs {
		for _, c := range fourletter.ParseCons(o.out) {
			n, ok := byIP[c.Addr.Addr()]
			if !ok {
				continue
			}
			switch s := latest[n]; {
			case s == nil:
				latest[n] = &seen{server: o.server, est: c.Established}
			case s.server == o.server:
				s.est = max(s.est, c.Established)
			case c.Established > s.est:
				*s = seen{server: o.server, est: c.Established}
			case c.Established == s.est:
				s.tie = true
			}
		}
	}
	served := map[string]string{}
	for n, s := range latest {
		if !s.tie {
			served[n] = s.server
		}
	}
	return served
}
