package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/internal/ctxsleep"
)

// Target is one container a fault can hit, named as history names it
// ("n2", "zk1").
type Target struct {
	Name      string
	Container *docker.Container
}

// Heal undoes one injected fault.
type Heal func(ctx context.Context) error

// World is what faults need to know about the cluster: its members and who
// currently holds which role. The harness implements it from the cluster and
// ZooKeeper; nemesis never asks the node program anything.
type World interface {
	Nodes() []Target
	ZKServers() []Target
	// Controller returns the broker id named by /controller.
	Controller(ctx context.Context) (int, error)
	// ZKLeader returns the id of the ZooKeeper leader.
	ZKLeader(ctx context.Context) (int, error)
	// PartitionLeader returns the leader in a partition's state znode.
	PartitionLeader(ctx context.Context, topic string, partition int32) (int, error)
}

// Nemesis applies faults to one run and remembers what it broke, so Heal can
// undo everything: paused processes are resumed, killed ones started, links
// healed. Every fault is recorded through the Recorder.
type Nemesis struct {
	World World
	Net   *Net
	Rec   *Recorder

	mu      sync.Mutex
	paused  map[*docker.Container]openFault // container → its fault
	killed  map[*docker.Container]openFault
	openNet []openFault // network faults in force, closed by Heal
	// claimed counts, per target name, the faults that hold it beyond a
	// pause or kill (a failpoint armed on it, a leader being cut off).
	claimed map[string]int
	// heldParts counts, per partition ("topic-p"), the faults that hold
	// it (kill-lagging-leader waits for its leader's ISR to shrink).
	heldParts map[string]int
	// busy counts, per container, the kills, starts, pauses and resumes
	// in flight on it: under load an engine call takes seconds (a start
	// 32s on a loaded machine), and a broker being restarted is no more
	// free for another fault than one still down.
	busy map[*docker.Container]int

	ops procOps // the engine's calls; a fake in tests
}

// procOps are the engine calls that kill, start, pause, resume and
// terminate a container, wait for it to exit, tell whether its process is
// stopped, and re-apply its network faults after a start.
type procOps interface {
	kill(ctx context.Context, c *docker.Container) error
	start(ctx context.Context, c *docker.Container) error
	pause(ctx context.Context, c *docker.Container) error
	resume(ctx context.Context, c *docker.Container) error
	reapply(ctx context.Context, c *docker.Container) error
	bounce(ctx context.Context, c *docker.Container) (time.Duration, error)
	terminate(ctx context.Context, c *docker.Container) error
	waitExited(ctx context.Context, c *docker.Container) error
	stopped(ctx context.Context, c *docker.Container) (bool, error)
}

// engineOps are procOps on the docker engine.
type engineOps struct{ net *Net }

func (engineOps) kill(ctx context.Context, c *docker.Container) error   { return Kill(ctx, c) }
func (engineOps) start(ctx context.Context, c *docker.Container) error  { return c.Start(ctx) }
func (engineOps) pause(ctx context.Context, c *docker.Container) error  { return Pause(ctx, c) }
func (engineOps) resume(ctx context.Context, c *docker.Container) error { return Resume(ctx, c) }
func (engineOps) bounce(ctx context.Context, c *docker.Container) (time.Duration, error) {
	return Bounce(ctx, c)
}
func (o engineOps) reapply(ctx context.Context, c *docker.Container) error {
	return o.net.Reapply(ctx, c)
}
func (engineOps) terminate(ctx context.Context, c *docker.Container) error {
	return c.Signal(ctx, "SIGTERM")
}
func (engineOps) waitExited(ctx context.Context, c *docker.Container) error {
	return c.WaitExited(ctx)
}
func (engineOps) stopped(ctx context.Context, c *docker.Container) (bool, error) {
	return ProcessStopped(ctx, c)
}

// engine returns the calls the Nemesis makes on containers.
func (n *Nemesis) engine() procOps {
	if n.ops != nil {
		return n.ops
	}
	return engineOps{net: n.Net}
}

// openFault remembers a recorded fault for its stop event.
type openFault struct {
	id, name string
	targets  []string
	// outcome, set by the fault that made it (NetOutcome), is the stop
	// event's detail: what the fault came to while it held.
	outcome string
	// stopped: the fault's stop is already recorded (its kill or pause
	// failed), and undoing it records nothing more.
	stopped bool
}

