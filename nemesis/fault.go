package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
)

// Topology is what decides whether a fault can apply to a run at all: the
// number of brokers and of ZooKeeper servers. Roles (who is controller, who
// leads ZooKeeper) are looked up when the fault starts, not here.
type Topology struct {
	Nodes     int
	ZKServers int
}

// Heal undoes one injected fault.
type Heal func(ctx context.Context) error

// Fault is one entry of the catalogue: its name, what it needs of the
// topology and how it is injected. Adding a fault is one entry in faults
// below; the schedule, --faults and replay pick it up from there.
type Fault struct {
	kind FaultKind
	doc  string
	// needs says what the topology must have; nil means any run.
	needs  func(Topology) error
	inject func(ctx context.Context, n *Nemesis, pick int) (Heal, error)
}

// Name is the fault's catalogue name, as --faults and schedule.json spell it.
func (f Fault) Name() FaultKind { return f.kind }

// Doc says in a few words what the fault does.
func (f Fault) Doc() string { return f.doc }

// Available reports whether f can apply to a run of topology t; the error
// says what is missing.
func (f Fault) Available(t Topology) error {
	if f.needs == nil {
		return nil
	}
	if err := f.needs(t); err != nil {
		return fmt.Errorf("%s: %w", f.kind, err)
	}
	return nil
}

// Inject starts the fault on the running cluster and returns what ends it.
// pick chooses among candidates (a random broker, one follower); the same
// pick in a replay chooses the same position.
func (f Fault) Inject(ctx context.Context, n *Nemesis, pick int) (Heal, error) {
	return f.inject(ctx, n, pick)
}

// Lookup returns the fault named k.
func Lookup(k FaultKind) (Fault, bool) {
	i := slices.IndexFunc(faults, func(f Fault) bool { return f.kind == k })
	if i < 0 {
		return Fault{}, false
	}
	return faults[i], true
}

func needNodes(min int) func(Topology) error {
	return func(t Topology) error {
		if t.Nodes < min {
			return fmt.Errorf("needs %d brokers, the run has %d", min, t.Nodes)
		}
		return nil
	}
}

func needZK(min int) func(Topology) error {
	return func(t Topology) error {
		if t.ZKServers < min {
			return fmt.Errorf("needs %d ZooKeeper servers, the run has %d", min, t.ZKServers)
		}
		return nil
	}
}

