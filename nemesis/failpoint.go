package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/schedule"
)

// FailpointFault is the fault that arms one of the node program's failpoint
// windows on the node holding a role, then provokes the work that reaches
// it. A random SIGSTOP almost always lands on an idle controller; a
// failpoint stops the node inside the window where a seed bug lives.
const FailpointFault = schedule.FailpointFault

// FailpointDoc describes the fault for the catalogue.
const FailpointDoc = "arm a node failpoint window on a role (controller, partition leader, follower, restarted broker) and provoke it"

// Roles a failpoint is armed on.
const (
	RoleController = "controller"
	RoleLeader     = "partition-leader"
	RoleFollower   = "follower"
	RoleRestarted  = "restarted-broker"
)

// Failpoint actions the fault draws from (the node's action syntax).
const (
	// FPSigstop: the node stops in the window (the nemesis SIGSTOPs it as
	// soon as it reports reaching it) and stays stopped past the ZooKeeper
	// session timeout, so it resumes as a zombie.
	FPSigstop = "sigstop"
	// FPPause: the node holds in the window for the fault's hold, then is
	// released; its session survives.
	FPPause = "pause"
	// FPError: the window's code path fails once.
	FPError = "error"
)

// Ways to provoke the work that reaches a window.
const (
	ProvokeBounceOther = "bounce-other"   // kill and restart a broker other than the armed one
	ProvokeBounceLead  = "bounce-leader"  // kill and restart the partition's leader
	ProvokeTerminate   = "terminate"      // SIGTERM the armed broker: its controlled shutdown
	ProvokeRestart     = "restart-target" // kill the armed broker, start it and arm it while it starts
	// ProvokeBounceTwo bounces a broker other than the armed one to reach
	// the window and, once the armed node holds there, bounces a third:
	// whatever the held controller sends next carries the third broker's
	// previous broker epoch to its new process, a request in flight across
	// a broker restart (KAFKA-7235's window).
	ProvokeBounceTwo = "bounce-other-then-third"
	// ProvokeShutdownRestart SIGTERMs a broker other than the armed
	// controller, one that follows a partition: its ControlledShutdown
	// brings the controller to its window (the ISR shrink written, the
	// StopReplica for the broker not sent yet), and once the controller
	// holds there the broker, still waiting for the answer, is killed and
	// started again. Released, the controller sends the StopReplica it
	// meant for the previous process to the new one (the same address):
	// only the broker-epoch check (KIP-380) keeps it from stopping a
	// replica there.
	ProvokeShutdownRestart = "terminate-other-then-restart"
)

// FPWindow is one failpoint window the fault can arm: the node program's
// name for it, the role of the node that reaches it and what makes it
// reach it.
type FPWindow struct {
	Name    string
	Role    string
	Provoke []string
	// Actions the window draws from; nil: every action. A controller held
	// in its window by an error does nothing a checker can see (the
	// controller retries), so those windows draw sigstop (a zombie) and
	// pause (a stale request in flight).
	Actions []string
	// Weight is the window's share of the draws (0 counts as 1).
	Weight int
	// PerBroker: the window is reached once per other broker (a send
	// thread each), and the fault holds every one of them, not only the
	// first. A controller's decision goes to every broker at once; held
	// in one thread only, the request in hand is, as often as not, the one
	// for the broker the provocation restarted, whose new process refuses
	// it for its broker epoch before its controller epoch is looked at.
	PerBroker bool
}

