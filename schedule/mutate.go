package schedule

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Bounds are what a mutated schedule must keep to: the kinds a step may
// have, the holds a step may take, and how a new step draws its pick
// (faults.NewPick, so a failpoint step plans over every window of today's
// table). Steps start no earlier than the end of the parent's openings.
type Bounds struct {
	Kinds            []FaultKind
	MinHold, MaxHold time.Duration
	NewPick          func(*rand.Rand) int
	_                struct{}
}

// Mutate derives a child of parent, as a fuzzer derives an input from one
// in its corpus: one to three of add a step, drop one, move one, re-target
// one (a new pick: other targets, another failpoint window) and overlap
// one with another. The openings are left as they are (they aim at known
// windows; the search is for what they do not reach). The same parent and
// seed give the same child, and the child is stored with its run, so a
// replay repeats it exactly. It returns the child and what was done, one
// line per mutation.
func Mutate(parent Schedule, seed uint64, b Bounds) (Schedule, []string) {
	r := rand.New(rand.NewPCG(seed, 0x6d757461))
	child := parent
	child.Seed = seed
	child.Steps = slices.Clone(parent.Steps)
	child.Skipped = nil
	earliest := time.Duration(0)
	for _, st := range child.Steps {
		if st.Opening {
			earliest = max(earliest, st.At+st.Hold)
		}
	}
	hold := func() time.Duration {
		if b.MaxHold <= b.MinHold {
			return b.MinHold
		}
		return b.MinHold + time.Duration(r.Int64N(int64(b.MaxHold-b.MinHold)))
	}
	// free lists the steps a mutation may touch: every step but an opening.
	free := func() []int {
		var out []int
		for i, st := range child.Steps {
			if !st.Opening {
				out = append(out, i)
			}
		}
		return out
	}
	var did []string
	for range 1 + r.IntN(3) {
		idx := free()
		op := r.IntN(5)
		if len(idx) == 0 {
			op = 0 // nothing to change yet: add
		}
		switch op {
		case 0:
			if len(b.Kinds) == 0 || child.Total-b.MinHold <= earliest {
				continue
			}
			st := Step{Kind: b.Kinds[r.IntN(len(b.Kinds))], Hold: hold(), Pick: b.NewPick(r)}
			st.At = earliest + time.Duration(r.Int64N(int64(child.Total-b.MinHold-earliest)))
			st.Hold = min(st.Hold, child.Total-st.At)
			child.Steps = append(child.Steps, st)
			did = append(did, fmt.Sprintf("add %s at %s held %s", st.Kind, st.At.Round(time.Millisecond), st.Hold.Round(time.Millisecond)))
		case 1:
			i := idx[r.IntN(len(idx))]
			did = append(did, fmt.Sprintf("drop %s at %s", child.Steps[i].Kind, child.Steps[i].At.Round(time.Millisecond)))
			child.Steps = slices.Delete(child.Steps, i, i+1)
		case 2:
			i := idx[r.IntN(len(idx))]
			st := &child.Steps[i]
			from := st.At
			shift := time.Duration(r.Int64N(int64(2*b.MaxHold+1))) - b.MaxHold
			st.At = min(max(earliest, st.At+shift), max(earliest, child.Total-st.Hold))
			did = append(did, fmt.Sprintf("move %s from %s to %s", st.Kind, from.Round(time.Millisecond), st.At.Round(time.Millisecond)))
		case 3:
			i := idx[r.IntN(len(idx))]
			child.Steps[i].Pick = b.NewPick(r)
			did = append(did, fmt.Sprintf("re-target %s at %s (pick %d)", child.Steps[i].Kind, child.Steps[i].At.Round(time.Millisecond), child.Steps[i].Pick))
		case 4:
			if len(child.Steps) < 2 {
				continue
			}
			i := idx[r.IntN(len(idx))]
			j := r.IntN(len(child.Steps) - 1)
			if j >= i {
				j++
			}
			other := child.Steps[j]
			st := &child.Steps[i]
			at := max(earliest, other.At+time.Duration(r.Int64N(int64(max(other.Hold, 1)))))
			if child.Total-at < b.MinHold {
				continue
			}
			st.At, st.Hold = at, min(st.Hold, child.Total-at)
			// Overlapping steps are held together, as a dense
			// schedule's are.
			child.Density = max(child.Density, 1)
			did = append(did, fmt.Sprintf("overlap %s with %s at %s", st.Kind, other.Kind, st.At.Round(time.Millisecond)))
		}
	}
	slices.SortStableFunc(child.Steps, func(a, b Step) int {
		switch {
		case a.Opening != b.Opening:
			if a.Opening {
				return -1
			}
			return 1
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
	return child, did
}