// NetOutcome sets the outcome the stop events of the network faults named
// name that are in force will carry: what a fault that holds a cut came to
// (kill-lagging-leader's kill, or why there was none).
func (n *Nemesis) NetOutcome(name, outcome string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i := range n.openNet {
		if n.openNet[i].name == name {
			n.openNet[i].outcome = outcome
		}
	}
}

// New returns a Nemesis for w recording into rec (which may be nil).
func New(w World, rec *Recorder) *Nemesis {
	return &Nemesis{World: w, Net: NewNet(), Rec: rec, paused: map[*docker.Container]openFault{}, killed: map[*docker.Container]openFault{},
		claimed: map[string]int{}}
}

// Claim marks t held by a fault until release: faults that pick a random
// broker leave it alone, so a dense schedule does not bounce the node a
// failpoint holds in its window (undoing it) or restart a leader another
// fault keeps down.
func (n *Nemesis) Claim(t Target) (release func()) {
	return n.count(&n.claimed, t.Name)
}

// count counts one more fault holding key in *counts until the returned
// release, which counts once however often it is called.
func (n *Nemesis) count(counts *map[string]int, key string) (release func()) {
	n.mu.Lock()
	if *counts == nil {
		*counts = map[string]int{}
	}
	(*counts)[key]++
	n.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			n.mu.Lock()
			if (*counts)[key]--; (*counts)[key] <= 0 {
				delete(*counts, key)
			}
			n.mu.Unlock()
		})
	}
}

// Holds reports whether a fault in force holds t: paused, killed (or
// stopped by an operator, StopTarget, and not started yet), being killed,
// started, paused or resumed, or claimed by a fault that needs it as it is
// (a failpoint armed on it, a leader kept down). Others acting on the
// cluster beside the nemesis (an operator's controlled shutdown in the
// control-plane workload) leave such a broker alone, as an operator leaves
// alone a machine in an incident.
func (n *Nemesis) Holds(t Target) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.claimed[t.Name] > 0 {
		return true
	}
	if t.Container == nil {
		return false
	}
	_, p := n.paused[t.Container]
	_, k := n.killed[t.Container]
	return p || k || n.busy[t.Container] > 0
}

// working counts c busy until the returned done.
func (n *Nemesis) working(c *docker.Container) (done func()) {
	n.mu.Lock()
	if n.busy == nil {
		n.busy = map[*docker.Container]int{}
	}
	n.busy[c]++
	n.mu.Unlock()
	return func() {
		n.mu.Lock()
		if n.busy[c]--; n.busy[c] <= 0 {
			delete(n.busy, c)
		}
		n.mu.Unlock()
	}
}

// HoldPartition marks a partition held by a fault until release, so the
// control-plane workload does not move its leader meanwhile: a preferred
// election or reassignment during kill-lagging-leader's cut hands the
// partition to a broker the cut controller cannot tell, and the ISR the
// fault waits for never shrinks (power KAFKA-3861 seeds 12, 13, 19).
func (n *Nemesis) HoldPartition(topic string, p int32) (release func()) {
	return n.count(&n.heldParts, fmt.Sprintf("%s-%d", topic, p))
}

// HoldsPartition reports whether a fault in force holds partition p of
// topic: one whose leadership the fault's window needs left where it is.
func (n *Nemesis) HoldsPartition(topic string, p int32) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.heldParts[fmt.Sprintf("%s-%d", topic, p)] > 0
}

