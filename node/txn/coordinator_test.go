package txn

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const parts = 1

// memLog is a __transaction_state stand-in: records committed at once.
type memLog struct {
	mu   sync.Mutex
	recs map[int32][]Record
}

func (l *memLog) Append(p int32, key, value []byte) (int64, func(context.Context) error, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.recs == nil {
		l.recs = map[int32][]Record{}
	}
	l.recs[p] = append(l.recs[p], Record{Key: key, Value: value})
	return int64(len(l.recs[p]) - 1), func(context.Context) error { return nil }, nil
}

func (l *memLog) all(p int32) []Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Record(nil), l.recs[p]...)
}

type counter struct {
	mu   sync.Mutex
	next int64
}

func (c *counter) NextProducerID(context.Context) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	return 1000 + c.next, nil
}

// fakeMarkers writes every marker at once and records them; hold, while
// set, answers NOT_LEADER_OR_FOLLOWER.
type fakeMarkers struct {
	mu   sync.Mutex
	sent []Marker
	hold bool
}

func (f *fakeMarkers) Leader(TopicPartition) (int32, bool) { return 1, true }
func (f *fakeMarkers) Send(_ context.Context, _ int32, m Marker) (map[TopicPartition]int16, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[TopicPartition]int16{}
	for _, tp := range m.Partitions {
		if f.hold {
			out[tp] = kerr.NotLeaderForPartition.Code
		} else {
			out[tp] = 0
		}
	}
	if !f.hold {
		f.sent = append(f.sent, m)
	}
	return out, nil
}

func (f *fakeMarkers) markers() []Marker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Marker(nil), f.sent...)
}

type rig struct {
	c   *Coordinator
	log *memLog
	mk  *fakeMarkers
	now time.Time
	mu  sync.Mutex
	evs []Event
}

func newRig(t *testing.T, log *memLog, mk *fakeMarkers, coordEpoch int32) *rig {
	t.Helper()
	r := &rig{log: log, mk: mk, now: time.Unix(1_700_000_000, 0)}
	r.c = New(Options{Config: Config{NumPartitions: parts, RetryBackoff: 5 * time.Millisecond, AbortInterval: time.Hour},
		Log: log, PIDs: &counter{}, Markers: mk,
		OnEvent: func(e Event) { r.evs = append(r.evs, e) },
		Now:     func() time.Time { r.mu.Lock(); defer r.mu.Unlock(); return r.now }})
	t.Cleanup(r.c.Close)
	r.c.BeginLoad(0, coordEpoch)
	if err := r.c.FinishLoad(0, coordEpoch, log.all(0)); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rig) state(id string) (State, int64, int16) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	m := r.c.txns[id]
	if m == nil {
		return -1, -1, -1
	}
	return m.state, m.producerID, m.producerEpoch
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

var tpA, tpB = TopicPartition{"t", 0}, TopicPartition{"t", 1}

// A second InitProducerId for the same transactional id bumps the epoch:
// the first producer's requests then answer INVALID_PRODUCER_EPOCH. One
// made while a transaction is open aborts it first, at an epoch above the
// old producer's, and answers CONCURRENT_TRANSACTIONS until the abort is
// complete; the retry gets the next epoch.
func TestInitProducerIDFencesOlderEpoch(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, &memLog{}, &fakeMarkers{}, 3)
	first := r.c.InitProducerID(ctx, "tx", 60000, nil)
	if first.Error != 0 || first.ProducerEpoch != 0 {
		t.Fatalf("first InitProducerId: %+v", first)
	}
	if code := r.c.AddPartitions(ctx, "AddPartitionsToTxn", 1, "tx", first.ProducerID, 0, []TopicPartition{tpA, tpB}, ""); code != 0 {
		t.Fatalf("AddPartitions: %d", code)
	}
	// A new producer instance of the same id: the ongoing transaction is
	// aborted at epoch 1, which the client never sees.
	if res := r.c.InitProducerID(ctx, "tx", 60000, nil); res.Error != kerr.ConcurrentTransactions.Code {
		t.Fatalf("InitProducerId with an open transaction: %+v, want CONCURRENT_TRANSACTIONS", res)
	}
	eventually(t, "fence abort completes", func() bool { s, _, _ := r.state("tx"); return s == CompleteAbort })
	ms := r.mk.markers()
	if len(ms) != 1 || ms[0].Commit || ms[0].ProducerEpoch != 1 || ms[0].CoordinatorEpoch != 3 || len(ms[0].Partitions) != 2 {
		t.Fatalf("markers %+v, want one ABORT at producer epoch 1, coordinator epoch 3, two partitions", ms)
	}
	second := r.c.InitProducerID(ctx, "tx", 60000, nil)
	if second.Error != 0 || second.ProducerID != first.ProducerID || second.ProducerEpoch != 2 {
		t.Fatalf("retried InitProducerId: %+v, want producer %d epoch 2", second, first.ProducerID)
	}
	// The old producer is fenced.
	if code := r.c.AddPartitions(ctx, "AddPartitionsToTxn", 1, "tx", first.ProducerID, 0, []TopicPartition{tpA}, ""); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("old producer's AddPartitions: %d, want INVALID_PRODUCER_EPOCH", code)
	}
	if code := r.c.EndTxn(ctx, 1, "tx", first.ProducerID, 0, true); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("old producer's EndTxn: %d, want INVALID_PRODUCER_EPOCH", code)
	}
	// A KIP-360 InitProducerId carrying the fenced epoch is refused too.
	if res := r.c.InitProducerID(ctx, "tx", 60000, &ProducerIDAndEpoch{ID: first.ProducerID, Epoch: 0}); res.Error != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("InitProducerId with the fenced epoch: %+v", res)
	}
	// The new producer commits.
	if code := r.c.AddPartitions(ctx, "AddPartitionsToTxn", 1, "tx", second.ProducerID, 2, []TopicPartition{tpA}, ""); code != 0 {
		t.Fatalf("new producer's AddPartitions: %d", code)
	}
	if code := r.c.EndTxn(ctx, 1, "tx", second.ProducerID, 2, true); code != 0 {
		t.Fatalf("new producer's EndTxn: %d", code)
	}
	eventually(t, "commit completes", func() bool { s, _, _ := r.state("tx"); return s == CompleteCommit })
	if code := r.c.EndTxn(ctx, 1, "tx", second.ProducerID, 2, true); code != 0 {
		t.Fatalf("EndTxn commit again after CompleteCommit: %d, want NONE", code)
	}
	if code := r.c.EndTxn(ctx, 1, "tx", second.ProducerID, 2, false); code != kerr.InvalidTxnState.Code {
		t.Fatalf("EndTxn abort after CompleteCommit: %d, want INVALID_TXN_STATE", code)
	}
}

