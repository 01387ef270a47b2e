package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

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
