package nemesis

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"
)

// FaultKind names one entry of the fault catalogue. Targets are chosen by
// role when the fault starts (the controller now, the ZooKeeper leader now),
// so a replayed schedule hits the same roles even if ids differ.
type FaultKind string

// The fault catalogue.
const (
	PauseController    FaultKind = "pause-controller"   // SIGSTOP the controller (GC-pause lookalike)
	PauseNode          FaultKind = "pause-node"         // SIGSTOP a random broker
	KillNode           FaultKind = "kill-node"          // SIGKILL a random broker; restarted at the end of the fault
	BounceNode         FaultKind = "bounce-node"        // kill and restart at once
	BounceController   FaultKind = "bounce-controller"  // kill and restart the controller at once
	IsolateNode        FaultKind = "isolate-node"       // cut a broker from ZooKeeper and the other brokers
	IsolateController  FaultKind = "isolate-controller" // the same, for the controller
	PartitionHalves    FaultKind = "partition-halves"   // brokers split in two groups; ZooKeeper stays with the larger
	IsolateZKLeader    FaultKind = "isolate-zk-leader"  // cut the ZooKeeper leader from its followers
	PauseZKFollower    FaultKind = "pause-zk-follower"  // SIGSTOP one ZooKeeper follower
	SlowZKFollowerLink FaultKind = "slow-zk-follower"   // slow the link from the ZooKeeper leader to one follower
)

// Catalogue lists every fault kind.
var Catalogue = []FaultKind{
	PauseController, PauseNode, KillNode, BounceNode, BounceController, IsolateNode,
	IsolateController, PartitionHalves, IsolateZKLeader, PauseZKFollower, SlowZKFollowerLink,
}

// ParseKinds parses a comma-separated list of fault kinds ("all" for every
// kind), naming the first unknown one.
func ParseKinds(s string) ([]FaultKind, error) {
	if s == "" || s == "all" {
		return slices.Clone(Catalogue), nil
	}
	var out []FaultKind
	for _, part := range strings.Split(s, ",") {
		k := FaultKind(strings.TrimSpace(part))
		if !slices.Contains(Catalogue, k) {
			return nil, fmt.Errorf("unknown fault %q (known: %s)", k, kindList())
		}
		out = append(out, k)
	}
	return out, nil
}

func kindList() string {
	s := make([]string, len(Catalogue))
	for i, k := range Catalogue {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// Step is one planned fault: start At after the schedule begins, hold for
// Hold, then heal everything.
type Step struct {
	At   time.Duration `json:"at_ns"`
	Kind FaultKind     `json:"kind"`
	Hold time.Duration `json:"hold_ns"`
	// Pick chooses among candidates (a random broker, one follower); the
	// same Pick in a replay chooses the same position.
	Pick int `json:"pick"`
}

// Schedule is a seeded plan of faults, one at a time with quiet gaps, the
// shape Jepsen's default nemesis has. It is stored in the run directory so a
// run can be replayed exactly.
type Schedule struct {
	Seed  uint64        `json:"seed"`
	Total time.Duration `json:"total_ns"`
	Steps []Step        `json:"steps"`
}

// Plan makes the schedule for seed: faults from kinds, each held for
// [minHold, maxHold], separated by quiet gaps of [minHold/2, maxHold], all
// inside total.
func Plan(seed uint64, total, minHold, maxHold time.Duration, kinds []FaultKind) Schedule {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	between := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(r.Int64N(int64(hi-lo)))
	}
	s := Schedule{Seed: seed, Total: total}
	at := between(minHold/2, maxHold)
	for len(kinds) > 0 {
		hold := between(minHold, maxHold)
		if at+hold > total {
			break
		}
		s.Steps = append(s.Steps, Step{At: at, Kind: kinds[r.IntN(len(kinds))], Hold: hold, Pick: r.IntN(1 << 16)})
		at += hold + between(minHold/2, maxHold)
	}
	return s
}

// Save writes the schedule as JSON.
func (s Schedule) Save(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("save schedule: %w", err)
	}
	return nil
}

