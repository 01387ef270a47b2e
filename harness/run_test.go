package harness

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/dockertest"
	"github.com/zkchaos/zkchaos/judge"
	"github.com/zkchaos/zkchaos/rundir"
)

// A control-plane run with every fix on, under controller faults, leaves a
// complete run directory and a valid verdict; its containers are gone after.
func TestControlPlaneRunUnderFaults(t *testing.T) {
	dockertest.Require(t)
	dir := t.TempDir()
	cfg := RunConfig{RunSpec: rundir.RunSpec{
		RunID:      "t-run-" + cluster.NewRunID()[16:],
		RunDir:     dir,
		Seed:       11,
		NoWorkload: true,
		TimeLimit:  20 * time.Second,
		Faults:     []string{string(faults.PauseController), string(faults.BounceNode), string(faults.IsolateController)},
		MinHold:    2 * time.Second,
		MaxHold:    4 * time.Second,
	}}
	got := runOrFail(t, cfg)
	for _, f := range []string{"run.json", "schedule.json", "history/harness.jsonl", "history/zk.jsonl", "history/n1.jsonl", "history/nemesis.jsonl", "logs/zk1.log", "logs/n1.log"} {
		if _, err := os.Stat(filepath.Join(got, f)); err != nil {
			t.Errorf("run dir lacks %s: %v", f, err)
		}
	}
	// The progress is kept whatever cfg.Progress was (io.Discard here
	// unless -v), with every phase's lines.
	if b, err := os.ReadFile(filepath.Join(got, "logs", "harness.log")); err != nil || !strings.Contains(string(b), "] workload") || !strings.Contains(string(b), "heal done") {
		t.Errorf("logs/harness.log lacks the phase lines (%v):\n%s", err, b)
	}
	rep, err := judge.Check(got, checkers.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != checkers.Valid {
		for _, r := range rep.Results {
			t.Logf("%s: %s: %s", r.Checker, r.Verdict, r.Explanation)
		}
		t.Fatalf("verdict %s with every fix on", rep.Verdict)
	}
	eng, err := docker.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if n, err := eng.CountLabelled(context.Background(), cfg.RunID); err != nil || n.Containers+n.Networks != 0 {
		t.Fatalf("run left %d containers and %d networks (err %v)", n.Containers, n.Networks, err)
	}
}

// A node program that refuses its flags exits at start-up; the set-up says
// so with the node's own message (the start-up check answers the wait for
// registrations, which would otherwise end after a minute with "0 of 3
// brokers registered").
func TestRunReportsANodeThatExitsAtStartup(t *testing.T) {
	dockertest.Require(t)
	cfg := RunConfig{RunSpec: rundir.RunSpec{
		RunID: "t-badflag-" + cluster.NewRunID()[16:], RunDir: t.TempDir(), Seed: 1,
		ZK: rundir.ZK{Servers: 1}, NoWorkload: true, TimeLimit: time.Second,
		NodeFlags: []string{"--no-such-flag"},
	}}
	_, err := Run(t.Context(), cfg)
	if err == nil {
		t.Fatal("a run whose nodes refuse their flags succeeded")
	}
	if !strings.Contains(err.Error(), "exited with status 2 at start-up") || !strings.Contains(err.Error(), "no-such-flag") {
		t.Fatalf("error does not name the exit and the flag: %v", err)
	}
}

// runOrFail runs cfg, its progress on stderr under -v, and returns the run
// directory; a run that ends in error fails the test.
func runOrFail(t *testing.T, cfg RunConfig) string {
	t.Helper()
	if testing.Verbose() {
		cfg.Progress = os.Stderr
	}
	got, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// runHistory is runOrFail with the run's history read back.
func runHistory(t *testing.T, cfg RunConfig) (string, *history.History) {
	t.Helper()
	got := runOrFail(t, cfg)
	h, err := history.ReadDir(got)
	if err != nil {
		t.Fatal(err)
	}
	return got, h
}
