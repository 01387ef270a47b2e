package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/ctxsleep"
	"github.com/zkchaos/zkchaos/nemesis"
)

// failpointFault is the failpoint fault of one run (its plans are
// fpplan.go's): it arms a window on the node holding the plan's role,
// provokes the work that reaches it, watches for the node reaching it and
// heals. It reads roles from world and parts, arms through fps, acts on
// processes through pr and records through rec.
type failpointFault struct {
	world   nemesis.World
	parts   Partitions
	fps     Failpoints
	session time.Duration
	rec     *nemesis.Recorder
	pr      procs
	resign  Resigner // nil: ProvokeDeleteController fails its step
	leaders Leaders  // nil: a shrink hold holds the controller's first write
	// replicaLag is the nodes' replica.lag.time.max (0: unknown), by which
	// a hold after the controller's write outlasts a leader's shrink.
	replicaLag time.Duration
}

func newFailpoint(w nemesis.World, env Env, rec *nemesis.Recorder, pr procs) *failpointFault {
	return &failpointFault{world: w, parts: env.Partitions, fps: env.Failpoints, session: env.Session, rec: rec, pr: pr, resign: env.Resigner,
		leaders: env.Leaders, replicaLag: env.ReplicaLag}
}

// reachWithin is how long after its provocation a window may still be
// reached: a broker's death is seen once its session expires, then the
// controller handles it; a restart takes seconds more.
func reachWithin(session time.Duration) time.Duration { return 4 * session }

// inject starts a failpoint fault drawn from pick and returns what ends
// it. It records a fault_start naming the window and the role, and a
// fault_stop saying whether the node reached the window.
func (f *failpointFault) inject(ctx context.Context, pick int) (Heal, error) {
	plan := PlanFailpoint(pick)
	// A role may have no holder for a moment (the controller failing
	// over, a partition between leaders): look again for a session
	// timeout and a little more before giving the fault up.
	target, other, err := f.resolveRoleSoon(ctx, plan, f.session+2*time.Second)
	if err != nil {
		return nil, err
	}
	holds := 1
	if plan.Window.PerBroker {
		holds = max(1, len(f.world.Nodes())-1)
	}
	if shrinkHold(plan, f.replicaLag) {
		// The firings before the stopped broker's removal from the ISRs
		// (the elections of the partitions it led, an operator's topic
		// creation) are let go (holdRemoval); a later one holds.
		holds = shrinkHoldFirings
	}
	r := &fpRun{f: f, plan: plan, name: plan.Window.Name, action: fmt.Sprintf("%d*%s", holds, plan.Action)}
	if err := r.begin(ctx, target, other, ""); err != nil {
		return nil, err
	}
	// The watch outlives the step's hold until reachWithin has passed: a
	// bounce reaches the controller's windows only once the bounced
	// broker's session has expired, often after a short hold has ended,
	// and disarming then would waste the fault.
	r.watcher = startBackground(ctx, r.watch)
	return r.heal, nil
}

// fpRun is one failpoint fault in force.
type fpRun struct {
	f      *failpointFault
	plan   FPPlan
	name   string // the window's
	action string // as the node's admin port takes it ("1*sigstop")

	watcher *background
	rearmed bool // the watch's own

	mu  sync.Mutex
	cur attempt
	// terminated: the armed node was sent SIGTERM (its controlled
	// shutdown); heal starts it again.
	terminated bool
	// holdUntil: a pause lasts at least until then (ProvokeShutdownRestart:
	// until the restarted broker has registered).
	holdUntil time.Time
	// reached and paused: when the watch saw the window reached, and when
	// it stopped the node there (sigstop).
	reached, paused time.Time
	// removal: whose removal from the ISRs the pause waits for, and the
	// leaders before it was stopped (holdRemoval); nil: the first firing
	// holds. letGone counts the firings let go.
	removal *removalWait
	letGone int
}

// attempt is the arming in force: the node armed, its fault's id in the
// history, when it was provoked. A controller window re-arms once on the
// new controller when the armed one loses the role before reaching it (an
// operator's controlled shutdown restarts it, another fault fails it
// over): the failpoint left with its process.
type attempt struct {
	target  Target
	id      int
	fid     string
	since   time.Time
	release func()
	// ended: closed by a re-arm whose new plan failed; nothing is left for
	// heal to undo.
	ended bool
}

