package checkers

// This file counts the fences of the epochs consumer groups and
// transactions carry (group generation, producer epoch, coordinator epoch)
// and of transaction verification. Their inputs come only from a workload
// that uses groups or transactions (the queue workload); a history with no
// such traffic leaves them not applicable rather than untested.

import (
	"github.com/zkchaos/zkchaos/history"
)

// The fences of groups and transactions, after the seven of the control
// plane in Fences.
const (
	// FenceGroupGeneration: a group coordinator's check of an
	// OffsetCommit's, Heartbeat's or SyncGroup's member id and generation
	// against the group's (GroupCoordinator.handleCommitOffsets,
	// handleHeartbeat, handleSyncGroup: UNKNOWN_MEMBER_ID, then
	// ILLEGAL_GENERATION): a member of an older generation must not
	// commit over the new generation's owner of a partition.
	FenceGroupGeneration = "coordinator-generation"
	// FenceTxnProducerEpoch: the check of a transactional request's or
	// batch's producer epoch against the one InitProducerId last gave the
	// producer id: the coordinator's (TransactionCoordinator.
	// handleAddPartitionsToTransaction and handleEndTransaction, and a
	// verification's), and a partition leader's
	// (ProducerAppendInfo.checkProducerEpoch on a batch or a marker).
	// Kafka 2.6.3 answers INVALID_PRODUCER_EPOCH (it has no
	// PRODUCER_FENCED).
	FenceTxnProducerEpoch = "txn-producer-epoch"
	// FenceTxnCoordinatorEpoch: a partition leader's check of a
	// WriteTxnMarkers marker's coordinator epoch against that of the
	// producer's last marker (ProducerAppendInfo.appendEndTxnMarker,
	// TRANSACTION_COORDINATOR_FENCED): a coordinator that lost its
	// __transaction_state partition must not decide the transaction again.
	FenceTxnCoordinatorEpoch = "txn-coordinator-epoch"
	// FenceTxnVerification: a partition leader's check that a
	// transactional batch starting its producer's transaction on the
	// partition belongs to the producer's ongoing transaction (KIP-890,
	// Kafka 3.6's AddPartitionsToTxnManager and verification guard; the
	// node's behaviour with the KAFKA-12671 switch off): INVALID_TXN_STATE.
	FenceTxnVerification = "txn-verification"
)

// groupFences and txnFences are the fences only group and transaction
// traffic can reach.
var (
	groupFences = []string{FenceGroupGeneration}
	txnFences   = []string{FenceTxnProducerEpoch, FenceTxnCoordinatorEpoch, FenceTxnVerification}
)

