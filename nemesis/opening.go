package nemesis

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A schedule may begin with openings (steps marked Opening, planned by
// package faults): faults aimed at known bug windows, which the runners
// run one after another, each healed (its window over) before the next
// starts. The runners honour the mark; what an opening aims at is the
// planner's.

// openingTries bounds the tries of an opening a passing state refused;
// openingRetryAfter separates them (a broker restart takes about 2 s).
const (
	openingTries      = 3
	openingRetryAfter = 2 * time.Second
)

// runOpenings runs the leading opening steps of steps one after another
// from start: each starts at its offset (moved later by as much as the
// openings before it overran their plan) and is healed, its heal
// returning once its window is over, before the next starts. It returns
// the steps after the openings and how far they move: the openings'
// overrun of their planned end, so the quiet after them stays
// OpeningQuiet. A step that cannot be applied is skipped and its error
// returned; ctx ending stops it early.
func runOpenings(ctx context.Context, start time.Time, steps []Step, inject Injector) (rest []Step, shift time.Duration, err error) {
	var errs []error
	for i, st := range steps {
		if !st.Opening {
			return steps[i:], shift, errors.Join(errs...)
		}
		if !sleepUntil(ctx, start.Add(st.At+shift)) {
			return nil, shift, errors.Join(errs...)
		}
		// A step refused by a passing state (a broker the control-plane
		// workload is restarting has no network namespace to cut) is
		// tried again; the hold moves with the time the tries took.
		var (
			heal  func(context.Context) error
			ierr  error
			extra time.Duration
		)
		for try := 1; ; try++ {
			began := time.Now()
			if heal, ierr = inject(ctx, st); ierr == nil {
				break
			}
			errs = append(errs, fmt.Errorf("opening at %s (%s), try %d of %d: %w", st.At, st.Kind, try, openingTries, ierr))
			if try == openingTries || !sleepUntil(ctx, time.Now().Add(openingRetryAfter)) {
				break
			}
			extra += time.Since(began)
		}
		if ierr != nil {
			continue
		}
		sleepUntil(ctx, start.Add(st.At+shift+extra+st.Hold))
		if herr := heal(context.WithoutCancel(ctx)); herr != nil {
			errs = append(errs, fmt.Errorf("heal %s started at %s: %w", st.Kind, st.At, herr))
		}
		if ctx.Err() != nil {
			return nil, shift, errors.Join(errs...)
		}
		// The heal ran past the planned end: what follows moves with it.
		shift = max(shift, time.Since(start)-(st.At+st.Hold))
	}
	return nil, shift, errors.Join(errs...)
}
