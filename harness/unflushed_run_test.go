package harness

import (
	"fmt"
	"os"
	"slices"
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

// crash-lose-unflushed on a real cluster: the broker is killed, its
// segments lose what it had not fsynced (the workload's appends since its
// last leader change), it starts again with the shorter log and fetches the
// lost suffix back from the leader: the ISR lists it again, and with one
// replica hit no acknowledged record is lost.
func TestCrashLoseUnflushedRefetches(t *testing.T) {
	dockertest.Require(t)
	dir := t.TempDir()
	if d := os.Getenv("UNF_KEEP"); d != "" {
		dir = d
	}
	sched := nemesis.Schedule{Seed: 3, Total: 30 * time.Second,
		Steps: []nemesis.Step{{At: 12 * time.Second, Kind: faults.CrashLoseUnflushed, Hold: 4 * time.Second}}}
	cfg := RunConfig{RunSpec: rundir.RunSpec{
		RunID: "t-unf-" + cluster.NewRunID()[16:], RunDir: dir, Seed: 3,
		ZK: rundir.ZK{Servers: 1}, ZKSessionTimeout: 3 * time.Second,
		Topic: "chaos", Partitions: 1, TimeLimit: 30 * time.Second, Settle: 8 * time.Second,
		Faults: []string{string(faults.CrashLoseUnflushed)},
	}, Schedule: &sched}
	if testing.Verbose() {
		cfg.Progress = os.Stderr
	}
	got, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := history.ReadDir(got)
	if err != nil {
		t.Fatal(err)
	}
	var crash, stop *history.Event
	var node int32
	restarted, rejoined := false, false
	for i := range h.Events {
		e := &h.Events[i]
		switch {
		case e.Fault != nil && e.Fault.Name == string(faults.CrashLoseUnflushed) && e.Kind == history.KindFaultStart:
			crash = e
			fmt.Sscanf(e.Fault.Targets[0], "n%d", &node)
		case crash != nil && e.Fault != nil && e.Fault.Name == string(faults.CrashLoseUnflushed) && e.Kind == history.KindFaultStop:
			stop = e
		case crash != nil && e.Kind == history.KindNodeStart && e.Node == node:
			restarted = true
		case restarted && e.Kind == history.KindZKWatch && e.Watch != nil && e.Watch.State != nil &&
			slices.Contains(e.Watch.State.ISR, node):
			rejoined = true
		}
	}
	if crash == nil || stop == nil {
		t.Fatalf("no crash-lose-unflushed window in the history (start %v, stop %v)", crash, stop)
	}
	t.Logf("crash: %s", crash.Fault.Detail)
	if !strings.Contains(crash.Fault.Detail, "dropped unflushed chaos-0 offsets") {
		t.Errorf("the crash dropped nothing of chaos-0: %q", crash.Fault.Detail)
	}
	if stop.Fault.Error != "" {
		t.Errorf("the fault failed: %s", stop.Fault.Error)
	}
	if !restarted || !rejoined {
		t.Fatalf("broker %d restarted %v, back in the ISR after %v", node, restarted, rejoined)
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
