package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/rundir"
	"github.com/zkchaos/zkchaos/rundir/rundirtest"
)

// A setting no run can have is refused by its flag, with exit 2, before
// anything reaches Docker or the disk (bug switches and node flags by the
// node program itself, run on the host with --check-flags): `run` is tried
// with --dry-run (the same checks come first without it), `power` with an
// executor that fails the test, `up` and `shrink` with an engine that does
// not exist, and `check` on a copy whose results.json must not be
// rewritten.
func TestFlagsOutOfRangeAreBadInput(t *testing.T) {
	noEngine(t)
	tmp := t.TempDir()
	empty := filepath.Join(tmp, "empty.json")
	os.WriteFile(empty, []byte("{}\n"), 0o644)
	negHold := filepath.Join(tmp, "neg-hold.json")
	if err := (faults.Schedule{Seed: 1, Total: 10 * time.Second, Steps: []faults.Step{{At: time.Second, Kind: faults.PauseNode, Hold: -time.Second}}}).Save(negHold); err != nil {
		t.Fatal(err)
	}
	checked := rundirtest.Copy(t, rundirtest.Stored(rundirtest.Kafka532))
	if out, code := runCLI(t, "check", "--visualize=false", checked); code != exitInvalid {
		t.Fatalf("check: exit %d\n%s", code, out)
	}
	results, err := os.ReadFile(filepath.Join(checked, rundir.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	runs := filepath.Join(tmp, "runs")

	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"run: two ZooKeeper servers", []string{"run", "--dry-run", "--zk", "2"}, []string{"--zk 2"}},
		{"run: no time", []string{"run", "--dry-run", "--time-limit", "0"}, []string{"--time-limit 0s"}},
		{"run: negative time", []string{"run", "--dry-run", "--time-limit", "-5s"}, []string{"--time-limit -5s"}},
		{"run: nanosecond holds", []string{"run", "--dry-run", "--min-hold", "1ns", "--max-hold", "1ns"}, []string{"--min-hold 1ns"}},
		{"run: holds upside down", []string{"run", "--dry-run", "--min-hold", "10s", "--max-hold", "1s"}, []string{"--max-hold 1s"}},
		{"run: no brokers", []string{"run", "--dry-run", "--nodes", "0"}, []string{"--nodes 0"}},
		{"run: no partitions", []string{"run", "--dry-run", "--partitions", "0"}, []string{"--partitions 0"}},
		{"run: no clients", []string{"run", "--dry-run", "--producers", "0", "--readers", "0"}, []string{"--producers 0", "--no-workload"}},
		{"run: negative readers", []string{"run", "--dry-run", "--readers", "-1"}, []string{"--readers -1"}},
		{"run: no session timeout", []string{"run", "--dry-run", "--session-timeout", "0"}, []string{"--session-timeout 0s"}},
		{"run: density NaN", []string{"run", "--dry-run", "--fault-density", "NaN"}, []string{"--fault-density NaN"}},
		{"run: negative grace", []string{"run", "--dry-run", "--liveness-grace", "-1s"}, []string{"--liveness-grace -1s"}},
		{"run: every problem named", []string{"run", "--dry-run", "--zk", "4", "--nodes", "0", "--time-limit", "-1s"}, []string{"--zk 4", "--nodes 0", "--time-limit -1s"}},
		{"run: replay of an empty object", []string{"run", "--dry-run", "--replay", empty}, []string{"--replay", empty, "total_ns"}},
		{"run: replay of a negative hold", []string{"run", "--dry-run", "--replay", negHold}, []string{"--replay", negHold, "step 1"}},
		{"run: unknown bug switch", []string{"run", "--runs", runs, "--bugs", "KAFKA-999"}, []string{"--bugs", "KAFKA-999", "known: KAFKA-532"}},
		{"run: unknown election policy", []string{"run", "--runs", runs, "--node-flag=--offline-election=coin"}, []string{"--offline-election", "coin"}},
		{"run: unknown failpoint", []string{"run", "--runs", runs, "--node-flag=--failpoints=nope=pause"}, []string{"--failpoints", "nope"}},
		{"power: two ZooKeeper servers", []string{"power", "--runs", runs, "--seeds", "1", "--zk", "2"}, []string{"--zk 2"}},
		{"power: no time", []string{"power", "--runs", runs, "--seeds", "1", "--time-limit", "0"}, []string{"--time-limit 0s"}},
		{"power: no hold", []string{"power", "--runs", runs, "--seeds", "1", "--min-hold", "0"}, []string{"--min-hold 0s"}},
		{"power: negative grace", []string{"power", "--runs", runs, "--seeds", "1", "--offline-grace", "-1s"}, []string{"--offline-grace -1s"}},
		{"power: transactions without the queue", []string{"power", "--runs", runs, "--seeds", "1", "--queue-txn"}, []string{"--queue-txn", "--workload queue"}},
		{"up: transactions without the queue", []string{"up", "--dir", filepath.Join(runs, "up"), "--queue-txn"}, []string{"--queue-txn", "--workload queue"}},
		{"up: a workload without brokers", []string{"up", "--dir", filepath.Join(runs, "up"), "--brokers", "0", "--workload", "queue"}, []string{"--workload", "--brokers 0"}},
		{"check: negative retries", []string{"check", "--max-badversion-retries", "-1", checked}, []string{"--max-badversion-retries -1"}},
		{"check: no linearizability budget", []string{"check", "--linearize-timeout", "0", checked}, []string{"--linearize-timeout 0s"}},
		{"check: negative grace", []string{"check", "--elect-grace", "-1s", checked}, []string{"--elect-grace -1s"}},
		{"shrink: no budget", []string{"shrink", "--runs", runs, "--budget", "0", checked}, []string{"--budget 0"}},
		{"shrink: no tries, hold or tail", []string{"shrink", "--runs", runs, "--tries", "0", "--min-hold", "-1s", "--tail", "0", checked}, []string{"--tries 0", "--min-hold -1s", "--tail 0s"}},
		{"shrink: negative grace", []string{"shrink", "--runs", runs, "--liveness-grace", "-1s", checked}, []string{"--liveness-grace -1s"}},
		{"up: two ZooKeeper servers", []string{"up", "--dir", filepath.Join(runs, "up"), "--zk", "2"}, []string{"--zk 2"}},
		{"up: ZooKeeper alone, four servers", []string{"up", "--brokers", "0", "--zk", "4"}, []string{"--zk 4"}},
		{"up: unknown bug switch", []string{"up", "--dir", filepath.Join(runs, "up"), "--bugs", "KAFKA-0"}, []string{"--bugs", "KAFKA-0"}},
		{"up: negative hold", []string{"up", "--dir", filepath.Join(runs, "up"), "--hold", "-1s"}, []string{"--hold -1s"}},
		{"up: tick too short", []string{"up", "--dir", filepath.Join(runs, "up"), "--zk-tick", "1ms"}, []string{"--zk-tick 1ms"}},
		{"up: no session timeout", []string{"up", "--dir", filepath.Join(runs, "up"), "--session-timeout", "0"}, []string{"--session-timeout 0s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Side by side: the cases that ask the node program about its
			// flags each build it first, about a second apiece.
			t.Parallel()
			out, code := runCLI(t, tt.args...)
			if code != exitBad {
				t.Fatalf("chaos %s: exit %d, want %d\n%s", strings.Join(tt.args, " "), code, exitBad, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("chaos %s: output does not name %q:\n%s", strings.Join(tt.args, " "), w, out)
				}
			}
			if strings.Contains(out, "docker") {
				t.Errorf("chaos %s: reached Docker before refusing its flags:\n%s", strings.Join(tt.args, " "), out)
			}
			if _, err := os.Stat(runs); err == nil {
				t.Errorf("chaos %s: created %s", strings.Join(tt.args, " "), runs)
			}
			if b, _ := os.ReadFile(filepath.Join(checked, rundir.ResultsFile)); string(b) != string(results) {
				t.Fatalf("chaos %s: rewrote %s", strings.Join(tt.args, " "), rundir.ResultsFile)
			}
		})
	}
}

// noEngine points the test at an engine that does not exist and makes
// power's executor fail the test if a run gets that far.
func noEngine(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent")
	old := powerExecute
	t.Cleanup(func() { powerExecute = old })
	powerExecute = func(context.Context, harness.RunConfig, checkers.Config) (string, checkers.Verdict, []checkers.Result, error) {
		t.Fatal("power reached the executor")
		return "", "", nil, nil
	}
}