// countGroupTxnFences counts the group and transaction fences (see
// CountFences) into get's counts and marks them not applicable when h has
// no traffic that could reach them.
func countGroupTxnFences(h *history.History, get func(string) *FenceCount) {
	gen, pe, ce, ver := get(FenceGroupGeneration), get(FenceTxnProducerEpoch), get(FenceTxnCoordinatorEpoch), get(FenceTxnVerification)
	groupTraffic, txnTraffic := false, false
	// Per producer and partition, the last AddPartitionsToTxn (or
	// AddOffsetsToTxn) the coordinator answered NONE with the partition
	// in it, and the last marker a leader appended there for the producer
	// and saw committed (one a deposed leader appended, answered
	// NOT_LEADER, is truncated away and ends nothing); and the partitions
	// where the producer's transaction is open (a transactional append
	// since its last marker).
	added, marked := map[producerTP]epochAt{}, map[producerTP]epochAt{}
	open := map[producerTP]bool{}
	for e := range eventsOf(h, history.KindGroupRequest, history.KindTxnRequest, history.KindTxnMarker, history.KindProduceRefused, history.KindProduceAppend) {
		switch e.Kind {
		case history.KindGroupRequest:
			g := e.Group
			switch g.API {
			case history.GroupAPIOffsetCommit, history.GroupAPIHeartbeat, history.GroupAPISync:
			default:
				continue
			}
			groupTraffic = true
			refused := g.ErrorCode == history.ErrIllegalGeneration || g.ErrorCode == history.ErrUnknownMemberID
			switch {
			case g.Checked != nil && g.Checked.Stale(g.Generation):
				gen.count(e.Index, refused)
			case g.Checked == nil && refused:
				// A writer before Checked: the refusal itself says the
				// check found the input stale.
				gen.count(e.Index, true)
			}
		case history.KindTxnRequest:
			t := e.Txn
			switch t.API {
			case history.TxnAPIInitProducerID, history.TxnAPIAddPartitions, history.TxnAPIAddOffsets, history.TxnAPIEndTxn:
				txnTraffic = true
			}
			switch t.API {
			case history.TxnAPIAddPartitions, history.TxnAPIAddOffsets, history.TxnAPIEndTxn, history.TxnAPIVerify:
				if k := t.KnownProducerEpoch; k != nil && t.ProducerEpoch != *k {
					pe.count(e.Index, t.ErrorCode == history.ErrInvalidProducerEpoch || t.ErrorCode == history.ErrProducerFenced)
				}
			}
			if (t.API == history.TxnAPIAddPartitions || t.API == history.TxnAPIAddOffsets) && t.ErrorCode == 0 {
				for _, tp := range t.Partitions {
					added[producerTP{t.ProducerID, tp}] = epochAt{e.Index, t.ProducerEpoch}
				}
			}
		case history.KindTxnMarker:
			m := e.TxnMarker
			txnTraffic = true
			staleProducer := m.KnownProducerEpoch != nil && m.ProducerEpoch < *m.KnownProducerEpoch
			if staleProducer {
				pe.count(e.Index, m.ErrorCode == history.ErrInvalidProducerEpoch)
			}
			// The producer epoch is checked first: a marker it refused
			// never reached the coordinator epoch check.
			if m.KnownCoordinatorEpoch != nil && m.CoordinatorEpoch < *m.KnownCoordinatorEpoch &&
				!(staleProducer && m.ErrorCode == history.ErrInvalidProducerEpoch) {
				ce.count(e.Index, m.ErrorCode == history.ErrTransactionCoordinatorFenced)
			}
			if m.Offset >= 0 && m.ErrorCode == 0 {
				k := producerTP{m.ProducerID, history.TP(m.Topic, m.Partition)}
				delete(open, k)
				marked[k] = epochAt{e.Index, m.ProducerEpoch}
			}
		case history.KindProduceRefused:
			r := e.Refusal
			if r.Transactional {
				txnTraffic = true
			}
			switch r.Check {
			case history.RefusedProducerEpoch:
				pe.count(e.Index, true)
			case history.RefusedVerification:
				ver.count(e.Index, true)
			}
		case history.KindProduceAppend:
			a := e.Append
			// The group coordinator's own transactional offset commits
			// are not verified (AppendOrigin.Coordinator).
			if a.Producer == nil || !a.Producer.Transactional || a.Topic == history.GroupMetadataTopic {
				continue
			}
			k := producerTP{a.Producer.ID, a.TP()}
			if open[k] {
				continue
			}
			open[k] = true
			// The batch starts the producer's transaction here: the
			// verification's input. It is stale when the coordinator
			// never added the partition for the producer, or when a
			// marker at the transaction's producer epoch or later already
			// ended, on this partition, the last transaction it was added
			// to (a produce that outlived its transaction: KAFKA-12671);
			// appended, it was obeyed.
			add, wasAdded := added[k]
			end, wasMarked := marked[k]
			if !wasAdded || (wasMarked && end.idx > add.idx && end.epoch >= add.epoch) {
				ver.count(e.Index, false)
			}
		}
	}
	for _, f := range groupFences {
		get(f).NotApplicable = !groupTraffic && get(f).Inputs == 0
	}
	for _, f := range txnFences {
		get(f).NotApplicable = !txnTraffic && get(f).Inputs == 0
	}
}

// epochAt is an event's index and the producer epoch it carried.
type epochAt struct {
	idx   int
	epoch int16
}

// producerTP is one producer id on one partition.
type producerTP struct {
	pid int64
	tp  history.TopicPartition
}
