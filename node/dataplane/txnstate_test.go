package dataplane

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/storage"
)

// txnBatch is a transactional producer's batch.
func txnBatch(t *testing.T, pid int64, epoch int16, seq int32, vals ...string) []byte {
	t.Helper()
	var recs []storage.KeyValue
	for _, v := range vals {
		recs = append(recs, storage.KeyValue{Value: []byte(v)})
	}
	b, err := storage.EncodeTxnBatch(recs, 1, pid, epoch, seq)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// marker appends a transaction marker to t-0 as WriteTxnMarkers does and
// waits for it to commit; it returns the marker's offset or the error.
func marker(m *Manager, pid int64, epoch int16, coordEpoch int32, commit bool) (int64, error) {
	mk := storage.EncodeMarker(storage.Marker{ProducerID: pid, ProducerEpoch: epoch, Commit: commit, CoordinatorEpoch: coordEpoch}, 1)
	base, committed, err := m.AppendAsCoordinator(history.TP("t", 0), mk)
	if err != nil {
		return -1, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return base, committed(ctx)
}

func committedFetch(m *Manager, offset int64) *kmsg.FetchResponseTopicPartition {
	req := fetchRequest(12, -1, history.TP("t", 0), offset, 1<<20)
	req.IsolationLevel = 1
	return &m.Fetch(context.Background(), req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
}

func listLatest(m *Manager, isolation int8) int64 {
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(5)
	req.ReplicaID, req.IsolationLevel = -1, isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return m.ListOffsets(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].Offset
}

// The last stable offset stays at the first offset of an open transaction
// while the high watermark moves past it, and moves on when the marker is
// written: to the next open transaction's start, then to the HW. A
// read_committed fetch and ListOffsets stop at it; read_uncommitted ones at
// the HW.
func TestLSOAdvancesAtCommitAndAbort(t *testing.T) {
	m := newManager(t, t.TempDir(), nil, 1)
	lead(t, m, 0, 1)
	steps := []struct {
		name  string
		batch []byte
	}{
		{"plain", batch("p0")},                           // 0
		{"txn 7", txnBatch(t, 7, 0, 0, "a0", "a1")},      // 1-2
		{"txn 8", txnBatch(t, 8, 0, 0, "b0")},            // 3
		{"txn 7 more", txnBatch(t, 7, 0, 2, "a2")},       // 4
		{"plain after", batch("p1")},                     // 5
		{"txn 8 more", txnBatch(t, 8, 0, 1, "b1", "b2")}, // 6-7
	}
	for _, s := range steps {
		if r := produce(m, 0, -1, time.Second, s.batch); r.ErrorCode != 0 {
			t.Fatalf("%s: error %d", s.name, r.ErrorCode)
		}
	}
	p := m.get(history.TP("t", 0))
	lso := func() int64 { p.mu.Lock(); defer p.mu.Unlock(); return p.lsoLocked() }
	if got, hw := lso(), p.hw; got != 1 || hw != 8 {
		t.Fatalf("two open transactions: LSO %d HW %d, want 1 and 8", got, hw)
	}
	if f := committedFetch(m, 0); f.LastStableOffset != 1 || f.HighWatermark != 8 || len(f.RecordBatches) == 0 {
		t.Fatalf("read_committed fetch: LSO %d HW %d, %d bytes", f.LastStableOffset, f.HighWatermark, len(f.RecordBatches))
	} else if hs, _, _ := storage.SplitBatches(f.RecordBatches); hs[len(hs)-1].LastOffset() != 0 {
		t.Fatalf("read_committed fetch returned up to offset %d, want only offset 0 (below the LSO 1)", hs[len(hs)-1].LastOffset())
	}
	if got := listLatest(m, 1); got != 1 {
		t.Fatalf("ListOffsets read_committed latest %d, want the LSO 1", got)
	}
	if got := listLatest(m, 0); got != 8 {
		t.Fatalf("ListOffsets read_uncommitted latest %d, want the HW 8", got)
	}

	// Producer 7 commits: the LSO moves to producer 8's first offset.
	if off, err := marker(m, 7, 0, 5, true); err != nil || off != 8 {
		t.Fatalf("commit marker: offset %d, %v", off, err)
	}
	if got := lso(); got != 3 {
		t.Fatalf("after 7's commit: LSO %d, want 3 (8's first offset)", got)
	}
	// Producer 8 aborts: nothing is open, the LSO is the HW.
	if off, err := marker(m, 8, 0, 5, false); err != nil || off != 9 {
		t.Fatalf("abort marker: offset %d, %v", off, err)
	}
	if got := lso(); got != 10 || p.hw != 10 {
		t.Fatalf("after 8's abort: LSO %d HW %d, want 10 and 10", got, p.hw)
	}
	f := committedFetch(m, 0)
	if len(f.AbortedTransactions) != 1 || f.AbortedTransactions[0].ProducerID != 8 || f.AbortedTransactions[0].FirstOffset != 3 {
		t.Fatalf("read_committed fetch aborted transactions %+v, want producer 8 from offset 3", f.AbortedTransactions)
	}
	if f.LastStableOffset != 10 {
		t.Fatalf("fetch LSO %d, want 10", f.LastStableOffset)
	}
	// A fetch from past the aborted transaction's marker is not told of it.
	if f := committedFetch(m, 10); len(f.AbortedTransactions) != 0 {
		t.Fatalf("fetch from 10: aborted %+v", f.AbortedTransactions)
	}
	// read_uncommitted answers no aborted list at all (null).
	if f := fetch(m, -1, 0, 0); f.AbortedTransactions != nil || f.LastStableOffset != 10 {
		t.Fatalf("read_uncommitted: aborted %+v LSO %d", f.AbortedTransactions, f.LastStableOffset)
	}

	// The state is rebuilt from the log: a reopened partition knows the
	// aborted transaction and that nothing is open.
	p.mu.Lock()
	err := p.rebuildProducersLocked()
	p.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if got := lso(); got != 10 {
		t.Fatalf("rebuilt: LSO %d, want 10", got)
	}
	if f := committedFetch(m, 0); len(f.AbortedTransactions) != 1 {
		t.Fatalf("rebuilt: aborted %+v", f.AbortedTransactions)
	}
}

// openTxn is a leader of t-0 on which producer 7, at producerEpoch, has
// a transaction open: value "a" at offset 0, no marker yet.
func openTxn(t *testing.T, producerEpoch int16) *Manager {
	t.Helper()
	m := newManager(t, t.TempDir(), nil, 1)
	lead(t, m, 0, 1)
	if r := produce(m, 0, -1, time.Second, txnBatch(t, 7, producerEpoch, 0, "a")); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	return m
}

// A marker whose coordinator epoch is older than the one of the last
// marker written for that producer is refused with
// TRANSACTION_COORDINATOR_FENCED, and one of an older producer epoch with
// INVALID_PRODUCER_EPOCH; equal and newer coordinator epochs are written.
func TestMarkerFencing(t *testing.T) {
	m := openTxn(t, 2)
	if _, err := marker(m, 7, 2, 4, true); err != nil {
		t.Fatalf("first marker, coordinator epoch 4: %v", err)
	}
	if _, err := marker(m, 7, 2, 3, false); !errors.Is(err, kerr.TransactionCoordinatorFenced) {
		t.Fatalf("marker at coordinator epoch 3 after 4: %v, want TRANSACTION_COORDINATOR_FENCED", err)
	}
	if _, err := marker(m, 7, 1, 4, false); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("marker at producer epoch 1 after 2: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	if _, err := marker(m, 7, 2, 4, false); err != nil {
		t.Fatalf("marker at the same coordinator epoch: %v", err)
	}
	if _, err := marker(m, 7, 3, 6, false); err != nil {
		t.Fatalf("marker at a newer coordinator and producer epoch: %v", err)
	}
	// The bumped epoch fences the producer's old epoch.
	if r := produce(m, 0, -1, time.Second, txnBatch(t, 7, 2, 1, "late")); r.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("produce at the fenced epoch: %d", r.ErrorCode)
	}
	// Clients may not write markers.
	mk := storage.EncodeMarker(storage.Marker{ProducerID: 7, ProducerEpoch: 3, Commit: true, CoordinatorEpoch: 9}, 1)
	if r := produce(m, 0, -1, time.Second, mk); r.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("client-written marker: %d, want INVALID_RECORD", r.ErrorCode)
	}
}

// A producer with an open transaction may not write outside it
// (INVALID_TXN_STATE); once its marker is written it may.
func TestNonTransactionalWriteDuringTransaction(t *testing.T) {
	m := openTxn(t, 0)
	if r := produce(m, 0, -1, time.Second, idemBatch(7, 0, 1, "b")); r.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("idempotent batch inside the transaction: %d, want INVALID_TXN_STATE", r.ErrorCode)
	}
	if _, err := marker(m, 7, 0, 0, true); err != nil {
		t.Fatal(err)
	}
	if r := produce(m, 0, -1, time.Second, idemBatch(7, 0, 1, "b")); r.ErrorCode != 0 {
		t.Fatalf("idempotent batch after the commit: %d", r.ErrorCode)
	}
}