// PauseTarget SIGSTOPs t until ResumeTarget or Heal.
//
// A SIGSTOP whose call failed may still have been delivered: the engine
// carries out a request whose client stopped waiting (a deadline under
// load, the schedule's end cancelling the step), and a process stopped
// with no fault held stays stopped for the rest of the run, which the
// checkers then read as the cluster failing to recover. So a failed pause
// resumes t, on a context of its own, before it reports the failure, and
// t stays held until Heal, whose resume catches a SIGSTOP that lands
// later still. One case ends the hold at once: the process was seen
// stopped before the resume (the signal landed, and a signal lands once)
// and running after it.
func (n *Nemesis) PauseTarget(ctx context.Context, t Target) error {
	defer n.working(t.Container)()
	undone := false
	f, err := n.record("pause", []string{t.Name}, "SIGSTOP", func() error {
		err := n.engine().pause(ctx, t.Container)
		if err == nil {
			return nil
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
		defer cancel()
		landed := n.seenStopped(rctx, t.Container, true)
		if rerr := n.engine().resume(rctx, t.Container); rerr != nil {
			return errors.Join(err, fmt.Errorf("resuming %s after the failed pause: %w", t.Name, rerr))
		}
		if !landed || !n.seenStopped(rctx, t.Container, false) {
			return err
		}
		undone = true
		return fmt.Errorf("%w (the SIGSTOP landed all the same; %s was resumed)", err, t.Name)
	})
	if undone {
		return err
	}
	return n.hold(n.paused, t.Container, f, err)
}

// stopSettle bounds how long seenStopped watches a process: a signal's
// call returns once the signal is sent, and a process of many threads
// (a JVM) shows stopped or running again only once every thread has.
var stopSettle = time.Second

// seenStopped reports whether c's process is seen stopped by a signal
// (want) or not stopped (!want) within stopSettle.
func (n *Nemesis) seenStopped(ctx context.Context, c *docker.Container, want bool) bool {
	return ctxsleep.Until(ctx, stopSettle, 20*time.Millisecond, func() bool {
		got, err := n.engine().stopped(ctx, c)
		return err == nil && got == want
	})
}

// undoTimeout bounds the undo of a fault whose injection failed.
const undoTimeout = 10 * time.Second

// record records the start of fault name on targets and does it; when that
// fails, the stop is recorded at once with the error.
func (n *Nemesis) record(name string, targets []string, detail string, do func() error) (openFault, error) {
	id := n.Rec.Start(name, targets, detail)
	if err := do(); err != nil {
		n.Rec.Stop(id, name, targets, err)
		return openFault{id: id, name: name, targets: targets, stopped: true}, err
	}
	return openFault{id: id, name: name, targets: targets}, nil
}

// holdNet keeps a network fault in force until Heal.
func (n *Nemesis) holdNet(f openFault, err error) error {
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.openNet = append(n.openNet, f)
	n.mu.Unlock()
	return nil
}

// hold keeps the fault f in force on c, in held (paused or killed), until
// undo or Heal. A fault whose signal failed (err, its stop already
// recorded) is held too: the engine may have carried out a request whose
// answer never came. A SIGKILL cut off by the end of the workload killed
// n1 10s after it was sent, and with nothing held no heal started it
// again; the broker stayed down through the heal phase. Its heal's start
// or resume is harmless when the signal never landed.
func (n *Nemesis) hold(held map[*docker.Container]openFault, c *docker.Container, f openFault, err error) error {
	n.mu.Lock()
	if old, ok := held[c]; !ok || !f.stopped || old.stopped {
		held[c] = f
	}
	n.mu.Unlock()
	return err
}

// undo runs do and then takes the fault held on c out of held, recording
// its stop (if one was held and not stopped already) with do's error. c
// stays held while do runs: a broker being started is not free for
// another fault, whose kill would race the start (n1 at +47s of a dense
// crash-lose-unflushed run: picked again 2s after a heal began a start
// that took 32s). When do fails, c stays held, its fault stopped, and Heal
// tries again: the start or resume may not have happened, or may happen
// later, and starting a running container or resuming a running process
// is harmless.
func (n *Nemesis) undo(held map[*docker.Container]openFault, c *docker.Container, do func() error) error {
	defer n.working(c)()
	err := do()
	n.mu.Lock()
	f, ok := held[c]
	if err == nil {
		delete(held, c)
	} else {
		held[c] = openFault{id: f.id, name: f.name, targets: f.targets, stopped: true}
	}
	n.mu.Unlock()
	if ok && !f.stopped {
		n.Rec.Stop(f.id, f.name, f.targets, err)
	}
	return err
}

// ResumeTarget SIGCONTs t.
func (n *Nemesis) ResumeTarget(ctx context.Context, t Target) error {
	return n.undo(n.paused, t.Container, func() error { return n.engine().resume(ctx, t.Container) })
}

// KillTarget SIGKILLs t; it stays down until StartTarget or Heal, and it is
// held from the moment the kill is sent.
func (n *Nemesis) KillTarget(ctx context.Context, t Target) error {
	defer n.working(t.Container)()
	f, err := n.record("kill", []string{t.Name}, "SIGKILL", func() error { return n.engine().kill(ctx, t.Container) })
	return n.hold(n.killed, t.Container, f, err)
}

// StartTarget starts a killed t again and re-applies the network faults that
// involve it (a restarted container has a fresh network namespace).
func (n *Nemesis) StartTarget(ctx context.Context, t Target) error {
	return n.undo(n.killed, t.Container, func() error {
		if err := n.engine().start(ctx, t.Container); err != nil {
			return err
		}
		return n.engine().reapply(ctx, t.Container)
	})
}

// Stopped says how an operator's stop (StopTarget) went.
type Stopped struct {
	// SignalErr holds the SIGTERM calls that failed: the first, and the
	// second when sending it again failed too.
	SignalErr error
	// Killed: the process had not exited within the wait and was killed.
	Killed bool
}

// killTimeout bounds the kill that ends an operator's stop whose process
// did not exit.
const killTimeout = 30 * time.Second

// StopTarget stops t the way an operator does beside the faults (the
// control-plane workload's controlled shutdown): SIGTERM, which makes the
// node run its controlled shutdown, then up to wait for the process to
// exit, then SIGKILL through KillTarget (recorded as a kill), as
// kafka-server-stop.sh followed by a kill -9 would. Nothing is recorded
// for the SIGTERM: the operator's workload records its operation.
//
// t is held from the signal until StartTarget or Heal starts it again, as
// a killed broker is: a fault that picked it meanwhile would race the
// shutdown or the start. Once the signal is sent the stop runs to its
// end whatever becomes of ctx, and a SIGTERM whose call failed is taken
// as possibly landed, since the engine carries out a request whose caller
// gave up (a broker stopped 0.1s after the end of a run's heal phase had
// listed it running): it is sent again, and the wait and kill that follow
// leave the process certainly down. With ctx done before anything was
// sent, nothing is, and t is not held.
func (n *Nemesis) StopTarget(ctx context.Context, t Target, wait time.Duration) (Stopped, error) {
	var how Stopped
	if err := ctx.Err(); err != nil {
		return how, err
	}
	defer n.working(t.Container)()
	bg := context.WithoutCancel(ctx)
	term := func() error {
		sctx, cancel := context.WithTimeout(bg, undoTimeout)
		defer cancel()
		return n.engine().terminate(sctx, t.Container)
	}
	if err := term(); err != nil {
		how.SignalErr = err
		if err := term(); err != nil {
			how.SignalErr = errors.Join(how.SignalErr, fmt.Errorf("sending it again: %w", err))
		}
	}
	wctx, cancel := context.WithTimeout(bg, wait)
	werr := n.engine().waitExited(wctx, t.Container)
	cancel()
	if werr != nil {
		how.Killed = true
		kctx, cancel := context.WithTimeout(bg, killTimeout)
		defer cancel()
		if err := n.KillTarget(kctx, t); err != nil {
			return how, fmt.Errorf("%s did not exit within %s of SIGTERM and could not be killed: %w", t.Name, wait, err)
		}
		return how, nil
	}
	return how, n.hold(n.killed, t.Container, openFault{name: "stop", targets: []string{t.Name}, stopped: true}, nil)
}

// BounceTarget kills and immediately restarts t, the fast restart that makes
// a broker's re-registration look like nothing happened (KAFKA-7235).
func (n *Nemesis) BounceTarget(ctx context.Context, t Target) (time.Duration, error) {
	defer n.working(t.Container)()
	id := n.Rec.Start("bounce", []string{t.Name}, "SIGKILL then start")
	gap, err := n.engine().bounce(ctx, t.Container)
	bounced := err == nil
	if bounced {
		err = n.engine().reapply(ctx, t.Container)
	}
	n.Rec.Stop(id, "bounce", []string{t.Name}, err)
	if !bounced {
		// Its kill may have landed without the start that follows it (or
		// land later, as a failed kill can): held like a failed kill, so
		// Heal starts it.
		return gap, n.hold(n.killed, t.Container, openFault{id: id, name: "bounce", targets: []string{t.Name}, stopped: true}, err)
	}
	return gap, err
}

// PartitionTargets cuts a from b in both directions until Heal.
func (n *Nemesis) PartitionTargets(ctx context.Context, name string, a, b []Target) error {
	names := append(targetNames(a), "|")
	names = append(names, targetNames(b)...)
	return n.holdNet(n.record(name, names, "", func() error { return n.Net.Partition(ctx, containers(a), containers(b)) }))
}

// CutTargets cuts a from b in both directions, as PartitionTargets does,
// and returns a heal that ends this cut alone: the links other faults cut
// stay cut, and a Heal or HealNet that came first leaves it nothing to do.
// A fault that must end its cut while other faults hold theirs (a zombie
// resumed out of ZooKeeper's reach for a moment) uses it.
func (n *Nemesis) CutTargets(ctx context.Context, name string, a, b []Target) (Heal, error) {
	names := append(targetNames(a), "|")
	names = append(names, targetNames(b)...)
	var links []Link
	f, err := n.record(name, names, "", func() error {
		var err error
		links, err = n.Net.Partitioned(ctx, containers(a), containers(b))
		return err
	})
	if err != nil {
		for _, l := range links {
			n.Net.Undrop(ctx, l)
		}
		return nil, err
	}
	if err := n.holdNet(f, nil); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		n.mu.Lock()
		open := false
		for i := range n.openNet {
			if n.openNet[i].id == f.id {
				f = n.openNet[i]
				n.openNet = append(n.openNet[:i], n.openNet[i+1:]...)
				open = true
				break
			}
		}
		n.mu.Unlock()
		if !open {
			return nil // healed with the others already
		}
		var errs []error
		for _, l := range links {
			errs = append(errs, n.Net.Undrop(ctx, l))
		}
		err := errors.Join(errs...)
		n.Rec.StopDetail(f.id, f.name, f.targets, f.outcome, err)
		return err
	}, nil
}

