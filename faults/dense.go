package faults

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// PlanDense makes a seeded schedule whose faults may overlap: density is the
// mean number of faults in force at once (1: back to back on average, 2: two
// held together most of the time; below 1 leaves quiet gaps). Faults start
// at exponentially spaced times (a Poisson process with rate
// density/meanHold), each held for [minHold, maxHold], all inside total. The
// same seed gives the same schedule, so --replay still works. The openings
// (opening.go) come first, one at a time. Steps are in start order and may
// overlap, which RunOverlapping executes and Run (one at
// a time) does not.
func PlanDense(seed uint64, total, minHold, maxHold time.Duration, kinds []FaultKind, density float64) (Schedule, error) {
	return PlanDenseWith(seed, total, minHold, maxHold, kinds, density, Options{})
}

// PlanDenseWith is PlanDense with options.
func PlanDenseWith(seed uint64, total, minHold, maxHold time.Duration, kinds []FaultKind, density float64, opt Options) (Schedule, error) {
	if density <= 0 || density > 8 {
		return Schedule{}, fmt.Errorf("fault density %.2f out of range (0, 8]", density)
	}
	if minHold <= 0 || maxHold < minHold {
		return Schedule{}, fmt.Errorf("fault holds [%s, %s] invalid", minHold, maxHold)
	}
	s := Schedule{Seed: seed, Total: total, Density: density}
	if len(kinds) == 0 {
		return s, nil
	}
	r := rand.New(rand.NewPCG(seed, seed^0xde5e0de5e))
	// Kinds come from their own generator, so the failpoint weighting does
	// not move the starts and holds a seed gives.
	kr := rand.New(rand.NewPCG(seed, 0xfa17))
	mean := float64(minHold+maxHold) / 2
	// The openings come first; the Poisson starts begin after them.
	var at time.Duration
	if !opt.NoOpenings {
		var openings []Step
		openings, at = planOpenings(seed, total, kinds, opt.Transactions)
		s.Steps = openings
	}
	for {
		at += time.Duration(r.ExpFloat64() * mean / density)
		hold := minHold
		if maxHold > minHold {
			hold += time.Duration(r.Int64N(int64(maxHold - minHold)))
		}
		if at+hold > total {
			break
		}
		k := drawKind(kr, kinds)
		s.Steps = append(s.Steps, Step{At: at, Kind: k, Hold: hold, Pick: newPickFor(r, k, opt.Transactions)})
	}
	return s, nil
}
