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
	inject injector
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
	return f.inject(ctx, n, f.kind, pick)
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
	{PauseController, "SIGSTOP the controller (GC-pause lookalike)", needNodes(1), onBroker(theController, pauseHeal)},
	{PauseNode, "SIGSTOP a random broker", needNodes(1), onBroker(aBroker, pauseHeal)},
	{KillNode, "SIGKILL a random broker; restarted at the end of the fault", needNodes(1), onBroker(aBroker, killHeal)},
	{BounceNode, "kill a random broker and restart it at once", needNodes(1), onBroker(aBroker, bounceHeal)},
	{BounceController, "kill the controller and restart it at once", needNodes(1), onBroker(theController, bounceHeal)},
	{IsolateNode, "cut a random broker from ZooKeeper and the other brokers", needNodes(1), onBroker(aBroker, isolateHeal)},
	{IsolateController, "cut the controller from ZooKeeper and the other brokers", needNodes(1), onBroker(theController, isolateHeal)},
	{PartitionHalves, "brokers split in two groups; ZooKeeper stays with the larger", needNodes(2), partitionHalves},
	{IsolateZKLeader, "cut the ZooKeeper leader from its followers", needZK(2), func(ctx context.Context, n *Nemesis, k FaultKind, _ int) (Heal, error) {
		l, rest, err := n.zkLeader(ctx, k)
		if err != nil {
			return nil, err
		}
		return n.partitionHeal(ctx, k, []Target{l}, rest)
	}},
	{PauseZKFollower, "SIGSTOP one ZooKeeper follower", needZK(2), onZKFollower(func(ctx context.Context, n *Nemesis, k FaultKind, _, f Target) (Heal, error) {
		return pauseHeal(ctx, n, k, f)
	})},
	{SlowZKFollowerLink, "slow the link from the ZooKeeper leader to one follower", needZK(2), onZKFollower(func(ctx context.Context, n *Nemesis, _ FaultKind, l, f Target) (Heal, error) {
		if err := n.SlowLink(ctx, l, f, SlowSpec{RateKbit: 64, Loss: 0.85}); err != nil {
			return nil, err
		}
		return n.HealNet, nil
	})},
	{FailpointFault, FailpointDoc, needNodes(2), func(ctx context.Context, n *Nemesis, _ FaultKind, pick int) (Heal, error) {
		return n.InjectFailpoint(ctx, pick)
	}},
	{KillLaggingLeader, KillLaggingLeaderDoc, needNodes(2), killLaggingLeader},
	{FailoverOnLaggingZK, FailoverOnLaggingZKDoc, needFailoverOnLaggingZK, failoverOnLaggingZK},
}

// injector starts a fault of kind k; pick chooses among candidates.
type injector func(ctx context.Context, n *Nemesis, k FaultKind, pick int) (Heal, error)

// chooser picks the broker a fault hits.
type chooser func(ctx context.Context, n *Nemesis, k FaultKind, pick int) (Target, error)

// aBroker picks among the brokers no other fault holds (all of them when
// every one is held): a random fault on a broker another holds would undo
// or blur it.
func aBroker(_ context.Context, n *Nemesis, k FaultKind, pick int) (Target, error) {
	return pickOne(k, free(nemesisProcs{n}, n.World.Nodes()), pick)
}

func theController(ctx context.Context, n *Nemesis, k FaultKind, _ int) (Target, error) {
	return n.controller(ctx, k)
}

// onBroker is a fault that does do to the broker choose picks.
func onBroker(choose chooser, do func(ctx context.Context, n *Nemesis, k FaultKind, t Target) (Heal, error)) injector {
	return func(ctx context.Context, n *Nemesis, k FaultKind, pick int) (Heal, error) {
		t, err := choose(ctx, n, k, pick)
		if err != nil {
			return nil, err
		}
		return do(ctx, n, k, t)
	}
}

// onZKFollower is a fault that does do to the ZooKeeper leader l and the
// follower f that pick chooses.
func onZKFollower(do func(ctx context.Context, n *Nemesis, k FaultKind, l, f Target) (Heal, error)) injector {
	return func(ctx context.Context, n *Nemesis, k FaultKind, pick int) (Heal, error) {
		l, rest, err := n.zkLeader(ctx, k)
		if err != nil {
			return nil, err
		}
		f, err := pickOne(k, rest, pick)
		if err != nil {
			return nil, err
		}
		return do(ctx, n, k, l, f)
	}
}

func partitionHalves(ctx context.Context, n *Nemesis, k FaultKind, pick int) (Heal, error) {
	nodes := n.World.Nodes()
	if len(nodes) < 2 {
		return nil, fmt.Errorf("%s: needs two brokers", k)
	}
	shuffled := slices.Clone(nodes)
	r := rand.New(rand.NewPCG(uint64(pick), 7))
	r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	small := shuffled[:len(shuffled)/2]
	big := append(slices.Clone(shuffled[len(shuffled)/2:]), n.World.ZKServers()...)
	return n.partitionHeal(ctx, k, small, big)
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

func pauseHeal(ctx context.Context, n *Nemesis, _ FaultKind, t Target) (Heal, error) {
	if err := n.PauseTarget(ctx, t); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return n.ResumeTarget(ctx, t) }, nil
}

func killHeal(ctx context.Context, n *Nemesis, _ FaultKind, t Target) (Heal, error) {
	if err := n.KillTarget(ctx, t); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return n.StartTarget(ctx, t) }, nil
}

// bounceHeal: a bounce is over when it returns; there is nothing to undo.
func bounceHeal(ctx context.Context, n *Nemesis, _ FaultKind, t Target) (Heal, error) {
	if _, err := n.BounceTarget(ctx, t); err != nil {
		return nil, err
	}
	return func(context.Context) error { return nil }, nil
}

func isolateHeal(ctx context.Context, n *Nemesis, k FaultKind, t Target) (Heal, error) {
	rest := append(without(n.World.Nodes(), t), n.World.ZKServers()...)
	return n.partitionHeal(ctx, k, []Target{t}, rest)
}

// partitionHeal: network rules are healed together (Net keeps no per-fault
// rule set), which is exact while a schedule holds one fault at a time; in
// a dense schedule the heal leaves the processes other faults hold paused
// or killed alone, so a pause held across a partition's end stays a pause.
func (n *Nemesis) partitionHeal(ctx context.Context, k FaultKind, a, b []Target) (Heal, error) {
	if err := n.PartitionTargets(ctx, string(k), a, b); err != nil {
		return nil, err
	}
	return n.HealNet, nil
}
