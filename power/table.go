package power

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// PrintTable prints the rows, the failpoint windows no run reached and the
// fence table.
func PrintTable(w io.Writer, rows []Row, unreached []string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "switch\tcaught\tchecker\tmedian to first violation\tworst\tmedian run")
	for _, r := range rows {
		caught := fmt.Sprintf("%d/%d", r.Caught, r.Runs)
		if r.Switch == Fixed {
			caught = fmt.Sprintf("%d/%d false positives", r.Caught, r.Runs)
		}
		var by []string
		for c, n := range r.ByChecker {
			by = append(by, fmt.Sprintf("%s %d", c, n))
		}
		sort.Strings(by)
		med, worst := "-", "-"
		if r.Median != nil {
			med, worst = r.Median.Round(100*time.Millisecond).String(), r.Worst.Round(100*time.Millisecond).String()
		}
		checker := strings.Join(by, ", ")
		if checker == "" {
			checker = "-"
		}
		cost := "-"
		if r.MedianSeconds > 0 || r.MedianBytes > 0 {
			cost = fmt.Sprintf("%.0fs, %.1f MB", r.MedianSeconds, float64(r.MedianBytes)/1e6)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Switch, caught, checker, med, worst, cost)
	}
	tw.Flush()
	for _, r := range rows {
		if c := r.Coverage; c != nil && c.Blocks > 0 {
			fmt.Fprintf(w, "node coverage, %s: %d of %d blocks reached by %d instrumented runs together (%.1f%%), %s by the median run (%.1f%%); %d runs reached a block no earlier run had\n",
				r.Switch, c.Union, c.Blocks, c.Runs, 100*float64(c.Union)/float64(c.Blocks), num(c.MedianCovered), 100*c.MedianCovered/float64(c.Blocks), c.RunsWithNew)
		}
	}
	for _, r := range rows {
		fmt.Fprintf(w, "combinations, %s: %d distinct (fault, target role, failpoint window, partition state) reached by %d runs together, %s by the median run; %d runs reached one no earlier run had\n",
			r.Switch, r.Combinations, r.Runs, num(r.MedianCombinations), r.RunsWithNewCombinations)
	}
	if len(unreached) > 0 {
		fmt.Fprintf(w, "failpoint windows no run reached: %s\n", strings.Join(unreached, ", "))
	}
	printFenceTable(w, rows)
}

// num writes a median as it is: 25, or 1.5 for the mean of two middle runs.
func num(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// printFenceTable says, per row and fence, in how many runs a stale input
// reached the fence and in how many it refused one, out of the runs the
// fence applied to, with the counts summed, and names the fences no run of
// a row tested: a row's verdicts say nothing about them. A fence that
// applied to none of a row's runs (a group or transaction fence in runs of
// the log workload) has no line; the row's "not applicable" line names it.
func printFenceTable(w io.Writer, rows []Row) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "switch\tfence\truns with stale input\truns refusing one\tstale inputs\trejected")
	for _, r := range rows {
		name := r.Switch
		for _, f := range r.Fences {
			if f.NotApplicable() {
				continue
			}
			with := fmt.Sprintf("%d/%d", f.RunsWithInput, f.Applicable())
			if f.Untested() {
				with += " UNTESTED"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%d\t%d\n", name, f.Fence, with, f.RunsWithRejection, f.Applicable(), f.Inputs, f.Rejected)
			name = ""
		}
	}
	tw.Flush()
	for _, r := range rows {
		var untested, notApplicable []string
		for _, f := range r.Fences {
			switch {
			case f.NotApplicable():
				notApplicable = append(notApplicable, f.Fence)
			case f.Untested():
				untested = append(untested, f.Fence)
			}
		}
		runs := "runs"
		if r.Runs == 1 {
			runs = "run"
		}
		if len(untested) > 0 {
			fmt.Fprintf(w, "untested in %s (no stale input in %d %s): %s\n", r.Switch, r.Runs, runs, strings.Join(untested, ", "))
		}
		if len(notApplicable) > 0 {
			fmt.Fprintf(w, "not applicable in %s (no group or transaction traffic in its %d %s): %s\n", r.Switch, r.Runs, runs, strings.Join(notApplicable, ", "))
		}
		if len(untested) == 0 && len(r.Fences) > len(notApplicable) {
			fmt.Fprintf(w, "every fence tested in %s\n", r.Switch)
		}
	}
}

// PrintMisses names the runs to open next: each bug switch's seeds its
// harm checker did not catch, and every false positive with every fix on.
func PrintMisses(w io.Writer, runs []Run) {
	for _, r := range runs {
		switch {
		case r.Switch == Fixed && r.Caught:
			fmt.Fprintf(w, "false positive: %s seed %d, %s by %s: %s\n", r.Switch, r.Seed, r.Verdict, strings.Join(r.By, ", "), r.RunDir)
		case r.Switch != Fixed && !r.Caught:
			fmt.Fprintf(w, "not caught: %s seed %d (%s): %s\n", r.Switch, r.Seed, r.Verdict, r.RunDir)
		}
	}
}
