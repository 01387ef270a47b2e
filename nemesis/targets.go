package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zkchaos/zkchaos/docker"
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
}

// openFault remembers a recorded fault for its stop event.
type openFault struct {
	id, name string
	targets  []string
	// outcome, set by the fault that made it (NetOutcome), is the stop
	// event's detail: what the fault came to while it held.
	outcome string
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

// Holds reports whether a fault in force holds t: paused, killed, or
// claimed by a fault that needs it as it is (a failpoint armed on it, a
// leader kept down). Others acting on the cluster beside the nemesis (an
// operator's controlled shutdown in the control-plane workload) leave such
// a broker alone, as an operator leaves alone a machine in an incident.
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
	return p || k
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
// resumes t, on a context of its own, before it reports the failure.
func (n *Nemesis) PauseTarget(ctx context.Context, t Target) error {
	f, err := n.record("pause", []string{t.Name}, "SIGSTOP", func() error {
		err := pauseSignal(ctx, t.Container)
		if err == nil {
			return nil
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
		defer cancel()
		if rerr := Resume(rctx, t.Container); rerr != nil {
			return errors.Join(err, fmt.Errorf("resuming %s after the failed pause: %w", t.Name, rerr))
		}
		return err
	})
	return n.hold(n.paused, t.Container, f, err)
}

// pauseSignal is Pause; tests replace it with one whose signal lands but
// whose call fails.
var pauseSignal = Pause

// undoTimeout bounds the undo of a fault whose injection failed.
const undoTimeout = 10 * time.Second

// record records the start of fault name on targets and does it; when that
// fails, the stop is recorded at once with the error.
func (n *Nemesis) record(name string, targets []string, detail string, do func() error) (openFault, error) {
	id := n.Rec.Start(name, targets, detail)
	if err := do(); err != nil {
		n.Rec.Stop(id, name, targets, err)
		return openFault{}, err
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

// hold keeps the fault f (unless err says it was not made) in force on c,
// in held (paused or killed), until undo.
func (n *Nemesis) hold(held map[*docker.Container]openFault, c *docker.Container, f openFault, err error) error {
	if err != nil {
		return err
	}
	n.mu.Lock()
	held[c] = f
	n.mu.Unlock()
	return nil
}

// undo takes the fault held on c out of held, runs do and records the
// fault's stop (if one was held) with do's error.
func (n *Nemesis) undo(held map[*docker.Container]openFault, c *docker.Container, do func() error) error {
	n.mu.Lock()
	f, ok := held[c]
	delete(held, c)
	n.mu.Unlock()
	err := do()
	if ok {
		n.Rec.Stop(f.id, f.name, f.targets, err)
	}
	return err
}

// ResumeTarget SIGCONTs t.
func (n *Nemesis) ResumeTarget(ctx context.Context, t Target) error {
	return n.undo(n.paused, t.Container, func() error { return Resume(ctx, t.Container) })
}

// KillTarget SIGKILLs t; it stays down until StartTarget or Heal.
func (n *Nemesis) KillTarget(ctx context.Context, t Target) error {
	f, err := n.record("kill", []string{t.Name}, "SIGKILL", func() error { return Kill(ctx, t.Container) })
	return n.hold(n.killed, t.Container, f, err)
}

// StartTarget starts a killed t again and re-applies the network faults that
// involve it (a restarted container has a fresh network namespace).
func (n *Nemesis) StartTarget(ctx context.Context, t Target) error {
	return n.undo(n.killed, t.Container, func() error {
		if err := t.Container.Start(ctx); err != nil {
			return err
		}
		return n.Net.Reapply(ctx, t.Container)
	})
}

// BounceTarget kills and immediately restarts t, the fast restart that makes
// a broker's re-registration look like nothing happened (KAFKA-7235).
func (n *Nemesis) BounceTarget(ctx context.Context, t Target) (time.Duration, error) {
	id := n.Rec.Start("bounce", []string{t.Name}, "SIGKILL then start")
	gap, err := Bounce(ctx, t.Container)
	if err == nil {
		err = n.Net.Reapply(ctx, t.Container)
	}
	n.Rec.Stop(id, "bounce", []string{t.Name}, err)
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
		err := Resume(ctx, c)
		n.Rec.Stop(f.id, f.name, f.targets, err)
		errs = append(errs, err)
	}
	for c, f := range killed {
		err := c.Start(ctx)
		n.Rec.Stop(f.id, f.name, f.targets, err)
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
