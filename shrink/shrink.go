// Package shrink owns making a failing fault schedule smaller: delta
// debugging over a schedule's steps, then shorter holds and a shorter run,
// each candidate judged by replaying it. It decides which schedules to try
// and keeps the smallest that still fails; running a schedule (containers,
// checking) is the caller's Runner, so this package never touches Docker.
package shrink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/nemesis"
)

// Runner replays one schedule (same seed, so the same workload) and says
// whether the checker being shrunk for still fails. An error is a harness
// problem, not a verdict; it ends the shrink.
type Runner func(ctx context.Context, s nemesis.Schedule) (fails bool, err error)

// Options bound the search.
type Options struct {
	// Budget is the most replays Shrink may spend (default 20). The search
	// stops when it runs out and returns the smallest failing schedule seen.
	Budget int
	// MinHold is the shortest hold a step is cut to (default 500ms).
	MinHold time.Duration
	// Tail is how long a shortened run goes on after its last fault ends
	// (default 5s): time for the effects of the fault to show.
	Tail time.Duration
	// Tries is how many replays a candidate gets before it counts as
	// passing (default 1). A failure that depends on timing can pass a
	// replay of the very schedule that failed; more tries trade budget for
	// fewer false "passes".
	Tries int
	// Log, if set, gets one line per replay.
	Log func(format string, args ...any)
}

// Result is the outcome of a shrink.
type Result struct {
	Schedule nemesis.Schedule // smallest schedule that failed
	Runs     int              // replays spent
	// Exhausted is true when the budget ran out before the search ended,
	// so a smaller failing schedule may exist.
	Exhausted bool
}

// ErrBudget is returned inside Shrink when the budget is spent.
var errBudget = errors.New("run budget spent")

type search struct {
	ctx   context.Context
	run   Runner
	opt   Options
	runs  int
	cache map[string]bool
}

func key(s nemesis.Schedule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/", s.Total)
	for _, st := range s.Steps {
		fmt.Fprintf(&b, "%d:%s:%d:%d,", st.At, st.Kind, st.Hold, st.Pick)
	}
	return b.String()
}

// fails replays s up to Tries times, stopping at the first failure; a
// schedule is never judged twice.
func (x *search) fails(s nemesis.Schedule) (bool, error) {
	k := key(s)
	if v, ok := x.cache[k]; ok {
		return v, nil
	}
	for try := 1; try <= x.opt.Tries; try++ {
		if x.runs >= x.opt.Budget {
			return false, errBudget
		}
		if err := x.ctx.Err(); err != nil {
			return false, err
		}
		x.runs++
		v, err := x.run(x.ctx, s)
		if err != nil {
			return false, fmt.Errorf("replay %d: %w", x.runs, err)
		}
		if x.opt.Log != nil {
			verdict := "passes"
			if v {
				verdict = "still fails"
			}
			x.opt.Log("replay %d/%d (try %d/%d): %s → %s", x.runs, x.opt.Budget, try, x.opt.Tries, Describe(s), verdict)
		}
		if v {
			x.cache[k] = true
			return true, nil
		}
	}
	x.cache[k] = false
	return false, nil
}

// Shrink returns the smallest schedule it finds for which run still fails,
// starting from s, which the caller knows fails (it is not replayed). It
// removes steps with delta debugging (ddmin: try each of n parts alone, then
// each complement, doubling n when neither fails), tries the schedule with
// no faults at all, halves each remaining hold while the failure stays, and
// finally ends the run Tail after the last fault. Every replay keeps the
// seed, so the workload is the same. Steps keep their start times: moving a
// fault changes what it hits.
func Shrink(ctx context.Context, s nemesis.Schedule, run Runner, opt Options) (Result, error) {
	if opt.Budget <= 0 {
		opt.Budget = 20
	}
	if opt.Tries <= 0 {
		opt.Tries = 1
	}
	if opt.MinHold <= 0 {
		opt.MinHold = 500 * time.Millisecond
	}
	if opt.Tail <= 0 {
		opt.Tail = 5 * time.Second
	}
	x := &search{ctx: ctx, run: run, opt: opt, cache: map[string]bool{key(s): true}}
	best := s
	err := x.shrink(&best)
	res := Result{Schedule: best, Runs: x.runs}
	if errors.Is(err, errBudget) {
		res.Exhausted = true
		err = nil
	}
	return res, err
}

func (x *search) shrink(best *nemesis.Schedule) error {
	with := func(steps []nemesis.Step) nemesis.Schedule {
		c := *best
		c.Steps = steps
		return c
	}
	// 1. ddmin over the steps.
	n := 2
	for len(best.Steps) >= 2 {
		parts := split(best.Steps, n)
		reduced := false
		for _, p := range parts { // a part alone
			if ok, err := x.fails(with(p)); err != nil {
				return err
			} else if ok {
				best.Steps, n, reduced = p, 2, true
				break
			}
		}
		if !reduced && n > 2 { // the complement of a part (for n == 2 that is the other part, already tried)
			for i := range parts {
				c := complement(parts, i)
				if ok, err := x.fails(with(c)); err != nil {
					return err
				} else if ok {
					best.Steps, n, reduced = c, max(n-1, 2), true
					break
				}
			}
		}
		if !reduced {
			if n >= len(best.Steps) {
				break
			}
			n = min(2*n, len(best.Steps))
		}
	}
	// 2. No fault at all: if the run fails anyway, the faults were never
	// the cause, which is worth knowing.
	if len(best.Steps) > 0 {
		if ok, err := x.fails(with(nil)); err != nil {
			return err
		} else if ok {
			best.Steps = nil
		}
	}
	// 3. Shorter holds, halving each while the failure stays.
	for i := range best.Steps {
		for best.Steps[i].Hold/2 >= x.opt.MinHold {
			c := slices.Clone(best.Steps)
			c[i].Hold /= 2
			ok, err := x.fails(with(c))
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			best.Steps = c
		}
	}
	// 4. A shorter run: end Tail after the last fault.
	end := x.opt.Tail
	if len(best.Steps) > 0 {
		last := best.Steps[len(best.Steps)-1]
		end = last.At + last.Hold + x.opt.Tail
	}
	if end < best.Total {
		c := *best
		c.Total = end
		if ok, err := x.fails(c); err != nil {
			return err
		} else if ok {
			*best = c
		}
	}
	return nil
}

// split cuts steps into n parts of nearly equal size, in order.
func split(steps []nemesis.Step, n int) [][]nemesis.Step {
	n = min(n, len(steps))
	var out [][]nemesis.Step
	for i := 0; i < n; i++ {
		lo, hi := i*len(steps)/n, (i+1)*len(steps)/n
		out = append(out, slices.Clone(steps[lo:hi]))
	}
	return out
}

func complement(parts [][]nemesis.Step, skip int) []nemesis.Step {
	var out []nemesis.Step
	for i, p := range parts {
		if i != skip {
			out = append(out, p...)
		}
	}
	return out
}

// Describe is a one-line summary of a schedule: its faults with start and
// hold, and its length.
func Describe(s nemesis.Schedule) string {
	if len(s.Steps) == 0 {
		return fmt.Sprintf("no faults, %s", s.Total)
	}
	var parts []string
	for _, st := range s.Steps {
		parts = append(parts, fmt.Sprintf("%s@%s/%s", st.Kind, st.At.Round(time.Millisecond), st.Hold.Round(time.Millisecond)))
	}
	return fmt.Sprintf("%d faults [%s], %s", len(s.Steps), strings.Join(parts, " "), s.Total)
}