// FPWindows lists every failpoint window of the node program, in the node's
// order (node/failpoint.Names; a test keeps them in step). New windows are
// appended so a saved schedule's picks keep their meaning.
var FPWindows = []FPWindow{
	{"controller-after-zk-write", RoleController, []string{ProvokeBounceOther, ProvokeBounceTwo, ProvokeShutdownRestart}, controllerActions, 3, false},
	{"controller-before-broker-change", RoleController, []string{ProvokeBounceOther, ProvokeBounceTwo}, controllerActions, 3, false},
	{"broker-before-register", RoleRestarted, []string{ProvokeRestart}, nil, 1, false},
	{"broker-during-controlled-shutdown", RoleLeader, []string{ProvokeTerminate}, nil, 1, false},
	{"broker-after-register", RoleRestarted, []string{ProvokeRestart}, nil, 1, false},
	// Bouncing the leader makes the ISR followers truncate to the new
	// leader (the follower the election passes over reaches it);
	// restarting the follower itself reaches it on its first LeaderAndIsr.
	{"follower-after-truncation", RoleFollower, []string{ProvokeBounceLead, ProvokeRestart}, nil, 1, false},
	// A bounce makes the controller send LeaderAndIsr and UpdateMetadata;
	// stopped with one of them in hand past its session, it resumes after
	// its successor has reached the receiver, and delivers it under the
	// old controller epoch: the input of the brokers' controller-epoch
	// check, which a zombie that resigns at its first fenced ZooKeeper
	// write never sends.
	{"controller-before-send", RoleController, []string{ProvokeBounceOther}, []string{FPSigstop}, 2, true},
	// A broker's controlled shutdown sends ControlledShutdown; held in the
	// controller before its event loop sees it while the broker is killed
	// and started again, the request goes on once the controller knows the
	// new process: it carries the previous process's broker epoch, the
	// input of the controller's broker-epoch check (KIP-380), which no
	// other window reaches. Pause only: a stopped controller resigns and
	// answers NOT_CONTROLLER without looking at the epoch.
	{"controller-before-controlled-shutdown", RoleController, []string{ProvokeShutdownRestart}, []string{FPPause}, 1, false},
}

// windowGenerations[g] is how many of FPWindows the picks of generation g
// (picks in [g*PickGeneration, (g+1)*PickGeneration)) draw from: the
// table as it was when that generation was the newest. A schedule.json
// holds its picks, so a window added later changes nothing it replays;
// NewPick draws from the last generation, which sees every window.
var windowGenerations = []int{6, 7, 8}

// PickGeneration is how many picks one generation holds.
const PickGeneration = 1 << 16

// pickWindows returns the windows pick draws from: its generation's, or
// the newest for a pick beyond every generation.
func pickWindows(pick int) []FPWindow {
	g := min(max(pick, 0)/PickGeneration, len(windowGenerations)-1)
	return FPWindows[:windowGenerations[g]]
}

// NewPick draws a step's pick from r, in the newest generation, which
// plans a failpoint over every window.
func NewPick(r *rand.Rand) int {
	return (len(windowGenerations)-1)*PickGeneration + r.IntN(PickGeneration)
}

var fpActions = []string{FPSigstop, FPPause, FPError}

// controllerActions: a controller's windows draw sigstop two times in three.
// A zombie controller is the window both of the control plane's fencing
// layers exist for (its conditional ZooKeeper writes, the brokers'
// controller-epoch check); a pause leaves a stale request in flight while a
// bounced broker restarts (the broker-epoch layer).
var controllerActions = []string{FPSigstop, FPSigstop, FPPause}

// FailpointWorld is what the failpoint fault needs beyond World: the node's
// admin port (arm, disarm), its event log (did it reach the window) and
// partition roles from ZooKeeper. The harness implements it on the World it
// hands the nemesis; nemesis still never talks to the node program itself.
type FailpointWorld interface {
	World
	ArmFailpoint(ctx context.Context, node int, name, action string) error
	DisarmFailpoint(ctx context.Context, node int, name string) error
	// FailpointReached reports whether node's event log has the fault_start
	// of failpoint name at or after since.
	FailpointReached(ctx context.Context, node int, name string, since time.Time) (bool, error)
	// PartitionISR returns a partition's leader and ISR from its state znode.
	PartitionISR(ctx context.Context, topic string, partition int32) (leader int, isr []int, err error)
	// WorkloadTopic names the topic whose partitions give the leader and
	// follower roles.
	WorkloadTopic() (topic string, partitions int32)
	// SessionTimeout is the nodes' ZooKeeper session timeout.
	SessionTimeout() time.Duration
	// ArmAtStart arms a failpoint for node's next process start only
	// (node/failpoint.OnceFile in its data directory); the node must be
	// down.
	ArmAtStart(ctx context.Context, node int, name, action string) error
	// PartitionReplicas returns topic's replica assignment
	// (/brokers/topics/<topic>): each partition's replicas, the first its
	// preferred replica.
	PartitionReplicas(ctx context.Context, topic string) (map[int32][]int, error)
}

