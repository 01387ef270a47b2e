package power

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
	"github.com/zkchaos/zkchaos/nodecover"
	"github.com/zkchaos/zkchaos/rundir"
	"github.com/zkchaos/zkchaos/zklayout"
)

// emptyRun is a run directory whose history has one harness event.
func emptyRun(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	historytest.WriteSource(t, dir, "harness", 0, history.Event{Kind: history.KindPhase, Time: 1,
		Phase: &history.Phase{Name: history.PhaseWorkload, Mark: history.PhaseBegin}})
	return dir
}

// Each switch runs seed, seed+1, ... with its bug switches and its node
// flags after the configuration's; a run the harness could not finish is
// named and left out, and the others still count; the lock is held around
// every run and its failure, like a cancelled context, ends the
// measurement.
func TestMeasure(t *testing.T) {
	sw532, _ := Lookup("KAFKA-532")
	sw3861, _ := Lookup("KAFKA-3861")
	base := harness.RunConfig{RunSpec: rundir.RunSpec{Seed: 10, NodeFlags: []string{"--x"}}}
	type call struct {
		seed   uint64
		bugs   string
		flags  string
		strict bool
		locked bool
	}
	for _, tt := range []struct {
		name       string
		lockErr    error
		failSeed   uint64 // the executor fails this seed of KAFKA-532
		cancel     bool   // and cancels the context then
		wantCalls  int
		wantRuns   int
		wantFailed int
		wantErr    string
	}{
		{name: "every run judged", wantCalls: 4, wantRuns: 4},
		{name: "a harness error is left out", failSeed: 11, wantCalls: 4, wantRuns: 3, wantFailed: 1},
		{name: "Ctrl-C ends it", failSeed: 10, cancel: true, wantCalls: 1, wantRuns: 0, wantFailed: 1, wantErr: "KAFKA-532 seed 10"},
		{name: "no lock, no run", lockErr: errors.New("lock refused"), wantCalls: 0, wantErr: "lock refused"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var calls []call
			locked := false
			m := Measure{Config: base, Seeds: 2, Switches: []Switch{sw532, sw3861}, RunsDir: t.TempDir(),
				Lock: func(context.Context) (func(), error) {
					if tt.lockErr != nil {
						return nil, tt.lockErr
					}
					locked = true
					return func() { locked = false }, nil
				},
				Execute: func(_ context.Context, rc harness.RunConfig, check checkers.Config) (string, checkers.Verdict, []checkers.Result, error) {
					calls = append(calls, call{rc.Seed, strings.Join(rc.Bugs, ","), strings.Join(rc.NodeFlags, " "), check.StrictAvailability, locked})
					if len(rc.Bugs) > 0 && rc.Seed == tt.failSeed {
						if tt.cancel {
							cancel()
						}
						return rc.RunDir, "", nil, errors.New("set-up failed")
					}
					return emptyRun(t), checkers.Valid, nil, nil
				}}
			runs, failed, err := m.Run(ctx)
			if len(calls) != tt.wantCalls || len(runs) != tt.wantRuns || len(failed) != tt.wantFailed {
				t.Fatalf("calls %+v, runs %d, failed %v", calls, len(runs), failed)
			}
			if (err != nil) != (tt.wantErr != "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err %v, want one naming %q", err, tt.wantErr)
			}
			if tt.wantCalls == 4 {
				want := []call{
					{10, "KAFKA-532", "--x", false, true}, {11, "KAFKA-532", "--x", false, true},
					{10, "", "--x " + strings.Join(sw3861.NodeFlags, " "), true, true}, {11, "", "--x " + strings.Join(sw3861.NodeFlags, " "), true, true},
				}
				for i := range want {
					if calls[i] != want[i] {
						t.Errorf("run %d: %+v, want %+v", i, calls[i], want[i])
					}
				}
			}
		})
	}
}

func TestParseSwitches(t *testing.T) {
	got, err := ParseSwitches("KAFKA-532, " + Fixed)
	if err != nil || len(got) != 2 || got[0].Name != "KAFKA-532" || got[1].Name != Fixed {
		t.Fatalf("%+v, %v", got, err)
	}
	if _, err := ParseSwitches("KAFKA-1"); err == nil || !strings.Contains(err.Error(), `unknown "KAFKA-1" (known: KAFKA-532,`) {
		t.Fatalf("unknown switch: %v", err)
	}
}

