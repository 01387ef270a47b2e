package faults

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zkchaos/zkchaos/nemesis"
)

// The fault FailoverOnLaggingZK opens KAFKA-16667's window: the controller
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
//
// This file is the fault: arming the election windows and the cut
// (setUp), the window played out in the background (window) and the heal;
// zkfplan.go resolves the roles and watches for the shrink, zkprobe.go
// asks the ZooKeeper servers whom they serve.

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
var laggingZKSlow = nemesis.SlowSpec{RateKbit: 4}

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

// zkFailover is failover-on-lagging-zk on one run: roles from world and
// parts, election windows through fps, links, sessions and reads through
// ops, timed by the session and replica.lag.time.max.
type zkFailover struct {
	world       nemesis.World
	parts       Partitions
	fps         Failpoints
	session     time.Duration
	replicaLag  time.Duration
	badVersions BadVersionCounter
	rec         *nemesis.Recorder
	ops         zkfOps

	// busy: one is in progress. A second one started meanwhile (a dense
	// schedule drawing it twice) would cut off the successor the first
	// one holds and arm the same windows, and neither would open its
	// window.
	mu   sync.Mutex
	busy bool
}

func newZKFailover(w nemesis.World, env Env, rec *nemesis.Recorder, ops zkfOps) *zkFailover {
	return &zkFailover{world: w, parts: env.Partitions, fps: env.Failpoints, session: env.Session, replicaLag: env.ReplicaLag,
		badVersions: env.BadVersions, rec: rec, ops: ops}
}

// take marks the fault in progress, unless it already is.
func (f *zkFailover) take() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.busy {
		return false
	}
	f.busy = true
	return true
}

func (f *zkFailover) done() {
	f.mu.Lock()
	f.busy = false
	f.mu.Unlock()
}

func (f *zkFailover) inject(ctx context.Context, pick int) (heal Heal, err error) {
	k := FailoverOnLaggingZK
	if !f.take() {
		return nil, fmt.Errorf("%s: another one is in progress", k)
	}
	defer func() {
		if heal == nil {
			f.done()
		}
	}()
	// A controller already stuck retrying a stale zkVersion (an earlier
	// fault opened the window) is left alone: failing it over would end
	// the harm this fault is after.
	if cid, err := f.world.Controller(ctx); err == nil {
		if n, ok := controllerStuck(ctx, f.badVersions, cid); ok {
			targets := []string{fmt.Sprintf("n%d", cid)}
			fid := f.rec.Start(string(k), targets, "")
			f.rec.StopDetail(fid, string(k), targets, fmt.Sprintf("left alone: controller n%d is already retrying a failed conditional write (%d BADVERSION in the last %s)", cid, n, zkfStuckWithin), nil)
			return func(context.Context) error { f.done(); return nil }, nil
		}
	}
	p, err := f.planSoon(ctx, pick)
	if err != nil {
		return nil, err
	}
	r := f.start(p)
	// A first read through the ZooKeeper leader opens the session the
	// watch reads through while the link is still fast.
	f.ops.stateAt(ctx, p.leader, r.topic, 0)
	if err := r.setUp(ctx); err != nil {
		return nil, err
	}
	// The window plays out in the background and may outlive the step's
	// hold (the successor's election waits for the controller's session
	// to expire, the shrink for replica.lag.time.max); heal waits for it.
	r.windowRun = startBackground(ctx, r.window)
	return r.heal, nil
}

// zkfRun is one failover-on-lagging-zk in force.
type zkfRun struct {
	f        *zkFailover
	p        zkfPlan
	cid, sid int // the controller's and the successor's broker ids
	topic    string
	parts    int32
	fid      string // its fault_start's id
	targets  []string
	// since: when the controller was cut from ZooKeeper.
	since     time.Time
	windowRun *background

	mu sync.Mutex
	// armed holds "id name" of every failpoint armed and not disarmed yet.
	armed map[string]bool
	// watch: the partitions whose shrink is the window (the plan's, then
	// what the survivors lead once the controller is cut from them).
	watch     []shrinkWatch
	outcome   string
	netHealed bool
	werr      error
	// deferred: the successor did not answer the disarm that releases
	// it (another fault had killed or paused it), so the heal disarms it.
	deferred bool
}

// start records the fault's start with its plan p.
func (f *zkFailover) start(p zkfPlan) *zkfRun {
	k := FailoverOnLaggingZK
	targets := append([]string{p.ctl.Name, p.succ.Name}, p.leader.Name, "->", p.lagging.Name)
	detail := fmt.Sprintf("controller %s cut from ZooKeeper, then from %s; %s (on follower %s) takes over and is held after its election; %s → %s slowed to %d kbit/s; held out of the election: %s",
		p.ctl.Name, strings.Join(targetNames(p.others), ", "), p.succ.Name, p.lagging.Name, p.leader.Name, p.lagging.Name, laggingZKSlow.RateKbit, strings.Join(targetNames(p.others), ", "))
	// Which partitions will change under the successor was read by the
	// plan before the cut, while ZooKeeper names the controller's ISR
	// memberships.
	topic, parts := f.parts.WorkloadTopic()
	return &zkfRun{f: f, p: p, cid: nodeID(p.ctl), sid: nodeID(p.succ), topic: topic, parts: parts,
		fid: f.rec.Start(string(k), targets, detail), targets: targets,
		armed: map[string]bool{}, watch: p.watch, outcome: "successor not held after its election"}
}

