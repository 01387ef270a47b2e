package dataplane

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/node/storage"
)

// Transactions in a partition (KIP-98, Kafka 2.6.3's ProducerStateManager
// and TransactionIndex), kept in memory and rebuilt from the log like the
// idempotent producer state: a transactional batch opens its producer's
// transaction (producerEntry.txnFirst) unless one is open; the producer's
// COMMIT or ABORT marker closes it. The last stable offset (LSO) is the
// smallest first offset of a transaction not yet decided, or decided by a
// marker the high watermark has not passed yet, capped at the high
// watermark (Log.lastStableOffset); a read_committed consumer reads up to
// it. Each ABORT marker adds the transaction's offset range to the aborted
// list a read_committed fetch answers with, so the consumer drops those
// records.

// txnRange is one transaction of a producer: its first offset and the
// offset of the marker that decided it.
type txnRange struct {
	producerID  int64
	first, last int64
}

// partitionTxns is the decided-transaction state of a partition.
type partitionTxns struct {
	// unreplicated are decided transactions whose marker is not yet below
	// the high watermark (ProducerStateManager.unreplicatedTxns).
	unreplicated []txnRange
	// aborted is the aborted-transaction index, in marker order.
	aborted []txnRange
}

// checkTxnState is ProducerAppendInfo.appendDataBatch's check: a producer
// with an open transaction may only write transactional batches
// (INVALID_TXN_STATE).
func checkTxnState(e *producerEntry, h storage.BatchHeader) (int16, string) {
	if e.txnFirst >= 0 && !h.IsTransactional() {
		return kerr.InvalidTxnState.Code, fmt.Sprintf("producer %d: non-transactional batch while its transaction from offset %d is open", h.ProducerID, e.txnFirst)
	}
	return 0, ""
}

// checkFromCoordinator is ProducerAppendInfo's checks on a batch the
// group coordinator appends for a TxnOffsetCommit (AppendOrigin.Coordinator):
// an older producer epoch than the partition's is fenced
// (INVALID_PRODUCER_EPOCH), and the sequence is not checked.
func (s producerStates) checkFromCoordinator(h storage.BatchHeader) (int16, string) {
	if !idempotent(h) {
		return 0, ""
	}
	e := s[h.ProducerID]
	if e == nil {
		return 0, ""
	}
	if h.ProducerEpoch < e.epoch {
		return kerr.InvalidProducerEpoch.Code, fmt.Sprintf("producer %d epoch %d is older than the partition's %d", h.ProducerID, h.ProducerEpoch, e.epoch)
	}
	return checkTxnState(e, h)
}

// checkMarker is ProducerAppendInfo.appendEndTxnMarker's checks on a
// marker the leader is asked to write: an older producer epoch than the
// partition's is fenced (INVALID_PRODUCER_EPOCH: Kafka 2.6.3 maps its
// ProducerFencedException to that code), and so is a coordinator epoch
// older than that of the producer's last marker
// (TRANSACTION_COORDINATOR_FENCED): a coordinator that lost its
// __transaction_state partition must not decide a transaction the new one
// decided.
func (s producerStates) checkMarker(m storage.Marker) (int16, string) {
	e := s[m.ProducerID]
	if e == nil {
		return 0, ""
	}
	if m.ProducerEpoch < e.epoch {
		return kerr.InvalidProducerEpoch.Code, fmt.Sprintf("marker for producer %d epoch %d is older than the partition's epoch %d", m.ProducerID, m.ProducerEpoch, e.epoch)
	}
	if m.CoordinatorEpoch < e.coordinatorEpoch {
		return kerr.TransactionCoordinatorFenced.Code, fmt.Sprintf("marker for producer %d carries coordinator epoch %d, older than the %d of its last marker", m.ProducerID, m.CoordinatorEpoch, e.coordinatorEpoch)
	}
	return 0, ""
}

// applyMarkerLocked records an appended marker (h as stored): it closes
// the producer's transaction, or an empty one at the marker's own offset
// if none was open, as appendEndTxnMarker does.
func (p *partition) applyMarkerLocked(h storage.BatchHeader, m storage.Marker) {
	e := p.producers[m.ProducerID]
	if e == nil {
		e = newProducerEntry(m.ProducerEpoch)
		p.producers[m.ProducerID] = e
	}
	first := e.txnFirst
	if first < 0 {
		first = h.BaseOffset
	}
	if m.ProducerEpoch > e.epoch {
		e.epoch, e.batches = m.ProducerEpoch, nil
	}
	e.txnFirst, e.coordinatorEpoch = -1, m.CoordinatorEpoch
	r := txnRange{producerID: m.ProducerID, first: first, last: h.BaseOffset}
	p.txns.unreplicated = append(p.txns.unreplicated, r)
	if !m.Commit {
		p.txns.aborted = append(p.txns.aborted, r)
	}
}

// applyLocked keeps the producer and transaction state current after an
// append of data, which holds exactly the batches of headers (as stored,
// offsets stamped; a leader's client batch may still carry offset 0, the
// headers are authoritative).
func (p *partition) applyLocked(headers []storage.BatchHeader, data []byte) error {
	pos := 0
	for _, h := range headers {
		size := int(h.Size())
		if pos+size > len(data) {
			return fmt.Errorf("%s: batch at offset %d runs past the %d bytes appended", p.tp, h.BaseOffset, len(data))
		}
		b := data[pos : pos+size]
		pos += size
		if h.IsTransactional() {
			// The transaction is ongoing now, or ended: a verification
			// started before this append no longer holds.
			delete(p.guards, h.ProducerID)
		}
		if !h.IsControl() {
			p.producers.update(h)
			continue
		}
		m, _, err := storage.DecodeMarker(b)
		if err != nil {
			return fmt.Errorf("%s: %w", p.tp, err)
		}
		p.applyMarkerLocked(h, m)
	}
	return nil
}

// lsoLocked is Log.lastStableOffset: the first offset of the oldest
// transaction not both decided and replicated, capped at the high
// watermark. Decided transactions the high watermark has passed are
// forgotten here (onHighWatermarkUpdated).
func (p *partition) lsoLocked() int64 {
	lso := p.hw
	kept := p.txns.unreplicated[:0]
	for _, r := range p.txns.unreplicated {
		if r.last >= p.hw {
			kept = append(kept, r)
			lso = min(lso, r.first)
		}
	}
	p.txns.unreplicated = kept
	for _, e := range p.producers {
		if e.txnFirst >= 0 {
			lso = min(lso, e.txnFirst)
		}
	}
	return lso
}

// abortedLocked is TransactionIndex.collectAbortedTxns: the aborted
// transactions a read_committed fetch of [from, upto) must be told of.
func (p *partition) abortedLocked(from, upto int64) []txnRange {
	var out []txnRange
	for _, r := range p.txns.aborted {
		if r.last >= from && r.first < upto {
			out = append(out, r)
		}
	}
	return out
}

// abortedFetched is Log.addAbortedTransactions for a read_committed fetch
// from offset from that returned data: the aborted transactions that end at
// or after from and start before the end of the last batch returned.
func (p *partition) abortedFetched(from int64, data []byte) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	out := []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
	headers, _, err := storage.SplitBatches(data)
	if err != nil || len(headers) == 0 {
		return out
	}
	upto := headers[len(headers)-1].LastOffset() + 1
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.abortedLocked(from, upto) {
		a := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		a.ProducerID, a.FirstOffset = r.producerID, r.first
		out = append(out, a)
	}
	return out
}
