package dataplane

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/failpoint"
	"github.com/zkchaos/zkchaos/node/storage"
)

// Transaction verification (KIP-890's first part, Kafka 3.6): before a
// leader appends a transactional batch that would start its producer's
// transaction on the partition, it asks the transactional id's
// coordinator whether the partition is in the producer's ongoing
// transaction, and appends only if it is and nothing ended a transaction
// of that producer on the partition meanwhile. Without it (Kafka 2.6.3,
// the KAFKA-12671 switch) a produce that reaches the leader after its
// transaction was aborted opens a transaction on the partition that no
// coordinator knows of: no marker ever ends it and the last stable offset
// stays at its first offset.
//
// The "meanwhile" is the verification guard (UnifiedLog's
// VerificationStateEntry): starting a verification records a guard for
// the producer on the partition, the produce carries it to the append,
// and any transactional batch or marker of the producer appended in
// between removes it, so an abort marker written while the produce waited
// makes the append fail although the coordinator had said yes.

// TxnVerifier asks the coordinator of transactionalID whether tp is in the
// ongoing transaction of producerID at epoch; 0 means it is, otherwise the
// error the produce answers (the node maps the coordinator's answer as
// Kafka 3.6's AddPartitionsToTxnManager does).
type TxnVerifier func(ctx context.Context, transactionalID string, producerID int64, epoch int16, tp history.TopicPartition) int16

// SetTxnVerifier installs the verifier; call before the broker serves.
func (m *Manager) SetTxnVerifier(v TxnVerifier) { m.verifier = v }

// verifying reports whether this leader verifies transactional batches.
func (m *Manager) verifying() bool {
	return m.verifier != nil && !m.cfg.Bugs.On(config.BugKafka12671)
}

// startVerificationLocked is maybeStartTransactionVerification: nil when
// the producer's transaction on the partition is ongoing already, else
// the producer's guard, created if it has none.
func (p *partition) startVerificationLocked(pid int64) *verificationGuard {
	if e := p.producers[pid]; e != nil && e.txnFirst >= 0 {
		return nil
	}
	if g, ok := p.guards[pid]; ok {
		return g
	}
	if p.guards == nil {
		p.guards = map[int64]*verificationGuard{}
	}
	g := &verificationGuard{producerID: pid}
	p.guards[pid] = g
	return g
}

// verificationGuard is the guard object: only its identity matters.
type verificationGuard struct{ producerID int64 }

// verifyTxn runs before a client batch is appended as leader. For a
// transactional batch that would start its producer's transaction here it
// verifies it (unless the switch is on) and then passes the
// leader-before-txn-append failpoint; it returns the guard the append must
// present (nil: none) or the error to answer.
func (m *Manager) verifyTxn(ctx context.Context, txnID *string, p *partition, records []byte) (*verificationGuard, int16) {
	h, ok := storage.PeekHeader(records)
	if !ok || h.IsControl() || !h.IsTransactional() {
		return nil, 0
	}
	p.mu.Lock()
	e := p.producers[h.ProducerID]
	starts := e == nil || e.txnFirst < 0
	var guard *verificationGuard
	if starts && m.verifying() {
		guard = p.startVerificationLocked(h.ProducerID)
	}
	p.mu.Unlock()
	if !starts {
		return nil, 0
	}
	if guard != nil {
		code := kerr.InvalidTxnState.Code // a transactional produce without its id cannot be verified
		if txnID != nil {
			code = verifyAnswer(m.verifier(ctx, *txnID, h.ProducerID, h.ProducerEpoch, p.tp))
		}
		if code != 0 {
			m.log.Printf("%s: produce of producer %d epoch %d not verified: %s", p.tp, h.ProducerID, h.ProducerEpoch, kerr.ErrorForCode(code))
			if code == kerr.InvalidTxnState.Code {
				// The coordinator said the partition is not in the
				// producer's ongoing transaction: the verification's
				// verdict. Other answers (not ready, a fenced epoch) are
				// the coordinator's to log.
				detail := "the coordinator did not find the partition in the producer's ongoing transaction"
				if txnID == nil {
					detail = "a transactional batch without a transactional id cannot be verified"
				}
				p.mu.Lock()
				p.logRefusalLocked(h, history.ProduceRefusal{Check: history.RefusedVerification, VerifyError: code, ErrorCode: code, Detail: detail})
				p.mu.Unlock()
			}
			return nil, code
		}
	}
	if err := m.cfg.Failpoints.Eval(ctx, failpoint.LeaderBeforeTxnAppend); err != nil {
		// An injected error answers as an unfinished verification does.
		return nil, kerr.NotEnoughReplicas.Code
	}
	return guard, 0
}

// verifyAnswer is ReplicaManager.appendRecords' mapping of a failed
// verification: the coordinator not ready to answer is retriable
// (NOT_ENOUGH_REPLICAS), anything else goes to the client as it is.
func verifyAnswer(code int16) int16 {
	switch code {
	case kerr.ConcurrentTransactions.Code, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code:
		return kerr.NotEnoughReplicas.Code
	}
	return code
}

// checkVerifiedLocked is UnifiedLog's batchMissingRequiredVerification at
// the append: a transactional batch that starts its producer's
// transaction must carry the producer's current guard.
func (p *partition) checkVerifiedLocked(h storage.BatchHeader, guard *verificationGuard) (int16, string) {
	if !p.m.verifying() || h.IsControl() || !h.IsTransactional() {
		return 0, ""
	}
	if e := p.producers[h.ProducerID]; e != nil && e.txnFirst >= 0 {
		return 0, ""
	}
	if guard == nil || p.guards[h.ProducerID] != guard {
		return kerr.InvalidTxnState.Code, fmt.Sprintf("producer %d epoch %d: transactional batch not part of an ongoing transaction (its verification was ended by a marker or never made)", h.ProducerID, h.ProducerEpoch)
	}
	return 0, ""
}

// logRefusalLocked writes a produce_refused event for batch h; r carries
// the check, the answer and what the leader held.
func (p *partition) logRefusalLocked(h storage.BatchHeader, r history.ProduceRefusal) {
	r.Topic, r.Partition = p.tp.Topic, p.tp.Partition
	r.ProducerID, r.ProducerEpoch, r.Transactional = h.ProducerID, h.ProducerEpoch, h.IsTransactional()
	p.m.log.Emit(history.Event{Kind: history.KindProduceRefused, Refusal: &r})
}