// DropLink loses every packet from → to (one way) until Heal.
func (n *Nemesis) DropLink(ctx context.Context, from, to Target) error {
	names := []string{from.Name, "->", to.Name}
	return n.holdNet(n.record("drop-link", names, "one-way", func() error { return n.Net.Drop(ctx, from.Container, to.Container) }))
}

// SlowLink shapes traffic from → to until Heal.
func (n *Nemesis) SlowLink(ctx context.Context, from, to Target, s SlowSpec) error {
	names := []string{from.Name, "->", to.Name}
	detail := fmt.Sprintf("rate=%dkbit loss=%.2f", s.RateKbit, s.Loss)
	return n.holdNet(n.record("slow-link", names, detail, func() error { return n.Net.Slow(ctx, from.Container, to.Container, s) }))
}

// HealNet undoes the network faults in force (every one: Net keeps no
// per-fault rule set) and leaves paused and killed processes as they are.
func (n *Nemesis) HealNet(ctx context.Context) error {
	err := n.Net.HealAll(ctx)
	n.mu.Lock()
	open := n.openNet
	n.openNet = nil
	n.mu.Unlock()
	for _, f := range open {
		n.Rec.StopDetail(f.id, f.name, f.targets, f.outcome, err)
	}
	return err
}

// Heal undoes every fault in force: network faults first (so resumed and
// restarted processes find a whole network), then resumes paused processes
// and starts killed ones. It keeps going past failures and reports them all.
func (n *Nemesis) Heal(ctx context.Context) error {
	var errs []error
	netErr := n.Net.HealAll(ctx)
	errs = append(errs, netErr)
	n.mu.Lock()
	open := n.openNet
	n.openNet = nil
	paused := n.paused
	killed := n.killed
	n.paused = map[*docker.Container]openFault{}
	n.killed = map[*docker.Container]openFault{}
	n.mu.Unlock()
	for _, f := range open {
		n.Rec.StopDetail(f.id, f.name, f.targets, f.outcome, netErr)
	}
	for c, f := range paused {
		err := n.engine().resume(ctx, c)
		if !f.stopped {
			n.Rec.Stop(f.id, f.name, f.targets, err)
		}
		errs = append(errs, err)
	}
	for c, f := range killed {
		err := n.engine().start(ctx, c)
		if !f.stopped {
			n.Rec.Stop(f.id, f.name, f.targets, err)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func targetNames(ts []Target) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

func containers(ts []Target) []*docker.Container {
	out := make([]*docker.Container, len(ts))
	for i, t := range ts {
		out[i] = t.Container
	}
	return out
}
