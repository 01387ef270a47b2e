package power

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/schedule"
)

// Executor runs one configuration through run, check and report (chaos
// power's is pipeline.Execute; tests stand in for Docker) and returns the
// run directory, also on error, with the verdicts.
type Executor func(ctx context.Context, rc harness.RunConfig, check checkers.Config) (dir string, verdict checkers.Verdict, results []checkers.Result, err error)

// Measure is a power measurement: Seeds random runs of each of Switches.
type Measure struct {
	// Config is every run's: settings (seed of the first run) and hooks.
	// A switch sets the bug switches and adds its node flags.
	Config   harness.RunConfig
	Seeds    int
	Switches []Switch
	// Guided aims each seed's failpoint faults at the windows the earlier
	// seeds of the same switch reached least (faults.GuideFailpoints).
	Guided bool
	// Cover instruments every run's node program (rundir.RunSpec.Cover)
	// and records the blocks each run reached and how many were new to
	// its switch.
	Cover bool
	// CoverageGuided (which implies Cover) searches as a fuzzer does: a
	// run that reached a block or a combination (Combinations) no earlier
	// run of its switch had puts its schedule in the switch's corpus, and
	// each later seed runs a mutation of a corpus schedule (schedule.Mutate) instead of its own draw. The
	// mutated schedule is stored with the run, so it replays exactly.
	CoverageGuided bool
	RunsDir        string
	Check          checkers.Config
	Execute        Executor
	// Lock, when set, is held around each run (a shared engine's lock), so
	// other users get turns between runs.
	Lock func(context.Context) (unlock func(), err error)
	// Log receives one line per run.
	Log io.Writer
}

// Run runs every switch's seeds and judges each run. A run the harness
// could not finish does not void the others: it is left out of runs and
// named in failed. err ends the measurement without a table: the lock not
// taken, a history that does not read, or ctx ended (with failed joined).
func (m Measure) Run(ctx context.Context) (runs []Run, failed []error, err error) {
	log := m.Log
	if log == nil {
		log = io.Discard
	}
	for _, sw := range m.Switches {
		// Per switch: which failpoint windows its runs so far reached,
		// for Guided.
		reached := map[string]int{}
		// Per switch: every block (Cover) and combination its runs
		// reached so far, and (CoverageGuided) the schedules that reached
		// new ones.
		found := newSearch()
		for i := range m.Seeds {
			rc := m.Config
			rc.Seed = m.Config.Seed + uint64(i)
			rc.Bugs = sw.Bugs
			rc.NodeFlags = append(slices.Clone(m.Config.NodeFlags), sw.NodeFlags...)
			if sw.Workload != "" {
				rc.Workload, rc.QueueTxn = sw.Workload, sw.QueueTxn
			}
			rc.RunID = cluster.NewRunID()
			rc.RunDir = filepath.Join(m.RunsDir, rc.RunID)
			rc.Cover = rc.Cover || m.Cover || m.CoverageGuided
			var parent corpusEntry
			var mutations []string
			switch {
			case m.CoverageGuided && len(found.corpus) > 0:
				pr := rand.New(rand.NewPCG(rc.Seed, 0x636f7270))
				parent = found.corpus[pr.IntN(len(found.corpus))]
				kinds, err := rc.FaultKinds()
				if err != nil {
					return runs, failed, err
				}
				var child schedule.Schedule
				child, mutations = schedule.Mutate(parent.sched, rc.Seed, schedule.Bounds{Kinds: kinds, MinHold: rc.MinHold, MaxHold: rc.MaxHold, NewPick: faults.NewPick})
				rc.Schedule = &child
			case m.Guided:
				// The guided schedule is stored with the run, so its
				// replay command repeats it exactly.
				s := faults.GuideFailpoints(rc.Plan(), reached)
				rc.Schedule = &s
			}
			check := m.Check
			check.StrictAvailability = check.StrictAvailability || sw.StrictAvailability
			unlock := func() {}
			if m.Lock != nil {
				if unlock, err = m.Lock(ctx); err != nil {
					return runs, failed, err
				}
			}
			dir, verdict, results, err := m.Execute(ctx, rc, check)
			unlock()
			if err != nil {
				failed = append(failed, fmt.Errorf("%s seed %d (run kept in %s): %w", sw.Name, rc.Seed, dir, err))
				fmt.Fprintf(log, "%s seed %d: harness error (left out of the table): %v\n", sw.Name, rc.Seed, err)
				if ctx.Err() != nil {
					return runs, failed, errors.Join(failed...)
				}
				continue
			}
			h, err := history.ReadDir(dir)
			if err != nil {
				return runs, failed, fmt.Errorf("%s seed %d: %w", sw.Name, rc.Seed, err)
			}
			r := Judge(sw, rc.Seed, dir, verdict, results, h)
			if novel := found.add(&r, rc.Cover, parent, mutations); m.CoverageGuided {
				found.keep(&r, novel)
			}
			runs = append(runs, r)
			for _, w := range r.Windows {
				reached[w]++
			}
			fmt.Fprintf(log, "%s seed %d: %s (caught %v) %s\n", sw.Name, rc.Seed, r.Verdict, r.Caught, dir)
		}
	}
	return runs, failed, nil
}

// ParseSwitches looks up each of the comma-separated names; an unknown
// one is an error listing the known.
func ParseSwitches(names string) ([]Switch, error) {
	var out []Switch
	for _, n := range strings.Split(names, ",") {
		sw, ok := Lookup(strings.TrimSpace(n))
		if !ok {
			var known []string
			for _, s := range Switches {
				known = append(known, s.Name)
			}
			return nil, fmt.Errorf("unknown %q (known: %s)", n, strings.Join(known, ", "))
		}
		out = append(out, sw)
	}
	return out, nil
}
