package checkers

import (
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
)

func fenceGroupReq(b *historytest.Builder, api, member string, carried int32, checked *history.GroupCheck, code int16) {
	b.Add(history.Event{Kind: history.KindGroupRequest, Node: 1, Group: &history.GroupRequest{API: api, Group: "g", Member: member,
		Generation: carried, GroupGeneration: 3, ErrorCode: code, Checked: checked}})
}

func fenceTxnReq(b *historytest.Builder, api string, pid int64, epoch int16, known *int16, code int16, parts ...history.TopicPartition) {
	b.Add(history.Event{Kind: history.KindTxnRequest, Node: 1, Txn: &history.TxnRequest{API: api, TransactionalID: "tx", ProducerID: pid,
		ProducerEpoch: epoch, KnownProducerEpoch: known, ErrorCode: code, Partitions: parts, CoordinatorEpoch: 1}})
}

func fenceMarker(b *historytest.Builder, epoch int16, coord int32, knownEpoch *int16, knownCoord *int32, offset int64, code int16) {
	b.Add(history.Event{Kind: history.KindTxnMarker, Node: 2, TxnMarker: &history.TxnMarker{Topic: fenceTP.Topic, Partition: fenceTP.Partition,
		ProducerID: 7, ProducerEpoch: epoch, CoordinatorEpoch: coord, Offset: offset, ErrorCode: code,
		KnownProducerEpoch: knownEpoch, KnownCoordinatorEpoch: knownCoord}})
}

func fenceTxnAppend(b *historytest.Builder, pid int64, epoch int16, offset int64) {
	b.Add(history.Event{Kind: history.KindProduceAppend, Node: 2, Append: &history.Append{Topic: fenceTP.Topic, Partition: fenceTP.Partition,
		BaseOffset: offset, LastOffset: offset, LeaderEpoch: 1, Acks: -1,
		Producer: &history.ProducerBatch{ID: pid, Epoch: epoch, Transactional: true}}})
}

func fenceRefusal(b *historytest.Builder, r history.ProduceRefusal) {
	r.Topic, r.Partition, r.ProducerID, r.Transactional = fenceTP.Topic, fenceTP.Partition, 7, true
	b.Add(history.Event{Kind: history.KindProduceRefused, Node: 2, Refusal: &r})
}

func i16(v int16) *int16 { return &v }

