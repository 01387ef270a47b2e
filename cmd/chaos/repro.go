package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/reports"
	"github.com/zkchaos/zkchaos/scenarios"
)

func init() { subcommands = append(subcommands, newReproCmd) }

func newReproCmd() *cobra.Command {
	var (
		fixed   bool
		runsDir string
	)
	cmd := &cobra.Command{
		Use:   "repro BUG",
		Short: "Reproduce a historical bug (" + strings.Join(scenarios.Names(), ", ") + ") on a real cluster; --fixed shows it passing",
		Long: `repro runs one regression scenario: a real ZooKeeper ensemble and brokers with
the bug's switch on, driven through the bug's exact fault window. It prints
whether the bug was reproduced, with the checker's explanation, and the path
of the HTML report. With --fixed the same scenario runs with every fix on and
must pass.

Exit status: 0 valid (not reproduced), 1 invalid (reproduced), 2 bad input or
harness error, 3 unknown.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sc, err := scenarios.Get(args[0])
			if err != nil {
				return withCode(exitBad, err)
			}
			cfg := sc.Config(fixed)
			cfg.RunID = cluster.NewRunID()
			cfg.RunDir = filepath.Join(runsDir, cfg.RunID)
			cfg.Progress = cmd.ErrOrStderr()
			mode := "bug switch " + sc.Name() + " on"
			if fixed {
				mode = "every fix on"
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s (%s)\n", sc.Name(), sc.Summary(), mode)
			dir, err := harness.Run(cmd.Context(), cfg)
			if err != nil {
				return withCode(exitBad, fmt.Errorf("%s (partial history and logs kept in %s): %w", sc.Name(), dir, err))
			}
			rep, err := harness.Check(dir, checkers.DefaultConfig())
			if err != nil {
				return withCode(exitBad, err)
			}
			page, err := reports.RenderHTML(dir)
			if err != nil {
				return withCode(exitBad, fmt.Errorf("report of %s: %w", dir, err))
			}
			out := cmd.OutOrStdout()
			var caught *checkers.Result
			for i := range rep.Results {
				if rep.Results[i].Checker == sc.Catches() {
					caught = &rep.Results[i]
				}
			}
			switch {
			case caught != nil && caught.Verdict == checkers.Invalid:
				fmt.Fprintf(out, "reproduced: %s\n", caught.Explanation)
			case rep.Verdict == checkers.Invalid:
				fmt.Fprintf(out, "reproduced, but not by %s: see the report\n", sc.Catches())
			default:
				fmt.Fprintf(out, "not reproduced: %s\n", verdictLine(rep.Verdict, rep.Results))
			}
			fmt.Fprintf(out, "report: %s\n", page)
			return verdictExit(rep.Verdict)
		},
	}
	cmd.Flags().BoolVar(&fixed, "fixed", false, "run with every fix on: the scenario must pass")
	cmd.Flags().StringVar(&runsDir, "runs", "runs", "directory that receives the run directory")
	return cmd
}
