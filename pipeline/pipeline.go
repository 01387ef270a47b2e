// Package pipeline is one chaos run from start to verdict, written once for
// every caller (chaos run, repro, repro-bench, shrink and power, the scenario
// tests): harness.Run records the run, judge.Check judges its history
// (with porcupine's visualization), reports.RenderHTML writes the report.
//
// It owns the order of those stages and nothing else: what a run does is
// harness's, what a verdict means is checkers', what a report shows is
// reports'; the exit status and what to print stay with cmd/chaos. It is
// the one package that imports harness, checkers and reports together.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/judge"
	"github.com/zkchaos/zkchaos/reports"
	"github.com/zkchaos/zkchaos/rundir"
)

// Options tune the stages after the run.
type Options struct {
	// Check are the checker knobs; the zero value means
	// checkers.DefaultConfig(). Its VisualizePath is set by Finish.
	Check *checkers.Config
	// NoVisualize skips porcupine's page (RUN_DIR/linearizability.html).
	NoVisualize bool
	// OnVerdict, when set, is called once the checkers have judged the run,
	// before the report is rendered and while Execute's teardown may still
	// be removing containers: what a person waits for comes first.
	OnVerdict func(Outcome)
}

// Outcome is what a run left and what the checkers said.
type Outcome struct {
	Dir     string          // the run directory (absolute once the run started)
	Results *rundir.Results // nil when the run or its check failed
	Report  string          // path of report.html; "" when not rendered
	// Checked is how long the check took (reading the history included);
	// benchmarks report it as a phase of its own.
	Checked time.Duration
}

// Verdict is the run's overall verdict (Unknown when it was never checked).
func (o Outcome) Verdict() checkers.Verdict {
	if o.Results == nil {
		return checkers.Unknown
	}
	return o.Results.Verdict
}

// Result returns what checker said, or nil when it did not run: a caller
// that expects a checker to fire (a scenario) can tell "did not fire" from
// "does not exist".
func (o Outcome) Result(checker string) *checkers.Result {
	if o.Results == nil {
		return nil
	}
	for i := range o.Results.Results {
		if o.Results.Results[i].Checker == checker {
			return &o.Results.Results[i]
		}
	}
	return nil
}

// Execute runs cfg (containers, workload, faults or a scenario's driver),
// then Finish. The returned Outcome names the run directory even on error,
// so the partial history and logs can be found; an error from the run
// itself says so. The run's teardown (saving container logs, removing the
// containers) goes on beside the check; the report, which links those
// logs, is rendered once it is done.
func Execute(ctx context.Context, cfg harness.RunConfig, opt Options) (Outcome, error) {
	var teardown func() error
	cfg.Teardown = func(finish func() error) { teardown = finish }
	dir, err := harness.Run(ctx, cfg)
	if err != nil {
		return Outcome{Dir: dir}, fmt.Errorf("partial history and logs kept in %s: %w", dir, err)
	}
	torn := make(chan error, 1)
	if teardown == nil {
		torn <- nil
	} else {
		go func() { torn <- teardown() }()
	}
	return finish(dir, opt, torn)
}

// Finish checks a stored run (writing results.json and, unless told not
// to, porcupine's visualization) and renders its HTML report. It needs no
// Docker. A history that cannot be read is an error wrapping
// judge.ErrBadHistory.
func Finish(dir string, opt Options) (Outcome, error) {
	torn := make(chan error, 1)
	torn <- nil
	return finish(dir, opt, torn)
}

// finish is Finish once the run's teardown, running beside it, reports on
// torn; it waits for that before rendering and before returning.
func finish(dir string, opt Options, torn <-chan error) (Outcome, error) {
	out := Outcome{Dir: dir}
	check := checkers.DefaultConfig()
	if opt.Check != nil {
		check = *opt.Check
	}
	check.VisualizePath = ""
	if !opt.NoVisualize {
		check.VisualizePath = filepath.Join(dir, rundir.LinearizeFile)
	}
	start := time.Now()
	res, err := judge.Check(dir, check)
	if err != nil {
		return out, errors.Join(err, <-torn)
	}
	out.Results, out.Checked = res, time.Since(start)
	if opt.OnVerdict != nil {
		opt.OnVerdict(out)
	}
	if err := <-torn; err != nil {
		return out, fmt.Errorf("teardown of %s: %w", dir, err)
	}
	page, err := reports.RenderHTML(dir)
	if err != nil {
		return out, fmt.Errorf("report of %s: %w", dir, err)
	}
	out.Report = page
	return out, nil
}
