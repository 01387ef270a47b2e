// Package schedule owns schedule.json, the fault schedule a run stores for
// replay: the fault kinds' names, Step and Schedule with their JSON shape,
// and reading and writing the file (Load refuses one no run could have
// written).
//
// It is a format package and imports nothing of the project: what a fault
// does and how a schedule is planned belong to faults, how it is executed
// to nemesis, which both use these types as their own. Readers that only
// need to know whether a stored schedule replays (reports, chaos keep)
// import this and not those, which link the Docker client.
package schedule

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
)

// FaultKind names one entry of the fault catalogue. Targets are chosen by
// role when the fault starts (the controller now, the ZooKeeper leader now),
// so a replayed schedule hits the same roles even if ids differ.
type FaultKind string

// The fault catalogue's names; what each does is faults' Fault.Doc.
const (
	PauseController      FaultKind = "pause-controller"
	PauseNode            FaultKind = "pause-node"
	KillNode             FaultKind = "kill-node"
	BounceNode           FaultKind = "bounce-node"
	BounceController     FaultKind = "bounce-controller"
	IsolateNode          FaultKind = "isolate-node"
	IsolateController    FaultKind = "isolate-controller"
	PartitionHalves      FaultKind = "partition-halves"
	IsolateZKLeader      FaultKind = "isolate-zk-leader"
	PauseZKFollower      FaultKind = "pause-zk-follower"
	SlowZKFollowerLink   FaultKind = "slow-zk-follower"
	FailpointFault       FaultKind = "failpoint"
	KillLaggingLeader    FaultKind = "kill-lagging-leader"
	FailoverOnLaggingZK  FaultKind = "failover-on-lagging-zk"
	CrashLoseUnflushed   FaultKind = "crash-lose-unflushed"
	DeleteRecreateTopic  FaultKind = "delete-recreate-topic"
	StallZKSessionServer FaultKind = "stall-zk-session-server"
)

// Kinds lists every fault kind in the catalogue's order; faults'
// catalogue has one fault for each (its tests hold the two lists equal).
var Kinds = []FaultKind{
	PauseController, PauseNode, KillNode, BounceNode, BounceController,
	IsolateNode, IsolateController, PartitionHalves, IsolateZKLeader,
	PauseZKFollower, SlowZKFollowerLink, FailpointFault, KillLaggingLeader,
	FailoverOnLaggingZK, CrashLoseUnflushed, DeleteRecreateTopic,
	StallZKSessionServer,
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
	// Opening marks a step aimed at a seed bug's window (faults'
	// openings): the schedule's openings run first, one at a time, each
	// until its window is over, and no other step starts until the quiet
	// after them.
	Opening bool `json:"opening,omitempty"`
}

// Schedule is a seeded plan of faults, one at a time with quiet gaps, the
// shape Jepsen's default nemesis has. It is stored in the run directory so a
// run can be replayed exactly.
type Schedule struct {
	Seed  uint64        `json:"seed"`
	Total time.Duration `json:"total_ns"`
	Steps []Step        `json:"steps"`
	// Skipped names the requested kinds the run's topology could not take,
	// with the reason; informational, replay ignores it.
	Skipped []string `json:"skipped,omitempty"`
	// Density is the mean number of faults in force at once of a dense
	// schedule (faults.PlanDense); its steps may overlap and are held
	// together. Zero: one fault at a time.
	Density float64 `json:"density,omitempty"`
}

// Save writes the schedule as JSON.
func (s Schedule) Save(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("save schedule: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("save schedule: %w", err)
	}
	return nil
}

// Load reads a saved schedule, for replay, and refuses one no run could
// have written.
func Load(path string) (Schedule, error) {
	var s Schedule
	b, err := os.ReadFile(path)
	if err != nil {
		return s, fmt.Errorf("load schedule: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("load schedule %s: %w", path, err)
	}
	// A file no run wrote (an empty object, another JSON document, a hand
	// edit) is refused here rather than replayed as something else.
	if s.Total <= 0 {
		return s, fmt.Errorf("load schedule %s: total_ns is %d: not a schedule a run stored (those last more than 0)", path, s.Total)
	}
	for i, st := range s.Steps {
		if !slices.Contains(Kinds, st.Kind) {
			return s, fmt.Errorf("load schedule %s: step %d: unknown fault %q", path, i+1, st.Kind)
		}
		if st.At < 0 || st.Hold <= 0 {
			return s, fmt.Errorf("load schedule %s: step %d (%s) at %s held %s: want a start of 0 or more and a positive hold", path, i+1, st.Kind, st.At, st.Hold)
		}
	}
	return s, nil
}

// MaxOverlap is the largest number of s's faults in force at one instant.
func (s Schedule) MaxOverlap() int {
	type edge struct {
		t time.Duration
		d int
	}
	var es []edge
	for _, st := range s.Steps {
		es = append(es, edge{st.At, 1}, edge{st.At + st.Hold, -1})
	}
	// Ends before starts at the same instant: a fault healed as the next
	// starts does not overlap it.
	sort.Slice(es, func(i, j int) bool { return es[i].t < es[j].t || es[i].t == es[j].t && es[i].d < es[j].d })
	n, best := 0, 0
	for _, e := range es {
		n += e.d
		best = max(best, n)
	}
	return best
}

// ParseKinds parses a comma-separated list of fault kinds ("all" for every
// kind), naming the first unknown one.
func ParseKinds(s string) ([]FaultKind, error) {
	if s == "" || s == "all" {
		return slices.Clone(Kinds), nil
	}
	var out []FaultKind
	for _, part := range strings.Split(s, ",") {
		k := FaultKind(strings.TrimSpace(part))
		if !slices.Contains(Kinds, k) {
			var known []string
			for _, c := range Kinds {
				known = append(known, string(c))
			}
			return nil, fmt.Errorf("unknown fault %q (known: %s)", k, strings.Join(known, ", "))
		}
		out = append(out, k)
	}
	return out, nil
}

// MinHold is the shortest fault hold a schedule is planned with. A schedule
// is planned by drawing holds until its total is filled, so holds of a few
// nanoseconds would plan billions of steps and run out of memory before the
// run starts; and a fault is applied and healed through Docker, which takes
// longer anyway.
const MinHold = 100 * time.Millisecond
