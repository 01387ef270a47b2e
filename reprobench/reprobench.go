// Package reprobench measures the regression scenarios (`chaos
// repro-bench`): each scenario's bug and fixed modes run N times, counted
// as expected or not, and timed per harness phase from the run's history.
// The command parses the flags and runs a Bench with its runner.
package reprobench

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/rundir"
	"github.com/zkchaos/zkchaos/scenarios"
)

// Phases are the harness phases timed, in run order, then the check.
var Phases = []string{history.PhaseSetup, history.PhaseWorkload, history.PhaseHeal, history.PhaseFinalReads, history.PhaseCollect}

// Marks inside the set-up, from its start (PhaseTimes): the ZooKeeper
// watcher's first session (the ensemble serving; the watcher connects once
// it is ready) and the last broker registration before the set-up ended
// (a broker the driver kills at once may not have flushed its event log, so
// "every broker's first" can be missing or land after a restart). The column "rest"
// is the wall time to the verdict no phase accounts for: starting the
// process and the run directory, and stopping the brokers. The teardown
// (container logs saved, containers removed) and the report come after the
// verdict, beside the check (pipeline.Execute), and are not counted.
const (
	MarkEnsemble   = "zk-ready"
	MarkRegistered = "registered"
	RestColumn     = "rest"
)

// Columns are the figures a bench row shows after the total.
var Columns = []string{history.PhaseSetup, MarkEnsemble, MarkRegistered, history.PhaseWorkload, history.PhaseHeal,
	history.PhaseFinalReads, history.PhaseCollect, "check", RestColumn}

// Row is one scenario mode's runs.
type Row struct {
	Scenario, Mode string
	Runs, OK       int
	Errors         int // runs the harness could not finish
	Total          []time.Duration
	Phases         map[string][]time.Duration
}

// Result is what one run gives the bench: its directory, its verdicts,
// the wall time from start to verdict and the part of it spent checking.
type Result struct {
	Dir           string
	Results       *rundir.Results
	Took, Checked time.Duration
}

// Runner runs, checks and renders mode m of sc with the run id given
// (chaos repro's run; tests stand in for Docker).
type Runner func(ctx context.Context, sc scenarios.Scenario, m scenarios.Mode, runID string) (Result, error)

// Bench runs each of Scenarios N times in its bug mode and N times in its
// fixed mode.
type Bench struct {
	Scenarios []scenarios.Scenario
	N         int
	Run       Runner
	// Lock, when set, is held around each run (a shared engine's lock).
	Lock func(context.Context) (unlock func(), err error)
	// Log receives one line per run.
	Log io.Writer
}

// Measure runs the bench. A run the harness could not finish counts as not
// as expected (it is what a user of chaos repro would have got) and the
// bench goes on; err ends it: the lock not taken, ctx ended, a history
// that does not read.
func (b Bench) Measure(ctx context.Context) ([]Row, error) {
	log := b.Log
	if log == nil {
		log = io.Discard
	}
	var rows []Row
	for _, sc := range b.Scenarios {
		for _, m := range []scenarios.Mode{sc.BugMode(), sc.FixMode()} {
			row := Row{Scenario: sc.Bug, Mode: m.Name, Phases: map[string][]time.Duration{}}
			for i := range b.N {
				runID := fmt.Sprintf("%s-bench-%s-%s-%d", cluster.NewRunID(), strings.ToLower(sc.Bug), m.Name, i)
				unlock := func() {}
				if b.Lock != nil {
					var err error
					if unlock, err = b.Lock(ctx); err != nil {
						return rows, err
					}
				}
				res, err := b.Run(ctx, sc, m, runID)
				unlock()
				if err != nil {
					if ctx.Err() != nil {
						return rows, err
					}
					fmt.Fprintf(log, "%s %s run %d/%d: harness error: %v\n", sc.Bug, m.Name, i+1, b.N, err)
					row.Runs++
					row.Errors++
					continue
				}
				line, err := row.add(sc, m, res)
				if err != nil {
					return rows, err
				}
				fmt.Fprintf(log, "%s %s run %d/%d: %s\n", sc.Bug, m.Name, i+1, b.N, line)
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// add counts one finished run of mode m of sc in r, and says in a line how
// it went.
func (r *Row) add(sc scenarios.Scenario, m scenarios.Mode, res Result) (string, error) {
	caught := sc.Catcher(res.Results.Results)
	ok := m.Fixed && res.Results.Verdict == checkers.Valid ||
		!m.Fixed && caught != nil && caught.Verdict == checkers.Invalid
	if ok {
		r.OK++
	}
	r.Runs++
	r.Total = append(r.Total, res.Took)
	r.Phases["check"] = append(r.Phases["check"], res.Checked)
	one := map[string][]time.Duration{}
	if err := PhaseTimes(res.Dir, one); err != nil {
		return "", err
	}
	one[RestColumn] = []time.Duration{res.Took - res.Checked - sumFirst(one, Phases)}
	var took []string
	for _, p := range Columns {
		if p == "check" {
			continue
		}
		r.Phases[p] = append(r.Phases[p], one[p]...)
		if len(one[p]) > 0 {
			took = append(took, p+" "+fmtSec(one[p][0]))
		}
	}
	return fmt.Sprintf("%s, as expected %v, after %s (%s, check %s) %s",
		res.Results.Verdict, ok, fmtSec(res.Took), strings.Join(took, ", "), fmtSec(res.Checked), filepath.Base(res.Dir)), nil
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

// PhaseTimes adds the duration of each harness phase of the run in dir,
// and the set-up's marks (MarkEnsemble, MarkRegistered) from its start.
func PhaseTimes(dir string, into map[string][]time.Duration) error {
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
		into[MarkEnsemble] = append(into[MarkEnsemble], time.Duration(zkReady-b))
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
		into[MarkRegistered] = append(into[MarkRegistered], time.Duration(last-b))
	}
	return nil
}

// Write prints one line per row: runs as expected, the median total and
// the median of each column, in seconds.
func Write(w io.Writer, n int, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	head := append([]string{"scenario", "mode", "as expected", "median total"}, Columns...)
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, r := range rows {
		expected := fmt.Sprintf("%d/%d", r.OK, r.Runs)
		if r.Errors > 0 {
			expected += fmt.Sprintf(" (%d harness errors)", r.Errors)
		}
		cells := []string{r.Scenario, r.Mode, expected, fmtSec(harness.Median(r.Total))}
		for _, p := range Columns {
			cells = append(cells, fmtSec(harness.Median(r.Phases[p])))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprintf(w, "(%d runs per mode; medians in seconds; 'as expected' counts bug runs its checker found invalid and fixed runs that were valid;\n"+
		" %s and %s are marks inside the set-up, from its start: ZooKeeper serving, every broker registered;\n"+
		" %s is what no phase accounts for before the verdict; teardown and report follow it)\n", n, MarkEnsemble, MarkRegistered, RestColumn)
}

func fmtSec(d time.Duration) string { return fmt.Sprintf("%.1f", d.Seconds()) }
