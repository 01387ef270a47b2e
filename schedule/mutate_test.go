package schedule

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func testParent() Schedule {
	return Schedule{Seed: 1, Total: 90 * time.Second, Steps: []Step{
		{At: time.Second, Kind: FailpointFault, Hold: 8 * time.Second, Pick: 131515, Opening: true},
		{At: 10 * time.Second, Kind: KillLaggingLeader, Hold: 12 * time.Second, Pick: 7, Opening: true},
		{At: 40 * time.Second, Kind: PauseNode, Hold: 3 * time.Second, Pick: 11},
		{At: 60 * time.Second, Kind: BounceNode, Hold: 4 * time.Second, Pick: 12},
	}}
}

func testBounds() Bounds {
	return Bounds{Kinds: []FaultKind{PauseNode, IsolateNode, FailpointFault}, MinHold: 2 * time.Second, MaxHold: 6 * time.Second,
		NewPick: func(r *rand.Rand) int { return 2<<16 + r.IntN(1<<16) }}
}

// A child keeps the parent's openings as they were, keeps every step
// inside the schedule, draws new steps from the allowed kinds, and is the
// same child for the same seed; over many seeds every operator is used.
func TestMutate(t *testing.T) {
	parent, b := testParent(), testBounds()
	ops := map[string]bool{}
	for seed := range uint64(400) {
		child, did := Mutate(parent, seed, b)
		again, didAgain := Mutate(parent, seed, b)
		if !slices.Equal(child.Steps, again.Steps) || !slices.Equal(did, didAgain) {
			t.Fatalf("seed %d: two children", seed)
		}
		if child.Seed != seed || child.Total != parent.Total {
			t.Fatalf("seed %d: child seed %d total %s", seed, child.Seed, child.Total)
		}
		if len(did) == 0 && slices.Equal(child.Steps, parent.Steps) {
			continue
		}
		if !slices.Equal(child.Steps[:2], parent.Steps[:2]) {
			t.Fatalf("seed %d: openings changed: %+v", seed, child.Steps[:2])
		}
		for i, st := range child.Steps {
			if st.At < 0 || st.Hold <= 0 || st.At+st.Hold > child.Total {
				t.Fatalf("seed %d: step %d at %s held %s outside %s", seed, i, st.At, st.Hold, child.Total)
			}
			if !st.Opening && st.At < 22*time.Second {
				t.Fatalf("seed %d: step %d at %s before the openings end (22s)", seed, i, st.At)
			}
			if i > 0 && !child.Steps[i-1].Opening && st.At < child.Steps[i-1].At {
				t.Fatalf("seed %d: steps out of order: %+v", seed, child.Steps)
			}
		}
		for _, d := range did {
			op, _, _ := strings.Cut(d, " ")
			ops[op] = true
			if op == "add" && !strings.Contains(d, string(PauseNode)) && !strings.Contains(d, string(IsolateNode)) && !strings.Contains(d, string(FailpointFault)) {
				t.Fatalf("seed %d: added a kind outside the bounds: %s", seed, d)
			}
			if op == "overlap" && child.Density < 1 {
				t.Fatalf("seed %d: overlapping steps in a schedule of density %g", seed, child.Density)
			}
		}
	}
	for _, op := range []string{"add", "drop", "move", "re-target", "overlap"} {
		if !ops[op] {
			t.Errorf("no seed used %s", op)
		}
	}
}

// A parent that is all openings (a 60 s run) gets steps added after them,
// or none when no room is left; the openings stay.
func TestMutateOpeningsOnly(t *testing.T) {
	parent := testParent()
	parent.Steps = parent.Steps[:2]
	for _, total := range []time.Duration{90 * time.Second, 23 * time.Second} {
		parent.Total = total
		for seed := range uint64(50) {
			child, _ := Mutate(parent, seed, testBounds())
			if !slices.Equal(child.Steps[:2], parent.Steps) {
				t.Fatalf("total %s seed %d: openings changed", total, seed)
			}
			if total == 23*time.Second && len(child.Steps) != 2 {
				t.Fatalf("total %s seed %d: added %+v with no room after the openings", total, seed, child.Steps[2:])
			}
		}
	}
}
