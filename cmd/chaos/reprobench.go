package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/scenarios"
)

// benchPhases are the harness phases timed, in run order, then the check.
var benchPhases = []string{history.PhaseSetup, history.PhaseWorkload, history.PhaseHeal, history.PhaseFinalReads, history.PhaseCollect}

// Marks inside the set-up, from its start (phaseTimes): the ZooKeeper
// watcher's first session (the ensemble serving; the watcher connects once
// it is ready) and the last broker registration before the set-up ended
// (a broker the driver kills at once may not have flushed its event log, so
// "every broker's first" can be missing or land after a restart). The column "rest"
// is the wall time to the verdict no phase accounts for: starting the
// process and the run directory, and stopping the brokers. The teardown
// (container logs saved, containers removed) and the report come after the
// verdict, beside the check (pipeline.Execute), and are not counted.
const (
	markEnsemble   = "zk-ready"
	markRegistered = "registered"
	restColumn     = "rest"
)

// benchColumns are the figures a bench row shows after the total.
var benchColumns = []string{history.PhaseSetup, markEnsemble, markRegistered, history.PhaseWorkload, history.PhaseHeal,
	history.PhaseFinalReads, history.PhaseCollect, "check", restColumn}

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
			var rows []benchRow
			for _, sc := range scs {
				for _, m := range []scenarios.Mode{sc.BugMode(), sc.FixMode()} {
					row := benchRow{scenario: sc.Bug, mode: m.Name, phases: map[string][]time.Duration{}}
					for i := 0; i < n; i++ {
						runID := fmt.Sprintf("%s-bench-%s-%s-%d", cluster.NewRunID(), strings.ToLower(sc.Bug), m.Name, i)
						unlock, err := lockFile(cmd.Context(), lockPath)
						if err != nil {
							return withCode(exitBad, err)
						}
						res, err := reproRun(cmd.Context(), sc, m, runID, runsDir, io.Discard, nil)
						unlock()
						if err != nil {
							if cmd.Context().Err() != nil {
								return withCode(exitBad, err)
							}
							// A run the harness could not finish counts
							// against the scenario (it is what a user of
							// 'chaos repro' would have got), and the bench
							// goes on.
							fmt.Fprintf(cmd.ErrOrStderr(), "%s %s run %d/%d: harness error: %v\n", sc.Bug, m.Name, i+1, n, err)
							row.runs++
							row.errors++
							continue
						}
						caught := sc.Catcher(res.Results.Results)
						ok := m.Fixed && res.Results.Verdict == checkers.Valid ||
							!m.Fixed && caught != nil && caught.Verdict == checkers.Invalid
						if ok {
							row.ok++
						}
						row.runs++
						row.total = append(row.total, res.Took)
						row.phases["check"] = append(row.phases["check"], res.Checked)
						one := map[string][]time.Duration{}
						if err := phaseTimes(res.Dir, one); err != nil {
							return withCode(exitBad, err)
						}
						one[restColumn] = []time.Duration{res.Took - res.Checked - sumFirst(one, benchPhases)}
						var took []string
						for _, p := range benchColumns {
							if p == "check" {
								continue
							}
							row.phases[p] = append(row.phases[p], one[p]...)
							if len(one[p]) > 0 {
								took = append(took, p+" "+fmtSec(one[p][0]))
							}
						}
						fmt.Fprintf(cmd.ErrOrStderr(), "%s %s run %d/%d: %s, as expected %v, after %s (%s, check %s) %s\n", sc.Bug, m.Name, i+1, n,
							res.Results.Verdict, ok, fmtSec(res.Took), strings.Join(took, ", "), fmtSec(res.Checked), filepath.Base(res.Dir))
					}
					rows = append(rows, row)
				}
			}
			writeBench(cmd.OutOrStdout(), n, rows)
			for _, r := range rows {
				if r.errors > 0 {
					return withCode(exitBad, fmt.Errorf("%s %s: %d runs ended in a harness error", r.scenario, r.mode, r.errors))
				}
			}
			for _, r := range rows {
				if r.ok != r.runs {
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

type benchRow struct {
	scenario, mode string
	runs, ok       int
	errors         int // runs the harness could not finish
	total          []time.Duration
	phases         map[string][]time.Duration
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

// sumFirst adds the first duration of each of keys in m.
func sumFirst(m map[string][]time.Duration, keys []string) time.Duration {
	var d time.Duration
	for _, k := range keys {
		if len(m[k]) > 0 {
			d += m[k][0]
		}
	}
	return d
}

// phaseTimes adds the duration of each harness phase of the run in dir,
// and the set-up's marks (markEnsemble, markRegistered) from its start.
func phaseTimes(dir string, into map[string][]time.Duration) error {
	h, err := history.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("phases of %s: %w", dir, err)
	}
	begin := map[string]int64{}
	var zkReady int64
	var registrations []int64
	for _, e := range h.Events {
		switch {
		case e.Kind == history.KindZKWatch && e.Watch != nil && e.Watch.SessionState == "StateHasSession" && zkReady == 0:
			zkReady = e.Time
		case e.Kind == history.KindBrokerRegistered:
			registrations = append(registrations, e.Time)
		case e.Kind == history.KindPhase:
			switch e.Phase.Mark {
			case history.PhaseBegin:
				begin[e.Phase.Name] = e.Time
			case history.PhaseEnd:
				if b, ok := begin[e.Phase.Name]; ok {
					into[e.Phase.Name] = append(into[e.Phase.Name], time.Duration(e.Time-b))
				}
			}
		}
	}
	b, ok := begin[history.PhaseSetup]
	if !ok {
		return nil
	}
	if zkReady > 0 {
		into[markEnsemble] = append(into[markEnsemble], time.Duration(zkReady-b))
	}
	if len(into[history.PhaseSetup]) == 0 {
		return nil
	}
	end := b + int64(into[history.PhaseSetup][len(into[history.PhaseSetup])-1])
	var last int64
	for _, r := range registrations {
		if r <= end {
			last = max(last, r)
		}
	}
	if last > 0 {
		into[markRegistered] = append(into[markRegistered], time.Duration(last-b))
	}
	return nil
}

func writeBench(w io.Writer, n int, rows []benchRow) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	head := append([]string{"scenario", "mode", "as expected", "median total"}, benchColumns...)
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, r := range rows {
		expected := fmt.Sprintf("%d/%d", r.ok, r.runs)
		if r.errors > 0 {
			expected += fmt.Sprintf(" (%d harness errors)", r.errors)
		}
		cells := []string{r.scenario, r.mode, expected, fmtSec(harness.Median(r.total))}
		for _, p := range benchColumns {
			cells = append(cells, fmtSec(harness.Median(r.phases[p])))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprintf(w, "(%d runs per mode; medians in seconds; 'as expected' counts bug runs its checker found invalid and fixed runs that were valid;\n"+
		" %s and %s are marks inside the set-up, from its start: ZooKeeper serving, every broker registered;\n"+
		" %s is what no phase accounts for before the verdict; teardown and report follow it)\n", n, markEnsemble, markRegistered, restColumn)
}

func fmtSec(d time.Duration) string { return fmt.Sprintf("%.1f", d.Seconds()) }