// stop records the fault's end with what it came to.
func (r *zkfRun) stop(outcome string, err error) {
	r.f.rec.StopDetail(r.fid, string(FailoverOnLaggingZK), r.targets, outcome, err)
}

// setUp holds the other survivors out of the election and the successor
// right after winning it, then cuts the controller from ZooKeeper: its
// session expires (the failover) while its replicas keep fetching. What
// fails is undone and recorded.
func (r *zkfRun) setUp(ctx context.Context) error {
	var err error
	for _, o := range r.p.others {
		if err = r.arm(ctx, o, fpBeforeElect); err != nil {
			break
		}
	}
	if err == nil {
		err = r.arm(ctx, r.p.succ, fpAfterElected)
	}
	if err == nil {
		err = r.f.ops.partition(ctx, "partition", []Target{r.p.ctl}, r.f.world.ZKServers())
	}
	if err != nil {
		_, derr := r.disarmAll(context.WithoutCancel(ctx))
		err = errors.Join(err, r.f.ops.healNet(context.WithoutCancel(ctx)), derr)
		r.stop("not started", err)
		return err
	}
	r.since = time.Now()
	return nil
}

// arm holds broker t at failpoint name (once).
func (r *zkfRun) arm(ctx context.Context, t Target, name string) error {
	id := nodeID(t)
	if err := r.f.fps.ArmFailpoint(ctx, id, name, "1*pause"); err != nil {
		return fmt.Errorf("%s: arm %s on %s: %w", FailoverOnLaggingZK, name, t.Name, err)
	}
	r.mu.Lock()
	r.armed[fmt.Sprintf("%d %s", id, name)] = true
	r.mu.Unlock()
	return nil
}

// disarmed notes that the failpoint name on broker id is no longer armed.
func (r *zkfRun) disarmed(id int, name string) {
	r.mu.Lock()
	delete(r.armed, fmt.Sprintf("%d %s", id, name))
	r.mu.Unlock()
}

// disarmAll disarms every failpoint still armed. A failpoint left armed
// would hold its node later with nobody to release it; disarming is
// retried past a pause another fault holds (a paused node keeps its
// failpoint armed), and a node killed meanwhile took it with its process
// (a process armed from the admin port starts again with nothing armed):
// gone lists those ("id name").
func (r *zkfRun) disarmAll(ctx context.Context) (gone []string, err error) {
	r.mu.Lock()
	keys := slices.Sorted(maps.Keys(r.armed))
	r.mu.Unlock()
	var errs []error
	for _, key := range keys {
		idS, name, _ := strings.Cut(key, " ")
		id, _ := strconv.Atoi(idS)
		if err := disarmSoon(ctx, r.f.fps, id, name, 15*time.Second); err != nil {
			if t, terr := byName(r.f.world.Nodes(), "n"+idS); terr == nil && r.f.ops.down(ctx, t) {
				gone = append(gone, key)
			} else {
				errs = append(errs, err)
			}
		}
		r.disarmed(id, name)
	}
	return gone, errors.Join(errs...)
}

// window plays the window out once the successor holds after its
// election: the link to its server slowed, the others let go and the
// controller cut from them, the successor released once one of them has
// shrunk the controller out of an ISR its server has not applied yet. The
// cut is healed with the slow link when the successor is released: it has
// read /brokers/ids by the time the controller's new session registers
// again.
func (r *zkfRun) window(ctx context.Context) {
	if !waitReached(ctx, r.f.fps, r.sid, fpAfterElected, r.since, reachWithin(r.f.session)) {
		return
	}
	// The link is slowed about zkfSlowAhead before the shrink is due: long
	// enough for a backlog that outlasts the successor's read, short
	// enough that the follower acknowledges the shrink's proposal within
	// syncLimit (else the leader drops it, and its sessions move to an
	// up-to-date server).
	lag := r.f.replicaLag
	ahead := max(0, lag-zkfSlowAhead)
	if ahead == 0 && !r.slow(ctx) {
		return
	}
	r.letOthersGo(ctx)
	if ahead > 0 && (!sleepUntil(ctx, time.Now().Add(ahead)) || !r.slow(ctx)) {
		return
	}
	r.mu.Lock()
	watching := r.watch
	r.mu.Unlock()
	shrunk, stale, mzxid := r.f.waitStaleShrink(ctx, r.p, watching, r.topic, r.cid, max(reachWithin(r.f.session), lag+zkfPlanWithin*r.f.session))
	r.releaseSuccessor(ctx, shrunk, stale, mzxid, time.Now())
}

