package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/schedule"
)

// FaultKind names one entry of the fault catalogue; the names and the
// schedule's on-disk shape are package schedule's.
type FaultKind = schedule.FaultKind

// The fault catalogue's names; what each does is its Fault's Doc.
const (
	PauseController    = schedule.PauseController
	PauseNode          = schedule.PauseNode
	KillNode           = schedule.KillNode
	BounceNode         = schedule.BounceNode
	BounceController   = schedule.BounceController
	IsolateNode        = schedule.IsolateNode
	IsolateController  = schedule.IsolateController
	PartitionHalves    = schedule.PartitionHalves
	IsolateZKLeader    = schedule.IsolateZKLeader
	PauseZKFollower    = schedule.PauseZKFollower
	SlowZKFollowerLink = schedule.SlowZKFollowerLink
)

// Catalogue lists every fault kind, in the order of the fault values.
var Catalogue = func() []FaultKind {
	out := make([]FaultKind, len(faults))
	for i, f := range faults {
		out[i] = f.kind
	}
	return out
}()

// ParseKinds parses a comma-separated list of fault kinds ("all" for every
// kind), naming the first unknown one (schedule.ParseKinds: the catalogue
// and schedule.Kinds are the same list, a test says so).
func ParseKinds(s string) ([]FaultKind, error) { return schedule.ParseKinds(s) }

// Step is one planned fault (schedule.Step).
type Step = schedule.Step

// Schedule is a seeded plan of faults, stored in the run directory so a run
// can be replayed exactly (schedule.Schedule).
type Schedule = schedule.Schedule

// FailpointShare is the share of steps a schedule gives the failpoint fault
// when it may draw it beside other kinds. Drawn uniformly it would be one
// step in twelve, about one per minute of a run; a failpoint window is where
// the fencing bugs live, and the kinds that only pause or cut an idle
// process rarely reach one.
const FailpointShare = 0.4

// LaggingLeaderShare is kill-lagging-leader's share of the draws beside
// other kinds: it is the one fault that arranges the replication bugs'
// window (a leader dying after its followers fell out of the ISR), which
// no overlap of the plain kinds arranges by chance.
const LaggingLeaderShare = 0.15

// LaggingZKShare is failover-on-lagging-zk's share: a controller failover
// whose successor reads through a lagging ZooKeeper follower (KAFKA-16667's
// window) needs three things at once that independent draws almost never
// line up.
const LaggingZKShare = 0.10

// targetedShares are the kinds drawn with a fixed share beside others; the
// rest of the draws are uniform over the remaining kinds.
var targetedShares = []kindShare{{FailpointFault, FailpointShare}, {KillLaggingLeader, LaggingLeaderShare}, {FailoverOnLaggingZK, LaggingZKShare}}

type kindShare struct {
	kind  FaultKind
	share float64
}

// drawKind draws one step's fault from kinds, giving each targeted kind its
// share of the draws when other kinds are there too.
func drawKind(r *rand.Rand, kinds []FaultKind) FaultKind {
	if len(kinds) < 2 {
		return kinds[r.IntN(len(kinds))]
	}
	var rest []FaultKind
	for _, k := range kinds {
		if !slices.ContainsFunc(targetedShares, func(t kindShare) bool { return t.kind == k }) {
			rest = append(rest, k)
		}
	}
	if len(rest) == len(kinds) || len(rest) == 0 {
		return kinds[r.IntN(len(kinds))]
	}
	x := r.Float64()
	for _, t := range targetedShares {
		if !slices.Contains(kinds, t.kind) {
			continue
		}
		if x < t.share {
			return t.kind
		}
		x -= t.share
	}
	return rest[r.IntN(len(rest))]
}

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

// MinHold is the shortest fault hold Plan draws (schedule.MinHold).
const MinHold = schedule.MinHold

// Plan makes the schedule for seed on a run of topology topo: the openings
// (opening.go) the available kinds allow, then faults drawn from the kinds
// available on topo, each held for [minHold, maxHold], separated by quiet
// gaps of [minHold/2, maxHold], all inside total. Kinds the topology cannot
// take are listed in Skipped with the reason and never drawn, so a planned
// step does not fail for want of a target. Holds shorter than MinHold are
// raised to it.
func Plan(seed uint64, topo Topology, total, minHold, maxHold time.Duration, kinds []FaultKind) Schedule {
	minHold, maxHold = max(minHold, MinHold), max(maxHold, MinHold)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	between := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(r.Int64N(int64(hi-lo)))
	}
	s := Schedule{Seed: seed, Total: total}
	usable, skipped := Usable(topo, kinds)
	s.Skipped = skipped
	at := between(minHold/2, maxHold)
	openings, after := planOpenings(seed, total, usable)
	s.Steps = openings
	at = max(at, after)
	for len(usable) > 0 {
		hold := between(minHold, maxHold)
		if at+hold > total {
			break
		}
		s.Steps = append(s.Steps, Step{At: at, Kind: drawKind(r, usable), Hold: hold, Pick: NewPick(r)})
		at += hold + between(minHold/2, maxHold)
	}
	return s
}

// LoadSchedule reads a saved schedule, for replay, and refuses one no run
// could have written (schedule.Load).
func LoadSchedule(path string) (Schedule, error) { return schedule.Load(path) }

