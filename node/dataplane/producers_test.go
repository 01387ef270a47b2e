package dataplane

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/broker"
	"github.com/zkchaos/zkchaos/node/storage"
)

// idemBatch is batch(vals...) as an idempotent producer sends it.
func idemBatch(pid int64, epoch int16, seq int32, vals ...string) []byte {
	b := batch(vals...)
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	binary.BigEndian.PutUint16(b[51:], uint16(epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// The leader's sequence checks, one producer request after another on the
// same partition: each step's answer (error and base offset) as Kafka 2.x
// gives it.
func TestIdempotentProduce(t *testing.T) {
	type step struct {
		name   string
		batch  []byte
		code   int16
		offset int64 // base offset answered (-1 on error)
	}
	for _, c := range []struct {
		name  string
		steps []step
		leo   int64 // log end offset after the steps
	}{
		{"in order", []step{
			{"first", idemBatch(7, 0, 0, "a", "b"), 0, 0},
			{"next", idemBatch(7, 0, 2, "c"), 0, 2},
		}, 3},
		{"retry of the last batch answers its offset", []step{
			{"first", idemBatch(7, 0, 0, "a", "b"), 0, 0},
			{"next", idemBatch(7, 0, 2, "c"), 0, 2},
			{"retry first", idemBatch(7, 0, 0, "a", "b"), 0, 0},
			{"retry next", idemBatch(7, 0, 2, "c"), 0, 2},
		}, 3},
		{"gap is out of order", []step{
			{"first", idemBatch(7, 0, 0, "a"), 0, 0},
			{"skips 1", idemBatch(7, 0, 2, "c"), kerr.OutOfOrderSequenceNumber.Code, -1},
			{"then 1", idemBatch(7, 0, 1, "b"), 0, 1},
		}, 2},
		// ProducerAppendInfo.checkSequence (2.6.3, KIP-360): no
		// UNKNOWN_PRODUCER_ID; the first batch sets where the sequence is.
		{"unknown producer is accepted at any sequence", []step{
			{"seq 5", idemBatch(9, 0, 5, "a"), 0, 0},
			{"seq 6 follows", idemBatch(9, 0, 6, "b"), 0, 1},
			{"retry of seq 5", idemBatch(9, 0, 5, "a"), 0, 0},
			{"seq 8 skips 7", idemBatch(9, 0, 8, "c"), kerr.OutOfOrderSequenceNumber.Code, -1},
		}, 2},
		{"older epoch is fenced", []step{
			{"epoch 1", idemBatch(7, 1, 0, "a"), 0, 0},
			{"epoch 0", idemBatch(7, 0, 1, "b"), kerr.InvalidProducerEpoch.Code, -1},
		}, 1},
		{"new epoch restarts at 0", []step{
			{"epoch 0", idemBatch(7, 0, 0, "a"), 0, 0},
			{"epoch 1 seq 1", idemBatch(7, 1, 1, "b"), kerr.OutOfOrderSequenceNumber.Code, -1},
			{"epoch 1 seq 0", idemBatch(7, 1, 0, "b"), 0, 1},
		}, 2},
		{"producers are independent", []step{
			{"p7", idemBatch(7, 0, 0, "a"), 0, 0},
			{"p8", idemBatch(8, 0, 0, "b"), 0, 1},
			{"p7 retry", idemBatch(7, 0, 0, "a"), 0, 0},
		}, 2},
		{"non-idempotent batches are never deduplicated", []step{
			{"a", batch("a"), 0, 0},
			{"a again", batch("a"), 0, 1},
		}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newManager(t, t.TempDir(), nil, 1)
			lead(t, m, 0, 1)
			for _, s := range c.steps {
				r := produce(m, 0, -1, time.Second, s.batch)
				if r.ErrorCode != s.code || r.BaseOffset != s.offset {
					t.Fatalf("%s: error %d base offset %d, want error %d offset %d", s.name, r.ErrorCode, r.BaseOffset, s.code, s.offset)
				}
			}
			if leo := m.get(history.TP("t", 0)).log.LogEndOffset(); leo != c.leo {
				t.Fatalf("log end offset %d, want %d", leo, c.leo)
			}
		})
	}
}

func TestSequenceWrap(t *testing.T) {
	if !inSequence(math.MaxInt32, 0) || inSequence(math.MaxInt32, 1) || !inSequence(4, 5) || inSequence(4, 4) {
		t.Fatal("inSequence")
	}
	s := producerStates{}
	h, _ := storage.PeekHeader(idemBatch(7, 0, math.MaxInt32-1, "a", "b"))
	s.update(h)
	if got := s[7].lastSeq(); got != math.MaxInt32 {
		t.Fatalf("last sequence %d", got)
	}
	h, _ = storage.PeekHeader(idemBatch(7, 0, 0, "c"))
	if dup, code, _ := s.check(h); dup != nil || code != 0 {
		t.Fatalf("sequence 0 after MaxInt32: dup %v code %d", dup, code)
	}
}

// The state is in the log: a reopened log (a restarted broker) and a
// follower that replicated the log (a new leader after failover) both
// continue every producer's sequence and still recognise a retry.
func TestProducerStateSurvivesRestartAndFailover(t *testing.T) {
	dir := t.TempDir()
	m1 := newManagerID(t, 1, dir, nil, 1)
	lead(t, m1, 0, 1)
	for i, b := range [][]byte{idemBatch(7, 0, 0, "a", "b"), idemBatch(7, 0, 2, "c"), batch("x"), idemBatch(8, 3, 0, "d")} {
		if r := produce(m1, 0, -1, time.Second, b); r.ErrorCode != 0 {
			t.Fatalf("produce %d: %d", i, r.ErrorCode)
		}
	}

	// Failover: broker 2 replicates broker 1's log, then leads.
	addr, srv := serve(t, m1)
	m2 := newManagerID(t, 2, t.TempDir(), nil, 1)
	follow(t, m2, addr, 1, 2)
	p2 := m2.get(history.TP("t", 0))
	eventually(t, "follower replicated 5 records", func() bool { return p2.log.LogEndOffset() == 5 })
	if err := m2.BecomeLeader(broker.Partition{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 4, ISR: []int32{2}, Replicas: []int32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	check := func(who string, m *Manager) {
		t.Helper()
		for _, s := range []struct {
			name   string
			b      []byte
			code   int16
			offset int64
		}{
			{"retry of p7's last batch", idemBatch(7, 0, 2, "c"), 0, 2},
			{"p7 skipping a sequence", idemBatch(7, 0, 4, "e"), kerr.OutOfOrderSequenceNumber.Code, -1},
			{"p8 at an old epoch", idemBatch(8, 2, 1, "e"), kerr.InvalidProducerEpoch.Code, -1},
			{"p7 continues", idemBatch(7, 0, 3, "e"), 0, 5},
		} {
			if r := produce(m, 0, -1, time.Second, s.b); r.ErrorCode != s.code || r.BaseOffset != s.offset {
				t.Fatalf("%s: %s: error %d offset %d, want %d at %d", who, s.name, r.ErrorCode, r.BaseOffset, s.code, s.offset)
			}
		}
	}
	check("new leader after failover", m2)

	// Restart: broker 1's log reopened from disk.
	srv.Close()
	m1.Close()
	m3 := newManagerID(t, 1, dir, nil, 1)
	lead(t, m3, 0, 1)
	check("restarted broker", m3)
}

// A follower that truncates forgets the producer batches it cut, so the
// producer's retry of a cut batch is appended again, not answered as a
// duplicate of a record that no longer exists.
func TestProducerStateFollowsTruncation(t *testing.T) {
	m := newManager(t, t.TempDir(), nil, 1)
	lead(t, m, 0, 1)
	for _, b := range [][]byte{idemBatch(7, 0, 0, "a"), idemBatch(7, 0, 1, "b")} {
		if r := produce(m, 0, -1, time.Second, b); r.ErrorCode != 0 {
			t.Fatalf("produce: %d", r.ErrorCode)
		}
	}
	p := m.get(history.TP("t", 0))
	p.mu.Lock()
	if _, err := p.log.TruncateTo(1); err != nil {
		t.Fatal(err)
	}
	if err := p.rebuildProducersLocked(); err != nil {
		t.Fatal(err)
	}
	p.hw = 1
	p.mu.Unlock()
	if r := produce(m, 0, -1, time.Second, idemBatch(7, 0, 1, "b")); r.ErrorCode != 0 || r.BaseOffset != 1 {
		t.Fatalf("retry of the cut batch: error %d offset %d, want appended at 1", r.ErrorCode, r.BaseOffset)
	}
}

func TestInitProducerIDTransactionalRefused(t *testing.T) {
	m := newManager(t, t.TempDir(), nil, 1)
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = kmsg.StringPtr("tx")
	if r := m.InitProducerID(t.Context(), req).(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code || r.ProducerID != -1 {
		t.Fatalf("transactional: %+v", r)
	}
	// Without a ZooKeeper session no block can be claimed: retriable.
	req.TransactionalID = nil
	if r := m.InitProducerID(t.Context(), req).(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("no session: %+v", r)
	}
}

func listOffset(m *Manager, replica int32, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	return m.ListOffsets(listOffsetsRequest(replica, history.TP("t", 0), ts, -1)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
}

// KIP-207: a new leader whose high watermark is still below the start of
// its leader epoch answers a consumer's "latest" with OFFSET_NOT_AVAILABLE
// (its HW could be behind what the old leader already answered) until the
// ISR's fetches move the HW to the epoch start.
func TestListOffsetsLaggingHighWatermark(t *testing.T) {
	dir := t.TempDir()
	m := newManagerID(t, 1, dir, nil, 1)
	lead(t, m, 0, 1)
	if r := produce(m, 0, -1, time.Second, batch("a", "b")); r.ErrorCode != 0 {
		t.Fatalf("produce: %d", r.ErrorCode)
	}
	m.Close()
	// Restarted without a checkpoint: HW starts at the log start, 0.
	m = newManagerID(t, 1, dir, nil, 1)
	if err := m.BecomeLeader(broker.Partition{Topic: "t", Partition: 0, Leader: 1, LeaderEpoch: 4, ISR: []int32{1, 2}, Replicas: []int32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		replica int32
		ts      int64
		code    int16
		offset  int64
	}{
		{"consumer latest", -1, -1, kerr.OffsetNotAvailable.Code, -1},
		{"consumer earliest", -1, -2, 0, 0},
		{"query-leo latest", -2, -1, 0, 2},
	} {
		if got := listOffset(m, c.replica, c.ts); got.ErrorCode != c.code || got.Offset != c.offset {
			t.Errorf("%s: error %d offset %d, want %d at %d", c.name, got.ErrorCode, got.Offset, c.code, c.offset)
		}
	}
	if f := fetch(m, 2, 0, 2); f.ErrorCode != 0 {
		t.Fatalf("follower fetch: %d", f.ErrorCode)
	}
	if got := listOffset(m, -1, -1); got.ErrorCode != 0 || got.Offset != 2 || got.LeaderEpoch != 4 {
		t.Fatalf("consumer latest once the HW reached the epoch start: %+v", got)
	}
}

// Kafka never answers a partition with null records; kafka-python fails
// on them.
func TestFetchRecordsNeverNull(t *testing.T) {
	m := newManager(t, t.TempDir(), nil, 1)
	lead(t, m, 0, 1)
	for _, c := range []struct {
		name   string
		p      int32
		offset int64
	}{{"empty log", 0, 0}, {"out of range", 0, 5}, {"unknown partition", 9, 0}} {
		resp := m.Fetch(t.Context(), fetchRequest(4, -1, history.TP("t", c.p), c.offset, 1<<20)).(*kmsg.FetchResponse)
		if resp.Topics[0].Partitions[0].RecordBatches == nil {
			t.Errorf("%s: null records", c.name)
		}
	}
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(11)
	req.SessionID = 42
	if resp := m.Fetch(t.Context(), req).(*kmsg.FetchResponse); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Errorf("fetch naming a session never created: error %d", resp.ErrorCode)
	}
}
