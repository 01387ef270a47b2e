package txn

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A leader's verification (KIP-890) is answered from the metadata: a
// partition added to the ongoing transaction is NONE, one not added is
// INVALID_TXN_STATE, and once the abort is complete no partition is in
// the transaction any more, so a produce that arrives late is refused. A
// producer of an older epoch is told PRODUCER_FENCED, an unknown id
// INVALID_PRODUCER_ID_MAPPING.
func TestVerifyPartitions(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, &memLog{}, &fakeMarkers{}, 2)
	res := r.c.InitProducerID(ctx, "tx", 60000, nil)
	if code := r.c.AddPartitions(ctx, "AddPartitionsToTxn", 1, "tx", res.ProducerID, res.ProducerEpoch, []TopicPartition{tpA}, ""); code != 0 {
		t.Fatalf("AddPartitions: %d", code)
	}
	got := r.c.VerifyPartitions("tx", res.ProducerID, res.ProducerEpoch, []TopicPartition{tpA, tpB})
	if got[tpA] != 0 || got[tpB] != kerr.InvalidTxnState.Code {
		t.Fatalf("ongoing transaction: %v, want %s NONE and %s INVALID_TXN_STATE", got, tpA, tpB)
	}
	if got := r.c.VerifyPartitions("tx", res.ProducerID, res.ProducerEpoch+1, []TopicPartition{tpA}); got[tpA] != kerr.ProducerFenced.Code {
		t.Fatalf("other epoch: %v, want PRODUCER_FENCED", got)
	}
	if got := r.c.VerifyPartitions("other", res.ProducerID, res.ProducerEpoch, []TopicPartition{tpA}); got[tpA] != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("unknown id: %v, want INVALID_PRODUCER_ID_MAPPING", got)
	}
	if code := r.c.EndTxn(ctx, 1, "tx", res.ProducerID, res.ProducerEpoch, false); code != 0 {
		t.Fatalf("EndTxn abort: %d", code)
	}
	eventually(t, "abort completes", func() bool { s, _, _ := r.state("tx"); return s == CompleteAbort })
	if got := r.c.VerifyPartitions("tx", res.ProducerID, res.ProducerEpoch, []TopicPartition{tpA}); got[tpA] != kerr.InvalidTxnState.Code {
		t.Fatalf("after the abort: %v, want INVALID_TXN_STATE", got)
	}
	last := r.evs[len(r.evs)-1]
	if last.API != APIVerify || last.State != CompleteAbort.String() || len(last.Errors) != 1 || last.Errors[0].Error != kerr.InvalidTxnState.Code {
		t.Fatalf("last event %+v, want a verification at CompleteAbort refusing %s", last, tpA)
	}
}
