package main

// This file owns `chaos shrink`: replay a failing run's schedule smaller and
// smaller. The search lives in shrink/; this file runs each candidate on real
// containers (pipeline.Execute) with the original run's settings.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/pipeline"
	"github.com/zkchaos/zkchaos/rundir"
	"github.com/zkchaos/zkchaos/shrink"
)

func newShrinkCmd() *cobra.Command {
	var (
		checker string
		runsDir string
		opt     shrink.Options
	)
	check := checkers.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "shrink RUN_DIR",
		Short: "Find a smaller fault schedule that still fails the same checker, by replaying the run (Docker)",
		Long: `shrink replays a failing run's schedule.json with faults removed (delta
debugging over the steps), then with every fault present but the failure
needing none, then with holds halved, then with the run ended soon after
the last fault, keeping each change only if the same checker still fails.
Every replay uses the run's own settings (run.json) and seed, so the
workload is the same; each replay is a full run under --runs. It prints
the smallest failing schedule, its replay command and how many runs it took.

Exit status: 0 a failing schedule was kept (possibly the original), 2 bad
input (not a failing scheduled run) or harness error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			runDir := args[0]
			if err := errors.Join(checkShrinkOptions(opt), checkKnobs(check)); err != nil {
				return withCode(exitBad, err)
			}
			cfg, sched, target, err := loadShrinkable(runDir, checker)
			if err != nil {
				return withCode(exitBad, err)
			}
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			fmt.Fprintf(out, "shrinking %s: %s fails %s; budget %d replays\n", runDir, shrink.Describe(sched), target, opt.Budget)
			ranIn := map[string]string{} // schedule → the replay's run directory
			run := func(ctx context.Context, s faults.Schedule) (bool, error) {
				rc := cfg
				rc.Schedule = &s
				rc.Seed, rc.TimeLimit = s.Seed, s.Total
				rc.RunID = cluster.NewRunID()
				rc.RunDir = filepath.Join(runsDir, rc.RunID)
				rc.Progress = errOut
				o, err := pipeline.Execute(ctx, rc, pipeline.Options{Check: &check, NoVisualize: true})
				if err != nil {
					return false, err
				}
				dir := o.Dir
				ranIn[scheduleKey(s)] = dir
				r := o.Result(target)
				return r != nil && r.Verdict == checkers.Invalid, nil
			}
			opt.Log = func(format string, a ...any) { fmt.Fprintf(out, format+"\n", a...) }
			start := time.Now()
			res, err := shrink.Shrink(cmd.Context(), sched, run, opt)
			if err != nil {
				return withCode(exitBad, fmt.Errorf("shrink %s after %d replays: %w", runDir, res.Runs, err))
			}
			fmt.Fprintf(out, "smallest failing schedule: %s (from %d faults) after %d replays in %s\n",
				shrink.Describe(res.Schedule), len(sched.Steps), res.Runs, time.Since(start).Round(time.Second))
			if res.Exhausted {
				fmt.Fprintln(out, "the run budget ran out: a smaller failing schedule may exist (raise --budget)")
			}
			// Every kept schedule other than the original was run by a
			// replay whose own schedule.json is exactly it.
			replayDir := runDir
			if d, ok := ranIn[scheduleKey(res.Schedule)]; ok {
				replayDir = d
			}
			info, _ := rundir.ReadInfo(replayDir)
			fmt.Fprintf(out, "run: %s\nreplay: %s\n", replayDir, rundir.ReplayCommand(replayDir, info, true))
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&opt.Budget, "budget", 20, "most replays (each a full run)")
	f.StringVar(&checker, "checker", "", "checker that must keep failing (default: the first invalid one in RUN_DIR/results.json)")
	f.StringVar(&runsDir, "runs", "runs", "directory that receives one run directory per replay")
	f.DurationVar(&opt.MinHold, "min-hold", 500*time.Millisecond, "shortest hold a fault is cut to")
	f.IntVar(&opt.Tries, "tries", 1, "replays a candidate gets before it counts as passing (for failures that depend on timing)")
	f.DurationVar(&opt.Tail, "tail", 5*time.Second, "time a shortened run goes on after its last fault")
	check.RegisterFlags(f) // the knobs every replay is checked with
	return cmd
}

// checkShrinkOptions refuses what shrink.Shrink would replace by its
// default without a word (a zero or negative budget, tries, hold or tail).
func checkShrinkOptions(o shrink.Options) error {
	var errs []error
	for _, c := range []struct {
		flag string
		bad  bool
		val  any
	}{
		{"budget", o.Budget < 1, o.Budget},
		{"tries", o.Tries < 1, o.Tries},
		{"min-hold", o.MinHold <= 0, o.MinHold},
		{"tail", o.Tail <= 0, o.Tail},
	} {
		if c.bad {
			errs = append(errs, fmt.Errorf("--%s %v: want more than 0", c.flag, c.val))
		}
	}
	return errors.Join(errs...)
}

// loadShrinkable reads what a replay needs: the run's settings, its
// schedule and the checker that failed.
func loadShrinkable(runDir, checker string) (harness.RunConfig, faults.Schedule, string, error) {
	var cfg harness.RunConfig
	info, err := rundir.ReadInfo(runDir)
	if err == nil && info == nil {
		err = fmt.Errorf("%s: no %s", runDir, rundir.RunFile)
	}
	if err != nil {
		return cfg, faults.Schedule{}, "", fmt.Errorf("shrink: %w", err)
	}
	cfg.RunSpec = *info
	if cfg.Scenario != "" {
		return cfg, faults.Schedule{}, "", fmt.Errorf("shrink: %s is a run of scenario %s, whose driver (not a schedule) makes the faults", runDir, cfg.Scenario)
	}
	// A replay re-plans nothing, but a fault kind this build no longer
	// knows could not be injected either.
	if _, err := cfg.FaultKinds(); err != nil {
		return cfg, faults.Schedule{}, "", fmt.Errorf("shrink: run.json of %s: %w", runDir, err)
	}
	sched, err := faults.LoadSchedule(filepath.Join(runDir, rundir.ScheduleFile))
	if err != nil {
		return cfg, sched, "", fmt.Errorf("shrink: %w", err)
	}
	rep, err := rundir.ReadResults(runDir)
	if err != nil {
		return cfg, sched, "", fmt.Errorf("shrink: %w (run 'chaos check %s' first)", err, runDir)
	}
	for _, r := range rep.Results {
		if r.Verdict == checkers.Invalid && (checker == "" || r.Checker == checker) {
			return cfg, sched, r.Checker, nil
		}
	}
	if checker != "" {
		return cfg, sched, "", fmt.Errorf("shrink: --checker %s is not invalid in %s", checker, filepath.Join(runDir, rundir.ResultsFile))
	}
	return cfg, sched, "", errors.New("shrink: " + runDir + " did not fail: nothing to shrink")
}

// scheduleKey identifies a schedule by its content.
func scheduleKey(s faults.Schedule) string {
	b, _ := json.Marshal(s)
	return string(b)
}