// A coordinator that becomes leader of the partition at a new epoch and
// finds a transaction in PrepareCommit (its predecessor wrote the decision
// but not the completion) sends the COMMIT markers at its own coordinator
// epoch and writes CompleteCommit; until the load is done, requests answer
// COORDINATOR_LOAD_IN_PROGRESS.
func TestLoadCompletesPrepareCommit(t *testing.T) {
	ctx := context.Background()
	log := &memLog{}
	old := &fakeMarkers{hold: true} // the old coordinator's markers never land
	r1 := newRig(t, log, old, 4)
	res := r1.c.InitProducerID(ctx, "tx", 60000, nil)
	if code := r1.c.AddPartitions(ctx, "AddPartitionsToTxn", 1, "tx", res.ProducerID, res.ProducerEpoch, []TopicPartition{tpA}, ""); code != 0 {
		t.Fatal(code)
	}
	if code := r1.c.EndTxn(ctx, 1, "tx", res.ProducerID, res.ProducerEpoch, true); code != 0 {
		t.Fatal(code)
	}
	r1.c.Unload(0) // the old coordinator loses the partition
	if s, _, _ := r1.state("tx"); s != -1 {
		t.Fatalf("unloaded coordinator still caches the transaction in %s", s)
	}

	mk := &fakeMarkers{}
	r2 := &rig{log: log, mk: mk, now: time.Unix(1_700_000_100, 0)}
	r2.c = New(Options{Config: Config{NumPartitions: parts, RetryBackoff: 5 * time.Millisecond, AbortInterval: time.Hour},
		Log: log, PIDs: &counter{}, Markers: mk, Now: time.Now})
	t.Cleanup(r2.c.Close)
	r2.c.BeginLoad(0, 5)
	if got := r2.c.InitProducerID(ctx, "tx", 60000, nil); got.Error != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("InitProducerId while loading: %+v", got)
	}
	if err := r2.c.FinishLoad(0, 5, log.all(0)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "loaded PrepareCommit completes", func() bool { s, _, _ := r2.state("tx"); return s == CompleteCommit })
	ms := mk.markers()
	if len(ms) != 1 || !ms[0].Commit || ms[0].CoordinatorEpoch != 5 || ms[0].ProducerID != res.ProducerID || len(ms[0].Partitions) != 1 || ms[0].Partitions[0] != tpA {
		t.Fatalf("markers after load %+v, want one COMMIT of t-0 at coordinator epoch 5", ms)
	}
	// A load of an older epoch that finishes late is ignored.
	r2.c.Unload(0)
	if err := r2.c.FinishLoad(0, 5, log.all(0)); err != nil {
		t.Fatal(err)
	}
	if got := r2.c.InitProducerID(ctx, "tx", 60000, nil); got.Error != kerr.NotCoordinator.Code {
		t.Fatalf("InitProducerId after unload: %+v, want NOT_COORDINATOR", got)
	}
}

