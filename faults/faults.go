// Package faults owns what a run breaks: the fault catalogue (one Fault per
// kind that schedule.json may name, each with what it needs of the
// topology), the composite faults built here over nemesis's primitives
// (the failpoint fault, kill-lagging-leader, failover-on-lagging-zk: plans
// that arm, provoke, watch and heal, aimed at the windows where the seed
// bugs live), the dispatch of a schedule's step to its fault (Set.Apply)
// and the planning of seeded schedules (Plan, PlanDense, the openings, the
// failpoint picks and their generations).
//
// A run's faults are a Set, built by New from the run's Nemesis and its
// capabilities (Env: partition roles, the node's failpoints, the session
// timeout, ...), checked when the Set is built: a fault never asks at
// injection time whether the world can do what it needs, and keeps its
// state (a failover in progress) in the Set, not in the package.
//
// It must not touch containers, iptables or tc itself (nemesis's
// primitives do, and record what they do), must not run a schedule's clock
// (nemesis's runners hold steps at their offsets) and never talks to the
// node program but through the capabilities it is given.
package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/schedule"
)

// FaultKind names one entry of the fault catalogue; the names and the
// schedule's on-disk shape are package schedule's.
type FaultKind = schedule.FaultKind

// Step is one planned fault (schedule.Step).
type Step = schedule.Step

// Schedule is a seeded plan of faults, stored in the run directory so a run
// can be replayed exactly (schedule.Schedule).
type Schedule = schedule.Schedule

// Target is one container a fault can hit (nemesis.Target).
type Target = nemesis.Target

// Heal undoes one injected fault (nemesis.Heal).
type Heal = nemesis.Heal

// The fault catalogue's names; what each does is its Fault's Doc.
const (
	PauseController      = schedule.PauseController
	PauseNode            = schedule.PauseNode
	KillNode             = schedule.KillNode
	BounceNode           = schedule.BounceNode
	BounceController     = schedule.BounceController
	IsolateNode          = schedule.IsolateNode
	IsolateController    = schedule.IsolateController
	PartitionHalves      = schedule.PartitionHalves
	IsolateZKLeader      = schedule.IsolateZKLeader
	PauseZKFollower      = schedule.PauseZKFollower
	SlowZKFollowerLink   = schedule.SlowZKFollowerLink
	FailpointFault       = schedule.FailpointFault
	KillLaggingLeader    = schedule.KillLaggingLeader
	FailoverOnLaggingZK  = schedule.FailoverOnLaggingZK
	CrashLoseUnflushed   = schedule.CrashLoseUnflushed
	DeleteRecreateTopic  = schedule.DeleteRecreateTopic
	StallZKSessionServer = schedule.StallZKSessionServer
)

// Topology is what decides whether a fault can apply to a run at all: the
// number of brokers and of ZooKeeper servers. Roles (who is controller, who
// leads ZooKeeper) are looked up when the fault starts, not here.
type Topology struct {
	Nodes     int
	ZKServers int
}

// Fault is one entry of the catalogue: its name, what it needs of the
// topology and how a run's Set injects it. Adding a fault is one entry in
// catalogue below; the schedule, --faults and replay pick it up from there.
type Fault struct {
	kind FaultKind
	doc  string
	// needs says what the topology must have; nil means any run.
	needs  func(Topology) error
	inject injector
}

// injector starts a fault of kind k on the run of s; pick chooses among
// candidates.
type injector func(ctx context.Context, s *Set, k FaultKind, pick int) (Heal, error)

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

// Lookup returns the fault named k.
func Lookup(k FaultKind) (Fault, bool) {
	i := slices.IndexFunc(catalogue, func(f Fault) bool { return f.kind == k })
	if i < 0 {
		return Fault{}, false
	}
	return catalogue[i], true
}

// Catalogue lists every fault kind, in the order of the fault values.
var Catalogue = func() []FaultKind {
	out := make([]FaultKind, len(catalogue))
	for i, f := range catalogue {
		out[i] = f.kind
	}
	return out
}()

// ParseKinds parses a comma-separated list of fault kinds ("all" for every
// kind), naming the first unknown one (schedule.ParseKinds: the catalogue
// and schedule.Kinds are the same list, a test says so).
func ParseKinds(s string) ([]FaultKind, error) { return schedule.ParseKinds(s) }