// faults is the catalogue, in the order of Catalogue.
var faults = []Fault{
	{PauseController, "SIGSTOP the controller (GC-pause lookalike)", needNodes(1), func(ctx context.Context, n *Nemesis, _ int) (Heal, error) {
		t, err := n.controller(ctx, PauseController)
		if err != nil {
			return nil, err
		}
		return n.pauseHeal(ctx, t)
	}},
	{PauseNode, "SIGSTOP a random broker", needNodes(1), func(ctx context.Context, n *Nemesis, pick int) (Heal, error) {
		t, err := pickOne(PauseNode, n.World.Nodes(), pick)
		if err != nil {
			return nil, err
		}
		return n.pauseHeal(ctx, t)
	}},
	{KillNode, "SIGKILL a random broker; restarted at the end of the fault", needNodes(1), func(ctx context.Context, n *Nemesis, pick int) (Heal, error) {
		t, err := pickOne(KillNode, n.World.Nodes(), pick)
		if err != nil {
			return nil, err
		}
		if err := n.KillTarget(ctx, t); err != nil {
			return nil, err
		}
		return func(ctx context.Context) error { return n.StartTarget(ctx, t) }, nil
	}},
	{BounceNode, "kill a random broker and restart it at once", needNodes(1), func(ctx context.Context, n *Nemesis, pick int) (Heal, error) {
		t, err := pickOne(BounceNode, n.World.Nodes(), pick)
		if err != nil {
			return nil, err
		}
		return n.bounceHeal(ctx, t)
	}},
	{BounceController, "kill the controller and restart it at once", needNodes(1), func(ctx context.Context, n *Nemesis, _ int) (Heal, error) {
		t, err := n.controller(ctx, BounceController)
		if err != nil {
			return nil, err
		}
		return n.bounceHeal(ctx, t)
	}},
	{IsolateNode, "cut a random broker from ZooKeeper and the other brokers", needNodes(1), func(ctx context.Context, n *Nemesis, pick int) (Heal, error) {
		t, err := pickOne(IsolateNode, n.World.Nodes(), pick)
		if err != nil {
			return nil, err
		}
		return n.isolateHeal(ctx, IsolateNode, t)
	}},
	{IsolateController, "cut the controller from ZooKeeper and the other brokers", needNodes(1), func(ctx context.Context, n *Nemesis, _ int) (Heal, error) {
		t, err := n.controller(ctx, IsolateController)
		if err != nil {
			return nil, err
		}
		return n.isolateHeal(ctx, IsolateController, t)
	}},
	{PartitionHalves, "brokers split in two groups; ZooKeeper stays with the larger", needNodes(2), func(ctx context.Context, n *Nemesis, pick int) (Heal, error) {
		nodes := n.World.Nodes()
		if len(nodes) < 2 {
			return nil, fmt.Errorf("%s: needs two brokers", PartitionHalves)
		}
		shuffled := slices.Clone(nodes)
		r := rand.New(rand.NewPCG(uint64(pick), 7))
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		small := shuffled[:len(shuffled)/2]
		big := append(slices.Clone(shuffled[len(shuffled)/2:]), n.World.ZKServers()...)
		return n.partitionHeal(ctx, PartitionHalves, small, big)
	}},
	{IsolateZKLeader, "cut the ZooKeeper leader from its followers", needZK(2), func(ctx context.Context, n *Nemesis, _ int) (Heal, error) {
		l, rest, err := n.zkLeader(ctx, IsolateZKLeader)
		if err != nil {
			return nil, err
		}
		return n.partitionHeal(ctx, IsolateZKLeader, []Target{l}, rest)
	}},
	{PauseZKFollower, "SIGSTOP one ZooKeeper follower", needZK(2), func(ctx context.Context, n *Nemesis, pick int) (Heal, error) {
		_, rest, err := n.zkLeader(ctx, PauseZKFollower)
		if err != nil {
			return nil, err
		}
		f, err := pickOne(PauseZKFollower, rest, pick)
		if err != nil {
			return nil, err
		}
		return n.pauseHeal(ctx, f)
	}},
	{SlowZKFollowerLink, "slow the link from the ZooKeeper leader to one follower", needZK(2), func(ctx context.Context, n *Nemesis, pick int) (Heal, error) {
		l, rest, err := n.zkLeader(ctx, SlowZKFollowerLink)
		if err != nil {
			return nil, err
		}
		f, err := pickOne(SlowZKFollowerLink, rest, pick)
		if err != nil {
			return nil, err
		}
		if err := n.SlowLink(ctx, l, f, SlowSpec{RateKbit: 64, Loss: 0.85}); err != nil {
			return nil, err
		}
		return n.Heal, nil
	}},
}

func pickOne(k FaultKind, ts []Target, pick int) (Target, error) {
	if len(ts) == 0 {
		return Target{}, fmt.Errorf("%s: no candidates", k)
	}
	return ts[pick%len(ts)], nil
}

// controller is the broker /controller names now.
func (n *Nemesis) controller(ctx context.Context, k FaultKind) (Target, error) {
	id, err := n.World.Controller(ctx)
	if err != nil {
		return Target{}, fmt.Errorf("%s: %w", k, err)
	}
	return byName(n.World.Nodes(), fmt.Sprintf("n%d", id))
}

// zkLeader is the ZooKeeper leader now and the servers that follow it.
func (n *Nemesis) zkLeader(ctx context.Context, k FaultKind) (Target, []Target, error) {
	zks := n.World.ZKServers()
	id, err := n.World.ZKLeader(ctx)
	if err != nil {
		return Target{}, nil, fmt.Errorf("%s: %w", k, err)
	}
	l, err := byName(zks, fmt.Sprintf("zk%d", id))
	return l, without(zks, l), err
}

func (n *Nemesis) pauseHeal(ctx context.Context, t Target) (Heal, error) {
	if err := n.PauseTarget(ctx, t); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return n.ResumeTarget(ctx, t) }, nil
}

// bounceHeal: a bounce is over when it returns; there is nothing to undo.
func (n *Nemesis) bounceHeal(ctx context.Context, t Target) (Heal, error) {
	if _, err := n.BounceTarget(ctx, t); err != nil {
		return nil, err
	}
	return func(context.Context) error { return nil }, nil
}

func (n *Nemesis) isolateHeal(ctx context.Context, k FaultKind, t Target) (Heal, error) {
	rest := append(without(n.World.Nodes(), t), n.World.ZKServers()...)
	return n.partitionHeal(ctx, k, []Target{t}, rest)
}

// partitionHeal: network rules are healed together (Net keeps no per-fault
// rule set), which is exact while a schedule holds one fault at a time.
func (n *Nemesis) partitionHeal(ctx context.Context, k FaultKind, a, b []Target) (Heal, error) {
	if err := n.PartitionTargets(ctx, string(k), a, b); err != nil {
		return nil, err
	}
	return n.Heal, nil
}
