package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/wanttext"
	"github.com/zkchaos/zkchaos/power"
	"github.com/zkchaos/zkchaos/rundir"
)

// The command runs every switch × seed through the executor, prints the
// table and writes power.json; bad flags exit 2.
func TestPowerCommand(t *testing.T) {
	var calls []string
	lock := filepath.Join(t.TempDir(), "docker.lock")
	unlockedRuns := 0
	old := powerExecute
	oldPre := powerPreflight
	t.Cleanup(func() { powerExecute, powerPreflight = old, oldPre })
	powerPreflight = func(context.Context) error { return nil }
	powerExecute = func(_ context.Context, rc harness.RunConfig, _ checkers.Config) (string, checkers.Verdict, []checkers.Result, error) {
		calls = append(calls, strings.Join(rc.Bugs, "+")+"|"+strings.Join(rc.NodeFlags, " "))
		// --lock holds the file during each run: a second taker fails.
		if f, err := os.Open(lock); err != nil {
			unlockedRuns++
		} else {
			if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
				unlockedRuns++
			}
			f.Close()
		}
		dir := writeRun(t, map[string][]history.Event{"harness": {{Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseWorkload, Mark: history.PhaseBegin}}}})
		res := checkers.Result{Checker: "controller-fencing", Verdict: checkers.Valid}
		if len(rc.Bugs) > 0 && rc.Seed%2 == 1 {
			res.Verdict, res.Events = checkers.Invalid, []int{0}
		}
		return dir, res.Verdict, []checkers.Result{res}, nil
	}
	runs := t.TempDir()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"power", "--seeds", "2", "--seed", "1", "--switches", "KAFKA-532,KAFKA-3861," + power.Fixed, "--runs", runs, "--lock", lock})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	f3861 := "|--offline-election=offline --min-insync-replicas=2 --replica-lag-time-max=2s"
	want := []string{"KAFKA-532|", "KAFKA-532|", f3861, f3861, "|", "|"}
	if strings.Join(calls, ";") != strings.Join(want, ";") {
		t.Fatalf("executed %q, want %q", calls, want)
	}
	if unlockedRuns > 0 {
		t.Errorf("%d of %d runs executed without holding --lock", unlockedRuns, len(calls))
	}
	if !strings.Contains(out.String(), "KAFKA-532") || !strings.Contains(out.String(), "1/2") {
		t.Fatalf("table:\n%s", out.String())
	}
	b, err := os.ReadFile(filepath.Join(runs, "power.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep power.Report
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Rows) != 3 || len(rep.Runs) != 6 || rep.Rows[0].Caught != 1 {
		t.Fatalf("power.json %s (%v)", b, err)
	}

	for _, args := range [][]string{
		{"power", "--seeds", "0"},
		{"power", "--switches", "KAFKA-1"},
		{"power", "--faults", "nope"},
		{"power", "--seeds", "1", "--switches", power.Fixed, "--runs", runs, "--lock", filepath.Join(runs, "no-such-dir", "lock")},
	} {
		root := newRootCmd()
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		root.SetArgs(args)
		if err := root.Execute(); exitCode(err) != exitBad {
			t.Errorf("%v: exit %d (%v), want %d", args, exitCode(err), err, exitBad)
		}
	}
}