func TestCountGroupTxnFences(t *testing.T) {
	hb, commit, sync := history.GroupAPIHeartbeat, history.GroupAPIOffsetCommit, history.GroupAPISync
	current := &history.GroupCheck{Generation: 3, Member: true}
	addParts, endTxn, verify := history.TxnAPIAddPartitions, history.TxnAPIEndTxn, history.TxnAPIVerify
	cases := []struct {
		name          string
		build         func(b *historytest.Builder)
		want          map[string]fenceWant
		notApplicable []string
	}{
		{"no group or transaction traffic: not applicable", func(b *historytest.Builder) {
			b.Control(1, control(history.APIUpdateMetadata, 2, 1, 100, 1, 100, history.VerdictAccepted, 0))
		}, nil, []string{FenceGroupGeneration, FenceTxnProducerEpoch, FenceTxnCoordinatorEpoch, FenceTxnVerification}},
		{"clean groups and transactions", func(b *historytest.Builder) {
			fenceGroupReq(b, hb, "m1", 3, current, 0)
			fenceGroupReq(b, commit, "m1", 3, current, 0)
			fenceGroupReq(b, commit, "", -1, nil, 0) // a commit without generation to an empty group: no check
			fenceTxnReq(b, history.TxnAPIInitProducerID, -1, -1, nil, 0)
			fenceTxnReq(b, addParts, 7, 2, i16(2), 0, fenceTP)
			fenceTxnAppend(b, 7, 2, 10)
			fenceTxnAppend(b, 7, 2, 11)
			fenceTxnReq(b, endTxn, 7, 2, i16(2), 0)
			fenceMarker(b, 2, 1, i16(2), ptr32(-1), 12, 0)
			fenceTxnReq(b, addParts, 7, 2, i16(2), 0, fenceTP)
			fenceTxnAppend(b, 7, 2, 13)
		}, nil, nil},
		{"heartbeat at an older generation refused", func(b *historytest.Builder) {
			fenceGroupReq(b, hb, "m1", 2, current, history.ErrIllegalGeneration)
		}, map[string]fenceWant{FenceGroupGeneration: {1, 1}}, txnFences},
		{"commit from a member the group no longer has refused", func(b *historytest.Builder) {
			fenceGroupReq(b, commit, "m0", 3, &history.GroupCheck{Generation: 3}, history.ErrUnknownMemberID)
		}, map[string]fenceWant{FenceGroupGeneration: {1, 1}}, txnFences},
		{"commit at an older generation stored", func(b *historytest.Builder) {
			fenceGroupReq(b, commit, "m1", 2, current, 0)
			fenceGroupReq(b, sync, "m1", 2, current, history.ErrIllegalGeneration)
		}, map[string]fenceWant{FenceGroupGeneration: {2, 1}}, txnFences},
		{"refusal logged by a writer before Checked", func(b *historytest.Builder) {
			fenceGroupReq(b, hb, "m1", 2, nil, history.ErrIllegalGeneration)
		}, map[string]fenceWant{FenceGroupGeneration: {1, 1}}, txnFences},
		{"zombie producer's AddPartitionsToTxn and EndTxn refused", func(b *historytest.Builder) {
			fenceTxnReq(b, addParts, 7, 1, i16(2), history.ErrInvalidProducerEpoch, fenceTP)
			fenceTxnReq(b, endTxn, 7, 1, i16(2), history.ErrInvalidProducerEpoch)
		}, map[string]fenceWant{FenceTxnProducerEpoch: {2, 2}}, groupFences},
		{"zombie producer's EndTxn obeyed, its verification fenced, its batch refused", func(b *historytest.Builder) {
			fenceTxnReq(b, endTxn, 7, 1, i16(2), 0)
			fenceTxnReq(b, verify, 7, 1, i16(2), history.ErrProducerFenced, fenceTP)
			fenceRefusal(b, history.ProduceRefusal{Check: history.RefusedProducerEpoch, ProducerEpoch: 1, KnownProducerEpoch: 2, ErrorCode: history.ErrInvalidProducerEpoch})
		}, map[string]fenceWant{FenceTxnProducerEpoch: {3, 2}}, groupFences},
		{"marker at an older producer epoch refused: not the coordinator epoch's", func(b *historytest.Builder) {
			fenceMarker(b, 1, 0, i16(2), ptr32(1), -1, history.ErrInvalidProducerEpoch)
		}, map[string]fenceWant{FenceTxnProducerEpoch: {1, 1}}, groupFences},
		{"deposed coordinator's marker refused", func(b *historytest.Builder) {
			fenceMarker(b, 2, 1, i16(2), ptr32(2), -1, history.ErrTransactionCoordinatorFenced)
		}, map[string]fenceWant{FenceTxnCoordinatorEpoch: {1, 1}}, groupFences},
		{"deposed coordinator's marker appended", func(b *historytest.Builder) {
			fenceMarker(b, 2, 1, i16(2), ptr32(2), 20, 0)
		}, map[string]fenceWant{FenceTxnCoordinatorEpoch: {1, 0}}, groupFences},
		{"marker for a producer the leader has no state for: nothing compared", func(b *historytest.Builder) {
			fenceMarker(b, 2, 1, nil, nil, 20, 0)
		}, nil, groupFences},
		{"produce after its transaction ended refused by verification", func(b *historytest.Builder) {
			fenceTxnReq(b, addParts, 7, 2, i16(2), 0, fenceTP)
			fenceTxnAppend(b, 7, 2, 10)
			fenceMarker(b, 2, 1, i16(2), ptr32(-1), 11, 0)
			fenceRefusal(b, history.ProduceRefusal{Check: history.RefusedVerification, ProducerEpoch: 2, ErrorCode: history.ErrInvalidTxnState})
		}, map[string]fenceWant{FenceTxnVerification: {1, 1}}, groupFences},
		{"produce after its transaction ended appended (KAFKA-12671)", func(b *historytest.Builder) {
			fenceTxnReq(b, addParts, 7, 2, i16(2), 0, fenceTP)
			fenceTxnAppend(b, 7, 2, 10)
			fenceMarker(b, 2, 1, i16(2), ptr32(-1), 11, 0)
			fenceTxnAppend(b, 7, 2, 12)
			fenceTxnAppend(b, 7, 2, 13) // the same open transaction: one input
		}, map[string]fenceWant{FenceTxnVerification: {1, 0}}, groupFences},
		{"marker a deposed leader appended but never committed ends nothing", func(b *historytest.Builder) {
			fenceTxnReq(b, addParts, 7, 2, i16(2), 0, fenceTP)
			fenceMarker(b, 2, 0, i16(2), ptr32(0), 12, 6) // NOT_LEADER_FOR_PARTITION
			fenceTxnAppend(b, 7, 2, 10)
		}, nil, groupFences},
		{"marker of an older producer epoch does not end the new epoch's transaction", func(b *historytest.Builder) {
			fenceTxnReq(b, addParts, 7, 2, i16(2), 0, fenceTP)
			fenceMarker(b, 1, 0, nil, nil, 12, 0)
			fenceTxnAppend(b, 7, 2, 13)
		}, nil, groupFences},
		{"transactional batch to a partition never added appended", func(b *historytest.Builder) {
			fenceTxnReq(b, addParts, 7, 2, i16(2), 0, history.TP("other", 0))
			fenceTxnAppend(b, 7, 2, 10)
		}, map[string]fenceWant{FenceTxnVerification: {1, 0}}, groupFences},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := historytest.New()
			tc.build(b)
			for _, f := range CountFences(b.History()) {
				w := tc.want[f.Fence]
				if f.Inputs != w.inputs || f.Rejected != w.rejected {
					t.Errorf("%s: %d inputs, %d rejected; want %d, %d", f.Fence, f.Inputs, f.Rejected, w.inputs, w.rejected)
				}
				wantNA := false
				for _, n := range tc.notApplicable {
					wantNA = wantNA || n == f.Fence
				}
				isNew := f.Fence == FenceGroupGeneration || strings.HasPrefix(f.Fence, "txn-")
				if isNew && f.NotApplicable != wantNA {
					t.Errorf("%s: not applicable %v, want %v", f.Fence, f.NotApplicable, wantNA)
				}
			}
		})
	}
}

func ptr32(v int32) *int32 { return &v }