// begin claims target, records the fault, arms and provokes; on error
// everything it did is undone and recorded.
func (r *fpRun) begin(ctx context.Context, target, other Target, note string) error {
	plan := r.plan
	release := r.claim(target, other)
	id := nodeID(target)
	detail := fmt.Sprintf("%s on %s (%s): %s, provoked by %s", r.name, target.Name, plan.Window.Role, r.action, plan.Provoke)
	if other.Name != "" {
		detail += " of " + other.Name
	}
	detail += note
	fid := r.f.rec.StartFault(history.Fault{Name: string(FailpointFault), Targets: []string{target.Name}, Detail: detail, Failpoint: r.name})
	since := time.Now()
	fail := func(err error) error {
		release()
		r.stop(attempt{target: target, fid: fid}, false, "", err)
		return err
	}
	if err := r.arm(ctx, target, id); err != nil {
		if r.plan.Provoke != ProvokeRestart {
			// The node may have armed it and its answer come too late
			// (stopped by another fault right after): a failpoint left
			// armed holds later with nobody to end the hold. The node
			// itself refuses an arm it reads only after the harness gave
			// up (history.FailpointArmBeforeHeader).
			r.f.fps.DisarmFailpoint(context.WithoutCancel(ctx), id, r.name)
		}
		return fail(err)
	}
	r.mu.Lock()
	r.cur = attempt{target: target, id: id, fid: fid, since: since, release: release}
	r.mu.Unlock()
	if err := r.provoke(ctx, target, other, id, since); err != nil {
		r.f.fps.DisarmFailpoint(context.WithoutCancel(ctx), id, r.name)
		return fail(err)
	}
	return nil
}

// claim marks the brokers the window needs as this fault's until the
// returned release.
func (r *fpRun) claim(target, other Target) (release func()) {
	pr := r.f.pr
	releases := []func(){pr.claim(target)}
	if other.Name != "" {
		// The broker the provocation bounces or restarts is part of the
		// window too: an operator's controlled shutdown of it meanwhile
		// would end the window early.
		releases = append(releases, pr.claim(other))
	}
	if r.plan.Window.PerBroker || r.plan.Provoke == ProvokeDeleteController {
		// Every other broker receives one of the held requests: an
		// operator's controlled shutdown of one during the hold (the
		// control-plane workload) leaves its request nobody to meet the
		// controller-epoch check (power every-fix-on seeds whose only
		// other receiver was shutting down refused nothing). For the
		// forced election likewise: a controlled shutdown of the third
		// broker just before the hold has the controller rewrite every
		// state it is in, and the held change then finds nothing left to
		// write (power every-fix-on seed 1 at c65faf8).
		for _, n := range without(without(r.f.world.Nodes(), target), other) {
			releases = append(releases, pr.claim(n))
		}
	}
	return func() {
		for _, rel := range releases {
			rel()
		}
	}
}

// arm arms the window on target (broker id).
func (r *fpRun) arm(ctx context.Context, target Target, id int) error {
	if r.plan.Provoke != ProvokeRestart {
		return r.f.fps.ArmFailpoint(ctx, id, r.name, r.action)
	}
	// The failpoint must be armed in the new process before it runs:
	// kill, arm it for the next start, start. The start does not depend
	// on the step's context, and a kill that reports an error is checked:
	// at the run's time limit the engine killed the broker while the
	// client's context had already expired, the kill reported "context
	// deadline exceeded", nothing started the broker again and it stayed
	// dead through heal and the final reads.
	bg := context.WithoutCancel(ctx)
	if err := r.f.pr.kill(ctx, target); err != nil {
		if r.f.pr.down(bg, target) {
			err = errors.Join(err, r.f.pr.start(bg, target))
		}
		return err
	}
	err := r.f.fps.ArmAtStart(ctx, id, r.name, r.action)
	// With the error action the new process may exit at once (an error at
	// broker-before-register aborts its start-up), which makes the start's
	// network re-apply fail; heal starts it again and reports a start that
	// still fails.
	if serr := r.f.pr.start(bg, target); err == nil && r.plan.Action != FPError {
		err = serr
	}
	return err
}

