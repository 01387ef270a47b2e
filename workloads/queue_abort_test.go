package workloads

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
)

// A transactional send whose produce the leader holds past the operation's
// timeout and the abort's wait for it is given up: the producer aborts the
// transaction with EndTxn at its current epoch while the produce is still
// held (as kgo's EndTransaction and the Java producer's abortTransaction
// do), records the operation as unknown, and restarts with a new
// transactional id. A send answered in time is not aborted that way.
func TestQueueTxnAbortsPastAHeldProduce(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a send's timeout and the abort's wait against kfake")
	}
	for _, tc := range []struct {
		name      string
		hold      bool
		wantType  history.OpType
		wantAbort bool // an EndTxn abort reached the coordinator while the produce was held
	}{
		{"produce held past the abort", true, history.OpInfo, true},
		{"produce answered", false, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "q"))
			if err != nil {
				t.Fatal(err)
			}
			defer fake.Close()
			release := make(chan struct{})
			var mu sync.Mutex
			held, abortedWhileHeld := false, false
			var endTxns []kmsg.EndTxnRequest
			if tc.hold {
				fake.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
					mu.Lock()
					held = true
					mu.Unlock()
					fake.SleepControl(func() { <-release })
					mu.Lock()
					held = false
					mu.Unlock()
					return nil, nil, false
				})
			}
			fake.ControlKey(int16(kmsg.EndTxn), func(r kmsg.Request) (kmsg.Response, error, bool) {
				fake.KeepControl()
				mu.Lock()
				endTxns = append(endTxns, *r.(*kmsg.EndTxnRequest))
				if held && !r.(*kmsg.EndTxnRequest).Commit {
					abortedWhileHeld = true
				}
				mu.Unlock()
				return nil, nil, false
			})
			_, open := historyDir(t)
			w, err := open("client-0")
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			cfg := QueueConfig{Brokers: fake.ListenAddrs(), Topic: "q", Partitions: 1, Producers: 1, Transactional: true,
				Group: DefaultQueueGroup, OpTimeout: time.Second, Seed: 1}
			p := &queueProducer{cfg: cfg, w: w, slot: 0, proc: 3, nslots: 1, rng: rand.New(rand.NewPCG(1, 0))}
			kc, err := p.newClient()
			if err != nil {
				t.Fatal(err)
			}
			p.kc = kc
			var op history.QueueOp
			crashed := false
			for range 20 { // until one operation is not aborted on purpose
				op = history.QueueOp{Type: history.OpInvoke, Process: p.proc, F: history.QueueTxn, Topic: "q", Transactional: true,
					Mops: []history.QueueMop{{F: history.MopSend, Value: p.value()}}}
				p.txn(context.Background(), []*kgo.Record{{Topic: "q", Value: []byte("v")}}, &op)
				crashed = op.Type == history.OpInfo
				if tc.hold || op.Type == history.OpOK {
					break
				}
			}
			close(release)
			kc.Close()
			mu.Lock()
			defer mu.Unlock()
			if tc.hold && op.Type != tc.wantType {
				t.Errorf("operation %s (%s), want %s", op.Type, op.Error, tc.wantType)
			}
			if !tc.hold && (op.Type != history.OpOK || crashed) {
				t.Errorf("operation %s (%s), want ok", op.Type, op.Error)
			}
			if abortedWhileHeld != tc.wantAbort {
				t.Errorf("EndTxn abort while the produce was held: %v, want %v (EndTxn requests %+v)", abortedWhileHeld, tc.wantAbort, endTxns)
			}
			for _, e := range endTxns {
				if e.TransactionalID != queueTxnID(DefaultQueueGroup, 3) {
					t.Errorf("EndTxn for transactional id %q, want process 3's %q", e.TransactionalID, queueTxnID(DefaultQueueGroup, 3))
				}
			}
		})
	}
}

// Each process has its own transactional id, so a restarted process's
// producer id is a new one.
func TestQueueTxnIDPerProcess(t *testing.T) {
	if a, b := queueTxnID("queue", 0), queueTxnID("queue", 4); a == b {
		t.Errorf("processes 0 and 4 of one slot share transactional id %q", a)
	}
}
