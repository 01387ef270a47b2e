package nemesis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/schedule"
)

// FaultKind names one entry of the fault catalogue (schedule.FaultKind);
// the catalogue itself is package faults'.
type FaultKind = schedule.FaultKind

// Step is one planned fault (schedule.Step).
type Step = schedule.Step

// Schedule is a seeded plan of faults, stored in the run directory so a run
// can be replayed exactly (schedule.Schedule).
type Schedule = schedule.Schedule

// Injector starts one step's fault and returns what ends it. The runners
// call it at the step's offset and never look at the kind themselves:
// which fault a kind names is the caller's (package faults' Set.Apply).
type Injector func(ctx context.Context, st Step) (func(context.Context) error, error)

// RunSchedule executes s the way it was planned: a dense schedule
// (Density > 0) with its faults held together, any other one step by step.
// inject starts each step's fault.
func (n *Nemesis) RunSchedule(ctx context.Context, s Schedule, inject Injector) error {
	if s.Density <= 0 {
		return n.Run(ctx, s, inject)
	}
	defer n.Heal(context.WithoutCancel(ctx))
	err := RunOverlapping(ctx, s, inject)
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
func (n *Nemesis) Run(ctx context.Context, s Schedule, inject Injector) error {
	start := time.Now()
	defer n.Heal(context.WithoutCancel(ctx))
	// Openings first; a heal that fails ends the run as any step's would.
	steps, shift, err := runOpenings(ctx, start, s.Steps, func(ctx context.Context, st Step) (func(context.Context) error, error) {
		heal, err := inject(ctx, st)
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
		heal, err := inject(ctx, st)
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

// sleepUntil waits until t or until ctx ends, and says whether ctx is
// still live.
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
