package main

// This file owns `chaos keep`: turn a failing run into a regression test.
// The trimming lives in regressions/.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/regressions"
	"github.com/zkchaos/zkchaos/rundir"
	"github.com/zkchaos/zkchaos/schedule"
)

func newKeepCmd() *cobra.Command {
	var (
		into string
		opt  regressions.Options
	)
	opt.Config = checkers.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "keep RUN_DIR NAME",
		Short: "Keep a failing run as a regression: its history trimmed to what the failing checker needs, with the expected verdict",
		Long: `keep re-checks RUN_DIR's history, takes the first invalid checker (or
--checker), and trims the history to a small one on which that checker is
still invalid: the events it blames and --context events either side of each
are always kept, the rest is removed piece by piece, re-running the checker
after every removal. The result goes to INTO/NAME/ (history/*.jsonl,
expected.json with every checker's verdict, run.json and schedule.json), and
'go test ./regressions/' re-checks every kept run without Docker.

Exit status: 0 kept, 2 bad input (unreadable run, a run no checker finds
invalid, a name already taken).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			runDir, name := args[0], args[1]
			if err := regressions.ValidName(name); err != nil {
				return withCode(exitBad, err)
			}
			// Found before the trimming, which can take minutes, rather
			// than by Save after it.
			dir := filepath.Join(into, name)
			if _, err := os.Stat(dir); err == nil {
				return withCode(exitBad, fmt.Errorf("%s already exists: choose another name or remove it", dir))
			}
			// Save copies run.json and schedule.json as they are: a corrupt
			// one would be kept beside the regression for good.
			if _, err := rundir.ReadInfo(runDir); err != nil {
				return withCode(exitBad, fmt.Errorf("keep %s: %w", runDir, err))
			}
			if _, err := schedule.Load(filepath.Join(runDir, rundir.ScheduleFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return withCode(exitBad, fmt.Errorf("keep %s: %w", runDir, err))
			}
			h, err := history.ReadDir(runDir)
			if err != nil {
				return withCode(exitBad, fmt.Errorf("keep %s: %w", runDir, err))
			}
			t, err := regressions.Trim(cmd.Context(), h, opt)
			if err != nil {
				if errors.Is(err, regressions.ErrNothingToKeep) {
					err = fmt.Errorf("keep %s: %w", runDir, err)
				}
				return withCode(exitBad, err)
			}
			if err := regressions.Save(dir, runDir, t); err != nil {
				return withCode(exitBad, err)
			}
			ex := t.Expected
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "kept %d of %d events in %s (%s still %s after %d checks)\n",
				ex.KeptEvents, ex.SourceEvents, dir, ex.Checker, ex.Verdict, ex.CheckerChecks)
			fmt.Fprintf(out, "  %s\n", ex.Explanation)
			fmt.Fprintln(out, "re-checked by: go test ./regressions/")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&into, "into", filepath.Join("testdata", "regressions"), "folder that receives NAME/")
	f.StringVar(&opt.Checker, "checker", "", "checker to keep failing (default: the first invalid one)")
	f.IntVar(&opt.Context, "context", 10, "events kept on each side of every event the checker blames")
	f.IntVar(&opt.MaxChecks, "max-checks", 400, "most checker runs spent trimming")
	return cmd
}
