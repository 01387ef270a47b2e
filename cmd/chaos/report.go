package main

// This file owns `chaos report`: re-render the HTML report of stored runs
// and, for CI, write their JUnit XML. The work lives in reports/.

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/zkchaos/zkchaos/reports"
)

func newReportCmd() *cobra.Command {
	var (
		junit string
		jopt  reports.JUnitOptions // one set of JUnit options for both modes
		index string
	)
	cmd := &cobra.Command{
		Use:   "report RUN_DIR...",
		Short: "Render RUN_DIR/report.html (one self-contained page) for stored runs; optionally JUnit XML",
		Long: `report reads each run directory (history, results.json, run.json, schedule.json,
logs) and writes RUN_DIR/report.html: the verdict, the replay command, every
checker's explanation, the events behind each violation and a timeline of
faults, controllers, partition leaders and client latencies. It prints the
path of each report. It does not re-check: run 'chaos check RUN_DIR' first
to refresh results.json; a run without results.json renders as not checked.

With --junit FILE it also writes JUnit XML: one testsuite per run, one
testcase per checker (invalid: failure with the replay command; unknown:
skipped, or error with --unknown-as-error; not checked: error).

With --index RUNS_DIR it also writes RUNS_DIR/index.html listing every run
there (verdict, seed, bug switches, link to each report), so a runs folder
kept as a CI artifact can be browsed without 'chaos serve'.

With --index RUNS_DIR and no RUN_DIR it re-renders nothing: it indexes the
runs already in RUNS_DIR and, with --junit, writes one JUnit file over all of
them. That is the merge step of a sharded nightly job: gather every shard's
run directories into one folder, then 'chaos report --index DIR --junit FILE'.

Exit status: 0 every report written, 2 bad input (the message names the file).`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				if index == "" {
					return withCode(exitBad, errors.New("report: name at least one RUN_DIR, or --index RUNS_DIR to index the runs already there"))
				}
				return runIndexOnly(cmd.OutOrStdout(), index, junit, jopt)
			}
			err := runReport(cmd.OutOrStdout(), args, junit, jopt)
			if index != "" {
				p, ierr := reports.WriteIndexFile(index)
				if ierr != nil {
					return withCode(exitBad, errors.Join(err, ierr))
				}
				fmt.Fprintln(cmd.OutOrStdout(), p)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&index, "index", "", "also write RUNS_DIR/index.html listing the runs in RUNS_DIR")
	cmd.Flags().StringVar(&junit, "junit", "", "also write JUnit XML for the runs to this file ('-' for stdout)")
	cmd.Flags().BoolVar(&jopt.UnknownAsError, "unknown-as-error", false, "in JUnit, report an unknown verdict as an error instead of skipped")
	return cmd
}

// runReport renders every run, going on past a bad one so one corrupt run
// does not hide the others' reports, and returns exit 2 if any failed.
func runReport(out io.Writer, dirs []string, junit string, opt reports.JUnitOptions) error {
	var (
		errs []error
		sums []reports.RunSummary
	)
	for _, dir := range dirs {
		p, err := reports.RenderHTML(dir)
		if err != nil {
			errs = append(errs, err)
		} else {
			fmt.Fprintln(out, p)
		}
		if junit == "" {
			continue
		}
		s, serr := reports.LoadSummary(dir)
		if serr != nil {
			s.Problem = serr.Error()
		} else if err != nil {
			s.Problem = err.Error()
		}
		sums = append(sums, s)
	}
	if junit != "" {
		if err := writeJUnitFile(out, junit, sums, opt); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return withCode(exitBad, errors.Join(errs...))
	}
	return nil
}

// runIndexOnly writes RUNS_DIR/index.html and, when junit is set, one JUnit
// file over every run in runsDir, from their run.json and results.json. A run
// that cannot be read is listed (and is a JUnit error) rather than dropped.
func runIndexOnly(out io.Writer, runsDir, junit string, opt reports.JUnitOptions) error {
	p, err := reports.WriteIndexFile(runsDir)
	if err != nil {
		return withCode(exitBad, err)
	}
	fmt.Fprintln(out, p)
	if junit == "" {
		return nil
	}
	runs, err := reports.Index(runsDir)
	if err != nil {
		return withCode(exitBad, err)
	}
	if err := writeJUnitFile(out, junit, runs, opt); err != nil {
		return withCode(exitBad, err)
	}
	return nil
}

func writeJUnitFile(out io.Writer, path string, sums []reports.RunSummary, opt reports.JUnitOptions) error {
	if path == "-" {
		return reports.WriteJUnitWith(out, sums, opt)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	if err := reports.WriteJUnitWith(f, sums, opt); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	return nil
}