// Usable splits kinds into those a run of topology topo can take and the
// reasons the others cannot, for Schedule.Skipped.
func Usable(topo Topology, kinds []FaultKind) (usable []FaultKind, skipped []string) {
	for _, k := range kinds {
		f, ok := Lookup(k)
		if !ok {
			skipped = append(skipped, fmt.Sprintf("unknown fault %q", k))
			continue
		}
		if err := f.Available(topo); err != nil {
			skipped = append(skipped, err.Error())
			continue
		}
		usable = append(usable, k)
	}
	return usable, skipped
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

// catalogue is the catalogue, in the order of Catalogue (schedule.Kinds).
var catalogue = []Fault{
	{PauseController, "SIGSTOP the controller (GC-pause lookalike)", needNodes(1), onBroker(theController, pauseHeal)},
	{PauseNode, "SIGSTOP a random broker", needNodes(1), onBroker(aBroker, pauseHeal)},
	{KillNode, "SIGKILL a random broker; restarted at the end of the fault", needNodes(1), onBroker(aBroker, killHeal)},
	{BounceNode, "kill a random broker and restart it at once", needNodes(1), onBroker(aBroker, bounceHeal)},
	{BounceController, "kill the controller and restart it at once", needNodes(1), onBroker(theController, bounceHeal)},
	{IsolateNode, "cut a random broker from ZooKeeper and the other brokers", needNodes(1), onBroker(aBroker, isolateHeal)},
	{IsolateController, "cut the controller from ZooKeeper and the other brokers", needNodes(1), onBroker(theController, isolateHeal)},
	{PartitionHalves, "brokers split in two groups; ZooKeeper stays with the larger", needNodes(2), partitionHalves},
	{IsolateZKLeader, "cut the ZooKeeper leader from its followers", needZK(2), func(ctx context.Context, s *Set, k FaultKind, _ int) (Heal, error) {
		l, rest, err := zkLeader(ctx, s.n.World, k)
		if err != nil {
			return nil, err
		}
		return partitionHeal(ctx, s.n, k, []Target{l}, rest)
	}},
	{PauseZKFollower, "SIGSTOP one ZooKeeper follower", needZK(2), onZKFollower(func(ctx context.Context, n *nemesis.Nemesis, k FaultKind, _, f Target) (Heal, error) {
		return pauseHeal(ctx, n, k, f)
	})},
	{SlowZKFollowerLink, "slow the link from the ZooKeeper leader to one follower", needZK(2), onZKFollower(func(ctx context.Context, n *nemesis.Nemesis, _ FaultKind, l, f Target) (Heal, error) {
		if err := n.SlowLink(ctx, l, f, nemesis.SlowSpec{RateKbit: 64, Loss: 0.85}); err != nil {
			return nil, err
		}
		return n.HealNet, nil
	})},
	{FailpointFault, FailpointDoc, needNodes(2), func(ctx context.Context, s *Set, _ FaultKind, pick int) (Heal, error) {
		return s.failpoint.inject(ctx, pick)
	}},
	{KillLaggingLeader, KillLaggingLeaderDoc, needNodes(2), func(ctx context.Context, s *Set, _ FaultKind, pick int) (Heal, error) {
		return s.lagging.inject(ctx, pick)
	}},
	{FailoverOnLaggingZK, FailoverOnLaggingZKDoc, needFailoverOnLaggingZK, func(ctx context.Context, s *Set, _ FaultKind, pick int) (Heal, error) {
		return s.zkFailover.inject(ctx, pick)
	}},
	{CrashLoseUnflushed, CrashLoseUnflushedDoc, needNodes(1), func(ctx context.Context, s *Set, _ FaultKind, pick int) (Heal, error) {
		return s.unflushed.inject(ctx, pick)
	}},
	// The spread topic it deletes exists from 3 brokers on.
	{DeleteRecreateTopic, DeleteRecreateTopicDoc, needNodes(3), func(ctx context.Context, s *Set, _ FaultKind, pick int) (Heal, error) {
		return s.recreate.inject(ctx, pick)
	}},
	{StallZKSessionServer, StallZKSessionServerDoc, needNodes(1), func(ctx context.Context, s *Set, _ FaultKind, pick int) (Heal, error) {
		return s.stall.inject(ctx, pick)
	}},
}

// chooser picks the broker a fault hits.
type chooser func(ctx context.Context, n *nemesis.Nemesis, k FaultKind, pick int) (Target, error)

// aBroker picks among the brokers no other fault holds (all of them when
// every one is held): a random fault on a broker another holds would undo
// or blur it.
func aBroker(_ context.Context, n *nemesis.Nemesis, k FaultKind, pick int) (Target, error) {
	return pickOne(k, free(nemesisProcs{n}, n.World.Nodes()), pick)
}

func theController(ctx context.Context, n *nemesis.Nemesis, k FaultKind, _ int) (Target, error) {
	return controller(ctx, n.World, k)
}

// onBroker is a fault that does do to the broker choose picks.
func onBroker(choose chooser, do func(ctx context.Context, n *nemesis.Nemesis, k FaultKind, t Target) (Heal, error)) injector {
	return func(ctx context.Context, s *Set, k FaultKind, pick int) (Heal, error) {
		t, err := choose(ctx, s.n, k, pick)
		if err != nil {
			return nil, err
		}
		return do(ctx, s.n, k, t)
	}
}

// onZKFollower is a fault that does do to the ZooKeeper leader l and the
// follower f that pick chooses.
func onZKFollower(do func(ctx context.Context, n *nemesis.Nemesis, k FaultKind, l, f Target) (Heal, error)) injector {
	return func(ctx context.Context, s *Set, k FaultKind, pick int) (Heal, error) {
		l, rest, err := zkLeader(ctx, s.n.World, k)
		if err != nil {
			return nil, err
		}
		f, err := pickOne(k, rest, pick)
		if err != nil {
			return nil, err
		}
		return do(ctx, s.n, k, l, f)
	}
}

func partitionHalves(ctx context.Context, s *Set, k FaultKind, pick int) (Heal, error) {
	nodes := s.n.World.Nodes()
	if len(nodes) < 2 {
		return nil, fmt.Errorf("%s: needs two brokers", k)
	}
	shuffled := slices.Clone(nodes)
	r := rand.New(rand.NewPCG(uint64(pick), 7))
	r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	small := shuffled[:len(shuffled)/2]
	big := append(slices.Clone(shuffled[len(shuffled)/2:]), s.n.World.ZKServers()...)
	return partitionHeal(ctx, s.n, k, small, big)
}

func pickOne(k FaultKind, ts []Target, pick int) (Target, error) {
	if len(ts) == 0 {
		return Target{}, fmt.Errorf("%s: no candidates", k)
	}
	return ts[pick%len(ts)], nil
}

// controller is the broker /controller names now.
func controller(ctx context.Context, w nemesis.World, k FaultKind) (Target, error) {
	id, err := w.Controller(ctx)
	if err != nil {
		return Target{}, fmt.Errorf("%s: %w", k, err)
	}
	return byName(w.Nodes(), fmt.Sprintf("n%d", id))
}

// zkLeader is the ZooKeeper leader now and the servers that follow it.
func zkLeader(ctx context.Context, w nemesis.World, k FaultKind) (Target, []Target, error) {
	zks := w.ZKServers()
	id, err := w.ZKLeader(ctx)
	if err != nil {
		return Target{}, nil, fmt.Errorf("%s: %w", k, err)
	}
	l, err := byName(zks, fmt.Sprintf("zk%d", id))
	return l, without(zks, l), err
}

func pauseHeal(ctx context.Context, n *nemesis.Nemesis, _ FaultKind, t Target) (Heal, error) {
	if err := n.PauseTarget(ctx, t); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return n.ResumeTarget(ctx, t) }, nil
}