// FPPlan is what one failpoint fault does, drawn from its step's Pick: the
// same Pick in a replay gives the same plan.
type FPPlan struct {
	Window    FPWindow
	Action    string
	Provoke   string
	Partition int32 // for the leader and follower roles (mod the topic's partitions)
	Pick      int   // chooses among candidate nodes
}

// PlanFailpoint draws the plan of a failpoint fault from pick.
func PlanFailpoint(pick int) FPPlan {
	r := rand.New(rand.NewPCG(uint64(pick), 0xf417f417))
	// The controller's windows weigh triple: every fencing layer of the
	// control plane is exercised there (a zombie controller, a request in
	// flight across a broker restart), and a random run draws only a few
	// failpoint steps.
	windows := pickWindows(pick)
	total := 0
	for _, w := range windows {
		total += max(1, w.Weight)
	}
	n := r.IntN(total)
	w := windows[len(windows)-1]
	for _, c := range windows {
		if n < max(1, c.Weight) {
			w = c
			break
		}
		n -= max(1, c.Weight)
	}
	acts := w.Actions
	if acts == nil {
		acts = fpActions
	}
	return FPPlan{Window: w, Action: acts[r.IntN(len(acts))], Provoke: w.Provoke[r.IntN(len(w.Provoke))],
		Partition: int32(r.IntN(1 << 10)), Pick: r.IntN(1 << 16)}
}

// FailpointAvailable says whether the fault can apply to a run of nodes
// brokers: every window's provocation needs a second broker.
func FailpointAvailable(nodes int) error {
	if nodes < 2 {
		return fmt.Errorf("%s: needs 2 brokers, the run has %d", FailpointFault, nodes)
	}
	return nil
}

// procs is what the fault does to processes; the Nemesis's methods, or a
// fake in tests.
type procs interface {
	bounce(ctx context.Context, t Target) error
	kill(ctx context.Context, t Target) error
	start(ctx context.Context, t Target) error
	terminate(ctx context.Context, t Target) error // SIGTERM; the node runs its controlled shutdown
	waitExited(ctx context.Context, t Target) error
	pause(ctx context.Context, t Target) error
	resume(ctx context.Context, t Target) error
	// down reports whether t's process is not running (another fault
	// killed it); an error asking counts as up.
	down(ctx context.Context, t Target) bool
	// held reports whether another fault holds t (paused, killed, armed);
	// claim marks t held by this one until the returned release.
	held(t Target) bool
	claim(t Target) (release func())
}

type nemesisProcs struct{ n *Nemesis }

func (p nemesisProcs) bounce(ctx context.Context, t Target) error {
	_, err := p.n.BounceTarget(ctx, t)
	return err
}
func (p nemesisProcs) kill(ctx context.Context, t Target) error  { return p.n.KillTarget(ctx, t) }
func (p nemesisProcs) start(ctx context.Context, t Target) error { return p.n.StartTarget(ctx, t) }
func (p nemesisProcs) pause(ctx context.Context, t Target) error { return p.n.PauseTarget(ctx, t) }
func (p nemesisProcs) resume(ctx context.Context, t Target) error {
	return p.n.ResumeTarget(ctx, t)
}
func (p nemesisProcs) terminate(ctx context.Context, t Target) error {
	return t.Container.Signal(ctx, "SIGTERM")
}
func (p nemesisProcs) waitExited(ctx context.Context, t Target) error {
	return t.Container.WaitExited(ctx)
}
func (p nemesisProcs) down(ctx context.Context, t Target) bool {
	st, err := t.Container.State(ctx)
	return err == nil && !st.Running
}
func (p nemesisProcs) held(t Target) bool              { return p.n.isHeld(t) }
func (p nemesisProcs) claim(t Target) (release func()) { return p.n.claim(t) }

