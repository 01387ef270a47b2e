package main

// This file owns how `chaos run` picks its seeds (--seeds and --shard) and
// what --dry-run prints. Sharding exists so a CI matrix can split one night's
// seed list across machines: every shard computes the same list from --seed
// and --seeds and keeps its own slice, with no coordinator between them.

import (
	"fmt"
	"io"
	"iter"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/zkchaos/zkchaos/faults"
)

// shard is one part of a seed list: Index of Count, 1-based as people (and
// CI matrices) count.
type shard struct {
	Index, Count int
}

// parseShard reads "I/N" with 1 <= I <= N. The empty string is the whole
// list (shard 1/1).
func parseShard(s string) (shard, error) {
	if s == "" {
		return shard{1, 1}, nil
	}
	i, n, ok := strings.Cut(s, "/")
	if !ok {
		return shard{}, fmt.Errorf("--shard %q: want I/N, e.g. 1/4", s)
	}
	idx, err := strconv.Atoi(strings.TrimSpace(i))
	if err != nil {
		return shard{}, fmt.Errorf("--shard %q: shard index %q is not a number", s, i)
	}
	cnt, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil {
		return shard{}, fmt.Errorf("--shard %q: shard count %q is not a number", s, n)
	}
	if cnt < 1 {
		return shard{}, fmt.Errorf("--shard %q: shard count must be at least 1", s)
	}
	if idx < 1 || idx > cnt {
		return shard{}, fmt.Errorf("--shard %q: shard index must be between 1 and %d", s, cnt)
	}
	return shard{idx, cnt}, nil
}

func (s shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// seeds returns this shard's seeds out of first, first+1, ..., first+n-1:
// the ones at positions Index-1, Index-1+Count, ... Shards interleave rather
// than take contiguous blocks so that each gets a share of every part of the
// list and their sizes differ by at most one; together the shards hold every
// seed exactly once. The seeds are made one at a time, as they are run:
// a list of --seeds 1000000000 would take 8 GB before the first run.
func (s shard) seeds(first uint64, n int) iter.Seq[uint64] {
	return func(yield func(uint64) bool) {
		for j := s.Index - 1; j < n; j += s.Count {
			if !yield(first + uint64(j)) {
				return
			}
		}
	}
}

// printSchedule writes one seed's schedule as a table a person can read
// and diff: each fault's start, hold, end and pick (the position among
// candidates that chooses a random broker or follower). Openings are
// marked [opening BUG]: their ends are planned, the run holds each until
// its window is over and moves the steps after them by any overrun.
func printSchedule(out io.Writer, s faults.Schedule, label string) {
	fmt.Fprintf(out, "seed %d%s: %d faults in %s\n", s.Seed, label, len(s.Steps), s.Total)
	if len(s.Steps) == 0 {
		fmt.Fprintln(out, "  (no faults: the workload runs undisturbed)")
		return
	}
	if s.Density > 0 {
		fmt.Fprintf(out, "  dense: %.2g faults in force on average, at most %d at once\n", s.Density, s.MaxOverlap())
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tstart\thold\tend\tfault\tpick")
	for i, st := range s.Steps {
		kind := string(st.Kind)
		if st.Kind == faults.FailpointFault {
			// The window, role and action the pick arms (the same in a
			// replay).
			p := faults.PlanFailpoint(st.Pick)
			kind += fmt.Sprintf(" %s (%s, %s, %s)", p.Window.Name, p.Window.Role, p.Action, p.Provoke)
		}
		if st.Opening {
			// Aimed at a seed bug's window; runs alone, until its window
			// is over, before the others.
			kind += " [opening"
			if bug := faults.OpeningBug(st); bug != "" {
				kind += " " + bug
			}
			kind += "]"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%d\n", i+1, st.At.Round(time.Millisecond), st.Hold.Round(time.Millisecond),
			(st.At + st.Hold).Round(time.Millisecond), kind, st.Pick)
	}
	tw.Flush()
}

// selectSeeds applies --shard to the seed list of --seed and --seeds. A
// shard needs an explicit --seed: the default seed comes from the clock, and
// shards on different machines would then split different lists.
func selectSeeds(first uint64, n int, shardFlag string, seedSet, replaying bool) (iter.Seq[uint64], shard, error) {
	sh, err := parseShard(shardFlag)
	if err != nil {
		return nil, sh, err
	}
	if shardFlag != "" {
		if replaying {
			return nil, sh, fmt.Errorf("--shard %s: --replay is a single run and cannot be sharded", sh)
		}
		if !seedSet {
			return nil, sh, fmt.Errorf("--shard %s needs an explicit --seed, so that every shard splits the same seed list", sh)
		}
	}
	if sh.Index > n {
		return nil, sh, fmt.Errorf("--shard %s: --seeds %d leaves this shard no seed (use at most %d shards)", sh, n, n)
	}
	return sh.seeds(first, n), sh, nil
}
