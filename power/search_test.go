package power

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
	"github.com/zkchaos/zkchaos/nodecover"
	"github.com/zkchaos/zkchaos/rundir"
)

// storeRun writes a checked every-fix-on run under root/name whose faults
// pause the given brokers (none the controller, nothing known of their
// partitions; a ZooKeeper server paused is a follower) and whose coverage.json lists blocks; nil blocks: no
// coverage.json.
func storeRun(t *testing.T, root, name string, seed uint64, paused []string, blocks []string) {
	t.Helper()
	dir := filepath.Join(root, name)
	historytest.WriteSource(t, dir, "harness", 0, history.Event{Kind: history.KindPhase, Time: 1,
		Phase: &history.Phase{Name: history.PhaseWorkload, Mark: history.PhaseBegin}})
	var evs []history.Event
	for i, b := range paused {
		evs = append(evs, history.Event{Kind: history.KindFaultStart, Time: int64(2 + i), Fault: &history.Fault{ID: name + b, Name: "pause", Targets: []string{b}}})
	}
	if len(evs) > 0 {
		historytest.WriteSource(t, dir, "nemesis", 0, evs...)
	}
	if err := rundir.WriteInfo(dir, rundir.Info{Seed: seed, Cover: blocks != nil}); err != nil {
		t.Fatal(err)
	}
	if err := rundir.WriteResults(dir, &rundir.Results{Verdict: checkers.Valid}); err != nil {
		t.Fatal(err)
	}
	if blocks != nil {
		b, _ := json.Marshal(nodecover.Summary{Blocks: 10, Covered: len(blocks), Reached: blocks})
		if err := os.WriteFile(filepath.Join(dir, nodecover.File), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A table made from stored runs counts each run's blocks and combinations
// against the runs of its switch before it (in run-id order), as one made
// by running does; a run without coverage.json has no coverage.
func TestJudgeStoredNovelty(t *testing.T) {
	root := t.TempDir()
	storeRun(t, root, "a", 1, []string{"n1"}, []string{"x", "y"})
	storeRun(t, root, "b", 2, []string{"n1", "zk2"}, []string{"x"})
	storeRun(t, root, "c", 3, []string{"n2"}, []string{"x", "z", "w"})
	storeRun(t, root, "d", 4, []string{"zk1"}, nil)
	runs, _, err := JudgeStored(io.Discard, []string{root})
	if err != nil || len(runs) != 4 {
		t.Fatalf("runs %d, err %v", len(runs), err)
	}
	type got struct {
		covered, newBlocks, union int
		combos, newCombos         int
	}
	want := []got{{2, 2, 2, 1, 1}, {1, 0, 2, 2, 1}, {3, 2, 4, 1, 0}, {-1, -1, -1, 1, 0}}
	for i, r := range runs {
		g := got{-1, -1, -1, r.Combinations, r.NewCombinations}
		if c := r.Coverage; c != nil {
			g.covered, g.newBlocks, g.union = c.Covered, c.New, c.Union
		}
		if g != want[i] {
			t.Errorf("run %s: %+v, want %+v", r.RunDir, g, want[i])
		}
	}
	if !slices.Equal(runs[1].Reached, []string{"pause/other/-/-", "pause/zk-follower/-/-"}) || !slices.Equal(runs[3].Reached, []string{"pause/zk-follower/-/-"}) {
		t.Errorf("combinations %v, %v", runs[1].Reached, runs[3].Reached)
	}
	rows := Table(runs)
	if len(rows) != 1 || rows[0].Combinations != 2 || rows[0].RunsWithNewCombinations != 2 || rows[0].Coverage == nil || rows[0].Coverage.MedianCovered != 2 || rows[0].Coverage.Union != 4 {
		t.Fatalf("rows %+v", rows)
	}
}
