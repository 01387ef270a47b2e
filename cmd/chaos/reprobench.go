package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/zkchaos/zkchaos/reprobench"
	"github.com/zkchaos/zkchaos/scenarios"
)

func newReproBenchCmd() *cobra.Command {
	var (
		n        int
		runsDir  string
		lockPath string
	)
	cmd := &cobra.Command{
		Use:   "repro-bench [BUG...]",
		Short: "Run each scenario N times with the bug and N times with the fix; count reproductions and time each phase",
		Long: `repro-bench runs every scenario named (default: all) N times in its bug
mode and N times in its fixed mode, as 'chaos repro' does, and prints per
scenario and mode: how many runs the scenario's checker found the bug in (bug
mode) or were valid (fixed mode), and the median wall time from start to
verdict with the median of each phase (set-up, the driver's workload window,
heal and settle, final reads, collection, check). Needs Docker; a warm base
image keeps image builds out of the figures.

A run the harness cannot finish counts as not as expected and the bench goes
on. Exit status: 0 when every bug run reproduced and every fixed run was
valid, 1 otherwise, 2 on bad input or when a run ended in a harness error.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 1 {
				return withCode(exitBad, fmt.Errorf("-n: %d runs, want at least 1", n))
			}
			var scs []scenarios.Scenario
			for _, a := range args {
				sc, err := scenarios.Get(a)
				if err != nil {
					return withCode(exitBad, err)
				}
				scs = append(scs, sc)
			}
			if len(scs) == 0 {
				scs = scenarios.All()
			}
			b := reprobench.Bench{Scenarios: scs, N: n, Log: cmd.ErrOrStderr(),
				Lock: func(ctx context.Context) (func(), error) { return lockFile(ctx, lockPath) },
				Run: func(ctx context.Context, sc scenarios.Scenario, m scenarios.Mode, runID string) (reprobench.Result, error) {
					res, err := reproRun(ctx, sc, m, runID, runsDir, io.Discard, nil)
					if err != nil {
						return reprobench.Result{}, err
					}
					return reprobench.Result{Dir: res.Dir, Results: res.Results, Took: res.Took, Checked: res.Checked}, nil
				}}
			rows, err := b.Measure(cmd.Context())
			if err != nil {
				return withCode(exitBad, err)
			}
			reprobench.Write(cmd.OutOrStdout(), n, rows)
			for _, r := range rows {
				if r.Errors > 0 {
					return withCode(exitBad, fmt.Errorf("%s %s: %d runs ended in a harness error", r.Scenario, r.Mode, r.Errors))
				}
			}
			for _, r := range rows {
				if r.OK != r.Runs {
					return withCode(exitInvalid, nil)
				}
			}
			return nil
		},
	}
	cmd.Flags().IntVarP(&n, "runs-per-mode", "n", 3, "runs per scenario and mode")
	cmd.Flags().StringVar(&runsDir, "runs", "runs", "directory that receives the run directories")
	cmd.Flags().StringVar(&lockPath, "lock", "", "hold an exclusive flock on this file during each run only (a shared machine's Docker lock), so other users get turns between runs")
	return cmd
}

// lockFile takes an exclusive flock on path ("" takes none) and returns
// its release. It waits in the kernel's queue like flock(1), and gives up
// when ctx ends (Ctrl-C) instead of blocking the exit.
func lockFile(ctx context.Context, path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("--lock: %w", err)
	}
	got := make(chan error, 1)
	go func() { got <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }()
	select {
	case err := <-got:
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("--lock %s: %w", path, err)
		}
		return func() { f.Close() }, nil
	case <-ctx.Done():
		// Closing the file drops the lock should the waiting call still
		// get it.
		f.Close()
		return nil, fmt.Errorf("--lock %s: %w", path, ctx.Err())
	}
}