// InjectFailpoint starts a failpoint fault drawn from pick and returns what
// ends it. It records a fault_start naming the window and the role, and a
// fault_stop saying whether the node reached the window.
func (n *Nemesis) InjectFailpoint(ctx context.Context, pick int) (func(context.Context) error, error) {
	return injectFailpoint(ctx, n.World, n.Rec, nemesisProcs{n}, pick)
}

func nodeID(t Target) int {
	var id int
	fmt.Sscanf(t.Name, "n%d", &id)
	return id
}

// resolveRole finds the node holding plan's role now, and the broker the
// provocation hits (-1: the target itself or none).
func resolveRole(ctx context.Context, fw FailpointWorld, pr procs, plan FPPlan) (target Target, other Target, err error) {
	nodes := fw.Nodes()
	ctl, err := fw.Controller(ctx)
	if err != nil {
		return target, other, err
	}
	ctlT, err := byName(nodes, fmt.Sprintf("n%d", ctl))
	if err != nil {
		return target, other, err
	}
	topic, parts := fw.WorkloadTopic()
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
		leader, isr, perr := fw.PartitionISR(ctx, topic, p)
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
	if plan.Provoke == ProvokeBounceOther || plan.Provoke == ProvokeBounceTwo {
		// A broker another fault holds (paused, killed, armed) is no
		// provocation: bouncing it would undo that fault.
		rest := free(pr, without(nodes, target))
		if plan.Window.Role == RoleController {
			// A controller reaches its windows by handling the broker
			// change, and after-zk-write only when that change moves a
			// partition's leadership: bounce a broker that leads one.
			if leaders := leadersAmong(ctx, fw, rest); len(leaders) > 0 {
				rest = leaders
			}
		}
		other, err = pickFP(rest, plan.Pick/7)
	}
	if plan.Provoke == ProvokeShutdownRestart {
		// The broker must follow a partition: the controller sends a
		// StopReplica only for the partitions a shutting-down broker
		// follows.
		rest := free(pr, without(nodes, target))
		if fs := followersAmong(ctx, fw, rest); len(fs) > 0 {
			rest = fs
		}
		other, err = pickFP(rest, plan.Pick/7)
	}
	return target, other, err
}

// followersAmong returns the brokers of ts in the ISR of a partition of the
// workload topic they do not lead, in ts's order.
func followersAmong(ctx context.Context, fw FailpointWorld, ts []Target) []Target {
	return amongRoles(ctx, fw, ts, func(leader int, isr []int) []int {
		return slices.DeleteFunc(slices.Clone(isr), func(r int) bool { return r == leader })
	})
}

