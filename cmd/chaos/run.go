package main

import (
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
	"github.com/zkchaos/zkchaos/reports"
	"github.com/zkchaos/zkchaos/rundir"
)

// runOptions are the flags of `chaos run`: the run's own (rundir.RunSpec,
// what run.json records and a replay command repeats), the stored schedule
// to replay, and those of the batch.
type runOptions struct {
	spec    rundir.RunSpec
	replay  string
	seeds   int
	runsDir string
	junit   string
	check   checkers.Config
	shard   string // --shard I/N
	dryRun  bool
}

func newRunCmd() *cobra.Command { return newRunCmdWith(&runOptions{}) }

func newRunCmdWith(o *runOptions) *cobra.Command {
	o.check = checkers.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run chaos: real ZooKeeper and brokers, a Kafka client workload, a seeded fault schedule, then check",
		Long: `run starts a ZooKeeper ensemble and broker containers, drives a Kafka client
workload while the nemesis injects a seeded schedule of faults, heals, reads
every partition back, and checks the recorded history. Each seed gets its own
run directory under --runs with the history, the schedule executed (replayable
with --replay), logs and results.json. Without --seed the first seed is drawn
from the clock.

Exit status: 0 every run valid, 1 some run invalid, 2 bad input or harness
error, 3 some run unknown.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, seeds, err := o.config()
			if err != nil {
				return withCode(exitBad, err)
			}
			list, sh, err := selectSeeds(cfg.Seed, seeds, o.shard, cmd.Flags().Changed(rundir.FlagSeed), o.replay != "")
			if err != nil {
				return withCode(exitBad, err)
			}
			if o.dryRun {
				for seed := range list {
					// Ctrl-C cancels the context rather than the process.
					if err := cmd.Context().Err(); err != nil {
						return withCode(exitBad, err)
					}
					label := ""
					if o.shard != "" {
						label = " (shard " + sh.String() + ")"
					}
					rc := cfg
					rc.Seed = seed
					printSchedule(cmd.OutOrStdout(), rc.Plan(), label)
				}
				return nil
			}
			if err := harness.CheckNodeFlags(cmd.Context(), cfg); err != nil {
				return withCode(exitBad, err)
			}
			cfg.Progress = cmd.ErrOrStderr()
			overall := checkers.Valid
			var dirs []string
			for seed := range list {
				rc := cfg
				rc.Seed = seed
				rc.RunID = cluster.NewRunID()
				rc.RunDir = filepath.Join(o.runsDir, rc.RunID)
				out, err := pipeline.Execute(cmd.Context(), rc, pipeline.Options{Check: &o.check})
				if out.Results != nil {
					printSummary(cmd.OutOrStdout(), out.Results, filepath.Join(out.Dir, rundir.ResultsFile))
				}
				if err != nil {
					return withCode(exitBad, fmt.Errorf("run seed %d: %w", rc.Seed, err))
				}
				fmt.Fprintf(cmd.OutOrStdout(), "report: %s\n", out.Report)
				if out.Verdict() != checkers.Valid {
					info, _ := rundir.ReadInfo(out.Dir)
					fmt.Fprintf(cmd.OutOrStdout(), "replay: %s\n", rundir.ReplayCommand(out.Dir, info, true))
				}
				overall = checkers.Combine(overall, out.Verdict())
				dirs = append(dirs, out.Dir)
			}
			if o.junit != "" {
				var sums []reports.RunSummary
				for _, d := range dirs {
					sum, err := reports.LoadSummary(d)
					if err != nil {
						return withCode(exitBad, fmt.Errorf("junit: %w", err))
					}
					sums = append(sums, sum)
				}
				if err := writeJUnitFile(cmd.OutOrStdout(), o.junit, sums, reports.JUnitOptions{UnknownAsError: true}); err != nil {
					return withCode(exitBad, err)
				}
			}
			return verdictExit(overall)
		},
	}
	f := cmd.Flags()
	o.spec = rundir.Default()
	// A batch whose seed nobody gave still has one, in run.json.
	o.spec.Seed = uint64(time.Now().UnixNano() % 1_000_000)
	o.spec.Register(f)
	f.StringVar(&o.replay, rundir.FlagReplay, "", "replay a stored schedule.json (sets seed, time limit and fault density)")
	f.IntVar(&o.seeds, "seeds", 1, "number of runs, with seeds seed, seed+1, ...")
	f.StringVar(&o.shard, "shard", "", "run only shard I/N of the seed list (I from 1; needs --seed), for a CI matrix")
	f.BoolVar(&o.dryRun, "dry-run", false, "print the fault schedule of each seed and exit, without Docker")
	f.StringVar(&o.runsDir, "runs", "runs", "directory that receives one run directory per seed")
	o.check.RegisterFlags(f)
	f.StringVar(&o.junit, "junit", "", "write JUnit XML of every run (one testsuite per run, one testcase per checker) to this file")
	return cmd
}

// config turns the parsed flags into the configuration of the first run and
// the number of runs; errors name the flag.
func (o *runOptions) config() (harness.RunConfig, int, error) {
	cfg := harness.RunConfig{RunSpec: o.spec}
	// The history goes on for the recovery grace after the final heal, so
	// the recovery checker sees whether the cluster came back rather than
	// a history that ends first (unknown).
	cfg.Linger = o.check.RecoveryGrace + time.Second
	seeds := o.seeds
	if o.replay != "" {
		s, err := faults.LoadSchedule(o.replay)
		if err != nil {
			return cfg, 0, fmt.Errorf("--%s: %w", rundir.FlagReplay, err)
		}
		cfg.Schedule = &s
		cfg.ApplySchedule(s)
		seeds = 1
	}
	if seeds < 1 {
		return cfg, 0, fmt.Errorf("--seeds %d: want at least 1", seeds)
	}
	if err := errors.Join(cfg.Validate(), checkKnobs(o.check)); err != nil {
		return cfg, 0, err
	}
	return cfg, seeds, nil
}
