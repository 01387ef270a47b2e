package faults

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/zkchaos/zkchaos/schedule"
)

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
	return PlanWith(seed, topo, total, minHold, maxHold, kinds, Options{})
}

// Options change how a schedule is planned.
type Options struct {
	_ struct{}
	// NoOpenings leaves the openings out: every step is drawn, from the
	// schedule's start. It measures what random (or guided) search finds
	// without being aimed at the known windows.
	NoOpenings bool
	// Transactions: the run's workload has transactional producers (the
	// queue workload with --queue-txn). Only then does the schedule open
	// with KAFKA-12671's window, and only then do its failpoint steps
	// draw windows that only a transactional produce reaches.
	Transactions bool
}

// PlanWith is Plan with options.
func PlanWith(seed uint64, topo Topology, total, minHold, maxHold time.Duration, kinds []FaultKind, opt Options) Schedule {
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
	if !opt.NoOpenings {
		openings, after := planOpenings(seed, total, usable, opt.Transactions)
		s.Steps = openings
		at = max(at, after)
	}
	for len(usable) > 0 {
		hold := between(minHold, maxHold)
		if at+hold > total {
			break
		}
		k := drawKind(r, usable)
		s.Steps = append(s.Steps, Step{At: at, Kind: k, Hold: hold, Pick: newPickFor(r, k, opt.Transactions)})
		at += hold + between(minHold/2, maxHold)
	}
	return s
}

// LoadSchedule reads a saved schedule, for replay, and refuses one no run
// could have written (schedule.Load).
func LoadSchedule(path string) (Schedule, error) { return schedule.Load(path) }
