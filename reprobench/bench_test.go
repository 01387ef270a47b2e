package reprobench

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
	"github.com/zkchaos/zkchaos/rundir"
	"github.com/zkchaos/zkchaos/scenarios"
)

// A bench runs each scenario's bug mode and fixed mode N times: a bug run
// is as expected when the scenario's checker finds it invalid, a fixed run
// when it is valid; a harness error counts against the mode and the bench
// goes on; each finished run's phases come from its history. The lock is
// held around every run, and its failure ends the bench.
func TestBenchMeasure(t *testing.T) {
	sc, err := scenarios.Get("KAFKA-532")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	historytest.WriteSource(t, dir, "harness", 0,
		phaseEv(0, history.PhaseSetup, history.PhaseBegin), phaseEv(4000, history.PhaseSetup, history.PhaseEnd),
		phaseEv(4000, history.PhaseWorkload, history.PhaseBegin), phaseEv(9000, history.PhaseWorkload, history.PhaseEnd),
	)
	catcher := sc.Catches.Name()
	for _, tt := range []struct {
		name    string
		lockErr error
		// outcome of each run, in order: bug runs then fixed runs
		outcomes []string // "caught", "valid", "error"
		wantRows []Row
		wantErr  string
	}{
		{name: "as expected", outcomes: []string{"caught", "caught", "valid", "valid"},
			wantRows: []Row{{Scenario: "KAFKA-532", Mode: "bug", Runs: 2, OK: 2}, {Scenario: "KAFKA-532", Mode: "fixed", Runs: 2, OK: 2}}},
		{name: "a miss, a false positive and a harness error", outcomes: []string{"valid", "error", "caught", "valid"},
			wantRows: []Row{{Scenario: "KAFKA-532", Mode: "bug", Runs: 2, OK: 0, Errors: 1}, {Scenario: "KAFKA-532", Mode: "fixed", Runs: 2, OK: 1}}},
		{name: "no lock", lockErr: errors.New("lock refused"), wantErr: "lock refused"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			i := 0
			locked := false
			var log bytes.Buffer
			b := Bench{Scenarios: []scenarios.Scenario{sc}, N: 2, Log: &log,
				Lock: func(context.Context) (func(), error) {
					if tt.lockErr != nil {
						return nil, tt.lockErr
					}
					locked = true
					return func() { locked = false }, nil
				},
				Run: func(_ context.Context, _ scenarios.Scenario, m scenarios.Mode, runID string) (Result, error) {
					if !locked || !strings.Contains(runID, "-bench-kafka-532-"+m.Name+"-") {
						t.Errorf("run %s of %s: locked %v", runID, m.Name, locked)
					}
					out := tt.outcomes[i]
					i++
					res := checkers.Result{Checker: catcher, Verdict: checkers.Valid}
					switch out {
					case "error":
						return Result{}, errors.New("set-up failed")
					case "caught":
						res.Verdict = checkers.Invalid
					}
					return Result{Dir: dir, Results: &rundir.Results{Verdict: res.Verdict, Results: []checkers.Result{res}},
						Took: 12 * time.Second, Checked: time.Second}, nil
				}}
			rows, err := b.Measure(t.Context())
			if (err != nil) != (tt.wantErr != "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err %v, want one naming %q", err, tt.wantErr)
			}
			if len(rows) != len(tt.wantRows) {
				t.Fatalf("rows %+v", rows)
			}
			for k, want := range tt.wantRows {
				got := rows[k]
				if got.Scenario != want.Scenario || got.Mode != want.Mode || got.Runs != want.Runs || got.OK != want.OK || got.Errors != want.Errors {
					t.Errorf("row %d: %+v, want %+v", k, got, want)
				}
				// Finished runs: 12 s to the verdict, 1 s of it checking,
				// 4 s set-up and 5 s workload, 2 s no phase accounts for.
				done := got.Runs - got.Errors
				if len(got.Total) != done || len(got.Phases[history.PhaseSetup]) != done || done > 0 && got.Phases[RestColumn][0] != 2*time.Second {
					t.Errorf("row %d timings %v %v", k, got.Total, got.Phases)
				}
			}
			if tt.wantRows == nil {
				return
			}
			harnessError := tt.outcomes[1] == "error"
			if strings.Contains(log.String(), "KAFKA-532 bug run 2/2: harness error: set-up failed") != harnessError {
				t.Errorf("log, harness error %v:\n%s", harnessError, log.String())
			}
			var table bytes.Buffer
			Write(&table, 2, rows)
			if strings.Contains(table.String(), "(1 harness errors)") != harnessError {
				t.Errorf("table, harness error %v:\n%s", harnessError, table.String())
			}
		})
	}
}
