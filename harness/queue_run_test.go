package harness

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/dockertest"
	"github.com/zkchaos/zkchaos/rundir"
)

// pauseLeaderDriver pauses the leader of the topic's partition 0 from
// after until after+hold, past the brokers' session timeout, so the
// partition fails over while producers are inside transactions and the
// group's members poll; then it waits for the time limit.
type pauseLeaderDriver struct {
	topic       string
	after, hold time.Duration
	paused      *int
}

func (d pauseLeaderDriver) Drive(ctx context.Context, l *Live) error {
	wait := func(dur time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(dur):
		}
	}
	wait(d.after)
	if ctx.Err() != nil {
		return nil
	}
	id, err := l.World.PartitionLeader(ctx, d.topic, 0)
	if err != nil {
		return fmt.Errorf("leader of %s-0: %w", d.topic, err)
	}
	tg, err := l.Node(id)
	if err != nil {
		return err
	}
	if err := l.Nemesis.PauseTarget(ctx, tg); err != nil {
		return err
	}
	*d.paused = id
	wait(d.hold)
	if err := l.Nemesis.ResumeTarget(context.WithoutCancel(ctx), tg); err != nil {
		return err
	}
	// The workload phase ends when its driver returns.
	<-ctx.Done()
	return nil
}

// A 30 s queue run with transactions, a partition's leader paused for 8 s
// in the middle: every queue checker finds it valid, and every value of a
// committed transaction is in the drain, which read every partition.
func TestQueueTxnRunWithPausedLeader(t *testing.T) {
	dockertest.Require(t)
	paused := 0
	cfg := RunConfig{RunSpec: rundir.RunSpec{
		RunID:     "t-queue-" + cluster.NewRunID()[16:],
		RunDir:    t.TempDir(),
		Seed:      7,
		Workload:  rundir.WorkloadQueue,
		QueueTxn:  true,
		Producers: 2,
		Readers:   4,
		TimeLimit: 30 * time.Second,
		ZK:        rundir.ZK{Servers: 1},
	}}
	cfg.Driver = pauseLeaderDriver{topic: "chaos", after: 8 * time.Second, hold: 8 * time.Second, paused: &paused}
	if testing.Verbose() {
		cfg.Progress = os.Stderr
	}
	start := time.Now()
	dir, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("run took %s; broker %d paused", took.Round(time.Second), paused)
	if took < cfg.TimeLimit {
		t.Fatalf("run took %s, less than its %s time limit", took, cfg.TimeLimit)
	}
	if paused == 0 {
		t.Fatal("no broker was paused")
	}
	h, err := history.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// queue-poll is asserted too: a consumer the paused leader, resumed
	// and not yet told of its successor, answered OFFSET_OUT_OF_RANGE
	// resets to the log start, which the checker names as a known anomaly
	// (deposed-leader-out-of-range) from the node's log of that answer.
	queue := []checkers.Checker{checkers.QueueLog{}, checkers.QueueLostWrite{}, checkers.QueueIsolation{}, checkers.QueueGroup{}, checkers.QueuePoll{}, checkers.QueueCommit{}}
	results, verdict := checkers.Run(h, queue)
	for _, r := range results {
		t.Logf("%s: %s: %s", r.Checker, r.Verdict, r.Explanation)
		for _, k := range r.Known {
			t.Logf("%s: known anomaly %s ×%d: %s", r.Checker, k.Name, k.Count, k.Example)
		}
	}
	if verdict != checkers.Valid {
		t.Errorf("queue checkers: %s, want valid", verdict)
		// The run directory is the test's temporary one: keep a copy, so
		// the node's answers behind the finding can be read afterwards.
		kept, err := os.MkdirTemp("", "queue-finding-")
		if err == nil {
			err = os.CopyFS(kept, os.DirFS(dir))
		}
		t.Logf("run directory kept at %s (copy error: %v)", kept, err)
	}

	committed := map[int64]int32{}
	drained := map[int64]bool{}
	ends := 0
	for _, op := range history.QueueOperations(h) {
		q := op.Op()
		switch {
		case q.F == history.QueueDrained && op.Outcome() == history.OpOK:
			ends = len(q.Offsets)
		case q.F == history.QueueTxn && q.Final && op.Outcome() == history.OpOK:
			for _, m := range q.Mops {
				for _, p := range m.Polled {
					for _, r := range p.Records {
						drained[r.Value] = true
					}
				}
			}
		case q.F == history.QueueTxn && op.Outcome() == history.OpOK:
			for _, m := range q.Mops {
				if m.F == history.MopSend {
					committed[m.Value] = m.Key
				}
			}
		}
	}
	if ends != 3 {
		t.Errorf("the drain read %d of 3 partitions to their ends", ends)
	}
	missing := 0
	for v, key := range committed {
		if !drained[v] {
			missing++
			if missing <= 5 {
				t.Errorf("value %d, committed to chaos-%d, is not in the drain", v, key)
			}
		}
	}
	if len(committed) < 100 || missing > 0 {
		t.Errorf("%d committed values, %d missing from the drain of %d values", len(committed), missing, len(drained))
	}
}
