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
	"github.com/zkchaos/zkchaos/history/historytest"
	"github.com/zkchaos/zkchaos/rundir"
)

// powerHistory: workload begins at 1s; event 2 (at 4s) is a violation;
// the nemesis reached controller-after-zk-write.
func powerHistory() *history.History {
	b := historytest.New()
	b.At(1000).Add(history.Event{Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseWorkload, Mark: history.PhaseBegin}})
	b.At(2000).Add(history.Event{Kind: history.KindFaultStop, Fault: &history.Fault{ID: "f1", Name: "failpoint", Failpoint: "controller-after-zk-write", Detail: "window reached"}})
	b.At(4000).Phase()
	b.At(5000).Add(history.Event{Kind: history.KindFaultStop, Fault: &history.Fault{ID: "f2", Name: "failpoint", Failpoint: "broker-after-register", Detail: "window not reached"}})
	return b.History()
}

func TestJudgePowerRun(t *testing.T) {
	h := powerHistory()
	sw532, _ := lookupPowerSwitch("KAFKA-532")
	fixed, _ := lookupPowerSwitch(powerFixed)
	tests := []struct {
		name    string
		sw      powerSwitch
		results []checkers.Result
		caught  bool
		by      string
		ttf     time.Duration // -1: none
	}{
		{"harm checker", sw532, []checkers.Result{{Checker: "controller-fencing", Verdict: checkers.Invalid, Events: []int{2}}}, true, "controller-fencing", 3 * time.Second},
		// A violation citing an earlier event for context happened at its
		// latest event.
		{"violation with context", sw532, []checkers.Result{{Checker: "controller-fencing", Verdict: checkers.Invalid, Events: []int{1, 2},
			Violations: []checkers.Violation{{Events: []int{1, 2}}}}}, true, "controller-fencing", 3 * time.Second},
		// One an absence proves holds from its At: 2.5 s after the
		// workload began, between the events it cites.
		{"violation held from a grace's end", fixed, []checkers.Result{{Checker: "liveness", Verdict: checkers.Invalid, Events: []int{1, 2},
			Violations: []checkers.Violation{{Events: []int{1, 2}, At: historytest.T0 + 3500*historytest.Ms}}}}, true, "liveness", 2500 * time.Millisecond},
		{"other checker is not the harm", sw532, []checkers.Result{{Checker: "liveness", Verdict: checkers.Invalid, Events: []int{1}}}, false, "", -1},
		{"valid", sw532, []checkers.Result{{Checker: "controller-fencing", Verdict: checkers.Valid}}, false, "", -1},
		{"fixed: any invalid is a false positive", fixed, []checkers.Result{{Checker: "liveness", Verdict: checkers.Invalid, Events: []int{1, 2},
			Violations: []checkers.Violation{{Events: []int{2}}, {Events: []int{1}}}}}, true, "liveness", time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := judgePowerRun(tt.sw, 7, "d", checkers.Invalid, tt.results, h)
			if r.Caught != tt.caught || strings.Join(r.By, ",") != tt.by {
				t.Fatalf("caught %v by %v", r.Caught, r.By)
			}
			if tt.ttf < 0 && r.FirstViolation != nil || tt.ttf >= 0 && (r.FirstViolation == nil || *r.FirstViolation != tt.ttf) {
				t.Fatalf("first violation %v, want %s", r.FirstViolation, tt.ttf)
			}
			if strings.Join(r.Windows, ",") != "controller-after-zk-write" {
				t.Fatalf("windows reached %v", r.Windows)
			}
		})
	}
}

