package harness

import (
	"fmt"
	"os"
	"path/filepath"
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
// lost suffix back from the leader: the ISR lists it again. With one
// replica hit, or two at once while the third is in the ISR (the
// controller elects it, and it holds every acknowledged record), no
// acknowledged record is lost and every checker is valid.
//
// With the third replica paused out of the ISR first, the two crashed
// brokers were every replica the controller could elect: the one elected
// comes back without the lost suffix, acknowledged records are gone, and
// the checkers name that the known anomaly lost-unflushed-quorum instead
// of a violation.
func TestCrashLoseUnflushedRefetches(t *testing.T) {
	dockertest.Require(t)
	crash := func(at, hold time.Duration) nemesis.Step {
		return nemesis.Step{At: at, Kind: faults.CrashLoseUnflushed, Hold: hold}
	}
	for _, tt := range []struct {
		name    string
		steps   []nemesis.Step
		crashes int
		lost    bool // the known anomaly must be named
	}{
		{"one broker", []nemesis.Step{crash(12*time.Second, 4*time.Second)}, 1, false},
		{"two brokers at once", []nemesis.Step{crash(12*time.Second, 4*time.Second), crash(12500*time.Millisecond, 3500*time.Millisecond)}, 2, false},
		// n3 (the pick among three free brokers) is paused past the
		// replica lag, then n1 and n2 crash.
		{"the whole ISR", []nemesis.Step{{At: 5 * time.Second, Kind: faults.PauseNode, Hold: 18 * time.Second, Pick: 2},
			crash(16*time.Second, 4*time.Second), crash(16500*time.Millisecond, 3500*time.Millisecond)}, 2, true},
	} {
		t.Run(tt.name, func(t *testing.T) { crashLoseUnflushedRun(t, tt.steps, tt.crashes, tt.lost) })
	}
}

func crashLoseUnflushedRun(t *testing.T, steps []nemesis.Step, crashes int, lost bool) {
	dir := t.TempDir()
	if d := os.Getenv("UNF_KEEP"); d != "" {
		dir = filepath.Join(d, strings.ReplaceAll(t.Name(), "/", "-"))
	}
	sched := nemesis.Schedule{Seed: 7, Total: 35 * time.Second, Steps: steps}
	if len(steps) > 1 {
		sched.Density = float64(len(steps))
	}
	cfg := RunConfig{RunSpec: rundir.RunSpec{
		RunID: "t-unf-" + cluster.NewRunID()[16:], RunDir: dir, Seed: 7,
		ZK: rundir.ZK{Servers: 1}, ZKSessionTimeout: 3 * time.Second,
		Topic: "chaos", Partitions: 1, TimeLimit: 35 * time.Second, Settle: 8 * time.Second,
		Faults: []string{string(faults.CrashLoseUnflushed)},
	}, Schedule: &sched}
	got, h := runHistory(t, cfg)
	// Per crashed broker: its crash, whether it started again after it,
	// and whether a partition state then listed it in the ISR.
	type crash struct {
		start              *history.Event
		stopped, restarted bool
		rejoined           bool
	}
	byNode := map[int32]*crash{}
	for i := range h.Events {
		e := &h.Events[i]
		switch {
		case e.Fault != nil && e.Fault.Name == string(faults.CrashLoseUnflushed) && e.Kind == history.KindFaultStart:
			var node int32
			fmt.Sscanf(e.Fault.Targets[0], "n%d", &node)
			byNode[node] = &crash{start: e}
		case e.Fault != nil && e.Fault.Name == string(faults.CrashLoseUnflushed) && e.Kind == history.KindFaultStop:
			if e.Fault.Error != "" {
				t.Errorf("the fault failed: %s", e.Fault.Error)
			}
			for _, c := range byNode {
				if c.start.Fault.ID == e.Fault.ID {
					c.stopped = true
				}
			}
		case e.Kind == history.KindNodeStart && byNode[e.Node] != nil:
			byNode[e.Node].restarted = true
		case e.Kind == history.KindZKWatch && e.Watch != nil && e.Watch.State != nil:
			for node, c := range byNode {
				if c.restarted && slices.Contains(e.Watch.State.ISR, node) {
					c.rejoined = true
				}
			}
		}
	}
	if len(byNode) != crashes {
		t.Fatalf("%d brokers crashed, want %d", len(byNode), crashes)
	}
	for node, c := range byNode {
		t.Logf("n%d: %s", node, c.start.Fault.Detail)
		if !strings.Contains(c.start.Fault.Detail, "dropped unflushed chaos-0 offsets") {
			t.Errorf("the crash of n%d dropped nothing of chaos-0: %q", node, c.start.Fault.Detail)
		}
		if !c.stopped || !c.restarted || !c.rejoined {
			t.Errorf("n%d: fault stopped %v, restarted %v, back in the ISR after %v", node, c.stopped, c.restarted, c.rejoined)
		}
	}
	rep, err := judge.Check(got, checkers.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	named := false
	for _, r := range rep.Results {
		if r.Verdict != checkers.Valid {
			t.Errorf("%s: %s: %s", r.Checker, r.Verdict, r.Explanation)
		}
		for _, k := range r.Known {
			if k.Name == checkers.KnownLostUnflushedQuorum {
				named = true
				t.Logf("%s: %s ×%d: %s", r.Checker, k.Name, k.Count, k.Example)
			}
		}
	}
	if named != lost {
		t.Errorf("known anomaly %s named %v, want %v", checkers.KnownLostUnflushedQuorum, named, lost)
	}
}
