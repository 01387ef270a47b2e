package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/rundir"
)

func newCheckCmd() *cobra.Command {
	cfg := checkers.DefaultConfig()
	var visualize bool
	cmd := &cobra.Command{
		Use:   "check RUN_DIR",
		Short: "Re-check a stored run's history offline (no Docker) and write RUN_DIR/results.json",
		Long: `check reads every RUN_DIR/history/*.jsonl file, merges them into one ordered
history, runs every checker (controller fencing, broker fencing, leader
uniqueness, durability, HW checkpoint, availability, liveness, linearizability),
writes RUN_DIR/results.json and prints a summary.

Exit status: 0 valid, 1 invalid, 2 bad input (unreadable history: the error
names file and line), 3 unknown (a checker could not decide).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if visualize {
				cfg.VisualizePath = filepath.Join(args[0], rundir.LinearizeFile)
			}
			return runCheck(cmd.OutOrStdout(), args[0], cfg)
		},
	}
	f := cmd.Flags()
	cfg.RegisterFlags(f)
	f.BoolVar(&visualize, "visualize", true, "write porcupine's visualization of the most interesting partition to RUN_DIR/linearizability.html")
	return cmd
}

// runCheck does the work of `chaos check` and maps the verdict to an exit
// code error (nil for valid).
func runCheck(out io.Writer, runDir string, cfg checkers.Config) error {
	rep, err := harness.Check(runDir, cfg)
	if err != nil {
		return withCode(exitBad, err)
	}
	printSummary(out, rep, filepath.Join(runDir, rundir.ResultsFile))
	return verdictExit(rep.Verdict)
}

// verdictExit maps a verdict to the process exit status.
func verdictExit(v checkers.Verdict) error {
	switch v {
	case checkers.Valid:
		return nil
	case checkers.Invalid:
		return withCode(exitInvalid, nil)
	default:
		return withCode(exitUnknown, nil)
	}
}

func printSummary(out io.Writer, rep *rundir.Results, path string) {
	fmt.Fprintf(out, "checked %d events from %d history files in %s\n", rep.Events, len(rep.Files), rep.RunDir)
	for _, w := range rep.Warnings {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", r.Checker, r.Verdict, r.Explanation)
	}
	tw.Flush()
	fmt.Fprintf(out, "verdict: %s (details in %s)\n", verdictLine(rep.Verdict, rep.Results), path)
}

// verdictLine says the verdict and why: which checkers are invalid, which
// are unknown and why, and the known anomalies seen (which do not make a
// run invalid).
func verdictLine(v checkers.Verdict, results []checkers.Result) string {
	var invalid, unknown, known []string
	for _, r := range results {
		switch r.Verdict {
		case checkers.Invalid:
			invalid = append(invalid, r.Checker)
		case checkers.Unknown:
			unknown = append(unknown, fmt.Sprintf("%s (%s)", r.Checker, strings.TrimSuffix(r.Explanation, ".")))
		}
		for _, k := range r.Known {
			known = append(known, fmt.Sprintf("%s ×%d (%s)", k.Name, k.Count, r.Checker))
		}
	}
	s := string(v)
	if len(invalid) > 0 {
		s += "; invalid: " + strings.Join(invalid, ", ")
	}
	if len(unknown) > 0 {
		s += "; unknown: " + strings.Join(unknown, "; ")
	}
	if len(known) > 0 {
		s += "; known anomalies: " + strings.Join(known, ", ")
	}
	return s
}
