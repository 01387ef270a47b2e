package checkers

import (
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// lsoStory builds the KAFKA-12671 window on chaos-0, led by broker 2:
// producer 1000 (transactional id "tx", epoch 0) adds the partition,
// writes offset 0, and its transaction is aborted (marker at offset 1,
// CompleteAbort). late says whether a produce then reaches the leader and
// opens a transaction at offset 2 (the HW moving to 3 with the LSO left at
// 2); readd whether the producer's next transaction adds the partition
// again afterwards (which its marker will end). endMs is when the
// history ends.
func lsoStory(late, readd bool, endMs int64) *history.History {
	tp := history.TP("chaos", 0)
	b := hb.New()
	b.Add(history.Event{Kind: history.KindRoleChange, Node: 2, Role: &history.Role{Topic: "chaos", Partition: 0, Role: history.RoleLeader, Leader: 2, LeaderEpoch: 1}})
	pid, epoch := int64(1000), int16(0)
	b.Add(history.Event{Kind: history.KindTxnRequest, Node: 1, Txn: &history.TxnRequest{API: history.TxnAPIInitProducerID, TransactionalID: "tx",
		ProducerID: -1, ProducerEpoch: -1, AssignedProducerID: &pid, AssignedEpoch: &epoch, State: "Empty"}})
	b.Add(history.Event{Kind: history.KindTxnRequest, Node: 1, Txn: &history.TxnRequest{API: history.TxnAPIAddPartitions, TransactionalID: "tx",
		ProducerID: pid, ProducerEpoch: epoch, State: "Ongoing", Partitions: []history.TopicPartition{tp}}})
	appendAt := func(off int64) {
		b.Add(history.Event{Kind: history.KindProduceAppend, Node: 2, Append: &history.Append{Topic: "chaos", Partition: 0, BaseOffset: off, LastOffset: off,
			LeaderEpoch: 1, Acks: -1, Producer: &history.ProducerBatch{ID: pid, Epoch: epoch, Transactional: true}}})
	}
	hwTo := func(old, hw, lso int64) {
		b.Add(history.Event{Kind: history.KindHWAdvance, Node: 2, HW: &history.HWAdvance{Topic: "chaos", Partition: 0, Old: old, New: hw, LeaderEpoch: 1, LSO: &lso}})
	}
	appendAt(0)
	hwTo(0, 1, 0)
	b.Add(history.Event{Kind: history.KindTxnRequest, Node: 1, Txn: &history.TxnRequest{API: history.TxnAPIEndTxn, TransactionalID: "tx",
		ProducerID: pid, ProducerEpoch: epoch, State: "PrepareAbort"}})
	b.Add(history.Event{Kind: history.KindTxnMarker, Node: 2, TxnMarker: &history.TxnMarker{Topic: "chaos", Partition: 0, ProducerID: pid, ProducerEpoch: epoch,
		CoordinatorEpoch: 1, Offset: 1}})
	hwTo(1, 2, 2)
	b.Add(history.Event{Kind: history.KindTxnRequest, Node: 1, Txn: &history.TxnRequest{API: history.TxnAPIComplete, TransactionalID: "tx",
		ProducerID: pid, ProducerEpoch: epoch, State: "CompleteAbort"}})
	if late {
		appendAt(2)
		hwTo(2, 3, 2)
	}
	if readd {
		b.Add(history.Event{Kind: history.KindTxnRequest, Node: 1, Txn: &history.TxnRequest{API: history.TxnAPIAddPartitions, TransactionalID: "tx",
			ProducerID: pid, ProducerEpoch: epoch, State: "Ongoing", Partitions: []history.TopicPartition{tp}}})
	}
	b.At(endMs).Phase()
	return b.History()
}

func TestLSOHangingTransaction(t *testing.T) {
	c := LSO{Grace: 2 * time.Second}
	tests := []struct {
		name        string
		h           *history.History
		want        Verdict
		explanation []string
	}{
		{"late produce after the abort marker", lsoStory(true, false, 10_000), Invalid,
			[]string{"partition chaos-0's last stable offset stayed at 2 below its high watermark 3 (broker 2, leader epoch 1",
				"producer 1000 epoch 0 has a transaction open there from offset 2", "after its ABORT marker at offset 1",
				`coordinator (transactional id "tx") last reported it CompleteAbort`, "a hanging transaction"}},
		{"clean abort", lsoStory(false, false, 10_000), Valid, nil},
		{"the producer's next transaction adds the partition again", lsoStory(true, true, 10_000), Valid, nil},
		{"history ends within the grace", lsoStory(true, false, 12), Unknown, []string{"within the 2s grace"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := c.Check(tt.h)
			if res.Verdict != tt.want {
				t.Fatalf("verdict %s, want %s: %s", res.Verdict, tt.want, res.Explanation)
			}
			for _, s := range tt.explanation {
				if !strings.Contains(res.Explanation, s) {
					t.Errorf("explanation %q lacks %q", res.Explanation, s)
				}
			}
		})
	}
}

// A fault still open at the end leaves a stuck LSO undecided.
func TestLSOFaultOpen(t *testing.T) {
	h := lsoStory(true, false, 10_000)
	evs := append([]history.Event(nil), h.Events...)
	evs = append(evs[:1], append([]history.Event{{Kind: history.KindFaultStart, Time: evs[0].Time, Source: "nemesis", Fault: &history.Fault{ID: "f1", Name: "pause"}}}, evs[1:]...)...)
	for i := range evs {
		evs[i].Index, evs[i].Seq = i, uint64(i)
	}
	res := LSO{Grace: 2 * time.Second}.Check(history.New(evs))
	if res.Verdict != Unknown || !strings.Contains(res.Explanation, "never stopped") {
		t.Fatalf("verdict %s (%s), want unknown for an open fault", res.Verdict, res.Explanation)
	}
}
