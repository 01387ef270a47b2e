package power

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
	"github.com/zkchaos/zkchaos/internal/wanttext"
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

func TestJudge(t *testing.T) {
	h := powerHistory()
	sw532, _ := Lookup("KAFKA-532")
	fixed, _ := Lookup(Fixed)
	tests := []struct {
		name    string
		sw      Switch
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
			r := Judge(tt.sw, 7, "d", checkers.Invalid, tt.results, h)
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

func TestTable(t *testing.T) {
	d := func(s int) *time.Duration { v := time.Duration(s) * time.Second; return &v }
	runs := []Run{
		{Switch: "KAFKA-532", Caught: true, By: []string{"controller-fencing"}, FirstViolation: d(10), Seconds: 80, Bytes: 20e6},
		{Switch: "KAFKA-532", Caught: true, By: []string{"controller-fencing", "durability"}, FirstViolation: d(30), Seconds: 90, Bytes: 24e6},
		{Switch: "KAFKA-532", Caught: true, By: []string{"durability"}, FirstViolation: d(20), Seconds: 84, Bytes: 22e6},
		{Switch: "KAFKA-532"}, // cost unknown: left out of the medians
		{Switch: Fixed, Combinations: 1, Reached: []string{"pause/leader/-/isr-full"}, NewCombinations: 1, Coverage: &RunCoverage{Blocks: 100, Covered: 30, New: 30, Union: 30}},
		{Switch: Fixed, Caught: true, By: []string{"liveness"}, FirstViolation: d(5), Combinations: 2, Reached: []string{"pause/leader/-/isr-full", "kill/controller/-/offline"},
			NewCombinations: 1, Coverage: &RunCoverage{Blocks: 100, Covered: 20, Union: 30}},
	}
	rows := Table(runs)
	if len(rows) != 2 || rows[0].Switch != "KAFKA-532" || rows[1].Switch != Fixed {
		t.Fatalf("rows %+v", rows)
	}
	r := rows[0]
	if r.Runs != 4 || r.Caught != 3 || r.ByChecker["controller-fencing"] != 2 || r.ByChecker["durability"] != 2 || *r.Median != 20*time.Second || *r.Worst != 30*time.Second ||
		r.MedianSeconds != 84 || r.MedianBytes != 22e6 {
		t.Fatalf("KAFKA-532 row %+v", r)
	}
	if f := rows[1]; f.Combinations != 2 || f.MedianCombinations != 1.5 || f.RunsWithNewCombinations != 2 || f.Coverage == nil || f.Coverage.MedianCovered != 25 || f.Coverage.Union != 30 {
		t.Fatalf("every-fix-on row %+v, coverage %+v", f, f.Coverage)
	}
	var out bytes.Buffer
	PrintTable(&out, rows, []string{"follower-after-truncation"})
	wanttext.Contains(t, "table", out.String(), "3/4", "controller-fencing 2, durability 2", "20s", "30s", "1/2 false positives", "84s, 22.0 MB", "no run reached: follower-after-truncation",
		"node coverage, every-fix-on: 30 of 100 blocks reached by 2 instrumented runs together (30.0%), 25 by the median run (25.0%); 1 runs reached a block no earlier run had",
		"combinations, every-fix-on: 2 distinct (fault, target role, failpoint window, partition state) reached by 2 runs together, 1.5 by the median run; 2 runs reached one no earlier run had")
	if got := UnreachedWindows([]Run{{Windows: []string{"controller-after-zk-write"}}}); len(got) != len(faults.FPWindows)-1 || got[0] != "controller-before-broker-change" {
		t.Fatalf("unreached %v", got)
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
func TestPrintMisses(t *testing.T) {
	var out bytes.Buffer
	PrintMisses(&out, []Run{
		{Switch: "KAFKA-532", Seed: 1, Caught: true, RunDir: "r1"},
		{Switch: "KAFKA-532", Seed: 2, Verdict: checkers.Valid, RunDir: "r2"},
		{Switch: Fixed, Seed: 3, Verdict: checkers.Valid, RunDir: "r3"},
		{Switch: Fixed, Seed: 4, Caught: true, Verdict: checkers.Invalid, By: []string{"liveness"}, RunDir: "r4"},
	})
	want := "not caught: KAFKA-532 seed 2 (valid): r2\nfalse positive: every-fix-on seed 4, invalid by liveness: r4\n"
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// Each row tallies its runs' fence counts; the table names the fences no
// run of a row brought a stale input to.
func TestFenceTable(t *testing.T) {
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
	runs := []Run{
		{Switch: "KAFKA-532", Fences: counts(4, 0)},
		{Switch: "KAFKA-532", Fences: counts(0, 0)},
		{Switch: Fixed, Fences: counts(0, 0)},
		{Switch: Fixed}, // judged before fences were counted: untested in it
	}
	rows := Table(runs)
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
	PrintTable(&out, rows, nil)
	s := out.String()
	wanttext.Contains(t, "table", s,
		"KAFKA-532     broker-controller-epoch",
		"every-fix-on  broker-controller-epoch",
		"untested in every-fix-on (no stale input in 2 runs): broker-controller-epoch, broker-broker-epoch",
		"untested in KAFKA-532 (no stale input in 2 runs): broker-broker-epoch,")
	// The KAFKA-532 line: 1 of 2 runs saw 4 stale inputs, none refused.
	if !strings.Contains(s, "1/2") || strings.Contains(s, "untested in KAFKA-532 (no stale input in 2 runs): broker-controller-epoch") {
		t.Errorf("KAFKA-532's tested fence:\n%s", s)
	}
	if r := Judge(Switches[0], 1, "d", checkers.Valid, nil, powerHistory()); len(r.Fences) != len(checkers.Fences) {
		t.Errorf("judged run counts %d fences, want %d", len(r.Fences), len(checkers.Fences))
	}
}

// An every-fix-on row of log-workload runs, whose group and transaction
// fences had no traffic, reads "every fence tested" when the control
// plane's fences were; so does one read back from runs stored before those
// fences were counted (they list the seven only).
func TestFenceTableNotApplicable(t *testing.T) {
	counts := func(listNew bool) []checkers.FenceCount {
		var out []checkers.FenceCount
		for i, f := range checkers.Fences {
			if i >= 7 && !listNew {
				break
			}
			c := checkers.FenceCount{Fence: f, Inputs: 2, Rejected: 2}
			if i >= 7 {
				c = checkers.FenceCount{Fence: f, NotApplicable: true}
			}
			out = append(out, c)
		}
		return out
	}
	for _, listNew := range []bool{true, false} {
		var runs []Run
		for seed := uint64(1); seed <= 20; seed++ {
			runs = append(runs, Run{Switch: Fixed, Seed: seed, Fences: counts(listNew)})
		}
		rows := Table(runs)
		var out bytes.Buffer
		PrintTable(&out, rows, nil)
		s := out.String()
		for _, want := range []string{
			"every fence tested in every-fix-on\n",
			"not applicable in every-fix-on (no group or transaction traffic in its 20 runs): coordinator-generation, txn-producer-epoch, txn-coordinator-epoch, txn-verification\n",
			"every-fix-on  broker-controller-epoch",
		} {
			if !strings.Contains(s, want) {
				t.Errorf("listing the new fences %v: table lacks %q:\n%s", listNew, want, s)
			}
		}
		if strings.Contains(s, "UNTESTED") || strings.Contains(s, "untested in") || strings.Contains(s, " coordinator-generation  ") {
			t.Errorf("listing the new fences %v: a not-applicable fence reads as untested or has a line:\n%s", listNew, s)
		}
	}
}