// amongRoles returns the brokers of ts that role names for some partition
// of the workload topic now (given its leader and ISR), in ts's order.
func amongRoles(ctx context.Context, fw FailpointWorld, ts []Target, role func(leader int, isr []int) []int) []Target {
	topic, parts := fw.WorkloadTopic()
	named := map[string]bool{}
	for p := range parts {
		if l, isr, err := fw.PartitionISR(ctx, topic, p); err == nil {
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

// free returns the brokers of ts no other fault holds, or ts when every one
// is held.
func free(pr procs, ts []Target) []Target {
	var out []Target
	for _, t := range ts {
		if !pr.held(t) {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return ts
	}
	return out
}

// resolveRoleSoon retries resolveRole while the role has no holder (a
// failover in progress, a partition without a leader) or within passes.
func resolveRoleSoon(ctx context.Context, fw FailpointWorld, pr procs, plan FPPlan, within time.Duration) (Target, Target, error) {
	deadline := time.Now().Add(within)
	for {
		target, other, err := resolveRole(ctx, fw, pr, plan)
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
func leadersAmong(ctx context.Context, fw FailpointWorld, ts []Target) []Target {
	return amongRoles(ctx, fw, ts, func(leader int, _ []int) []int {
		if leader < 0 {
			return nil
		}
		return []int{leader}
	})
}

// waitReached polls until node reports reaching window name or within
// passes.
func waitReached(ctx context.Context, fw FailpointWorld, id int, name string, since time.Time, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		if ok, _ := fw.FailpointReached(ctx, id, name, since); ok {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func pickFP(ts []Target, pick int) (Target, error) {
	if len(ts) == 0 {
		return Target{}, fmt.Errorf("%s: no candidates", FailpointFault)
	}
	return ts[pick%len(ts)], nil
}

func injectFailpoint(ctx context.Context, w World, rec *Recorder, pr procs, pick int) (func(context.Context) error, error) {
	fw, ok := w.(FailpointWorld)
	if !ok {
		return nil, fmt.Errorf("%s: the run's world cannot arm failpoints (no FailpointWorld)", FailpointFault)
	}
	plan := PlanFailpoint(pick)
	// A role may have no holder for a moment (the controller failing
	// over, a partition between leaders): look again for a session
	// timeout and a little more before giving the fault up.
	target, other, err := resolveRoleSoon(ctx, fw, pr, plan, fw.SessionTimeout()+2*time.Second)
	if err != nil {
		return nil, err
	}
	name := plan.Window.Name
	holds := 1
	if plan.Window.PerBroker {
		holds = max(1, len(fw.Nodes())-1)
	}
	action := fmt.Sprintf("%d*%s", holds, plan.Action)
	// armed is the attempt in force: the node armed, its fault's id in the
	// history, when it was provoked. A controller window re-arms once on
	// the new controller when the armed one loses the role before
	// reaching it (an operator's controlled shutdown restarts it, another
	// fault fails it over): the failpoint left with its process.
	type attempt struct {
		target  Target
		id      int
		fid     string
		since   time.Time
		release func()
		// ended: closed by a re-arm whose new plan failed; nothing is
		// left for heal to undo.
		ended bool
	}
	var mu sync.Mutex
	var cur attempt
	terminated := false
	// holdUntil: a pause lasts at least until then (ProvokeShutdownRestart:
	// until the restarted broker has registered).
	var holdUntil time.Time
	// begin claims target, records the fault, arms and provokes; on error
	// everything it did is undone and recorded.
	begin := func(ctx context.Context, target, other Target, note string) error {
		release := pr.claim(target)
		if other.Name != "" {
			// The broker the provocation bounces or restarts is part of
			// the window too: an operator's controlled shutdown of it
			// meanwhile would end the window early.
			rel, relOther := release, pr.claim(other)
			release = func() { rel(); relOther() }
		}
		if plan.Window.PerBroker {
			// Every other broker receives one of the held requests: an
			// operator's controlled shutdown of one during the hold (the
			// control-plane workload) leaves its request nobody to meet
			// the controller-epoch check (power every-fix-on seeds whose
			// only other receiver was shutting down refused nothing).
			releases := []func(){release}
			for _, n := range without(without(fw.Nodes(), target), other) {
				releases = append(releases, pr.claim(n))
			}
			release = func() {
				for _, r := range releases {
					r()
				}
			}
		}
		id := nodeID(target)
		detail := fmt.Sprintf("%s on %s (%s): %s, provoked by %s", name, target.Name, plan.Window.Role, action, plan.Provoke)
		if other.Name != "" {
			detail += " of " + other.Name
		}
		detail += note
		fid := rec.startFailpoint(name, []string{target.Name}, detail)
		since := time.Now()
		fail := func(err error) error {
			release()
			rec.stopFailpoint(fid, name, []string{target.Name}, "window not reached", err)
			return err
		}
		switch plan.Provoke {
		case ProvokeRestart:
			// The failpoint must be armed in the new process before it
			// runs: kill, arm it for the next start, start.
			if err := pr.kill(ctx, target); err != nil {
				return fail(err)
			}
			err := fw.ArmAtStart(ctx, id, name, action)
			// With the error action the new process may exit at once (an
			// error at broker-before-register aborts its start-up), which
			// makes the start's network re-apply fail; heal starts it
			// again and reports a start that still fails.
			if serr := pr.start(ctx, target); err == nil && plan.Action != FPError {
				err = serr
			}
			if err != nil {
				return fail(err)
			}
		default:
			if err := fw.ArmFailpoint(ctx, id, name, action); err != nil {
				return fail(err)
			}
		}
		mu.Lock()
		cur = attempt{target: target, id: id, fid: fid, since: since, release: release}
		mu.Unlock()
		var err error
		switch plan.Provoke {
		case ProvokeBounceOther, ProvokeBounceLead:
			err = pr.bounce(ctx, other)
		case ProvokeBounceTwo:
			err = pr.bounce(ctx, other)
			if err == nil && waitReached(ctx, fw, id, name, since, reachWithin(fw)) {
				// The third broker restarts while the armed node holds in
				// the window; a window not reached in time leaves it alone.
				if rest := free(pr, without(without(fw.Nodes(), target), other)); len(rest) > 0 {
					err = pr.bounce(ctx, rest[plan.Pick%len(rest)])
				}
			}
		case ProvokeTerminate:
			// The controlled shutdown runs during the hold; a hold in the
			// window keeps the process alive until heal.
			terminated = true
			err = pr.terminate(ctx, target)
		case ProvokeShutdownRestart:
			err = pr.terminate(ctx, other)
			if err != nil {
				break
			}
			if waitReached(ctx, fw, id, name, since, reachWithin(fw)) {
				// The broker waits for the held controller's answer: kill
				// it and start it again. Its new process registers once
				// the old session has expired (a session timeout after
				// the kill, give or take ZooKeeper's tick); the hold lasts
				// twice that, so the controller's requests meet the new
				// process, registered, not a broker that is gone (the
				// controller would drop them on seeing it gone).
				killed := time.Now()
				err = pr.bounce(ctx, other)
				mu.Lock()
				holdUntil = killed.Add(2 * fw.SessionTimeout())
				mu.Unlock()
				break
			}
			// The window was not reached: the broker finishes its
			// controlled shutdown and exits; start it again, as an
			// operator's restart would.
			tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err = pr.waitExited(tctx, other)
			cancel()
			if err == nil {
				err = pr.start(ctx, other)
			}
		}
		if err != nil {
			fw.DisarmFailpoint(context.WithoutCancel(ctx), id, name)
			return fail(err)
		}
		return nil
	}
	if err := begin(ctx, target, other, ""); err != nil {
		return nil, err
	}
	stop := func(a attempt, reached bool, detail string, err error) {
		d := "window not reached" + detail
		if reached {
			d = "window reached"
		}
		rec.stopFailpoint(a.fid, name, []string{a.target.Name}, d, err)
	}

	// Watch for the window: on reaching it under sigstop, stop the whole
	// process (as PID 1 it cannot stop itself; it holds until SIGCONT).
	// The watch outlives the step's hold until reachWithin has passed:
	// a bounce reaches the controller's windows only once the bounced
	// broker's session has expired, often after a short hold has ended,
	// and disarming then would waste the fault.
	wctx, wcancel := context.WithCancel(context.WithoutCancel(ctx))
	reached, paused := time.Time{}, time.Time{}
	rearmed := false
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for {
			mu.Lock()
			a := cur
			mu.Unlock()
			ok, _ := fw.FailpointReached(wctx, a.id, name, a.since)
			if ok {
				mu.Lock()
				reached = time.Now()
				mu.Unlock()
				if plan.Action == FPSigstop {
					if pr.pause(wctx, a.target) == nil {
						mu.Lock()
						paused = time.Now()
						mu.Unlock()
					}
				}
				return
			}
			if !rearmed && plan.Window.Role == RoleController {
				if c, err := fw.Controller(wctx); err == nil && c != a.id {
					rearmed = true
					// The old process must not keep the failpoint: held
					// in it later, nobody would end its hold. A node
					// down or restarted has nothing armed; one another
					// fault keeps away keeps this attempt.
					if reachedNow, _ := fw.FailpointReached(wctx, a.id, name, a.since); reachedNow {
						continue // reached as the role moved: handled above
					}
					if derr := disarmSoon(wctx, fw, a.id, name, 2*time.Second); derr == nil || pr.down(wctx, a.target) {
						if !rearmOnController(wctx, fw, pr, plan, a.target, c, begin, func(detail string, err error) {
							a.release()
							stop(a, false, detail, err)
							mu.Lock()
							cur.ended = true
							mu.Unlock()
						}) {
							return
						}
						continue
					}
				}
			}
			mu.Lock()
			by := cur.since.Add(reachWithin(fw))
			mu.Unlock()
			if time.Now().After(by) {
				return
			}
			select {
			case <-wctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	heal := func(ctx context.Context) error {
		joinWatch(ctx, watchDone, wcancel)
		mu.Lock()
		reachedAt, p, a, until := reached, paused, cur, holdUntil
		mu.Unlock()
		if a.ended {
			return nil
		}
		defer a.release()
		target, id := a.target, a.id
		r := !reachedAt.IsZero()
		if !r {
			// One last look: the window may have been reached just now.
			r, _ = fw.FailpointReached(ctx, id, name, a.since)
		}
		var errs []error
		switch {
		case !p.IsZero():
			// A sigstop outlasts the session, so the node resumes with
			// its session gone: that is the window's point. A stopped
			// controller resumes only once another broker has taken
			// over, so its late requests meet brokers that already obey
			// a newer controller epoch (KAFKA-532's window).
			sleepUntil(ctx, p.Add(fw.SessionTimeout()+time.Second))
			if plan.Window.Role == RoleController {
				waitSuccessor(ctx, fw, id, time.Now().Add(2*fw.SessionTimeout()+2*time.Second))
			}
			errs = append(errs, pr.resume(ctx, target))
		case r && plan.Action == FPPause:
			// The held node's stale work stays in flight for a session
			// timeout at least, long enough for a bounced broker to come
			// back (a request for its previous process, KAFKA-7235).
			if !reachedAt.IsZero() {
				sleepUntil(ctx, reachedAt.Add(fw.SessionTimeout()))
			}
			sleepUntil(ctx, until)
		}
		if plan.Provoke == ProvokeRestart {
			// An error at broker-before-register aborts the start-up and
			// the process exits: start it again (a no-op if it runs).
			errs = append(errs, pr.start(ctx, target))
		}
		// An armed failpoint left behind would fire later with nobody to
		// end its hold, so disarming is retried while another fault (a
		// partition, a restart) keeps the admin port away. A terminated
		// node may have exited already, and a node another fault killed
		// meanwhile is down: neither has anything left armed (a failpoint
		// lives in the process; ArmAtStart's file is consumed by the start
		// it was written for).
		if !pr.down(ctx, target) {
			if err := disarmSoon(ctx, fw, id, name, 5*time.Second); err != nil && !terminated && !pr.down(ctx, target) {
				errs = append(errs, err)
			}
		}
		if terminated {
			// Its controlled shutdown finishes once released; then it
			// starts again, as an operator's restart would.
			tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := pr.waitExited(tctx, target)
			cancel()
			if err == nil {
				err = pr.start(ctx, target)
			}
			errs = append(errs, err)
		}
		err := errors.Join(errs...)
		stop(a, r, "", err)
		return err
	}
	return heal, nil
}

// rearmOnController moves a controller window's failpoint to the new
// controller c once the armed node old has lost the role without reaching
// it: end closes the old attempt (its history event says why), begin arms
// and provokes again. It reports whether a new attempt is in force; when
// none could be made, end or begin has recorded why.
func rearmOnController(ctx context.Context, fw FailpointWorld, pr procs, plan FPPlan, old Target, c int,
	begin func(ctx context.Context, target, other Target, note string) error, end func(detail string, err error)) bool {
	target, other, err := resolveRoleSoon(ctx, fw, pr, plan, fw.SessionTimeout()+2*time.Second)
	if err != nil {
		end(fmt.Sprintf(": %s stopped being the controller (n%d is) before reaching it, and no new plan: %v", old.Name, c, err), nil)
		return false
	}
	end(fmt.Sprintf(": %s stopped being the controller (%s is) before reaching it; re-armed on %s", old.Name, target.Name, target.Name), nil)
	return begin(ctx, target, other, fmt.Sprintf(" (re-armed: %s lost the controller role first)", old.Name)) == nil
}

// reachWithin is how long after its provocation a window may still be
// reached: a broker's death is seen once its session expires, then the
// controller handles it; a restart takes seconds more.
func reachWithin(fw FailpointWorld) time.Duration { return 4 * fw.SessionTimeout() }

// joinWatch lets a fault's watch goroutine finish on its own, or stops it
// when ctx ends, and returns once it has returned.
func joinWatch(ctx context.Context, done <-chan struct{}, stop context.CancelFunc) {
	select {
	case <-done:
	case <-ctx.Done():
	}
	stop()
	<-done
}

// waitSuccessor waits until ZooKeeper names a controller other than node,
// then one second more for its first requests to reach the brokers, or
// until deadline.
func waitSuccessor(ctx context.Context, fw FailpointWorld, node int, deadline time.Time) {
	for time.Now().Before(deadline) {
		if c, err := fw.Controller(ctx); err == nil && c >= 0 && c != node {
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
func disarmSoon(ctx context.Context, fw FailpointWorld, id int, name string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := fw.DisarmFailpoint(ctx, id, name)
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

// startFailpoint records the fault's start with the window it armed.
func (r *Recorder) startFailpoint(window string, targets []string, detail string) string {
	if r == nil {
		return ""
	}
	id := fmt.Sprintf("f%d", r.next.Add(1))
	r.write(failpointEvent(true, id, window, targets, detail, nil))
	return id
}

// stopFailpoint records its end and whether the window was reached.
func (r *Recorder) stopFailpoint(id, window string, targets []string, detail string, err error) {
	if r == nil {
		return
	}
	r.write(failpointEvent(false, id, window, targets, detail, err))
}

// FailpointWindowNames lists the windows' names, in FPWindows order.
func FailpointWindowNames() []string {
	out := make([]string, len(FPWindows))
	for i, w := range FPWindows {
		out[i] = w.Name
	}
	return slices.Clip(out)
}

func failpointEvent(start bool, id, window string, targets []string, detail string, err error) history.Event {
	kind := history.KindFaultStop
	if start {
		kind = history.KindFaultStart
	}
	f := &history.Fault{ID: id, Name: string(FailpointFault), Targets: targets, Detail: detail, Failpoint: window}
	if err != nil {
		f.Error = err.Error()
	}
	return history.Event{Kind: kind, Fault: f}
}

// GuideFailpoints biases s's failpoint steps toward the windows reached
// least often so far (reached: window → runs that reached it; a window
// absent from it counts as never reached), the coverage-guided search of
// `chaos power --guided`: each failpoint step's Pick is redrawn, from a
// generator seeded by the schedule's seed, until its plan arms one of the
// least-reached windows. Other steps are left alone. The result is an ordinary schedule:
// saved with the run, it replays exactly, whatever reached says later.
func GuideFailpoints(s Schedule, reached map[string]int) Schedule {
	least := -1
	for _, w := range FPWindows {
		if n := reached[w.Name]; least < 0 || n < least {
			least = n
		}
	}
	var targets []string
	for _, w := range FPWindows {
		if reached[w.Name] == least {
			targets = append(targets, w.Name)
		}
	}
	r := rand.New(rand.NewPCG(s.Seed, 0x6a1de))
	out := s
	out.Steps = slices.Clone(s.Steps)
	for i, st := range out.Steps {
		if st.Kind != FailpointFault || st.Opening {
			// An opening aims at its seed bug's window; guidance leaves
			// it in place.
			continue
		}
		// Each step aims at one least-reached window drawn at random, so
		// several steps spread over them instead of piling on one.
		want := targets[r.IntN(len(targets))]
		for range 1 << 16 {
			p := NewPick(r)
			if PlanFailpoint(p).Window.Name == want {
				out.Steps[i].Pick = p
				break
			}
		}
	}
	return out
}
