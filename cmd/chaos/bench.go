package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/harness"
)

func newBenchEnvCmd() *cobra.Command {
	var (
		reps int
		dir  string
	)
	cmd := &cobra.Command{
		Use:   "bench-env",
		Short: "Measure the environment: cold image build, warm ensemble start, bounce gap, ZooKeeper re-election after a partition",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if reps < 1 {
				return withCode(exitBad, fmt.Errorf("--reps %d: want at least 1", reps))
			}
			if dir == "" {
				dir = filepath.Join("runs", "bench-env-"+cluster.NewRunID())
			}
			f, err := harness.MeasureEnv(cmd.Context(), dir, reps, cmd.ErrOrStderr())
			if err != nil {
				return withCode(exitBad, err)
			}
			w := cmd.OutOrStdout()
			if f.ImageBuilt {
				fmt.Fprintf(w, "cold image build:            %s\n", f.ImageBuildTime.Round(time.Second))
			} else {
				fmt.Fprintf(w, "cold image build:            (image cached; remove it to measure)\n")
			}
			fmt.Fprintf(w, "warm 3-server ensemble up:   median %s of %d\n", harness.Median(f.EnsembleUp).Round(time.Millisecond), len(f.EnsembleUp))
			fmt.Fprintf(w, "bounce gap (kill→started):   median %s of %d\n", harness.Median(f.BounceGap).Round(time.Millisecond), len(f.BounceGap))
			fmt.Fprintf(w, "re-election after isolating: median %s of %d (tick 100ms, syncLimit 5)\n", harness.Median(f.Election).Round(time.Millisecond), len(f.Election))
			fmt.Fprintf(w, "figures and fault history in %s\n", dir)
			return nil
		},
	}
	cmd.Flags().IntVar(&reps, "reps", 5, "samples per figure")
	cmd.Flags().StringVar(&dir, "dir", "", "run directory (default runs/bench-env-RUN_ID)")
	return cmd
}
