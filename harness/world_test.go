package harness

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/clustertest"
	"github.com/zkchaos/zkchaos/nemesis"
)

// A seeded schedule of ZooKeeper faults runs against a real ensemble, every
// fault is recorded as a start/stop pair, and the ensemble is whole after.
func TestZooKeeperFaultScheduleHeals(t *testing.T) {
	c, _ := clustertest.Start(t, cluster.Options{ZK: cluster.ZKOptions{Servers: 3, TickTime: 100 * time.Millisecond, SyncLimit: 5}})
	w, err := newWorld(c)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	file := filepath.Join(t.TempDir(), "nemesis.jsonl")
	hw, err := history.Create(file, "nemesis", 0)
	if err != nil {
		t.Fatal(err)
	}
	n := nemesis.New(w, nemesis.NewRecorder(hw))
	// The ZooKeeper faults need nothing of the node program.
	fs, err := faults.New(n, faults.Env{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := []faults.FaultKind{faults.IsolateZKLeader, faults.PauseZKFollower, faults.SlowZKFollowerLink}
	s := faults.Plan(5, faults.Topology{Nodes: 0, ZKServers: 3}, 14*time.Second, time.Second, 2*time.Second, kinds)
	if len(s.Steps) < 3 {
		t.Fatalf("plan has %d steps; want at least 3", len(s.Steps))
	}
	if err := n.Run(t.Context(), s, fs.Apply); err != nil {
		t.Fatal(err)
	}
	hw.Close()
	if _, err := c.WaitZKReady(t.Context(), 30*time.Second); err != nil {
		t.Fatalf("ensemble not whole after the schedule: %v", err)
	}

	evs, _, err := history.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if f := e.Fault; f.Error != "" {
			t.Errorf("fault %s %s failed: %s", f.ID, f.Name, f.Error)
		}
	}
	windows, orphans := history.FaultWindowsOf(history.New(evs), false, false)
	for _, i := range orphans {
		t.Errorf("fault_stop %s without a start", evs[i].Fault.ID)
	}
	starts := len(windows)
	for _, w := range windows {
		if !w.Stopped {
			t.Errorf("fault %s %s never stopped", w.Start.Fault.ID, w.Start.Fault.Name)
		}
	}
	if starts != len(s.Steps) {
		t.Errorf("%d faults recorded, %d planned", starts, len(s.Steps))
	}
}
