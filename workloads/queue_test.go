package workloads

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/history"
	"go.uber.org/goleak"
)

// queueWorkloadHistory runs the queue workload against kfake for d, then
// the drain, and returns the history read back.
func queueWorkloadHistory(t *testing.T, transactional bool, d time.Duration) *history.History {
	t.Helper()
	fake, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "q"))
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	dir, open := historyDir(t)
	cfg := QueueConfig{Brokers: fake.ListenAddrs(), Topic: "q", Partitions: 3, Producers: 2, Consumers: 4,
		Transactional: transactional, OpTimeout: 2 * time.Second, Churn: time.Second, Seed: 1}
	wl, err := NewQueue(cfg, open)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := wl.Run(ctx); err != nil {
		t.Fatal(err)
	}
	fw, err := open("final")
	if err != nil {
		t.Fatal(err)
	}
	if err := QueueDrain(context.Background(), cfg, fw, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	fw.Close()
	h, err := history.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// The workload's history is well-formed, the queue checkers find it valid
// (kfake loses, duplicates and skips nothing), and it has what they need:
// acknowledged sends, group members' polls at known generations with
// commits, assigning consumers' polls, and a drain that read every
// partition to its end.
func TestQueueWorkloadRecordsCheckableHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs kgo clients against kfake for seconds")
	}
	for _, txn := range []bool{false, true} {
		h := queueWorkloadHistory(t, txn, 4*time.Second)
		var sends, acked, polls, members, commits, assigns, aborted int
		drained := 0
		for _, op := range history.QueueOperations(h) {
			q := op.Op()
			switch {
			case q.F == history.QueueDrained && op.Outcome() == history.OpOK:
				drained = len(q.Offsets)
			case q.F == history.QueueCommit && op.Outcome() == history.OpOK:
				commits++
			case q.F == history.QueueAssign:
				assigns++
			case q.F == history.QueueTxn:
				for _, m := range q.Mops {
					if m.F == history.MopSend {
						sends++
						if op.Outcome() == history.OpOK {
							acked++
						}
						if op.Outcome() == history.OpFail {
							aborted++
						}
					}
					if m.F == history.MopPoll && len(m.Polled) > 0 {
						polls++
						if a := q.Assignment; a != nil && a.Mode == history.QueueSubscribed && a.Generation > 0 {
							members++
						}
					}
				}
			}
		}
		t.Logf("transactional %v: %d sends (%d acknowledged, %d aborted), %d polls with records (%d by members), %d commits, %d assigns, %d partitions drained",
			txn, sends, acked, aborted, polls, members, commits, assigns, drained)
		queueCheckers := []checkers.Checker{checkers.QueueLog{}, checkers.QueueLostWrite{}, checkers.QueuePoll{}, checkers.QueueIsolation{}, checkers.QueueGroup{}, checkers.QueueCommit{}}
		results, verdict := checkers.Run(h, queueCheckers)
		for _, r := range results {
			if r.Verdict != checkers.Valid {
				t.Errorf("transactional %v: %s %s: %s", txn, r.Checker, r.Verdict, r.Explanation)
			}
		}
		if verdict != checkers.Valid {
			t.Errorf("transactional %v: verdict %s on a fake that loses nothing", txn, verdict)
		}
		if acked == 0 || polls == 0 || members == 0 || commits == 0 || assigns < 2 || drained != 3 || (txn && aborted == 0) {
			t.Errorf("transactional %v: a part of the workload is missing", txn)
		}
	}
	goleak.VerifyNone(t)
}
