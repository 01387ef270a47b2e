package txn

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
)

// APIVerify names a verification in the event log: a partition leader
// asked whether partitions are in a producer's ongoing transaction
// (AddPartitionsToTxn v4 with VerifyOnly, KIP-890). Kafka 2.6.3 has no
// such request; the node answers it only with the KAFKA-12671 switch off.
const APIVerify = history.TxnAPIVerify

// VerifyPartitions is Kafka 3.6's
// TransactionCoordinator.handleVerifyPartitionsInTransaction: nothing is
// written, the answer is read off the id's metadata. The coordinator's
// own errors (loading, not the coordinator) and those of a producer that
// is not the id's current one answer for every partition; otherwise each
// partition is NONE when the ongoing transaction holds it and
// INVALID_TXN_STATE when it does not. Partitions leave the metadata when
// CompleteCommit or CompleteAbort is written, so a produce that arrives
// after its transaction ended is refused. A pending state is not checked,
// as in 3.6: the leader's append re-checks its verification.
func (c *Coordinator) VerifyPartitions(id string, pid int64, epoch int16, parts []TopicPartition) map[TopicPartition]int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, coordEpoch, code := c.stateLocked(id)
	out := make(map[TopicPartition]int16, len(parts))
	switch {
	case id == "":
		code = errInvalidRequest
	case code != errNone:
		coordEpoch = -1
	case m == nil || m.producerID != pid:
		code = errInvalidPIDMapping
	case m.producerEpoch != epoch:
		code = kerr.ProducerFenced.Code
	case m.state == PrepareCommit || m.state == PrepareAbort:
		code = errConcurrentTransactions
	}
	ev := Event{API: APIVerify, Version: 4, TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: coordEpoch,
		Partitions: parts, Error: code, AssignedProducerID: -1, AssignedEpoch: -1}
	if code == errNone || code == kerr.ProducerFenced.Code || code == errConcurrentTransactions {
		// The producer id matched: its epoch was compared.
		ev.KnownEpoch = known(m.producerEpoch)
	}
	for _, tp := range parts {
		pc := code
		if pc == errNone && !m.partitions[tp] {
			pc = errInvalidTxnState
		}
		out[tp] = pc
		if code == errNone {
			ev.Errors = append(ev.Errors, PartitionError{TP: tp, Error: pc})
		}
	}
	c.emitLocked(ev)
	return out
}

// VerifyRoute is the AddPartitionsToTxn version a partition leader's
// verification uses (v4, KIP-890's broker-to-broker batch). The node
// serves it beside the v0-1 that Kafka 2.6.3 serves clients, without
// advertising it in ApiVersions, so clients keep 2.6.3's versions.
const VerifyRoute = int16(4)

// VerifyAddPartitions answers an AddPartitionsToTxn v4 from a partition
// leader: each transaction with VerifyOnly is verified; one without is
// INVALID_REQUEST for its partitions (Kafka 3.6 would add them, but no
// broker of the node sends that).
func (h *Handlers) VerifyAddPartitions(r *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, tx := range r.Transactions {
		var parts []TopicPartition
		for _, t := range tx.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, TopicPartition{t.Topic, p})
			}
		}
		codes := map[TopicPartition]int16{}
		if tx.VerifyOnly {
			codes = h.C.VerifyPartitions(tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, parts)
		} else {
			for _, tp := range parts {
				codes[tp] = errInvalidRequest
			}
		}
		rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rt.TransactionalID = tx.TransactionalID
		for _, t := range tx.Topics {
			ot := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			ot.Topic = t.Topic
			for _, p := range t.Partitions {
				op := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				op.Partition, op.ErrorCode = p, codes[TopicPartition{t.Topic, p}]
				ot.Partitions = append(ot.Partitions, op)
			}
			rt.Topics = append(rt.Topics, ot)
		}
		resp.Transactions = append(resp.Transactions, rt)
	}
	return resp
}
