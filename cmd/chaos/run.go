package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/reports"
)

func init() { subcommands = append(subcommands, newRunCmd) }

func newRunCmd() *cobra.Command {
	var (
		cfg     harness.RunConfig
		seeds   int
		faults  string
		bugs    string
		replay  string
		runsDir string
		junit   string
	)
	check := checkers.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run chaos: real ZooKeeper and brokers, a Kafka client workload, a seeded fault schedule, then check",
		Long: `run starts a ZooKeeper ensemble and broker containers, drives a Kafka client
workload while the nemesis injects a seeded schedule of faults, heals, reads
every partition back, and checks the recorded history. Each seed gets its own
run directory under --runs with the history, the schedule executed (replayable
with --replay), logs and results.json.

Exit status: 0 every run valid, 1 some run invalid, 2 bad input or harness
error, 3 some run unknown.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if faults != "none" {
				kinds, err := nemesis.ParseKinds(faults)
				if err != nil {
					return withCode(exitBad, fmt.Errorf("--faults: %w", err))
				}
				cfg.Faults = kinds
			}
			if bugs != "" {
				cfg.Bugs = strings.Split(bugs, ",")
			}
			if replay != "" {
				s, err := nemesis.LoadSchedule(replay)
				if err != nil {
					return withCode(exitBad, fmt.Errorf("--replay: %w", err))
				}
				cfg.Schedule = &s
				cfg.Seed = s.Seed
				cfg.TimeLimit = s.Total
				seeds = 1
			}
			if seeds < 1 {
				return withCode(exitBad, fmt.Errorf("--seeds %d: want at least 1", seeds))
			}
			cfg.Progress = cmd.ErrOrStderr()
			overall := checkers.Valid
			first := cfg.Seed
			var dirs []string
			for i := 0; i < seeds; i++ {
				rc := cfg
				rc.Seed = first + uint64(i)
				rc.RunID = cluster.NewRunID()
				rc.RunDir = filepath.Join(runsDir, rc.RunID)
				dir, err := harness.Run(cmd.Context(), rc)
				if err != nil {
					return withCode(exitBad, fmt.Errorf("run seed %d (partial history and logs kept in %s): %w", rc.Seed, dir, err))
				}
				check.VisualizePath = filepath.Join(dir, "linearizability.html")
				rep, err := harness.Check(dir, check)
				if err != nil {
					return withCode(exitBad, err)
				}
				printSummary(cmd.OutOrStdout(), rep, filepath.Join(dir, reports.ResultsFile))
				page, err := reports.RenderHTML(dir)
				if err != nil {
					return withCode(exitBad, fmt.Errorf("report of %s: %w", dir, err))
				}
				fmt.Fprintf(cmd.OutOrStdout(), "report: %s\n", page)
				if rep.Verdict != checkers.Valid {
					info, _ := reports.ReadRunInfo(dir)
					fmt.Fprintf(cmd.OutOrStdout(), "replay: %s\n", reports.ReplayCommand(dir, info, true))
				}
				overall = checkers.Combine(overall, rep.Verdict)
				dirs = append(dirs, dir)
			}
			if junit != "" {
				var sums []reports.RunSummary
				for _, d := range dirs {
					sum, err := reports.LoadSummary(d)
					if err != nil {
						return withCode(exitBad, fmt.Errorf("junit: %w", err))
					}
					sums = append(sums, sum)
				}
				if err := writeJUnitFile(cmd.OutOrStdout(), junit, sums, reports.JUnitOptions{UnknownAsError: true}); err != nil {
					return withCode(exitBad, err)
				}
			}
			return verdictExit(overall)
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&cfg.Seed, "seed", uint64(time.Now().UnixNano()%1_000_000), "seed of the first run (fault schedule and workload)")
	f.IntVar(&seeds, "seeds", 1, "number of runs, with seeds seed, seed+1, ...")
	f.DurationVar(&cfg.TimeLimit, "time-limit", 30*time.Second, "workload and nemesis duration per run")
	f.StringVar(&faults, "faults", "all", "fault kinds, comma-separated, 'all' or 'none': "+strings.Join(kindNames(), ", "))
	f.DurationVar(&cfg.MinHold, "min-hold", 2*time.Second, "shortest time a fault is held")
	f.DurationVar(&cfg.MaxHold, "max-hold", 6*time.Second, "longest time a fault is held")
	f.StringVar(&bugs, "bugs", "", "node bug switches to turn on, comma-separated (e.g. KAFKA-532); default: every fix on")
	f.StringSliceVar(&cfg.NodeFlags, "node-flag", nil, "extra flag for every node program (repeatable), e.g. --node-flag=--offline-election=unclean")
	f.StringVar(&replay, "replay", "", "replay a stored schedule.json (sets seed and time limit)")
	f.StringVar(&runsDir, "runs", "runs", "directory that receives one run directory per seed")
	f.BoolVar(&check.StrictReads, "strict-reads", false, "report a stale empty read from a lagging new leader (known anomaly KAFKA-2334) as invalid")
	f.StringVar(&junit, "junit", "", "write JUnit XML of every run (one testsuite per run, one testcase per checker) to this file")
	f.IntVar(&cfg.Nodes, "nodes", 3, "brokers")
	f.IntVar(&cfg.ZK.Servers, "zk", 3, "ZooKeeper servers: 1, 3 or 5")
	f.Int32Var(&cfg.Partitions, "partitions", 3, "partitions of the workload topic")
	f.BoolVar(&cfg.NoWorkload, "no-workload", false, "control plane only: no client traffic (fencing, leader and liveness checkers still run)")
	f.IntVar(&cfg.Producers, "producers", 4, "producer processes")
	f.IntVar(&cfg.Readers, "readers", 2, "reader processes")
	f.DurationVar(&cfg.ZKSessionTimeout, "session-timeout", 3*time.Second, "brokers' ZooKeeper session timeout")
	f.DurationVar(&check.OfflineGrace, "offline-grace", check.OfflineGrace, "a partition without a leader this long after healing is invalid")
	f.DurationVar(&check.LivenessGrace, "liveness-grace", check.LivenessGrace, "time the controller has after healing to finish pending work")
	return cmd
}

func kindNames() []string {
	var out []string
	for _, k := range nemesis.Catalogue {
		out = append(out, string(k))
	}
	return out
}