// Coverage-guided: a run that reaches blocks or combinations no earlier run
// of its switch reached puts its schedule in the corpus, saying which
// novelty, and the next seed runs a mutation of a corpus schedule (named
// with its parent and mutations); a run that adds nothing new does not
// enter the corpus. Every run is instrumented.
func TestMeasureCoverageGuided(t *testing.T) {
	fixed, _ := Lookup(Fixed)
	base := harness.RunConfig{RunSpec: rundir.RunSpec{Seed: 1, TimeLimit: 90 * time.Second, MinHold: 2 * time.Second, MaxHold: 6 * time.Second,
		Faults: []string{"pause-node", "bounce-node"}, Nodes: 3, ZK: rundir.ZK{Servers: 3}}}
	// reachedBy[i] are the blocks the i-th run reaches, struck[i] the
	// brokers its faults pause (n1 is the controller).
	reachedBy := [][]string{{"a", "b"}, {"a"}, {"a", "b", "c"}, {"a"}, {"a", "d"}}
	struck := [][]string{{"n1"}, {"n2"}, {"n1"}, {"n2", "n1"}, nil}
	var got []harness.RunConfig
	m := Measure{Config: base, Seeds: len(reachedBy), Switches: []Switch{fixed}, RunsDir: t.TempDir(), CoverageGuided: true,
		Execute: func(_ context.Context, rc harness.RunConfig, _ checkers.Config) (string, checkers.Verdict, []checkers.Result, error) {
			got = append(got, rc)
			i := len(got) - 1
			dir := emptyRun(t)
			sched := rc.Plan()
			if err := sched.Save(filepath.Join(dir, rundir.ScheduleFile)); err != nil {
				t.Fatal(err)
			}
			cov, _ := json.Marshal(nodecover.Summary{Blocks: 10, Covered: len(reachedBy[i]), Reached: reachedBy[i]})
			if err := os.WriteFile(filepath.Join(dir, nodecover.File), cov, 0o644); err != nil {
				t.Fatal(err)
			}
			ctl := int32(1)
			historytest.WriteSource(t, dir, "zk", 0, history.Event{Kind: history.KindZKWatch, Time: 2,
				Watch: &history.Watch{Path: zklayout.ControllerPath, Type: history.WatchChanged, ControllerID: &ctl}})
			var faults []history.Event
			for j, b := range struck[i] {
				faults = append(faults, history.Event{Kind: history.KindFaultStart, Time: int64(3 + j), Fault: &history.Fault{ID: fmt.Sprintf("f%d", j), Name: "pause", Targets: []string{b}}})
			}
			if len(faults) > 0 {
				historytest.WriteSource(t, dir, "nemesis", 0, faults...)
			}
			return dir, checkers.Valid, nil, nil
		}}
	runs, failed, err := m.Run(t.Context())
	if err != nil || len(failed) > 0 || len(runs) != len(reachedBy) {
		t.Fatalf("runs %d, failed %v, err %v", len(runs), failed, err)
	}
	for i, rc := range got {
		if !rc.Cover {
			t.Errorf("run %d not instrumented", i)
		}
		if (rc.Schedule != nil) != (i > 0) {
			t.Errorf("run %d: stored schedule %v, want one from the corpus after the first run", i, rc.Schedule != nil)
		}
	}
	wantNew, wantUnion := []int{2, 0, 1, 0, 1}, []int{2, 2, 3, 3, 4}
	wantCombos, wantNewCombos, wantComboUnion := []int{1, 1, 1, 2, 0}, []int{1, 1, 0, 0, 0}, []int{1, 2, 2, 2, 2}
	wantJoined := []string{"new blocks,new combinations", "new combinations", "new blocks", "", "new blocks"}
	for i, r := range runs {
		c := r.Coverage
		if c == nil || c.New != wantNew[i] || c.Union != wantUnion[i] {
			t.Fatalf("run %d coverage %+v, want %d new, union %d", i, c, wantNew[i], wantUnion[i])
		}
		if r.Combinations != wantCombos[i] || r.NewCombinations != wantNewCombos[i] || r.CombinationsUnion != wantComboUnion[i] {
			t.Errorf("run %d: %d combinations %v, %d new, union %d; want %d, %d new, union %d", i, r.Combinations, r.Reached, r.NewCombinations, r.CombinationsUnion,
				wantCombos[i], wantNewCombos[i], wantComboUnion[i])
		}
		if j := strings.Join(r.JoinedCorpus, ","); j != wantJoined[i] {
			t.Errorf("run %d joined the corpus for %q, want %q", i, j, wantJoined[i])
		}
		if i > 0 && (c.Parent == "" || len(c.Mutations) == 0) {
			t.Errorf("run %d: parent %q, mutations %v", i, c.Parent, c.Mutations)
		}
	}
	// The fourth run reached nothing new: no later run descends from it.
	if runs[4].Coverage.Parent == runs[3].RunDir {
		t.Errorf("run 4 descends from run 3, which reached nothing new")
	}
	row := Table(runs)
	for _, r := range row {
		if r.Switch == Fixed && (r.Coverage == nil || r.Coverage.Union != 4 || r.Coverage.RunsWithNew != 3 || r.Coverage.Blocks != 10 || r.Coverage.MedianCovered != 2 ||
			r.Combinations != 2 || r.RunsWithNewCombinations != 2 || r.MedianCombinations != 1) {
			t.Fatalf("row %+v, coverage %+v", r, r.Coverage)
		}
	}
}

// The KAFKA-12671 row runs the queue workload with transactions, whose
// schedules open with that bug's window; every other row keeps the
// measurement's workload (the log workload), whose schedules do not.
func TestKafka12671RowRunsTransactions(t *testing.T) {
	sw12671, _ := Lookup("KAFKA-12671")
	sw532, _ := Lookup("KAFKA-532")
	fixed, _ := Lookup(Fixed)
	base := harness.RunConfig{RunSpec: rundir.Default()}
	base.Seed, base.TimeLimit = 1, time.Minute
	type call struct {
		workload string
		txn      bool
		opening  string
	}
	got := map[string]call{}
	m := Measure{Config: base, Seeds: 1, Switches: []Switch{sw12671, sw532, fixed}, RunsDir: t.TempDir(),
		Execute: func(_ context.Context, rc harness.RunConfig, _ checkers.Config) (string, checkers.Verdict, []checkers.Result, error) {
			c := call{workload: rc.Workload, txn: rc.QueueTxn}
			if s := rc.Plan(); len(s.Steps) > 0 && s.Steps[0].Opening {
				c.opening = faults.OpeningBug(s.Steps[0])
			}
			got[strings.Join(rc.Bugs, ",")] = c
			return emptyRun(t), checkers.Valid, nil, nil
		}}
	if _, _, err := m.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := map[string]call{
		"KAFKA-12671": {rundir.WorkloadQueue, true, "KAFKA-12671"},
		"KAFKA-532":   {base.Workload, false, "KAFKA-532"},
		"":            {base.Workload, false, "KAFKA-532"},
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("row with bugs %q: %+v, want %+v", k, got[k], w)
		}
	}
}