// --from makes the table from stored runs: each counts for the switch its
// run.json names, and scenario runs, unchecked runs and other folders are
// left out by name.
func TestPowerFromStoredRuns(t *testing.T) {
	root := t.TempDir()
	wl := history.Event{Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseWorkload, Mark: history.PhaseBegin}}
	store := func(name string, info rundir.Info, verdict checkers.Verdict, checker string) {
		t.Helper()
		src := writeRun(t, map[string][]history.Event{"harness": {wl, {Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseWorkload, Mark: history.PhaseEnd}}}})
		dir := filepath.Join(root, name)
		if err := os.Rename(src, dir); err != nil {
			t.Fatal(err)
		}
		if err := rundir.WriteInfo(dir, info); err != nil {
			t.Fatal(err)
		}
		if verdict == "" {
			return // never checked
		}
		res := checkers.Result{Checker: checker, Verdict: verdict}
		if verdict == checkers.Invalid {
			res.Events = []int{1}
		}
		if err := rundir.WriteResults(dir, &rundir.Results{Verdict: verdict, Results: []checkers.Result{res}}); err != nil {
			t.Fatal(err)
		}
	}
	// Seed 2 of KAFKA-532 ran 30 s on another build: the table must say
	// it mixes settings, and fill in those all runs share.
	minute, build := time.Minute, "c705f7f4c6a1"
	store("a-532-seed1", rundir.Info{Seed: 1, Bugs: []string{"KAFKA-532"}, TimeLimit: minute, Build: build, SpreadTopic: "chaos-rf2"}, checkers.Invalid, "controller-fencing")
	store("b-532-seed2", rundir.Info{Seed: 2, Bugs: []string{"KAFKA-532"}, TimeLimit: minute / 2, SpreadTopic: "chaos-rf2"}, checkers.Valid, "controller-fencing")
	store("c-fixed-seed1", rundir.Info{Seed: 1, TimeLimit: minute, Build: build, SpreadTopic: "chaos-rf2"}, checkers.Valid, "controller-fencing")
	store("d-3861-seed1", rundir.Info{Seed: 1, NodeFlags: []string{"--offline-election=offline", "--min-insync-replicas=2", "--replica-lag-time-max=2s"}, TimeLimit: minute, Build: build, SpreadTopic: "chaos-rf2"}, checkers.Invalid, "availability")
	store("e-scenario", rundir.Info{Bugs: []string{"KAFKA-532"}, Scenario: "KAFKA-532"}, checkers.Invalid, "controller-fencing")
	store("f-unchecked", rundir.Info{Seed: 3, Bugs: []string{"KAFKA-532"}}, "", "")
	if err := os.Mkdir(filepath.Join(root, "not-a-run"), 0o755); err != nil {
		t.Fatal(err)
	}

	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	cmd := newRootCmd()
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	cmd.SetArgs([]string{"power", "--from", root})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("power --from: %v\n%s", err, errOut)
	}
	for _, want := range []string{"KAFKA-532    1/2", "KAFKA-3861   1/1", "every-fix-on  0/1 false positives"} {
		if !strings.Contains(strings.Join(strings.Fields(out.String()), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	wanttext.Contains(t, "table", out.String(), "mixed settings: time limit: 1m0s in 3 runs, 30s in 1 run", "mixed settings: build: c705f7f4c6a1 in 3 runs, (not recorded) in 1 run")
	for _, skipped := range []string{"e-scenario", "f-unchecked"} {
		if !strings.Contains(errOut.String(), skipped) {
			t.Errorf("%s not named as left out:\n%s", skipped, errOut)
		}
	}
	var rep power.Report
	if b, err := os.ReadFile(filepath.Join(root, "power.json")); err != nil || json.Unmarshal(b, &rep) != nil || len(rep.Runs) != 4 || len(rep.From) != 1 ||
		rep.Seeds != 2 || rep.FirstSeed != 1 || !rep.SpreadTopic || rep.TimeLimit != "" || rep.RunBuild != "" || len(rep.Mixed) != 2 {
		t.Fatalf("power.json: %+v (%v)", rep, err)
	}

	cmd = newRootCmd()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"power", "--from", filepath.Join(root, "not-a-run")})
	if err := cmd.Execute(); exitCode(err) != exitBad || !strings.Contains(err.Error(), "no checked random runs") {
		t.Fatalf("--from an empty folder: exit %d (%v), want %d naming the problem", exitCode(err), err, exitBad)
	}

	// A run whose files do not read stops the table, naming the file; only
	// one without results.json (unchecked, or still running) is left out.
	for _, bad := range []struct{ file, content string }{
		{rundir.ResultsFile, `{"verdict":`},
		{rundir.RunFile, `{"Seed": "x",`},
		{filepath.Join(history.HistoryDir, "harness.jsonl"), "garbage\n"},
	} {
		from := t.TempDir()
		run := filepath.Join(from, "run")
		copyDir(t, filepath.Join(root, "a-532-seed1"), run)
		if err := os.WriteFile(filepath.Join(run, bad.file), []byte(bad.content), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd = newRootCmd()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs([]string{"power", "--from", from})
		if err := cmd.Execute(); exitCode(err) != exitBad || !strings.Contains(err.Error(), filepath.Join(run, bad.file)) {
			t.Errorf("--from a run with a corrupt %s: exit %d (%v), want %d naming it", bad.file, exitCode(err), err, exitBad)
		}
	}
}

// With the engine unreachable, power stops before its first seed: one error,
// exit 2, and no run dir per seed.
func TestPowerStopsWhenTheEngineIsUnreachable(t *testing.T) {
	noEngine(t)
	runs := filepath.Join(t.TempDir(), "runs")
	out, code := runCLI(t, "power", "--runs", runs, "--seeds", "3", "--switches", "KAFKA-532")
	if code != exitBad || !strings.Contains(out, "docker engine unreachable at unix:///nonexistent") {
		t.Fatalf("exit %d, want %d naming the engine:\n%s", code, exitBad, out)
	}
	if _, err := os.Stat(runs); err == nil {
		t.Errorf("created %s", runs)
	}
}

// --workload queue, --queue-txn and --readers reach every run's settings,
// and power.json names the workload.
func TestPowerQueueWorkload(t *testing.T) {
	old, oldPre := powerExecute, powerPreflight
	t.Cleanup(func() { powerExecute, powerPreflight = old, oldPre })
	powerPreflight = func(context.Context) error { return nil }
	var got []rundir.RunSpec
	powerExecute = func(_ context.Context, rc harness.RunConfig, _ checkers.Config) (string, checkers.Verdict, []checkers.Result, error) {
		got = append(got, rc.RunSpec)
		dir := writeRun(t, map[string][]history.Event{"harness": {{Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseWorkload, Mark: history.PhaseBegin}}}})
		return dir, checkers.Valid, []checkers.Result{{Checker: "queue-lost-write", Verdict: checkers.Valid}}, nil
	}
	runs := t.TempDir()
	root := newRootCmd()
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"power", "--seeds", "1", "--switches", power.Fixed, "--runs", runs, "--workload", "queue", "--queue-txn", "--readers", "4"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Workload != rundir.WorkloadQueue || !got[0].QueueTxn || got[0].Readers != 4 {
		t.Fatalf("runs executed with %+v, want one queue run with transactions and 4 readers", got)
	}
	b, err := os.ReadFile(filepath.Join(runs, "power.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep power.Report
	if err := json.Unmarshal(b, &rep); err != nil || rep.Workload != rundir.WorkloadQueue || !rep.QueueTxn {
		t.Fatalf("power.json %s (%v): want workload queue with transactions", b, err)
	}
}