// provoke does the work that brings the armed node (id) to its window.
func (r *fpRun) provoke(ctx context.Context, target, other Target, id int, since time.Time) error {
	pr, fps := r.f.pr, r.f.fps
	switch r.plan.Provoke {
	case ProvokeBounceOther, ProvokeBounceLead:
		r.holdRemoval(ctx, other)
		r.holdPastShrink(time.Now())
		return pr.bounce(ctx, other)
	case ProvokeBounceTwo:
		r.holdRemoval(ctx, other)
		r.holdPastShrink(time.Now())
		err := pr.bounce(ctx, other)
		if err == nil && waitReached(ctx, fps, id, r.name, since, reachWithin(r.f.session)) {
			// The third broker restarts while the armed node holds in the
			// window; a window not reached in time leaves it alone.
			if rest := free(pr, without(without(r.f.world.Nodes(), target), other)); len(rest) > 0 {
				err = pr.bounce(ctx, rest[r.plan.Pick%len(rest)])
			}
		}
		return err
	case ProvokeTerminate:
		// The controlled shutdown runs during the hold; a hold in the
		// window keeps the process alive until heal.
		r.mu.Lock()
		r.terminated = true
		r.mu.Unlock()
		return pr.terminate(ctx, target)
	case ProvokeShutdownRestart:
		return r.shutdownRestart(ctx, other, id, since)
	case ProvokeDeleteController:
		return r.deleteController(ctx, target, other, id, since)
	}
	return nil
}

// stop records the end of attempt a: whether its window was reached.
func (r *fpRun) stop(a attempt, reached bool, detail string, err error) {
	d := "window not reached" + detail
	if reached {
		d = "window reached"
	}
	r.f.rec.StopFault(history.Fault{ID: a.fid, Name: string(FailpointFault), Targets: []string{a.target.Name}, Detail: d, Failpoint: r.name}, err)
}