// RunSchedule executes s the way it was planned: a dense schedule
// (Density > 0) with its faults held together, any other one step by step.
func (n *Nemesis) RunSchedule(ctx context.Context, s Schedule) error {
	if s.Density <= 0 {
		return n.Run(ctx, s)
	}
	defer n.Heal(context.WithoutCancel(ctx))
	err := RunOverlapping(ctx, s, func(ctx context.Context, st Step) (func(context.Context) error, error) {
		heal, err := n.Apply(ctx, st)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error { return heal(ctx) }, nil
	})
	if ctx.Err() != nil {
		// Steps cut short by the end of the workload are not failures.
		return nil
	}
	// A step that could not be applied (its target gone while another
	// fault holds the cluster) is in the history with its error; only a
	// heal that failed ends the run.
	return healErrors(err)
}

// healErrors keeps the heal failures of a runner's joined errors.
func healErrors(err error) error {
	var healErrs []error
	for _, e := range unwrapJoined(err) {
		if strings.HasPrefix(e.Error(), "heal ") {
			healErrs = append(healErrs, e)
		}
	}
	return errors.Join(healErrs...)
}

func unwrapJoined(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// Run executes s until it ends or ctx is cancelled, healing after every step
// and once more on the way out. A fault that cannot be applied (its target
// is gone) is recorded with its error and the schedule goes on: a nemesis
// must not end a run because the system under test is in a bad state.
func (n *Nemesis) Run(ctx context.Context, s Schedule) error {
	start := time.Now()
	defer n.Heal(context.WithoutCancel(ctx))
	// Openings first; a heal that fails ends the run as any step's would.
	steps, shift, err := runOpenings(ctx, start, s.Steps, func(ctx context.Context, st Step) (func(context.Context) error, error) {
		heal, err := n.Apply(ctx, st)
		if err != nil {
			// Whatever the fault did before it failed is healed.
			return nil, errors.Join(err, n.Heal(context.WithoutCancel(ctx)))
		}
		return func(ctx context.Context) error { return errors.Join(heal(ctx), n.Heal(ctx)) }, nil
	})
	if herr := healErrors(err); herr != nil {
		return fmt.Errorf("openings: %w", herr)
	}
	for _, st := range steps {
		st.At += shift
		if !sleepUntil(ctx, start.Add(st.At)) {
			return nil
		}
		heal, err := n.Apply(ctx, st)
		if err != nil && ctx.Err() != nil {
			return nil
		}
		sleepUntil(ctx, start.Add(st.At+st.Hold))
		var herr error
		if heal != nil {
			herr = heal(context.WithoutCancel(ctx))
		}
		// Heal whatever else is in force: a fault that failed half-way
		// leaves nothing behind for the next step.
		if err := errors.Join(herr, n.Heal(context.WithoutCancel(ctx))); err != nil {
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

// Apply starts one step's fault and returns its heal. A step that cannot
// be applied (no role holder, no candidate) is recorded as a fault that
// stopped at once with its error, so the history says what the schedule
// tried; the runners go on past it.
func (n *Nemesis) Apply(ctx context.Context, st Step) (Heal, error) {
	if !st.Opening {
		if heal, ok := n.leaveStuckAlone(ctx, st); ok {
			return heal, nil
		}
	}
	heal, err := n.apply(ctx, st)
	if err != nil && ctx.Err() == nil {
		detail := "not applied"
		if st.Opening {
			detail = "opening not applied"
		}
		id := n.Rec.Start(string(st.Kind), nil, detail)
		n.Rec.Stop(id, string(st.Kind), nil, err)
	}
	return heal, err
}

// stuckAskWithin bounds leaveStuckAlone's questions.
const stuckAskWithin = time.Second

// leaveStuckAlone records a random step as left alone, and says so, while
// the controller is retrying a conditional write that keeps failing with
// BADVERSION: a fault now (a kill, a pause past the session, a cut from
// ZooKeeper) would hand the role over and end the stuck state, and liveness,
// which judges only after every fault has healed, would never see it. A
// fixed controller re-reads after its first BADVERSION, so with every fix on
// this almost never holds and the schedule runs as drawn.
func (n *Nemesis) leaveStuckAlone(ctx context.Context, st Step) (Heal, bool) {
	if _, ok := n.World.(BadVersionWorld); !ok {
		return nil, false
	}
	// The question must not hold the step up: with ZooKeeper cut off or
	// paused by a fault in force, the controller read waits; the step
	// then goes ahead as drawn.
	qctx, cancel := context.WithTimeout(ctx, stuckAskWithin)
	defer cancel()
	cid, err := n.World.Controller(qctx)
	if err != nil {
		return nil, false
	}
	bad, stuck := controllerStuck(qctx, n.World, cid)
	if !stuck {
		return nil, false
	}
	targets := []string{fmt.Sprintf("n%d", cid)}
	id := n.Rec.Start(string(st.Kind), targets, "")
	n.Rec.stopDetail(id, string(st.Kind), targets, fmt.Sprintf("left alone: controller n%d is retrying a failed conditional write (%d BADVERSION in the last %s); the step would end that before liveness can judge it", cid, bad, zkfStuckWithin), nil)
	return func(context.Context) error { return nil }, true
}

func (n *Nemesis) apply(ctx context.Context, st Step) (Heal, error) {
	f, ok := Lookup(st.Kind)
	if !ok {
		return nil, fmt.Errorf("unknown fault %q", st.Kind)
	}
	topo := Topology{Nodes: len(n.World.Nodes()), ZKServers: len(n.World.ZKServers())}
	if err := f.Available(topo); err != nil {
		return nil, err
	}
	return f.Inject(ctx, n, st.Pick)
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
