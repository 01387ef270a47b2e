package dataplane

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/storage"
)

// A batch refused for an older producer epoch is logged as produce_refused
// with the epoch the leader held (the harness counts it at the producer
// epoch fence), and a marker's append says what the producer state held
// when it was checked; a batch refused for another reason is not logged.
func TestProducerEpochRefusalIsLogged(t *testing.T) {
	m, logged := openLogged(t, t.TempDir())
	lead(t, m, 0, 1)
	tp := history.TP("t", 0)
	if r := produce(m, 0, -1, time.Second, txnBatch(t, 7, 2, 0, "a")); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	_, _, seen, err := m.AppendMarker(tp, storage.Marker{ProducerID: 7, ProducerEpoch: 2, CoordinatorEpoch: 4, Commit: true})
	if err != nil || seen != (ProducerView{Known: true, Epoch: 2, CoordinatorEpoch: -1}) {
		t.Fatalf("first marker: %v, seen %+v", err, seen)
	}
	if _, _, seen, err = m.AppendMarker(tp, storage.Marker{ProducerID: 7, ProducerEpoch: 2, CoordinatorEpoch: 3}); err == nil ||
		seen != (ProducerView{Known: true, Epoch: 2, CoordinatorEpoch: 4}) {
		t.Fatalf("marker at an older coordinator epoch: %v, seen %+v", err, seen)
	}
	if _, _, seen, _ = m.AppendMarker(tp, storage.Marker{ProducerID: 9, ProducerEpoch: 0, CoordinatorEpoch: 3}); seen.Known {
		t.Fatalf("marker for a producer the partition never saw: seen %+v", seen)
	}
	if r := produce(m, 0, -1, time.Second, txnBatch(t, 7, 1, 0, "zombie")); r.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("produce at epoch 1 after 2: %d", r.ErrorCode)
	}
	if r := produce(m, 0, -1, time.Second, idemBatch(7, 2, 5, "gap")); r.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("produce out of sequence: %d", r.ErrorCode)
	}
	var got []history.ProduceRefusal
	for _, e := range loggedEvents(logged, history.KindProduceRefused) {
		got = append(got, *e.Refusal)
	}
	if len(got) != 1 || got[0].Check != history.RefusedProducerEpoch || got[0].ProducerEpoch != 1 || got[0].KnownProducerEpoch != 2 ||
		got[0].ErrorCode != kerr.InvalidProducerEpoch.Code || !got[0].Transactional || got[0].TP() != tp {
		t.Fatalf("refusals logged: %+v", got)
	}
}