func TestPowerTable(t *testing.T) {
	d := func(s int) *time.Duration { v := time.Duration(s) * time.Second; return &v }
	runs := []powerRun{
		{Switch: "KAFKA-532", Caught: true, By: []string{"controller-fencing"}, FirstViolation: d(10), Seconds: 80, Bytes: 20e6},
		{Switch: "KAFKA-532", Caught: true, By: []string{"controller-fencing", "durability"}, FirstViolation: d(30), Seconds: 90, Bytes: 24e6},
		{Switch: "KAFKA-532", Caught: true, By: []string{"durability"}, FirstViolation: d(20), Seconds: 84, Bytes: 22e6},
		{Switch: "KAFKA-532"}, // cost unknown: left out of the medians
		{Switch: powerFixed},
		{Switch: powerFixed, Caught: true, By: []string{"liveness"}, FirstViolation: d(5)},
	}
	rows := powerTable(runs)
	if len(rows) != 2 || rows[0].Switch != "KAFKA-532" || rows[1].Switch != powerFixed {
		t.Fatalf("rows %+v", rows)
	}
	r := rows[0]
	if r.Runs != 4 || r.Caught != 3 || r.ByChecker["controller-fencing"] != 2 || r.ByChecker["durability"] != 2 || *r.Median != 20*time.Second || *r.Worst != 30*time.Second ||
		r.MedianSeconds != 84 || r.MedianBytes != 22e6 {
		t.Fatalf("KAFKA-532 row %+v", r)
	}
	var out bytes.Buffer
	printPowerTable(&out, rows, []string{"follower-after-truncation"})
	for _, want := range []string{"3/4", "controller-fencing 2, durability 2", "20s", "30s", "1/2 false positives", "84s, 22.0 MB", "no run reached: follower-after-truncation"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if got := unreachedWindows([]powerRun{{Windows: []string{"controller-after-zk-write"}}}); len(got) != 6 || got[0] != "controller-before-broker-change" {
		t.Fatalf("unreached %v", got)
	}
}

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
	root.SetArgs([]string{"power", "--seeds", "2", "--seed", "1", "--switches", "KAFKA-532,KAFKA-3861," + powerFixed, "--runs", runs, "--lock", lock})
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
	var rep powerReport
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Rows) != 3 || len(rep.Runs) != 6 || rep.Rows[0].Caught != 1 {
		t.Fatalf("power.json %s (%v)", b, err)
	}

	for _, args := range [][]string{
		{"power", "--seeds", "0"},
		{"power", "--switches", "KAFKA-1"},
		{"power", "--faults", "nope"},
		{"power", "--seeds", "1", "--switches", powerFixed, "--runs", runs, "--lock", filepath.Join(runs, "no-such-dir", "lock")},
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
	for _, want := range []string{"mixed settings: time limit: 1m0s in 3 runs, 30s in 1 run", "mixed settings: build: c705f7f4c6a1 in 3 runs, (not recorded) in 1 run"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, skipped := range []string{"e-scenario", "f-unchecked"} {
		if !strings.Contains(errOut.String(), skipped) {
			t.Errorf("%s not named as left out:\n%s", skipped, errOut)
		}
	}
	var rep powerReport
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

// A stored run's cost: from run.json to results.json being written, and
// the disk space under its directory; nothing known without those files.
func TestRunCost(t *testing.T) {
	dir := t.TempDir()
	if took, size := runCost(dir); took != 0 || size != 0 {
		t.Fatalf("empty directory: %s, %d bytes", took, size)
	}
	begin := time.Now().Add(-time.Minute)
	for _, f := range []struct {
		path string
		size int
		at   time.Time
	}{
		{rundir.RunFile, 100, begin},
		{rundir.ResultsFile, 300, begin.Add(82 * time.Second)},
		{"history/n1.jsonl", 600, begin.Add(70 * time.Second)},
	} {
		p := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, f.size), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, f.at, f.at); err != nil {
			t.Fatal(err)
		}
	}
	// A preallocated ZooKeeper log: 64 MB long, nothing written.
	fh, err := os.Create(filepath.Join(dir, "zk-log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := fh.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	if took, size := runCost(dir); took != 82*time.Second || size < 1000 || size > 1<<20 {
		t.Fatalf("got %s, %d bytes; want 1m22s, the 1000 bytes written (in whole blocks), not the sparse 64 MB", took, size)
	}
}

// The runs to open next are named with their directories: a bug switch's
// misses and every-fix-on's false positives, nothing else.
func TestPrintPowerMisses(t *testing.T) {
	var out bytes.Buffer
	printPowerMisses(&out, []powerRun{
		{Switch: "KAFKA-532", Seed: 1, Caught: true, RunDir: "r1"},
		{Switch: "KAFKA-532", Seed: 2, Verdict: checkers.Valid, RunDir: "r2"},
		{Switch: powerFixed, Seed: 3, Verdict: checkers.Valid, RunDir: "r3"},
		{Switch: powerFixed, Seed: 4, Caught: true, Verdict: checkers.Invalid, By: []string{"liveness"}, RunDir: "r4"},
	})
	want := "not caught: KAFKA-532 seed 2 (valid): r2\nfalse positive: every-fix-on seed 4, invalid by liveness: r4\n"
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
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

// Each row tallies its runs' fence counts; the table names the fences no
// run of a row brought a stale input to.
func TestPowerFenceTable(t *testing.T) {
	counts := func(ctrlIn, ctrlRej int) []checkers.FenceCount {
		var out []checkers.FenceCount
		for _, f := range checkers.Fences {
			c := checkers.FenceCount{Fence: f}
			if f == checkers.FenceBrokerControllerEpoch {
				c.Inputs, c.Rejected = ctrlIn, ctrlRej
			}
			out = append(out, c)
		}
		return out
	}
	runs := []powerRun{
		{Switch: "KAFKA-532", Fences: counts(4, 0)},
		{Switch: "KAFKA-532", Fences: counts(0, 0)},
		{Switch: powerFixed, Fences: counts(0, 0)},
		{Switch: powerFixed}, // judged before fences were counted: untested in it
	}
	rows := powerTable(runs)
	if len(rows) != 2 {
		t.Fatalf("rows %+v", rows)
	}
	got := rows[0].Fences[0]
	if got.Fence != checkers.FenceBrokerControllerEpoch || got.Runs != 2 || got.RunsWithInput != 1 || got.RunsWithRejection != 0 || got.Inputs != 4 || got.Rejected != 0 {
		t.Fatalf("KAFKA-532 %+v", got)
	}
	if f := rows[1].Fences[0]; f.Runs != 2 || !f.Untested() {
		t.Fatalf("every-fix-on %+v", f)
	}
	var out bytes.Buffer
	printPowerTable(&out, rows, nil)
	s := out.String()
	for _, want := range []string{
		"KAFKA-532     broker-controller-epoch",
		"every-fix-on  broker-controller-epoch",
		"untested in every-fix-on (no stale input in 2 runs): broker-controller-epoch, broker-broker-epoch",
		"untested in KAFKA-532 (no stale input in 2 runs): broker-broker-epoch,",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	// The KAFKA-532 line: 1 of 2 runs saw 4 stale inputs, none refused.
	if !strings.Contains(s, "1/2") || strings.Contains(s, "untested in KAFKA-532 (no stale input in 2 runs): broker-controller-epoch") {
		t.Errorf("KAFKA-532's tested fence:\n%s", s)
	}
	if r := judgePowerRun(powerSwitches[0], 1, "d", checkers.Valid, nil, powerHistory()); len(r.Fences) != len(checkers.Fences) {
		t.Errorf("judged run counts %d fences, want %d", len(r.Fences), len(checkers.Fences))
	}
}
