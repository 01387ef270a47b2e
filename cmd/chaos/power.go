package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/pipeline"
	"github.com/zkchaos/zkchaos/power"
	"github.com/zkchaos/zkchaos/rundir"
)

// powerExecute runs one configuration through the pipeline (run, check,
// report) like `chaos run`; a variable so tests can stand in for Docker.
var powerExecute power.Executor = func(ctx context.Context, rc harness.RunConfig, check checkers.Config) (string, checkers.Verdict, []checkers.Result, error) {
	out, err := pipeline.Execute(ctx, rc, pipeline.Options{Check: &check, NoVisualize: true})
	if err != nil {
		return out.Dir, "", nil, err
	}
	return out.Dir, out.Results.Verdict, out.Results.Results, nil
}

// powerPreflight asks the engine once before the first seed: without it an
// unreachable engine fails every seed in turn, each leaving a run dir. A
// variable for the same reason as powerExecute.
var powerPreflight = func(ctx context.Context) error {
	eng, err := docker.Connect(ctx)
	if err != nil {
		return err
	}
	return eng.Close()
}

func newPowerCmd() *cobra.Command {
	var (
		cfg      harness.RunConfig
		seeds    int
		switches string
		runsDir  string
		jsonOut  string
		guided   bool
		covGuide bool
		lockPath string
		from     []string
	)
	check := checkers.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "power",
		Short: "Measure what the nemesis can find: N random seeds per bug switch and with every fix on, no scenario driver",
		Long: `power runs --seeds random runs (no scenario driver) for each bug switch and
with every fix on, and prints, per switch, how many seeds the checker naming
its harm caught, which checker, and the median and worst time from the start
of the workload to the first violating event; the every-fix-on row counts
false positives. It also names the failpoint windows no run reached and, per
switch and fence, in how many runs a stale input reached the fence and in how
many it refused one, with the counts summed, naming the fences no run tested
(a row's verdicts say nothing about them). The same
table goes to power.json in --runs (or --json). With --guided each seed's
failpoint faults aim at the windows the earlier seeds of the same switch
reached least, so a switch's seeds together cover every window sooner.
Every row also counts the distinct combinations its runs' faults reached: fault
x role of its target when it struck (controller, leader, follower, ZooKeeper
leader or follower, other) x failpoint window reached x class of the target's
partitions (deleting, offline, leader outside the ISR, reassigning, ISR
shrunk, ISR full), read off each run's history; power.json lists each run's.
With --cover the node program is built with coverage instrumentation and
the table says how many of its blocks the runs of each switch reached
together and the median run alone; with --coverage-guided the search is a
fuzzer's: a run that reached a block or a combination no earlier run of its
switch had joins the corpus (power.json says which), and each later seed
runs a mutation of a corpus schedule (steps added, dropped, moved, re-targeted
or overlapped after the openings), stored with the run so it replays exactly.
With --openings=false no schedule begins with the openings aimed at the seed
bugs' windows: the table then says what random (or guided) search finds alone.

Exit status: 0 table written, 2 bad input or harness error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(from) > 0 {
				// A table from runs already made: per-seed invocations
				// (each holding the Docker lock for one run) or batches
				// on several days fold into one table.
				runs, infos, err := power.JudgeStored(cmd.ErrOrStderr(), from)
				if err != nil {
					return withCode(exitBad, fmt.Errorf("--from: %w", err))
				}
				if !cmd.Flags().Changed("runs") {
					runsDir = from[0]
				}
				rep := power.Report{From: from}
				power.FoldStoredSettings(&rep, runs, infos)
				if err := power.Write(cmd.OutOrStdout(), runs, runsDir, jsonOut, rep); err != nil {
					return withCode(exitBad, err)
				}
				return nil
			}
			if seeds < 1 {
				return withCode(exitBad, fmt.Errorf("--seeds %d: want at least 1", seeds))
			}
			if err := errors.Join(cfg.Validate(), checkKnobs(check)); err != nil {
				return withCode(exitBad, err)
			}
			sws, err := power.ParseSwitches(switches)
			if err != nil {
				return withCode(exitBad, fmt.Errorf("--switches: %w", err))
			}
			if err := powerPreflight(cmd.Context()); err != nil {
				return withCode(exitBad, err)
			}
			cfg.Progress = io.Discard
			// The cluster settles past the graces, so a partition left
			// offline or a controller stuck retrying is seen stuck rather
			// than cut off by the end of the history (unknown).
			cfg.Linger = max(check.LivenessGrace, check.OfflineGrace, check.RecoveryGrace) + 5*time.Second
			m := power.Measure{Config: cfg, Seeds: seeds, Switches: sws, Guided: guided, CoverageGuided: covGuide, RunsDir: runsDir, Check: check,
				Execute: powerExecute, Log: cmd.ErrOrStderr(),
				Lock: func(ctx context.Context) (func(), error) { return lockFile(ctx, lockPath) }}
			runs, failed, err := m.Run(cmd.Context())
			if err != nil {
				return withCode(exitBad, err)
			}
			if err := power.Write(cmd.OutOrStdout(), runs, runsDir, jsonOut, power.Report{Seeds: seeds, FirstSeed: cfg.Seed, TimeLimit: cfg.TimeLimit.String(),
				Faults: cfg.Faults, Density: cfg.Density, Admin: cfg.Admin, Guided: guided, CoverageGuided: covGuide, Cover: cfg.Cover || covGuide, NoOpenings: cfg.NoOpenings,
				SpreadTopic: cfg.SpreadTopic != "", Workload: cfg.Workload, QueueTxn: cfg.QueueTxn}); err != nil {
				return withCode(exitBad, err)
			}
			if len(failed) > 0 {
				return withCode(exitBad, fmt.Errorf("%d runs the harness could not finish: %w", len(failed), errors.Join(failed...)))
			}
			return nil
		},
	}
	f := cmd.Flags()
	var names []string
	for _, s := range power.Switches {
		names = append(names, s.Name)
	}
	f.IntVar(&seeds, "seeds", 20, "random runs per switch")
	// A power table's runs: every switch runs seed, seed+1, ...; longer and
	// denser than a `chaos run`, so each seed has more chances to reach a
	// window. The switch sets bug switches and node flags, and the brokers
	// and clients are a `chaos run`'s.
	cfg.RunSpec = rundir.Default()
	cfg.Seed, cfg.TimeLimit, cfg.Density = 1, 60*time.Second, 1.5
	cfg.Register(f, rundir.FlagSeed, rundir.FlagTimeLimit, rundir.FlagFaults, rundir.FlagMinHold, rundir.FlagMaxHold,
		rundir.FlagZK, rundir.FlagSessionTimeout, rundir.FlagAdmin, rundir.FlagSpreadTopic, rundir.FlagFaultDensity, rundir.FlagCover, rundir.FlagOpenings,
		rundir.FlagWorkload, rundir.FlagQueueTxn, rundir.FlagReaders)
	f.StringVar(&switches, "switches", strings.Join(names, ","), "configurations to measure, comma-separated")
	f.StringVar(&runsDir, "runs", "runs", "directory that receives one run directory per run, and power.json")
	f.StringVar(&jsonOut, "json", "", "write the table as JSON here (default RUNS/power.json)")
	check.LivenessGrace, check.OfflineGrace = 10*time.Second, 10*time.Second
	f.DurationVar(&check.LivenessGrace, "liveness-grace", check.LivenessGrace, "time the controller has after healing to finish pending work; each run settles 5s past the longest of it, --offline-grace and the recovery grace (15s)")
	f.DurationVar(&check.OfflineGrace, "offline-grace", check.OfflineGrace, "a partition without a leader this long after healing is invalid")
	// A power table is hours of runs; per-run locking lets other users
	// of a shared engine take turns instead of waiting for all of it.
	f.StringVar(&lockPath, "lock", "", "hold an exclusive flock on this file during each run only (a shared machine's Docker lock), so other users get turns between runs")
	f.StringSliceVar(&from, "from", nil, "make the table from the run directories already under these directories (comma-separated or repeated) instead of running: each run counts for the switch its run.json matches (its bug switches and node flags); other runs are skipped and named")
	f.BoolVar(&guided, "guided", false, "aim each seed's failpoint faults at the windows the switch's earlier seeds reached least (each run stores its schedule, so it replays exactly)")
	f.BoolVar(&covGuide, "coverage-guided", false, "instrument the node program (implies --cover) and derive each seed's schedule by mutating a schedule that reached node code or a combination no earlier run of the switch had, as a fuzzer does (each run stores its schedule, so it replays exactly)")
	return cmd
}

func kindStrings(kinds []faults.FaultKind) []string {
	var out []string
	for _, k := range kinds {
		out = append(out, string(k))
	}
	return out
}