func killHeal(ctx context.Context, n *nemesis.Nemesis, _ FaultKind, t Target) (Heal, error) {
	if err := n.KillTarget(ctx, t); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return n.StartTarget(ctx, t) }, nil
}

// bounceHeal: a bounce is over when it returns; there is nothing to undo.
func bounceHeal(ctx context.Context, n *nemesis.Nemesis, _ FaultKind, t Target) (Heal, error) {
	if _, err := n.BounceTarget(ctx, t); err != nil {
		return nil, err
	}
	return func(context.Context) error { return nil }, nil
}

func isolateHeal(ctx context.Context, n *nemesis.Nemesis, k FaultKind, t Target) (Heal, error) {
	rest := append(without(n.World.Nodes(), t), n.World.ZKServers()...)
	return partitionHeal(ctx, n, k, []Target{t}, rest)
}

// partitionHeal: network rules are healed together (nemesis.Net keeps no
// per-fault rule set), which is exact while a schedule holds one fault at
// a time; in a dense schedule the heal leaves the processes other faults
// hold paused or killed alone, so a pause held across a partition's end
// stays a pause.
func partitionHeal(ctx context.Context, n *nemesis.Nemesis, k FaultKind, a, b []Target) (Heal, error) {
	if err := n.PartitionTargets(ctx, string(k), a, b); err != nil {
		return nil, err
	}
	return n.HealNet, nil
}

func byName(ts []Target, name string) (Target, error) {
	for _, t := range ts {
		if t.Name == name {
			return t, nil
		}
	}
	return Target{}, fmt.Errorf("no target named %s", name)
}

func without(ts []Target, x Target) []Target {
	var out []Target
	for _, t := range ts {
		if t.Name != x.Name {
			out = append(out, t)
		}
	}
	return out
}

func targetNames(ts []Target) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}
