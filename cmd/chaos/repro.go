package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/pipeline"
	"github.com/zkchaos/zkchaos/reports"
	"github.com/zkchaos/zkchaos/rundir"
	"github.com/zkchaos/zkchaos/scenarios"
)

func newReproCmd() *cobra.Command {
	var (
		fixed   bool
		list    bool
		mode    string
		runsDir string
	)
	cmd := &cobra.Command{
		Use:   "repro BUG",
		Short: "Reproduce a historical bug (" + strings.Join(scenarios.Names(), ", ") + ") on a real cluster; --fixed shows it passing",
		Long: `repro runs one regression scenario: a real ZooKeeper ensemble and brokers with
the bug's switch on, driven through the bug's exact fault window. It prints
whether the bug was reproduced, with the checker's explanation, and the path
of the HTML report. With --fixed the same scenario runs with the fix on and
must pass. A scenario with more than two modes (KAFKA-3861's election
policies) runs every mode on the same schedule and writes a page showing the
runs side by side; --mode picks one. --list shows every scenario.

Exit status: 0 valid (not reproduced), 1 invalid (reproduced), 2 bad input or
harness error, 3 unknown. When several modes run, the status is the bug
run's, and 2 when the fixed run was not valid.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if list {
				writeScenarioList(out)
				return nil
			}
			if len(args) != 1 {
				writeScenarioList(cmd.ErrOrStderr())
				return withCode(exitBad, fmt.Errorf("repro: name a scenario"))
			}
			sc, err := scenarios.Get(args[0])
			if err != nil {
				writeScenarioList(cmd.ErrOrStderr())
				return withCode(exitBad, err)
			}
			modes, err := reproModes(sc, mode, fixed)
			if err != nil {
				return withCode(exitBad, err)
			}
			id := cluster.NewRunID()
			var runs []reports.CompareRun
			status := error(nil)
			for _, m := range modes {
				runID := id
				if len(modes) > 1 {
					runID = id + "-" + m.Name
				}
				res, err := reproRun(cmd.Context(), sc, m, runID, runsDir, cmd.ErrOrStderr(), func(res *reproResult) { printRepro(out, sc, m, res) })
				if err != nil {
					return withCode(exitBad, err)
				}
				fmt.Fprintf(out, "report: %s\n", res.Report)
				runs = append(runs, reports.CompareRun{Mode: m.Name, About: m.About, RunDir: res.Dir})
				if len(modes) == 1 || m == sc.BugMode() {
					status = verdictExit(res.Results.Verdict)
				}
				if len(modes) > 1 && m.Fixed && res.Results.Verdict != checkers.Valid {
					defer fmt.Fprintf(out, "the fix (%s) was not valid: %s\n", m.Name, res.Results.Verdict)
					status = withCode(exitBad, nil)
				}
			}
			if len(runs) > 1 {
				rows, err := reports.Compare(runs)
				if err != nil {
					return withCode(exitBad, err)
				}
				page := filepath.Join(runsDir, id+"-compare.html")
				if err := reports.RenderCompare(page, sc.Bug+": "+sc.Summary, rows); err != nil {
					return withCode(exitBad, err)
				}
				fmt.Fprintln(out)
				reports.WriteCompareText(out, rows)
				fmt.Fprintf(out, "side by side: %s\n", page)
			}
			return status
		},
	}
	cmd.Flags().BoolVar(&fixed, "fixed", false, "run with the fix on: the scenario must pass")
	cmd.Flags().StringVar(&mode, "mode", "", "run one mode of the scenario (see --list)")
	cmd.Flags().BoolVar(&list, "list", false, "list the scenarios: bug, what goes wrong, the checker that catches it, the fix it proves")
	cmd.Flags().StringVar(&runsDir, "runs", "runs", "directory that receives the run directory")
	return cmd
}

// reproResult is one scenario run, checked and rendered.
type reproResult struct {
	Dir     string
	Results *rundir.Results
	Report  string // "" until rendered, after the verdict
	// Took is the wall time from start to verdict; Checked the part of it
	// spent checking.
	Took, Checked time.Duration
}

// reproRun runs, checks and renders one mode of sc. verdict, when not nil,
// is called as soon as the checkers have judged, before the containers are
// gone and the report rendered.
func reproRun(ctx context.Context, sc scenarios.Scenario, m scenarios.Mode, runID, runsDir string, progress io.Writer, verdict func(*reproResult)) (*reproResult, error) {
	start := time.Now()
	cfg := sc.Config(m)
	cfg.RunID = runID
	cfg.RunDir = filepath.Join(runsDir, runID)
	cfg.Progress = progress
	fmt.Fprintf(progress, "%s: %s (%s: %s)\n", sc.Bug, sc.Summary, m.Name, m.About)
	check := sc.Check
	res := &reproResult{}
	o, err := pipeline.Execute(ctx, cfg, pipeline.Options{Check: &check, OnVerdict: func(o pipeline.Outcome) {
		res.Dir, res.Results, res.Took, res.Checked = o.Dir, o.Results, time.Since(start), o.Checked
		if verdict != nil {
			verdict(res)
		}
	}})
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", sc.Bug, m.Name, err)
	}
	res.Report = o.Report
	return res, nil
}

// printRepro says whether sc's bug was reproduced and by what, as soon as
// the run is judged.
func printRepro(out io.Writer, sc scenarios.Scenario, m scenarios.Mode, res *reproResult) {
	caught := sc.Catcher(res.Results.Results)
	fmt.Fprintf(out, "%s %s: ", sc.Bug, m.Name)
	switch {
	case caught != nil && caught.Verdict == checkers.Invalid:
		fmt.Fprintf(out, "reproduced: %s\n", caught.Explanation)
	case res.Results.Verdict == checkers.Invalid:
		fmt.Fprintf(out, "reproduced, but not by %s:\n", sc.Catches.Name())
		for _, r := range res.Results.Results {
			if r.Verdict == checkers.Invalid {
				fmt.Fprintf(out, "  %s: %s\n", r.Checker, r.Explanation)
			}
		}
	default:
		fmt.Fprintf(out, "not reproduced: %s\n", verdictLine(res.Results.Verdict, res.Results.Results))
	}
	printReproFences(out, sc, res.Results.Results)
	fmt.Fprintf(out, "verdict after %s\n", res.Took.Round(100*time.Millisecond))
}

// reproFences names, per scenario, the fence its window brings stale
// requests to, and what those requests are.
var reproFences = map[string]struct{ fence, inputs string }{
	"KAFKA-532":  {checkers.FenceBrokerControllerEpoch, "control requests from a deposed controller (an older controller epoch than one the broker had seen)"},
	"KAFKA-7235": {checkers.FenceBrokerBrokerEpoch, "control requests meant for a broker's previous registration"},
}

// printReproFences says how many stale inputs the scenario's fence refused,
// then what every fence saw, from the fences result (nothing for a run
// checked without it).
func printReproFences(out io.Writer, sc scenarios.Scenario, results []checkers.Result) {
	var counts []checkers.FenceCount
	for _, r := range results {
		if fc, ok := checkers.FencesOf(r); ok {
			counts = fc
		}
	}
	if counts == nil {
		return
	}
	if f, ok := reproFences[sc.Bug]; ok {
		for _, c := range counts {
			if c.Fence != f.fence {
				continue
			}
			if c.Inputs == 0 {
				fmt.Fprintf(out, "%s fence untested: no %s reached it\n", c.Fence, f.inputs)
			} else {
				fmt.Fprintf(out, "%s fence: rejected %d of %d %s\n", c.Fence, c.Rejected, c.Inputs, f.inputs)
			}
		}
	}
	var parts []string
	for _, c := range counts {
		parts = append(parts, c.String())
	}
	fmt.Fprintf(out, "fences: %s\n", strings.Join(parts, "; "))
}

func writeScenarioList(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tCAUGHT BY\tMODES\tWHAT GOES WRONG / WHAT THE FIX PROVES")
	for _, s := range scenarios.All() {
		var modes []string
		for _, m := range s.Modes {
			modes = append(modes, m.Name)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Bug, s.Catches.Name(), strings.Join(modes, ","), s.Summary)
		fmt.Fprintf(tw, "\t\t\tfix: %s\n", s.Fix)
	}
	tw.Flush()
}

// reproModes are the modes `chaos repro` runs of sc: the one --mode names,
// the fixed one with --fixed, otherwise the bug mode, or every mode of a
// scenario of more than two (shown side by side).
func reproModes(sc scenarios.Scenario, mode string, fixed bool) ([]scenarios.Mode, error) {
	switch {
	case mode != "" && fixed:
		return nil, fmt.Errorf("--mode and --fixed: give one")
	case mode != "":
		m, err := sc.Mode(mode)
		if err != nil {
			return nil, fmt.Errorf("--mode: %w", err)
		}
		return []scenarios.Mode{m}, nil
	case fixed:
		return []scenarios.Mode{sc.FixMode()}, nil
	case len(sc.Modes) > 2:
		return sc.Modes, nil
	}
	return []scenarios.Mode{sc.BugMode()}, nil
}
