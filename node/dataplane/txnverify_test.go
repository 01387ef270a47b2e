package dataplane

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/failpoint"
)

// fakeCoordinator answers verifications from a set of partitions in the
// ongoing transaction, as the coordinator's metadata would.
type fakeCoordinator struct {
	mu    sync.Mutex
	in    map[history.TopicPartition]bool
	asked int
}

func (c *fakeCoordinator) verify(_ context.Context, id string, _ int64, _ int16, tp history.TopicPartition) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked++
	if id != "tx" || !c.in[tp] {
		return kerr.InvalidTxnState.Code
	}
	return 0
}

func (c *fakeCoordinator) set(in bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.in = map[history.TopicPartition]bool{history.TP("t", 0): in}
}

// verifyingLeader is a manager leading t-0 with ISR [1] that asks coord
// before a batch that starts a transaction, with KAFKA-12671's switch as
// bug says.
func verifyingLeader(t *testing.T, bug bool) (*Manager, *fakeCoordinator) {
	t.Helper()
	bugs := config.Bugs{}
	if bug {
		bugs[config.BugKafka12671] = true
	}
	m := newManager(t, t.TempDir(), bugs, 1)
	lead(t, m, 0, 1)
	coord := &fakeCoordinator{}
	m.SetTxnVerifier(coord.verify)
	return m, coord
}

// txnProduce sends records as transactional id "tx" to t-0 with acks=1.
func txnProduce(ctx context.Context, m *Manager, records []byte) int16 {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(8)
	id := "tx"
	req.TransactionID, req.Acks, req.TimeoutMillis = &id, 1, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return m.Produce(ctx, req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
}

func lsoOf(m *Manager) (lso, hw int64) {
	p := m.get(history.TP("t", 0))
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lsoLocked(), p.hw
}

// A produce that reaches the leader after its transaction was aborted
// (the abort marker written) is the hanging transaction of KAFKA-12671:
// with the switch on the leader appends it and the last stable offset
// stays at its offset below the high watermark; with verification the
// coordinator says the partition is not in a transaction and the produce
// is refused with INVALID_TXN_STATE. Within a transaction the leader asks
// once, for the batch that starts it.
func TestLateTxnProduceAfterAbort(t *testing.T) {
	for _, bug := range []bool{true, false} {
		m, coord := verifyingLeader(t, bug)
		ctx := context.Background()

		coord.set(true)
		if code := txnProduce(ctx, m, txnBatch(t, 7, 0, 0, "a0")); code != 0 {
			t.Fatalf("bug %v: produce in the transaction: %d", bug, code)
		}
		if code := txnProduce(ctx, m, txnBatch(t, 7, 0, 1, "a1")); code != 0 {
			t.Fatalf("bug %v: second produce: %d", bug, code)
		}
		if want := map[bool]int{true: 0, false: 1}[bug]; coord.asked != want {
			t.Fatalf("bug %v: coordinator asked %d times, want %d (only for the batch that starts the transaction)", bug, coord.asked, want)
		}
		if _, err := marker(m, 7, 0, 1, false); err != nil {
			t.Fatal(err)
		}
		coord.set(false) // CompleteAbort: no partition in the transaction
		code := txnProduce(ctx, m, txnBatch(t, 7, 0, 2, "late"))
		lso, hw := lsoOf(m)
		if bug {
			if code != 0 || lso != 3 || hw != 4 {
				t.Fatalf("switch on: late produce %d, LSO %d HW %d; want appended at 3 and the LSO stuck there below HW 4", code, lso, hw)
			}
			continue
		}
		if code != kerr.InvalidTxnState.Code || lso != 3 || hw != 3 {
			t.Fatalf("fixed: late produce %d, LSO %d HW %d; want INVALID_TXN_STATE, nothing appended, LSO = HW = 3", code, lso, hw)
		}
	}
}

// The verification guard: a produce verified while its transaction was
// ongoing, then held before the append while the abort marker is
// written, is refused at the append (the marker ended the verification),
// although the coordinator had said yes. With the switch on it is
// appended after the marker.
func TestVerifiedProduceHeldPastAbortMarker(t *testing.T) {
	for _, bug := range []bool{true, false} {
		m, coord := verifyingLeader(t, bug)
		coord.set(true)
		fp := failpoint.New()
		held := make(chan struct{}, 1)
		fp.OnHit = func(h failpoint.Hit) {
			if h.Phase == "start" {
				held <- struct{}{}
			}
		}
		if err := fp.Arm(failpoint.LeaderBeforeTxnAppend, failpoint.Action{Kind: failpoint.ActPause, Count: 1}); err != nil {
			t.Fatal(err)
		}
		m.cfg.Failpoints = fp
		ctx := context.Background()
		res := make(chan int16, 1)
		go func() { res <- txnProduce(ctx, m, txnBatch(t, 7, 0, 0, "held")) }()
		select {
		case <-held:
		case <-time.After(5 * time.Second):
			t.Fatal("produce never reached the failpoint")
		}
		if _, err := marker(m, 7, 0, 1, false); err != nil {
			t.Fatal(err)
		}
		if err := fp.Release(failpoint.LeaderBeforeTxnAppend); err != nil {
			t.Fatal(err)
		}
		code := <-res
		lso, hw := lsoOf(m)
		if bug {
			if code != 0 || lso != 1 || hw != 2 {
				t.Fatalf("switch on: held produce %d, LSO %d HW %d; want appended at 1 after the marker, LSO stuck at 1", code, lso, hw)
			}
			continue
		}
		if code != kerr.InvalidTxnState.Code || lso != 1 || hw != 1 {
			t.Fatalf("fixed: held produce %d, LSO %d HW %d; want INVALID_TXN_STATE and nothing appended", code, lso, hw)
		}
	}
}
