package dataplane

import (
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/zkchaos/zkchaos/node/storage"
)

// Idempotent producer state (KIP-98), per partition: for every producer id
// the latest producer epoch and the last few batches' sequence ranges and
// offsets. It lives in the log itself: every batch carries its producer id,
// epoch and base sequence, so a replica rebuilds the state by scanning its
// log at start-up and after a truncation, and keeps it current on every
// append, as leader and as follower. A new leader therefore continues each
// producer's sequence where the old leader's replicated log left it, as
// Kafka's ProducerStateManager does (Kafka adds snapshot files only to
// avoid the scan).

// producerBatchesKept is how many batches per producer are remembered for
// duplicate detection: Kafka keeps 5, the most a producer may have in flight
// with idempotence.
const producerBatchesKept = 5

// producerBatch is one appended batch of a producer.
type producerBatch struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
}

// producerEntry is Kafka's ProducerStateEntry.
type producerEntry struct {
	epoch   int16
	batches []producerBatch // oldest first, at most producerBatchesKept
	// coordinatorEpoch is that of the last transaction marker written for
	// this producer (-1: none); txnFirst the first offset of its ongoing
	// transaction (-1: none). See txnstate.go.
	coordinatorEpoch int32
	txnFirst         int64
}

func newProducerEntry(epoch int16) *producerEntry {
	return &producerEntry{epoch: epoch, coordinatorEpoch: -1, txnFirst: -1}
}

func (e *producerEntry) lastSeq() int32 {
	if len(e.batches) == 0 {
		return -1
	}
	return e.batches[len(e.batches)-1].lastSeq
}

// producerStates maps producer id to its state.
type producerStates map[int64]*producerEntry

// lastSeqOf is the sequence of the batch's last record; sequences wrap at
// MaxInt32 to 0 (DefaultRecordBatch.incrementSequence).
func lastSeqOf(h storage.BatchHeader) int32 {
	return int32((int64(h.BaseSequence) + int64(h.LastOffsetDelta)) % (math.MaxInt32 + 1))
}

func inSequence(last, next int32) bool {
	return next == last+1 || (last == math.MaxInt32 && next == 0)
}

// idempotent reports whether a batch carries a producer id to track.
func idempotent(h storage.BatchHeader) bool { return h.ProducerID >= 0 && !h.IsControl() }

// check is the leader's validation of a client batch before it is appended
// (Log.analyzeAndValidateProducerState and ProducerAppendInfo): a retry of
// one of the producer's last batches returns that batch (to be answered
// with its original offsets, nothing appended); an older epoch is fenced
// (INVALID_PRODUCER_EPOCH); a new epoch must start at sequence 0; in the
// same epoch the batch must follow the last sequence
// (OUT_OF_ORDER_SEQUENCE_NUMBER). A producer the partition has never seen
// (or whose records are all gone) is accepted at any sequence: Kafka 2.6.3's
// ProducerAppendInfo.checkSequence has no current epoch to compare with, and
// since KIP-360 (2.5) no longer answers UNKNOWN_PRODUCER_ID there. A new
// leader lacking a producer's last batches therefore appends its next one
// after a gap in the sequence.
func (s producerStates) check(h storage.BatchHeader) (dup *producerBatch, code int16, reason string) {
	if !idempotent(h) {
		return nil, 0, ""
	}
	e := s[h.ProducerID]
	if e == nil {
		return nil, 0, ""
	}
	if h.ProducerEpoch < e.epoch {
		return nil, kerr.InvalidProducerEpoch.Code, fmt.Sprintf("producer %d epoch %d is older than the partition's %d", h.ProducerID, h.ProducerEpoch, e.epoch)
	}
	if h.ProducerEpoch > e.epoch {
		if h.BaseSequence != 0 {
			return nil, kerr.OutOfOrderSequenceNumber.Code, fmt.Sprintf("producer %d new epoch %d starts at sequence %d (want 0)", h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
		code, reason := checkTxnState(e, h)
		return nil, code, reason
	}
	last := lastSeqOf(h)
	for i := range e.batches {
		if b := &e.batches[i]; b.firstSeq == h.BaseSequence && b.lastSeq == last {
			return b, 0, ""
		}
	}
	if !inSequence(e.lastSeq(), h.BaseSequence) {
		return nil, kerr.OutOfOrderSequenceNumber.Code, fmt.Sprintf("producer %d epoch %d: sequence %d after %d", h.ProducerID, h.ProducerEpoch, h.BaseSequence, e.lastSeq())
	}
	code, reason = checkTxnState(e, h)
	return nil, code, reason
}

// update records an appended batch (header as stored, offsets stamped).
func (s producerStates) update(h storage.BatchHeader) {
	if !idempotent(h) {
		return
	}
	e := s[h.ProducerID]
	if e == nil {
		e = newProducerEntry(h.ProducerEpoch)
		s[h.ProducerID] = e
	}
	if h.ProducerEpoch < e.epoch {
		// A follower copies what its leader accepted; an older epoch
		// cannot have been accepted after a newer one.
		return
	}
	if h.ProducerEpoch > e.epoch {
		// ProducerStateEntry.maybeUpdateProducerEpoch: a new epoch forgets
		// the old epoch's batches, not the transaction or the coordinator.
		e.epoch, e.batches = h.ProducerEpoch, nil
	}
	if h.IsTransactional() && e.txnFirst < 0 {
		e.txnFirst = h.BaseOffset
	}
	e.batches = append(e.batches, producerBatch{firstSeq: h.BaseSequence, lastSeq: lastSeqOf(h), firstOffset: h.BaseOffset, lastOffset: h.LastOffset()})
	if len(e.batches) > producerBatchesKept {
		e.batches = e.batches[len(e.batches)-producerBatchesKept:]
	}
}

// rebuildProducersLocked scans the whole log and replaces the producer
// and transaction state (Log.loadProducerState without snapshots). Caller
// holds p.mu.
func (p *partition) rebuildProducersLocked() error {
	p.producers, p.txns, p.guards = producerStates{}, partitionTxns{}, nil
	from, end := p.log.LogStartOffset(), p.log.LogEndOffset()
	for from < end {
		data, err := p.log.Read(from, p.m.cfg.MaxMessageBytes+1<<20, -1)
		if err != nil {
			return fmt.Errorf("%s: producer state scan at offset %d: %w", p.tp, from, err)
		}
		headers, n, err := storage.SplitBatches(data)
		if err != nil {
			return fmt.Errorf("%s: producer state scan at offset %d: %w", p.tp, from, err)
		}
		if len(headers) == 0 {
			return fmt.Errorf("%s: producer state scan at offset %d: no complete batch in %d bytes", p.tp, from, len(data))
		}
		if err := p.applyLocked(headers, data[:n]); err != nil {
			return fmt.Errorf("producer state scan at offset %d: %w", from, err)
		}
		from = headers[len(headers)-1].LastOffset() + 1
	}
	return nil
}