// slow slows the link from the ZooKeeper leader to the successor's server.
func (r *zkfRun) slow(ctx context.Context) bool {
	if err := r.f.ops.slow(ctx, r.p.leader, r.p.lagging, laggingZKSlow); err != nil {
		r.mu.Lock()
		r.outcome, r.werr = "successor held; slowing the link failed", err
		r.mu.Unlock()
		return false
	}
	return true
}

// letOthersGo releases the other survivors (they find the successor in
// /controller) and only then cuts the controller from them: their ISR
// shrinks come replica.lag.time.max from here, while the link is slowed,
// and the follower's backlog stays short enough to keep it in the quorum
// (a proposal unacknowledged for syncLimit ticks drops it, and its
// sessions with it).
func (r *zkfRun) letOthersGo(ctx context.Context) {
	for _, o := range r.p.others {
		if err := r.f.fps.DisarmFailpoint(ctx, nodeID(o), fpBeforeElect); err == nil {
			r.disarmed(nodeID(o), fpBeforeElect)
		}
	}
	// Leadership may have moved since the plan (an operator's preferred
	// election, say, off the controller that led every partition): watch
	// what the survivors lead now.
	if now := watchNow(ctx, r.f.ops, r.p.leader, r.topic, r.parts, r.cid, r.sid); len(now) > 0 {
		r.mu.Lock()
		r.watch = now
		r.mu.Unlock()
	}
	if err := r.f.ops.partition(ctx, "partition", []Target{r.p.ctl}, r.p.others); err != nil {
		r.mu.Lock()
		r.werr = err
		r.mu.Unlock()
	}
}

// releaseSuccessor lets the successor go on and heals the links, and says
// what the watch came to (shrunk, stale and mzxid from waitStaleShrink,
// seen when it returned). Released, the successor reads partition state
// through the lagging follower at once; unslowed right after, its writes
// are answered without the backlog (a session whose request waits behind
// it loses its connection).
func (r *zkfRun) releaseSuccessor(ctx context.Context, shrunk string, stale bool, mzxid int64, seen time.Time) {
	p, ops := r.p, r.f.ops
	rerr := r.f.fps.DisarmFailpoint(ctx, r.sid, fpAfterElected)
	if rerr == nil {
		r.disarmed(r.sid, fpAfterElected)
	}
	// Was the window still open once the successor went on? (It reads at
	// once; the slowed server applies the shrink later.) And how long
	// after the leader had it did the slowed server apply it (the link
	// unslowed meanwhile): the window's margin, measured beside the heal.
	applied := make(chan string, 1)
	if stale && mzxid > 0 {
		if z, err := ops.appliedZxid(ctx, p.lagging); err == nil {
			shrunk += fmt.Sprintf(" (%#x once %s was released", z, p.succ.Name)
		}
		go func() { applied <- appliedAfter(ctx, ops, p.lagging, mzxid, seen, 3*time.Second) }()
	} else {
		applied <- ""
	}
	herr := ops.healNet(ctx)
	if a := <-applied; a != "" {
		shrunk += "; " + a + ")"
	} else if stale && mzxid > 0 {
		shrunk += ")"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.netHealed = herr == nil
	r.werr = herr
	defer func() {
		// A successor another fault killed or paused does not answer
		// its admin port: it is not held by the failpoint while it is
		// down or stopped, and the heal disarms the failpoint (still in
		// armed) once it answers, so the run goes on and the record says
		// so.
		if rerr != nil {
			r.deferred = true
			r.outcome += fmt.Sprintf("; %s did not answer the disarm of %s (%v), left to the heal", p.succ.Name, fpAfterElected, rerr)
		}
	}()
	switch {
	case stale:
		r.outcome = fmt.Sprintf("window reached: %s released after %s", p.succ.Name, shrunk)
	case shrunk != "":
		r.outcome = fmt.Sprintf("window missed: %s released after %s", p.succ.Name, shrunk)
	case len(r.watch) == 0:
		r.outcome = fmt.Sprintf("successor held; no survivor but %s leads a partition with %s in its ISR, %s released", p.succ.Name, p.ctl.Name, p.succ.Name)
	default:
		r.outcome = fmt.Sprintf("successor held; no ISR shrink seen within %s, %s released", reachWithin(r.f.session), p.succ.Name)
	}
}

// heal waits for the window to play out, heals what it left and records
// the fault's end with what it came to.
func (r *zkfRun) heal(ctx context.Context) error {
	r.windowRun.join(ctx)
	r.mu.Lock()
	out, healed, we, deferred := r.outcome, r.netHealed, r.werr, r.deferred
	r.mu.Unlock()
	errs := []error{we}
	if !healed {
		errs = append(errs, r.f.ops.healNet(ctx))
	}
	gone, derr := r.disarmAll(ctx)
	errs = append(errs, derr)
	if deferred {
		if slices.Contains(gone, fmt.Sprintf("%d %s", r.sid, fpAfterElected)) {
			out += fmt.Sprintf("; %s down at the heal, its process gone with the failpoint", r.p.succ.Name)
		} else if derr == nil {
			out += fmt.Sprintf("; %s disarmed at the heal", fpAfterElected)
		}
	}
	err := errors.Join(errs...)
	r.stop(out, err)
	r.f.done()
	return err
}