// A transaction left open past its timeout is fenced and aborted by the
// coordinator; the producer's next EndTxn is refused for its old epoch.
func TestTransactionTimeoutAborts(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, &memLog{}, &fakeMarkers{}, 1)
	res := r.c.InitProducerID(ctx, "tx", 1000, nil)
	if code := r.c.AddPartitions(ctx, "AddPartitionsToTxn", 1, "tx", res.ProducerID, res.ProducerEpoch, []TopicPartition{tpA}, ""); code != 0 {
		t.Fatal(code)
	}
	r.c.AbortTimedOut()
	if s, _, _ := r.state("tx"); s != Ongoing {
		t.Fatalf("aborted before the timeout: %s", s)
	}
	r.mu.Lock()
	r.now = r.now.Add(2 * time.Second)
	r.mu.Unlock()
	r.c.AbortTimedOut()
	eventually(t, "timed-out transaction aborted", func() bool { s, _, _ := r.state("tx"); return s == CompleteAbort })
	if _, _, e := r.state("tx"); e != res.ProducerEpoch+1 {
		t.Fatalf("epoch after the timeout abort %d, want %d", e, res.ProducerEpoch+1)
	}
	if code := r.c.EndTxn(ctx, 1, "tx", res.ProducerID, res.ProducerEpoch, true); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("EndTxn after the timeout: %d, want INVALID_PRODUCER_EPOCH", code)
	}
}

// The record format round-trips and a tombstone deletes.
func TestRecords(t *testing.T) {
	tr := transit{producerID: 42, producerEpoch: 7, timeoutMs: 900, state: PrepareAbort,
		partitions: []TopicPartition{{"a", 1}, {"a", 0}, {"b", 3}}, startMs: 5, updateMs: 9}
	id, err := decodeKey(encodeKey("tx-1"))
	if err != nil || id != "tx-1" {
		t.Fatalf("key: %q %v", id, err)
	}
	m, err := decodeValue("tx-1", encodeValue(tr))
	if err != nil {
		t.Fatal(err)
	}
	if m.producerID != 42 || m.producerEpoch != 7 || m.timeoutMs != 900 || m.state != PrepareAbort || len(m.partitions) != 3 || m.startMs != 5 || m.updateMs != 9 {
		t.Fatalf("decoded %+v", m)
	}
	if m, err := decodeValue("tx-1", nil); m != nil || err != nil {
		t.Fatalf("tombstone: %+v %v", m, err)
	}
	if _, err := decodeValue("tx-1", encodeValue(tr)[:10]); err == nil {
		t.Fatal("short value decoded")
	}
}

// splitMarkers leads tpA on broker 1, which does not answer until
// released, and every other partition on broker 2, which writes at once.
type splitMarkers struct {
	release chan struct{}
	mu      sync.Mutex
	written []TopicPartition
}

func (f *splitMarkers) Leader(tp TopicPartition) (int32, bool) {
	if tp == tpA {
		return 1, true
	}
	return 2, true
}

func (f *splitMarkers) Send(ctx context.Context, broker int32, m Marker) (map[TopicPartition]int16, error) {
	if broker == 1 {
		select {
		case <-f.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[TopicPartition]int16{}
	for _, tp := range m.Partitions {
		out[tp] = 0
		f.written = append(f.written, tp)
	}
	return out, nil
}

func (f *splitMarkers) has(tp TopicPartition) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.written, tp)
}

// A leader that does not answer holds back only its own partitions'
// markers: Kafka's TransactionMarkerChannelManager sends each broker's
// WriteTxnMarkers from its own queue in the same poll. In a queue run
// (seed 7) broker 2, the coordinator of a loaded PrepareCommit over chaos-0
// and chaos-2, waited on chaos-0's leader (broker 1, cut off) and never
// wrote chaos-2's marker, which it led itself, before it was killed 3s
// later.
func TestMarkersToOneLeaderDoNotWaitForAnother(t *testing.T) {
	ctx := context.Background()
	mk := &splitMarkers{release: make(chan struct{})}
	log := &memLog{}
	c := New(Options{Config: Config{NumPartitions: parts, RetryBackoff: 5 * time.Millisecond, AbortInterval: time.Hour},
		Log: log, PIDs: &counter{}, Markers: mk, Now: time.Now})
	t.Cleanup(c.Close)
	c.BeginLoad(0, 3)
	if err := c.FinishLoad(0, 3, nil); err != nil {
		t.Fatal(err)
	}
	res := c.InitProducerID(ctx, "tx", 60000, nil)
	if code := c.AddPartitions(ctx, "AddPartitionsToTxn", 1, "tx", res.ProducerID, res.ProducerEpoch, []TopicPartition{tpA, tpB}, ""); code != 0 {
		t.Fatal(code)
	}
	if code := c.EndTxn(ctx, 1, "tx", res.ProducerID, res.ProducerEpoch, true); code != 0 {
		t.Fatal(code)
	}
	eventually(t, "t-1's marker written while broker 1 does not answer", func() bool { return mk.has(tpB) })
	if mk.has(tpA) {
		t.Fatal("t-0's marker written before broker 1 answered")
	}
	close(mk.release)
	eventually(t, "the transaction completes once broker 1 answers", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.txns["tx"].state == CompleteCommit
	})
}