// LoadSchedule reads a saved schedule, for replay.
func LoadSchedule(path string) (Schedule, error) {
	var s Schedule
	b, err := os.ReadFile(path)
	if err != nil {
		return s, fmt.Errorf("load schedule: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("load schedule %s: %w", path, err)
	}
	for i, st := range s.Steps {
		if !slices.Contains(Catalogue, st.Kind) {
			return s, fmt.Errorf("load schedule %s: step %d: unknown fault %q", path, i, st.Kind)
		}
	}
	return s, nil
}

// Run executes s until it ends or ctx is cancelled, healing after every step
// and once more on the way out. A fault that cannot be applied (its target
// is gone) is recorded with its error and the schedule goes on: a nemesis
// must not end a run because the system under test is in a bad state.
func (n *Nemesis) Run(ctx context.Context, s Schedule) error {
	start := time.Now()
	defer n.Heal(context.WithoutCancel(ctx))
	for _, st := range s.Steps {
		if !sleepUntil(ctx, start.Add(st.At)) {
			return nil
		}
		err := n.Apply(ctx, st)
		if err != nil && ctx.Err() != nil {
			return nil
		}
		sleepUntil(ctx, start.Add(st.At+st.Hold))
		if err := n.Heal(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("heal after %s: %w", st.Kind, err)
		}
	}
	sleepUntil(ctx, start.Add(s.Total))
	return nil
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// Apply starts one step's fault; Heal ends it.
func (n *Nemesis) Apply(ctx context.Context, st Step) error {
	nodes, zks := n.World.Nodes(), n.World.ZKServers()
	pick := func(ts []Target) (Target, error) {
		if len(ts) == 0 {
			return Target{}, fmt.Errorf("%s: no candidates", st.Kind)
		}
		return ts[st.Pick%len(ts)], nil
	}
	controller := func() (Target, error) {
		id, err := n.World.Controller(ctx)
		if err != nil {
			return Target{}, fmt.Errorf("%s: %w", st.Kind, err)
		}
		return byName(nodes, fmt.Sprintf("n%d", id))
	}
	zkLeader := func() (Target, []Target, error) {
		id, err := n.World.ZKLeader(ctx)
		if err != nil {
			return Target{}, nil, fmt.Errorf("%s: %w", st.Kind, err)
		}
		l, err := byName(zks, fmt.Sprintf("zk%d", id))
		return l, without(zks, l), err
	}
	switch st.Kind {
	case PauseController, PauseNode:
		t, err := controller()
		if st.Kind == PauseNode {
			t, err = pick(nodes)
		}
		if err != nil {
			return err
		}
		return n.PauseTarget(ctx, t)
	case KillNode:
		t, err := pick(nodes)
		if err != nil {
			return err
		}
		return n.KillTarget(ctx, t)
	case BounceNode, BounceController:
		t, err := pick(nodes)
		if st.Kind == BounceController {
			t, err = controller()
		}
		if err != nil {
			return err
		}
		_, err = n.BounceTarget(ctx, t)
		return err
	case IsolateNode, IsolateController:
		t, err := pick(nodes)
		if st.Kind == IsolateController {
			t, err = controller()
		}
		if err != nil {
			return err
		}
		return n.PartitionTargets(ctx, string(st.Kind), []Target{t}, append(without(nodes, t), zks...))
	case PartitionHalves:
		if len(nodes) < 2 {
			return fmt.Errorf("%s: needs two brokers", st.Kind)
		}
		shuffled := slices.Clone(nodes)
		r := rand.New(rand.NewPCG(uint64(st.Pick), 7))
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		small := shuffled[:len(shuffled)/2]
		return n.PartitionTargets(ctx, string(st.Kind), small, append(slices.Clone(shuffled[len(shuffled)/2:]), zks...))
	case IsolateZKLeader:
		l, rest, err := zkLeader()
		if err != nil {
			return err
		}
		return n.PartitionTargets(ctx, string(st.Kind), []Target{l}, rest)
	case PauseZKFollower, SlowZKFollowerLink:
		l, rest, err := zkLeader()
		if err != nil {
			return err
		}
		f, err := pick(rest)
		if err != nil {
			return err
		}
		if st.Kind == PauseZKFollower {
			return n.PauseTarget(ctx, f)
		}
		return n.SlowLink(ctx, l, f, SlowSpec{RateKbit: 64, Loss: 0.85})
	}
	return fmt.Errorf("unknown fault %q", st.Kind)
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
