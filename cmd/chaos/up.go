package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/zkchaos/zkchaos/harness"
)

func newUpCmd() *cobra.Command {
	var (
		cfg     harness.EnvConfig
		holdFor time.Duration
	)
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a ZooKeeper ensemble and hold it until Ctrl-C (or --hold), then remove it",
		Long: `up builds the base image if needed, starts a real ZooKeeper ensemble on a
per-run network and prints its addresses. It removes everything it started when
interrupted (SIGINT/SIGTERM) or after --hold; 'chaos clean' removes what a killed
process left behind.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
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
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.RunID, "run-id", "", "run id (labels every container; default: generated)")
	f.StringVar(&cfg.RunDir, "dir", "", "run directory (default runs/RUN_ID)")
	f.IntVar(&cfg.ZK.Servers, "zk", 3, "ZooKeeper servers: 1, 3 or 5")
	f.DurationVar(&cfg.ZK.TickTime, "zk-tick", 200*time.Millisecond, "ZooKeeper tickTime")
	f.DurationVar(&holdFor, "hold", 0, "remove the run after this long (default: wait for Ctrl-C)")
	return cmd
}

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