// watch looks for the window until reachWithin after the attempt's
// provocation: on reaching it under sigstop, it stops the whole process
// (as PID 1 it cannot stop itself; it holds until SIGCONT). A controller
// window whose node loses the role first moves to the new controller,
// once.
func (r *fpRun) watch(ctx context.Context) {
	for {
		r.mu.Lock()
		a := r.cur
		r.mu.Unlock()
		if ok, _ := r.f.fps.FailpointReached(ctx, a.id, r.name, a.since); ok {
			r.mu.Lock()
			r.reached = time.Now()
			w, gone := r.removal, r.letGone
			r.mu.Unlock()
			if w != nil && gone < shrinkHoldFirings-1 && !w.heldAtRemoval(ctx, r.f.fps, a.id, r.name, a.since) &&
				r.f.fps.ReleaseFailpoint(ctx, a.id, r.name) == nil {
				r.mu.Lock()
				r.letGone++
				r.cur.since = time.Now()
				r.mu.Unlock()
				continue // look for the next firing
			}
			if r.plan.Action == FPSigstop && r.f.pr.pause(ctx, a.target) == nil {
				r.mu.Lock()
				r.paused = time.Now()
				r.mu.Unlock()
			}
			return
		}
		if !r.rearmed && r.plan.Window.Role == RoleController {
			if c, err := r.f.world.Controller(ctx); err == nil && c != a.id {
				r.rearmed = true
				switch r.followController(ctx, a, c) {
				case watchOn:
					continue
				case watchOver:
					return
				}
			}
		}
		r.mu.Lock()
		by := r.cur.since.Add(reachWithin(r.f.session))
		r.mu.Unlock()
		if time.Now().After(by) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// What the watch does after followController.
const (
	watchOn   = iota // look again at once: a new attempt, or the window reached
	watchOver        // stop watching: no attempt is in force
	watchWait        // the old attempt stays: wait and look again
)

// followController moves attempt a to the new controller c once a's node
// has lost the role without reaching the window. The old process must not
// keep the failpoint: held in it later, nobody would end its hold. A node
// down or restarted has nothing armed; one another fault keeps away keeps
// this attempt.
func (r *fpRun) followController(ctx context.Context, a attempt, c int) int {
	if reachedNow, _ := r.f.fps.FailpointReached(ctx, a.id, r.name, a.since); reachedNow {
		return watchOn // reached as the role moved: the watch handles it
	}
	if derr := disarmSoon(ctx, r.f.fps, a.id, r.name, 2*time.Second); derr != nil && !r.f.pr.down(ctx, a.target) {
		return watchWait
	}
	if r.rearm(ctx, a, c) {
		return watchOn
	}
	return watchOver
}

// rearm ends attempt a, whose node old lost the controller role to c
// before reaching the window (its history event says why), and arms and
// provokes again on the controller of now. It reports whether a new
// attempt is in force.
func (r *fpRun) rearm(ctx context.Context, a attempt, c int) bool {
	end := func(detail string) {
		a.release()
		r.stop(a, false, detail, nil)
		r.mu.Lock()
		r.cur.ended = true
		r.mu.Unlock()
	}
	target, other, err := r.f.resolveRoleSoon(ctx, r.plan, r.f.session+2*time.Second)
	if err != nil {
		end(fmt.Sprintf(": %s stopped being the controller (n%d is) before reaching it, and no new plan: %v", a.target.Name, c, err))
		return false
	}
	end(fmt.Sprintf(": %s stopped being the controller (%s is) before reaching it; re-armed on %s", a.target.Name, target.Name, target.Name))
	return r.begin(ctx, target, other, fmt.Sprintf(" (re-armed: %s lost the controller role first)", a.target.Name)) == nil
}

// heal ends the fault: it waits for the watch, lets the node out of its
// window (resumed past its session under sigstop, held long enough under
// pause), disarms and restarts what the provocation left down, and records
// whether the window was reached.
func (r *fpRun) heal(ctx context.Context) error {
	r.watcher.join(ctx)
	r.mu.Lock()
	a := r.cur
	r.mu.Unlock()
	if a.ended {
		return nil
	}
	defer a.release()
	reached, errs := r.release(ctx, a)
	errs = append(errs, r.restore(ctx, a)...)
	err := errors.Join(errs...)
	note := ""
	r.mu.Lock()
	if r.letGone > 0 {
		note = fmt.Sprintf(", held at the removal of n%d from the ISRs (%d earlier firing(s) let go)", r.removal.broker, r.letGone)
	}
	r.mu.Unlock()
	r.stop(a, reached, note, err)
	return err
}

// release lets the node of attempt a out of the window and says whether it
// reached it.
func (r *fpRun) release(ctx context.Context, a attempt) (reached bool, errs []error) {
	r.mu.Lock()
	reachedAt, paused, until := r.reached, r.paused, r.holdUntil
	r.mu.Unlock()
	reached = !reachedAt.IsZero()
	if !reached {
		// One last look: the window may have been reached just now.
		reached, _ = r.f.fps.FailpointReached(ctx, a.id, r.name, a.since)
	}
	switch {
	case !paused.IsZero():
		// A sigstop outlasts the session, so the node resumes with its
		// session gone: that is the window's point. A stopped controller
		// resumes only once another broker has taken over, so its late
		// requests meet brokers that already obey a newer controller epoch
		// (KAFKA-532's window).
		sleepUntil(ctx, paused.Add(r.f.session+time.Second))
		if r.plan.Window.Role == RoleController {
			waitSuccessor(ctx, r.f.world, a.id, time.Now().Add(2*r.f.session+2*time.Second))
		}
		if r.name == history.FailpointControllerBeforeSend {
			errs = append(errs, r.resumeOutOfZKReach(ctx, a.target)...)
		} else {
			errs = append(errs, r.f.pr.resume(ctx, a.target))
		}
	case reached && r.plan.Action == FPPause:
		// The held node's stale work stays in flight for a session timeout
		// at least, long enough for a bounced broker to come back (a
		// request for its previous process, KAFKA-7235).
		if !reachedAt.IsZero() {
			sleepUntil(ctx, reachedAt.Add(r.f.session))
		}
		sleepUntil(ctx, until)
	}
	return reached, errs
}

// zombieSendGrace is how long a zombie controller resumed in its send
// path stays cut off from ZooKeeper: its send thread delivers the request
// in hand within milliseconds of SIGCONT, and the receiver judges it at once.
const zombieSendGrace = time.Second

// resumeOutOfZKReach resumes a controller stopped in its send path while it
// cannot reach ZooKeeper, and gives it back ZooKeeper zombieSendGrace later.
// Resumed in reach, it would learn at once that its session expired, and
// its resignation stops the send threads before the held request goes out
// (Kafka 2.6.3's RequestSendThread.initiateShutdown races a send the same
// way), so the brokers' controller-epoch check would see no stale request
// in some runs. Only this fault's cut is healed: other faults' cuts hold.
func (r *fpRun) resumeOutOfZKReach(ctx context.Context, t Target) []error {
	heal, cerr := r.f.pr.cutOff(ctx, "partition", []Target{t}, r.f.world.ZKServers())
	errs := []error{r.f.pr.resume(ctx, t)}
	if cerr != nil {
		return append(errs, fmt.Errorf("cut %s off from ZooKeeper before resuming it: %w", t.Name, cerr))
	}
	sleepUntil(ctx, time.Now().Add(zombieSendGrace))
	return append(errs, heal(context.WithoutCancel(ctx)))
}

// restore disarms the window and starts again what the fault left down.
func (r *fpRun) restore(ctx context.Context, a attempt) []error {
	pr := r.f.pr
	var errs []error
	if r.plan.Provoke == ProvokeRestart {
		// An error at broker-before-register aborts the start-up and the
		// process exits: start it again (a no-op if it runs).
		errs = append(errs, pr.start(ctx, a.target))
	}
	r.mu.Lock()
	terminated := r.terminated
	r.mu.Unlock()
	// An armed failpoint left behind would fire later with nobody to end
	// its hold, so disarming is retried while another fault (a partition,
	// a restart) keeps the admin port away. A terminated node may have
	// exited already, and a node another fault killed meanwhile is down:
	// neither has anything left armed (a failpoint lives in the process;
	// ArmAtStart's file is consumed by the start it was written for).
	if !pr.down(ctx, a.target) {
		if err := disarmSoon(ctx, r.f.fps, a.id, r.name, 5*time.Second); err != nil && !terminated && !pr.down(ctx, a.target) {
			errs = append(errs, err)
		}
	}
	if terminated {
		// Its controlled shutdown finishes once released; then it starts
		// again, as an operator's restart would.
		errs = append(errs, restartAfterExit(ctx, pr, a.target))
	}
	return errs
}

// waitSuccessor waits until ZooKeeper names a controller other than node,
// then one second more for its first requests to reach the brokers, or
// until deadline.
func waitSuccessor(ctx context.Context, w nemesis.World, node int, deadline time.Time) {
	for time.Now().Before(deadline) {
		if c, err := w.Controller(ctx); err == nil && c >= 0 && c != node {
			sleepUntil(ctx, time.Now().Add(time.Second))
			return
		}
		if !sleepUntil(ctx, time.Now().Add(100*time.Millisecond)) {
			return
		}
	}
}

// disarmSoon disarms a failpoint, retrying until the node's admin port
// answers or within passes.
func disarmSoon(ctx context.Context, fps Failpoints, id int, name string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := fps.DisarmFailpoint(ctx, id, name)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// resolveRole finds the node holding plan's role now, and the broker the
// provocation hits (-1: the target itself or none).
func (f *failpointFault) resolveRole(ctx context.Context, plan FPPlan) (target Target, other Target, err error) {
	nodes := f.world.Nodes()
	ctl, err := f.world.Controller(ctx)
	if err != nil {
		return target, other, err
	}
	ctlT, err := byName(nodes, fmt.Sprintf("n%d", ctl))
	if err != nil {
		return target, other, err
	}
	topic, parts := f.parts.WorkloadTopic()
	if parts < 1 {
		parts = 1
	}
	p := plan.Partition % parts
	switch plan.Window.Role {
	case RoleController:
		target = ctlT
	case RoleRestarted:
		rest := without(nodes, ctlT)
		if len(rest) == 0 {
			rest = nodes
		}
		target, err = pickFP(rest, plan.Pick)
	case RoleLeader, RoleFollower:
		leader, isr, perr := f.parts.PartitionISR(ctx, topic, p)
		if perr != nil {
			return target, other, perr
		}
		if plan.Window.Role == RoleLeader {
			if leader < 0 {
				return target, other, fmt.Errorf("%s: %s-%d has no leader", FailpointFault, topic, p)
			}
			target, err = byName(nodes, fmt.Sprintf("n%d", leader))
			break
		}
		var fs []Target
		for _, r := range isr {
			if r != leader {
				if t, e := byName(nodes, fmt.Sprintf("n%d", r)); e == nil {
					fs = append(fs, t)
				}
			}
		}
		if len(fs) == 0 {
			return target, other, fmt.Errorf("%s: %s-%d has no follower in its ISR %v", FailpointFault, topic, p, isr)
		}
		target = fs[plan.Pick%len(fs)]
		if plan.Provoke == ProvokeBounceLead {
			other, err = byName(nodes, fmt.Sprintf("n%d", leader))
		}
	}
	if err != nil {
		return target, other, err
	}
	if plan.Provoke == ProvokeBounceOther || plan.Provoke == ProvokeBounceTwo || plan.Provoke == ProvokeDeleteController {
		// A broker another fault holds (paused, killed, armed) is no
		// provocation: bouncing it would undo that fault.
		rest := free(f.pr, without(nodes, target))
		if plan.Window.Role == RoleController {
			// A controller reaches its windows by handling the broker
			// change, and after-zk-write only when that change moves a
			// partition's leadership: bounce a broker that leads one.
			if leaders := leadersAmong(ctx, f.parts, rest); len(leaders) > 0 {
				rest = leaders
			}
		}
		other, err = pickFP(rest, plan.Pick/7)
	}
	if plan.Provoke == ProvokeShutdownRestart {
		// The broker must follow a partition: the controller sends a
		// StopReplica only for the partitions a shutting-down broker
		// follows.
		rest := free(f.pr, without(nodes, target))
		if fs := followersAmong(ctx, f.parts, rest); len(fs) > 0 {
			rest = fs
		}
		other, err = pickFP(rest, plan.Pick/7)
	}
	return target, other, err
}

// followersAmong returns the brokers of ts in the ISR of a partition of the
// workload topic they do not lead, in ts's order.
func followersAmong(ctx context.Context, parts Partitions, ts []Target) []Target {
	return amongRoles(ctx, parts, ts, func(leader int, isr []int) []int {
		return slices.DeleteFunc(slices.Clone(isr), func(r int) bool { return r == leader })
	})
}

// amongRoles returns the brokers of ts that role names for some partition
// of the workload topic now (given its leader and ISR), in ts's order.
func amongRoles(ctx context.Context, pr Partitions, ts []Target, role func(leader int, isr []int) []int) []Target {
	topic, parts := pr.WorkloadTopic()
	named := map[string]bool{}
	for p := range parts {
		if l, isr, err := pr.PartitionISR(ctx, topic, p); err == nil {
			for _, b := range role(l, isr) {
				named[fmt.Sprintf("n%d", b)] = true
			}
		}
	}
	var out []Target
	for _, t := range ts {
		if named[t.Name] {
			out = append(out, t)
		}
	}
	return out
}

// resolveRoleSoon retries resolveRole while the role has no holder (a
// failover in progress, a partition without a leader) or within passes.
func (f *failpointFault) resolveRoleSoon(ctx context.Context, plan FPPlan, within time.Duration) (Target, Target, error) {
	deadline := time.Now().Add(within)
	for {
		target, other, err := f.resolveRole(ctx, plan)
		if err == nil || time.Now().After(deadline) {
			return target, other, err
		}
		if !sleepUntil(ctx, time.Now().Add(200*time.Millisecond)) {
			return target, other, err
		}
	}
}

// leadersAmong returns the brokers of ts that lead a partition of the
// workload topic now, in ts's order.
func leadersAmong(ctx context.Context, parts Partitions, ts []Target) []Target {
	return amongRoles(ctx, parts, ts, func(leader int, _ []int) []int {
		if leader < 0 {
			return nil
		}
		return []int{leader}
	})
}

// waitReached polls until node reports reaching window name or within
// passes.
func waitReached(ctx context.Context, fps Failpoints, id int, name string, since time.Time, within time.Duration) bool {
	return ctxsleep.Until(ctx, within, 100*time.Millisecond, func() bool {
		ok, _ := fps.FailpointReached(ctx, id, name, since)
		return ok
	})
}

func pickFP(ts []Target, pick int) (Target, error) {
	if len(ts) == 0 {
		return Target{}, fmt.Errorf("%s: no candidates", FailpointFault)
	}
	return ts[pick%len(ts)], nil
}
