package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
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
	openings, at := planOpenings(seed, total, kinds)
	s.Steps = openings
	for {
		at += time.Duration(r.ExpFloat64() * mean / density)
		hold := minHold
		if maxHold > minHold {
			hold += time.Duration(r.Int64N(int64(maxHold - minHold)))
		}
		if at+hold > total {
			break
		}
		s.Steps = append(s.Steps, Step{At: at, Kind: drawKind(kr, kinds), Hold: hold, Pick: NewPick(r)})
	}
	return s, nil
}

// Injector starts one step's fault and returns what ends it (the fault
// catalogue's Inject, or InjectFailpoint for the failpoint fault).
type Injector func(ctx context.Context, st Step) (func(context.Context) error, error)

// RunOverlapping executes s with faults held together: each step starts at
// its offset and is healed at its end whatever the others do. A step that
// cannot be applied is skipped (its error is in the history through the
// recorder, and in the returned error); a heal that fails is returned. When
// ctx ends, every fault in force is healed before it returns.
//
// Network faults held together share Net's rules, which are healed
// together: a schedule that overlaps two network faults ends both at the
// first one's heal.
func RunOverlapping(ctx context.Context, s Schedule, inject Injector) error {
	start := time.Now()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	add := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	// The openings run first, one at a time; the rest move with their
	// overrun.
	steps, shift, err := runOpenings(ctx, start, s.Steps, inject)
	if err != nil {
		add(err)
	}
	for _, st := range steps {
		st.At += shift
		if !sleepUntil(ctx, start.Add(st.At)) {
			break
		}
		heal, err := inject(ctx, st)
		if err != nil {
			add(fmt.Errorf("step at %s (%s): %w", st.At, st.Kind, err))
			continue
		}
		wg.Add(1)
		go func(st Step, heal func(context.Context) error) {
			defer wg.Done()
			sleepUntil(ctx, start.Add(st.At+st.Hold))
			if err := heal(context.WithoutCancel(ctx)); err != nil {
				add(fmt.Errorf("heal %s started at %s: %w", st.Kind, st.At, err))
			}
		}(st, heal)
	}
	wg.Wait()
	sleepUntil(ctx, start.Add(s.Total))
	return errors.Join(errs...)
}
