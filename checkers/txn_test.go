package checkers

import (
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// txnInitAt is broker node's InitProducerId for tid answered with pid and
// epoch at coordinator epoch ce.
func txnInitAt(b *hb.Builder, node int32, tid string, pid int64, epoch int16, ce int32) {
	b.Add(history.Event{Kind: history.KindTxnRequest, Node: node, Txn: &history.TxnRequest{API: history.TxnAPIInitProducerID,
		TransactionalID: tid, ProducerID: -1, ProducerEpoch: -1, AssignedProducerID: &pid, AssignedEpoch: &epoch, CoordinatorEpoch: ce}})
}

// txnReqAt is broker node's answer code to api of tid carrying pid and
// epoch at coordinator epoch ce, the transaction in state then.
func txnReqAt(b *hb.Builder, node int32, api, tid string, pid int64, epoch int16, ce int32, state string, commit bool, code int16) {
	b.Add(history.Event{Kind: history.KindTxnRequest, Node: node, Txn: &history.TxnRequest{API: api, TransactionalID: tid,
		ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: ce, State: state, Commit: commit, ErrorCode: code,
		Partitions: []history.TopicPartition{history.TP("t", 0)}}})
}

// txnLoadAt is broker node's load of __transaction_state-0 at coordinator
// epoch ce, holding ids.
func txnLoadAt(b *hb.Builder, node int32, ce int32, ids ...string) {
	b.Add(history.Event{Kind: history.KindTxnRequest, Node: node, Txn: &history.TxnRequest{API: history.TxnLoadPartition,
		ProducerID: -1, ProducerEpoch: -1, CoordinatorEpoch: ce, TransactionalIDs: ids}})
}

// markerAt is leader node's marker of pid on t-0: appended at offset (-1
// refused) and committed unless code is set.
func markerAt(b *hb.Builder, node int32, pid int64, pe int16, ce int32, commit bool, offset int64, code int16) {
	b.Add(history.Event{Kind: history.KindTxnMarker, Node: node, TxnMarker: &history.TxnMarker{Topic: "t", Partition: 0,
		ProducerID: pid, ProducerEpoch: pe, CoordinatorEpoch: ce, Commit: commit, Offset: offset, ErrorCode: code}})
}

// batchAt is leader node's append of pid's batch at epoch to t-0, and its
// acknowledgement once committed.
func batchAt(b *hb.Builder, node int32, pid int64, epoch int16, base, last int64) {
	b.Add(history.Event{Kind: history.KindProduceAppend, Node: node, Append: &history.Append{Topic: "t", Partition: 0,
		BaseOffset: base, LastOffset: last, LeaderEpoch: 3, Acks: history.AcksAll,
		Producer: &history.ProducerBatch{ID: pid, Epoch: epoch, FirstSeq: 0, LastSeq: int32(last - base)}}})
	b.Add(history.Event{Kind: history.KindProduceAck, Node: node, Append: &history.Append{Topic: "t", Partition: 0,
		BaseOffset: base, LastOffset: last, LeaderEpoch: 3, Acks: history.AcksAll}})
}

// oneTxn is a transaction of tx-1 (producer 100, epoch e) from its
// AddPartitionsToTxn to its completion at coordinator epoch 5, its
// markers on t-0 at offset marker.
func oneTxn(b *hb.Builder, e int16, base, marker int64, commit bool) {
	txnReqAt(b, 1, history.TxnAPIAddPartitions, "tx-1", 100, e, 5, "Ongoing", false, 0)
	batchAt(b, 2, 100, e, base, base+1)
	state := history.TxnStatePrepareAbort
	if commit {
		state = history.TxnStatePrepareCommit
	}
	txnReqAt(b, 1, history.TxnAPIEndTxn, "tx-1", 100, e, 5, state, commit, 0)
	markerAt(b, 2, 100, e, 5, commit, marker, 0)
	txnReqAt(b, 1, history.TxnAPIComplete, "tx-1", 100, e, 5, "", commit, 0)
}

func TestTxnFencing(t *testing.T) {
	grace := time.Second
	c := TxnFencing{Grace: grace}
	fenced := history.ErrInvalidProducerEpoch
	runPromiseCases(t, c, []promiseCase{
		{name: "transactions, a fence and a coordinator move, every stale input refused", want: Valid, build: func(b *hb.Builder) {
			b.Fault(true, "f1", "partition")
			txnInitAt(b, 1, "tx-1", 100, 0, 5)
			oneTxn(b, 0, 0, 2, true)
			oneTxn(b, 0, 3, 5, false)
			// A new producer of tx-1: epoch 1; the old one is refused.
			txnInitAt(b, 1, "tx-1", 100, 1, 5)
			txnReqAt(b, 1, history.TxnAPIAddPartitions, "tx-1", 100, 0, 5, "Empty", false, fenced)
			txnReqAt(b, 1, history.TxnAPIEndTxn, "tx-1", 100, 0, 5, "Empty", true, fenced)
			oneTxn(b, 1, 6, 8, true)
			// The old producer's batch reaches the leader after the epoch-1
			// marker: refused, so no produce_append. A deposed coordinator
			// (epoch 4) answers an AddPartitionsToTxn from its cache.
			txnReqAt(b, 3, history.TxnAPIAddPartitions, "tx-1", 100, 0, 4, "Ongoing", false, 0)
			// The coordinator moves to broker 3 at epoch 6; the deposed
			// one's marker is refused by the leader.
			txnReqAt(b, 3, history.TxnAPIAddPartitions, "tx-1", 100, 1, 6, "Ongoing", false, 0)
			batchAt(b, 2, 100, 1, 9, 9)
			txnReqAt(b, 3, history.TxnAPIEndTxn, "tx-1", 100, 1, 6, history.TxnStatePrepareCommit, true, 0)
			markerAt(b, 2, 100, 1, 6, true, 10, 0)
			markerAt(b, 2, 100, 1, 5, false, -1, history.ErrTransactionCoordinatorFenced)
			b.Fault(false, "f1", "partition")
			txnReqAt(b, 3, history.TxnAPIComplete, "tx-1", 100, 1, 6, "", true, 0)
			b.At(5000).Phase()
		}},
		{name: "a leader appends a deposed coordinator's marker", want: Invalid,
			explain: `broker 2 appended the abort marker of transactional id "tx-1", producer id 100 (producer epoch 1) to t-0 at offset 12 carrying coordinator epoch 5, committed (event 6`,
			build: func(b *hb.Builder) {
				txnInitAt(b, 1, "tx-1", 100, 1, 5)
				batchAt(b, 2, 100, 1, 9, 9)
				markerAt(b, 2, 100, 1, 6, true, 10, 0)
				batchAt(b, 2, 100, 1, 11, 11)
				markerAt(b, 2, 100, 1, 5, false, 12, 0)
			}},
		{name: "an older coordinator's marker appended below the newer one is in order", want: Valid, build: func(b *hb.Builder) {
			txnInitAt(b, 1, "tx-1", 100, 1, 5)
			markerAt(b, 2, 100, 1, 5, true, 10, 0)
			markerAt(b, 2, 100, 1, 6, true, 12, 0)
			// Appended, never committed: a deposed leader's own log.
			markerAt(b, 3, 100, 1, 4, false, 13, history.ErrNotEnoughReplicas)
		}},
		{name: "a coordinator takes a fenced producer's AddPartitionsToTxn", want: Invalid,
			explain: `broker 1, transaction coordinator at coordinator epoch 5, answered it without an error: AddPartitionsToTxn of transactional id "tx-1", producer id 100, carrying producer epoch 0 (event 2`,
			build: func(b *hb.Builder) {
				txnInitAt(b, 1, "tx-1", 100, 0, 5)
				txnInitAt(b, 1, "tx-1", 100, 1, 5)
				txnReqAt(b, 1, history.TxnAPIAddPartitions, "tx-1", 100, 0, 5, "Ongoing", false, 0)
			}},
		{name: "a deposed coordinator writes a fenced producer's PrepareCommit", want: Invalid,
			explain: `broker 3, transaction coordinator at coordinator epoch 4, wrote PrepareCommit for it without an error: EndTxn of transactional id "tx-1", producer id 100, carrying producer epoch 0`,
			build: func(b *hb.Builder) {
				txnInitAt(b, 3, "tx-1", 100, 0, 4)
				txnInitAt(b, 1, "tx-1", 100, 1, 5)
				txnReqAt(b, 3, history.TxnAPIEndTxn, "tx-1", 100, 0, 4, history.TxnStatePrepareCommit, true, 0)
			}},
		{name: "a leader appends a fenced producer's batch above the new epoch's marker", want: Invalid,
			explain: `broker 2 appended a batch of transactional id "tx-1", producer id 100 at producer epoch 0 to t-0 at offsets 11..12, leader epoch 3 (event 4`,
			build: func(b *hb.Builder) {
				txnInitAt(b, 1, "tx-1", 100, 0, 5)
				batchAt(b, 2, 100, 0, 5, 6)
				// The coordinator fences the ongoing transaction at epoch 1.
				markerAt(b, 2, 100, 1, 5, false, 10, 0)
				batchAt(b, 2, 100, 0, 11, 12)
			}},
		{name: "a fenced producer's first batch on a partition the new epoch never reached", want: Valid, build: func(b *hb.Builder) {
			txnInitAt(b, 1, "tx-1", 100, 0, 5)
			txnInitAt(b, 1, "tx-1", 100, 1, 5)
			batchAt(b, 2, 100, 0, 11, 12)
		}},
		{name: "a deposed leader appends a fenced batch it never commits", want: Valid, build: func(b *hb.Builder) {
			txnInitAt(b, 1, "tx-1", 100, 0, 5)
			markerAt(b, 2, 100, 1, 5, false, 10, 0)
			b.Add(history.Event{Kind: history.KindProduceAppend, Node: 3, Append: &history.Append{Topic: "t", Partition: 0,
				BaseOffset: 14, LastOffset: 14, LeaderEpoch: 2, Acks: history.AcksAll, Producer: &history.ProducerBatch{ID: 100, Epoch: 0}}})
		}},
		{name: "a prepared transaction never completed after healing", want: Invalid,
			explain: `broker 1 wrote PrepareCommit for transactional id "tx-1", producer id 100, epoch 0, at coordinator epoch 5 (EndTxn, event 8`,
			build: func(b *hb.Builder) {
				b.Fault(true, "f1", "partition")
				txnInitAt(b, 1, "tx-1", 100, 0, 5)
				oneTxn(b, 0, 0, 2, true)
				txnReqAt(b, 1, history.TxnAPIEndTxn, "tx-1", 100, 0, 5, history.TxnStatePrepareCommit, true, 0)
				b.Fault(false, "f1", "partition")
				b.At(5000).Phase()
			}},
		{name: "a prepared transaction completed long after healing", want: Invalid,
			explain: `and its markers finished only at +3s`,
			build: func(b *hb.Builder) {
				txnInitAt(b, 1, "tx-1", 100, 0, 5)
				txnReqAt(b, 1, history.TxnAPIEndTxn, "tx-1", 100, 0, 5, history.TxnStatePrepareAbort, false, 0)
				b.At(3000)
				txnReqAt(b, 3, history.TxnAPIComplete, "tx-1", 100, 0, 6, "", false, 0)
			}},
		{name: "the history ends before the grace after a prepare", want: Unknown, build: func(b *hb.Builder) {
			txnInitAt(b, 1, "tx-1", 100, 0, 5)
			txnReqAt(b, 1, history.TxnAPIEndTxn, "tx-1", 100, 0, 5, history.TxnStatePrepareCommit, true, 0)
			b.At(500).Phase()
		}},
		{name: "a coordinator killed between writing its completion and its answer: its next load finds the transaction complete", want: Valid, build: func(b *hb.Builder) {
			b.Fault(true, "f1", "bounce", "n1")
			txnInitAt(b, 1, "tx-1", 100, 0, 4)
			// CompleteAbort reached the followers; broker 1 died before
			// its answer, so no TxnComplete.
			txnReqAt(b, 1, history.TxnAPIEndTxn, "tx-1", 100, 0, 4, history.TxnStatePrepareAbort, false, 0)
			markerAt(b, 2, 100, 0, 4, false, 3, 0)
			b.Fault(false, "f1", "bounce", "n1")
			txnLoadAt(b, 1, 4, "tx-1")
			txnReqAt(b, 1, history.TxnAPIAddPartitions, "tx-1", 100, 0, 4, "Ongoing", false, 0)
			// A later abort of the same producer epoch, completed.
			txnReqAt(b, 1, history.TxnAPIEndTxn, "tx-1", 100, 0, 4, history.TxnStatePrepareAbort, false, 0)
			markerAt(b, 2, 100, 0, 4, false, 6, 0)
			txnReqAt(b, 1, history.TxnAPIComplete, "tx-1", 100, 0, 4, "", false, 0)
			b.At(20000).Phase()
		}},
		{name: "a prepare never completed is the one named, not a later one of the same producer epoch that was", want: Invalid,
			explain: `broker 3 wrote PrepareAbort for transactional id "tx-1", producer id 100, epoch 0, at coordinator epoch 4 (EndTxn, event 1`,
			build: func(b *hb.Builder) {
				txnInitAt(b, 3, "tx-1", 100, 0, 4)
				txnReqAt(b, 3, history.TxnAPIEndTxn, "tx-1", 100, 0, 4, history.TxnStatePrepareAbort, false, 0)
				txnReqAt(b, 1, history.TxnAPIEndTxn, "tx-1", 100, 0, 5, history.TxnStatePrepareAbort, false, 0)
				txnReqAt(b, 1, history.TxnAPIComplete, "tx-1", 100, 0, 5, "", false, 0)
				b.At(20000).Phase()
			}},
		{name: "a coordinator's own requests without a reload do not complete its prepare", want: Invalid,
			explain: `broker 1 wrote PrepareCommit for transactional id "tx-1", producer id 100, epoch 0, at coordinator epoch 4 (EndTxn, event 1`,
			build: func(b *hb.Builder) {
				txnInitAt(b, 1, "tx-1", 100, 0, 4)
				txnReqAt(b, 1, history.TxnAPIEndTxn, "tx-1", 100, 0, 4, history.TxnStatePrepareCommit, true, 0)
				txnLoadAt(b, 1, 3, "tx-1")
				txnReqAt(b, 1, history.TxnAPIAddPartitions, "tx-1", 100, 0, 4, "Ongoing", false, 0)
				b.At(20000).Phase()
			}},
		{name: "a deposed coordinator's prepare answered after the new coordinator completed it", want: Valid, build: func(b *hb.Builder) {
			b.Fault(true, "f1", "pause", "n2")
			txnInitAt(b, 2, "tx-1", 100, 1, 8)
			// Broker 2 appended PrepareAbort at coordinator epoch 8 and
			// was paused; broker 1, leader at epoch 13, loaded it and
			// finished it before broker 2's append was acknowledged.
			txnLoadAt(b, 1, 13, "tx-1")
			markerAt(b, 1, 100, 1, 13, false, 5, 0)
			txnReqAt(b, 1, history.TxnAPIComplete, "tx-1", 100, 1, 13, "", false, 0)
			b.Fault(false, "f1", "pause", "n2")
			txnReqAt(b, 2, history.TxnAPITimeout, "tx-1", 100, 1, 8, history.TxnStatePrepareAbort, false, 0)
			b.At(20000).Phase()
		}},
		{name: "a retried EndTxn answered from a completed transaction wrote nothing", want: Valid, build: func(b *hb.Builder) {
			txnInitAt(b, 1, "tx-1", 100, 0, 5)
			oneTxn(b, 0, 0, 2, true)
			txnReqAt(b, 1, history.TxnAPIEndTxn, "tx-1", 100, 0, 5, "CompleteCommit", true, 0)
			b.At(5000).Phase()
		}},
	})
}
