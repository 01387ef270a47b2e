package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/dockertest"
	"github.com/zkchaos/zkchaos/judge"
	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/rundir"
)

// stall-zk-session-server on a real ensemble: the server holding the
// controller's session, then the one holding a partition leader's, is
// stopped in stalls shorter than the client's read timeout for 5 s each.
// The sessions stay: no broker registers again and no controller is
// elected inside a stall's window (a session that moved or expired would
// show one of these), and every checker is valid.
func TestStallZKSessionServerKeepsTheSession(t *testing.T) {
	dockertest.Require(t)
	dir := t.TempDir()
	if d := os.Getenv("STALL_KEEP"); d != "" {
		dir = filepath.Join(d, strings.ReplaceAll(t.Name(), "/", "-"))
	}
	stall := func(at time.Duration, pick int) nemesis.Step {
		return nemesis.Step{At: at, Kind: faults.StallZKSessionServer, Hold: 5 * time.Second, Pick: pick}
	}
	sched := nemesis.Schedule{Seed: 5, Total: 30 * time.Second, Steps: []nemesis.Step{stall(6*time.Second, 0), stall(16*time.Second, 1)}}
	cfg := RunConfig{RunSpec: rundir.RunSpec{
		RunID: "t-stall-" + cluster.NewRunID()[16:], RunDir: dir, Seed: 5,
		ZKSessionTimeout: 3 * time.Second, Topic: "chaos", Partitions: 2,
		TimeLimit: 30 * time.Second, Settle: 5 * time.Second,
		Faults: []string{string(faults.StallZKSessionServer)},
	}, Schedule: &sched}
	got, h := runHistory(t, cfg)
	var windows []history.FaultWindow
	all, _ := history.FaultWindowsOf(h, false, false)
	for _, w := range all {
		if w.Start.Fault.Name == string(faults.StallZKSessionServer) {
			windows = append(windows, w)
		}
	}
	if len(windows) != 2 {
		t.Fatalf("%d stall windows, want 2", len(windows))
	}
	for i, w := range windows {
		t.Logf("stall %d: %s", i, w.Start.Fault.Detail)
		if w.Open || !w.Stopped {
			t.Fatalf("stall %d did not end with its own stop", i)
		}
		stop := h.Events[w.EndIndex].Fault
		if stop.Error != "" {
			t.Fatalf("stall %d failed: %s", i, stop.Error)
		}
		role := []string{"the controller", "the leader of chaos-"}[i]
		if !strings.Contains(w.Start.Fault.Detail, role) || !strings.Contains(stop.Detail, "stalls of 1s") {
			t.Errorf("stall %d: %q then %q", i, w.Start.Fault.Detail, stop.Detail)
		}
		for _, e := range h.Events {
			if e.Time > w.Start.Time && e.Time < w.End && (e.Kind == history.KindBrokerRegistered || e.Kind == history.KindControllerElected) {
				t.Errorf("stall %d (%s): %s of n%d inside the window: a session moved or expired", i, w.Start.Fault.Detail, e.Kind, e.Node)
			}
		}
	}
	rep, err := judge.Check(got, checkers.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.Verdict != checkers.Valid {
			t.Errorf("%s: %s: %s", r.Checker, r.Verdict, r.Explanation)
		}
	}
}
