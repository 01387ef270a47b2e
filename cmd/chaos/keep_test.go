package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/regressions"
	"github.com/zkchaos/zkchaos/rundir"
	"github.com/zkchaos/zkchaos/rundir/rundirtest"
)

func TestKeepCommand(t *testing.T) {
	into := t.TempDir()
	out, code := runCLI(t, "keep", "--into", into, "testdata/kafka-532", "zombie")
	if code != exitValid || !strings.Contains(out, "controller-fencing still invalid") {
		t.Fatalf("keep: exit %d\n%s", code, out)
	}
	if err := regressions.Recheck(filepath.Join(into, "zombie"), checkers.DefaultConfig()); err != nil {
		t.Fatalf("kept run does not re-check: %v", err)
	}

	badRun := rundirtest.Copy(t, rundirtest.Stored(rundirtest.Kafka532))
	os.WriteFile(filepath.Join(badRun, rundir.RunFile), []byte(`{"Seed": "x",`), 0o644)
	badSchedule := rundirtest.Copy(t, rundirtest.Stored(rundirtest.Kafka532))
	os.WriteFile(filepath.Join(badSchedule, rundir.ScheduleFile), []byte("nope\n"), 0o644)
	bad := []struct {
		name string
		args []string
		want string
	}{
		{"bad name", []string{"keep", "--into", into, "testdata/kafka-532", "../escape"}, "regression name"},
		{"name taken", []string{"keep", "--into", into, "testdata/kafka-532", "zombie"}, "already exists"},
		{"name taken, found before reading the run", []string{"keep", "--into", into, t.TempDir(), "zombie"}, "already exists"},
		{"no history", []string{"keep", "--into", into, t.TempDir(), "x"}, "history"},
		{"corrupt run.json", []string{"keep", "--into", into, badRun, "bad-run"}, filepath.Join(badRun, rundir.RunFile)},
		{"corrupt schedule.json", []string{"keep", "--into", into, badSchedule, "bad-schedule"}, filepath.Join(badSchedule, rundir.ScheduleFile)},
		{"checker not failing", []string{"keep", "--into", into, "--checker", "hw-checkpoint", "testdata/kafka-532", "y"}, "says valid"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			out, code := runCLI(t, tt.args...)
			if code != exitBad || !strings.Contains(out, tt.want) {
				t.Fatalf("exit %d, %q; want exit 2 with %q", code, out, tt.want)
			}
		})
	}
}

func TestShrinkCommandBadInput(t *testing.T) {
	scheduled := t.TempDir()
	copyDir(t, "testdata/kafka-532", scheduled)
	os.WriteFile(filepath.Join(scheduled, "run.json"), []byte(`{"RunID":"r","Seed":3}`), 0o644)
	if err := (faults.Schedule{Seed: 3, Total: 10e9, Steps: []faults.Step{{At: 1e9, Kind: faults.PauseController, Hold: 2e9}}}).Save(filepath.Join(scheduled, "schedule.json")); err != nil {
		t.Fatal(err)
	}
	unchecked := t.TempDir()
	copyDir(t, scheduled, unchecked)
	if out, code := runCLI(t, "check", "--visualize=false", scheduled); code != exitInvalid {
		t.Fatalf("check: %d %s", code, out)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no run.json", []string{"shrink", "testdata/kafka-532"}, "run.json"},
		{"scenario run", []string{"shrink", "../../testdata/regressions/kafka-532-zombie-controller"}, "scenario KAFKA-532"},
		{"not checked", []string{"shrink", unchecked}, "chaos check"},
		{"checker not failing", []string{"shrink", "--checker", "hw-checkpoint", scheduled}, "--checker hw-checkpoint is not invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, code := runCLI(t, tt.args...)
			if code != exitBad || !strings.Contains(out, tt.want) {
				t.Fatalf("exit %d, %q; want exit 2 with %q", code, out, tt.want)
			}
		})
	}
}
