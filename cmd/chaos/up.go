package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/rundir"
)

func newUpCmd() *cobra.Command {
	var holdFor time.Duration
	// The held cluster is a run's brokers, ensemble and topic without
	// clients (the user brings theirs), schedule or admin workload; the
	// hold ends it, not a time limit.
	spec := rundir.Default()
	spec.Faults, spec.Admin, spec.SpreadTopic, spec.NoWorkload = nil, false, "", true
	spec.TimeLimit = 100 * 365 * 24 * time.Hour
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a cluster (ZooKeeper ensemble, brokers, topic) for your own client and hold it until Ctrl-C (or --hold)",
		Long: `up builds the base image if needed and starts a real ZooKeeper ensemble and
--brokers node programs on a per-run network, creates the topic and prints a
bootstrap address that any Kafka client on this host can use (the host reaches
the containers' addresses directly). While it runs, 'chaos fault KIND' injects a
fault of the catalogue and 'chaos fault heal' heals every fault. The broker-side
history (node event logs, the ZooKeeper watcher, the nemesis) is recorded in the
run directory; when up stops (Ctrl-C, SIGTERM or --hold) it heals, removes
everything it started, and 'chaos check DIR' judges what happened.

With --workload (log or queue, and --queue-txn) the run's client workload
runs against the cluster while it is held, recorded in the same history, and
after the heal its final reads (the queue workload's drain) complete it, so
'chaos check DIR' judges the clients' promises too.

With --brokers 0 it starts the ZooKeeper ensemble alone. Killed with SIGKILL,
up leaves the run to its reaper, which removes the containers and the network
within seconds; 'chaos clean' removes what is left when no reaper could start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if spec.Nodes < 0 {
				return withCode(exitBad, fmt.Errorf("--brokers %d: want 0 or more", spec.Nodes))
			}
			if err := checkUpFlags(cluster.ZKOptions(spec.ZK), holdFor, spec.ZKSessionTimeout); err != nil {
				return withCode(exitBad, err)
			}
			var env harness.EnvConfig
			env.RunID, env.RunDir, env.ZK = spec.RunID, spec.RunDir, cluster.ZKOptions(spec.ZK)
			if spec.Nodes == 0 {
				if cmd.Flags().Changed(rundir.FlagWorkload) {
					return withCode(exitBad, fmt.Errorf("--%s with --brokers 0: a workload needs brokers", rundir.FlagWorkload))
				}
				return upZK(ctx, env, holdFor)
			}
			// A workload named on the command line runs beside the hold,
			// and its final reads (the queue's drain) follow the heal.
			spec.NoWorkload = !cmd.Flags().Changed(rundir.FlagWorkload)
			if err := spec.Validate(); err != nil {
				return withCode(exitBad, err)
			}
			if err := harness.CheckNodeFlags(ctx, harness.RunConfig{RunSpec: spec}); err != nil {
				return withCode(exitBad, err)
			}
			if err := env.Place(); err != nil {
				return withCode(exitBad, fmt.Errorf("--dir: %w", err))
			}
			rc := harness.RunConfig{RunSpec: spec, Progress: os.Stderr}
			rc.RunID, rc.RunDir = env.RunID, env.RunDir
			// Ctrl-C ends the hold, after which the run heals and writes its
			// history out as usual; before the cluster is ready it aborts.
			runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
			defer cancelRun()
			var ready atomic.Bool
			go func() {
				select {
				case <-ctx.Done():
					if !ready.Load() {
						cancelRun()
					}
				case <-runCtx.Done():
				}
			}()
			rc.Driver = &harness.ControlDriver{Topic: spec.Topic, Stop: ctx.Done(), Hold: holdFor,
				Ready: func(c rundir.Control) {
					ready.Store(true)
					fmt.Printf("cluster ready; run dir %s\n", rc.RunDir)
					fmt.Printf("bootstrap %s\n", strings.Join(c.Bootstrap, ","))
					fmt.Printf("zookeeper %s\n", strings.Join(c.ZooKeeper, ","))
					fmt.Printf("topic %s (%d partitions)\n", spec.Topic, spec.Partitions)
					if !spec.NoWorkload {
						fmt.Printf("workload %s: %d producers, %d readers; its final reads follow the heal\n", spec.WorkloadName(), spec.Producers, spec.Readers)
					}
					fmt.Printf("faults: chaos fault --dir %s KIND (%s); chaos fault --dir %s heal\n", rc.RunDir, kindList(), rc.RunDir)
				}}
			dir, err := harness.Run(runCtx, rc)
			if err != nil {
				return withCode(exitBad, fmt.Errorf("run dir %s: %w", dir, err))
			}
			fmt.Printf("stopped; check it with: chaos check %s\n", dir)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&spec.RunID, "run-id", "", "run id (labels every container; default: generated)")
	f.StringVar(&spec.RunDir, "dir", "", "run directory (default runs/RUN_ID)")
	f.DurationVar(&spec.ZK.TickTime, "zk-tick", spec.ZK.TickTime, "ZooKeeper tickTime")
	f.DurationVar(&holdFor, "hold", 0, "stop after this long (default: wait for Ctrl-C)")
	f.IntVar(&spec.Nodes, "brokers", spec.Nodes, "brokers (node programs); 0: the ZooKeeper ensemble alone")
	f.StringVar(&spec.Topic, "topic", spec.Topic, "topic to create")
	spec.Register(f, rundir.FlagZK, rundir.FlagPartitions, rundir.FlagBugs, rundir.FlagNodeFlag, rundir.FlagSessionTimeout,
		rundir.FlagWorkload, rundir.FlagQueueTxn, rundir.FlagProducers, rundir.FlagReaders)
	return cmd
}

// checkUpFlags refuses the settings of `chaos up` that the cluster would
// refuse only once Docker answers (the ensemble's size and tick), or that
// would silently mean something else (a zero session timeout is the
// default, a negative hold none).
func checkUpFlags(zk cluster.ZKOptions, hold, session time.Duration) error {
	var errs []error
	if s := zk.Servers; !cluster.ValidServers(s) {
		errs = append(errs, fmt.Errorf("--zk %d: want 1, 3 or 5 ZooKeeper servers", s))
	}
	if zk.TickTime < cluster.MinTickTime {
		errs = append(errs, fmt.Errorf("--zk-tick %s: want at least %s", zk.TickTime, cluster.MinTickTime))
	}
	if hold < 0 {
		errs = append(errs, fmt.Errorf("--hold %s: want 0 (until Ctrl-C) or more", hold))
	}
	if session <= 0 {
		errs = append(errs, fmt.Errorf("--session-timeout %s: want more than 0", session))
	}
	return errors.Join(errs...)
}

// upZK holds a ZooKeeper ensemble alone.
func upZK(ctx context.Context, cfg harness.EnvConfig, holdFor time.Duration) error {
	cfg.Progress = os.Stderr
	env, err := harness.StartEnv(ctx, cfg)
	if err != nil {
		return withCode(exitBad, err)
	}
	defer env.Close()
	c := env.Cluster
	fmt.Printf("run %s ready; run dir %s\n", c.RunID, c.RunDir)
	for _, s := range c.ZKServers() {
		fmt.Printf("zk%d %s\n", s.ID, s.ClientAddr())
	}
	if holdFor > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(holdFor):
		}
	} else {
		<-ctx.Done()
	}
	fmt.Fprintln(os.Stderr, "removing run", c.RunID)
	return nil
}

func kindList() string { return strings.Join(kindStrings(faults.Catalogue), ", ") }

func newCleanCmd() *cobra.Command {
	var runID string
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Remove containers and networks left by earlier runs (only ones carrying the project's label)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep, err := harness.Clean(cmd.Context(), runID)
			fmt.Printf("removed %d containers, %d networks\n", rep.Containers, rep.Networks)
			if err != nil {
				return withCode(exitBad, err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&runID, "run-id", "", "remove only this run (default: every run)")
	return cmd
}
