package checkers

import (
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// stateAssigned records a controller's write of tp's state naming leader at
// leaderEpoch with isr, carrying the assignment replicas.
func stateAssigned(b *hb.Builder, tp history.TopicPartition, leader, leaderEpoch int32, replicas []int32, isr ...int32) int {
	return b.Add(history.Event{Kind: history.KindZKWrite, Node: 1, ZKWrite: &history.ZKWrite{
		Path: "/brokers/topics/" + tp.Topic + "/partitions/0/state", Op: "set", Outcome: history.ZKOK,
		State: &history.PartitionState{Topic: tp.Topic, Partition: tp.Partition, Leader: leader, LeaderEpoch: leaderEpoch,
			ControllerEpoch: 1, ISR: isr, Replicas: replicas}}})
}

// The truncation checker names a follower's truncation under a broker
// that crash-lose-unflushed cut and a controller then elected from an ISR
// still listing it, ahead of the member that kept the records by the
// assignment; with the keeper first in the assignment it stays a
// violation.
func TestFollowerTruncationUnflushedElected(t *testing.T) {
	story := func(b *hb.Builder, replicas []int32) int {
		b.State(tp0, 1, 0, 1, 10, 1, 2, 3)
		hwEv(b, 3, 0, 188, 0, 200)
		hwEv(b, 2, 0, 188, 0, 200)
		crashUnflushed(b, "f0", "n2")
		truncEv(b, 2, 200, 0, 0, history.TruncationUnflushedLoss)
		b.Start(2)
		stateAssigned(b, tp0, 2, 1, replicas, 2, 3)
		b.State(tp0, 2, 1, 1, 11, 2, 3)
		return truncEv(b, 3, 200, 0, 1, "leader-epoch (leader's end offset 0 for epoch 0)")
	}
	// shrunk: elected with ISR [2 3 1], broker 3 first in the assignment,
	// and the leader later drops broker 3 from its ISR at the same epoch:
	// the ISR it was elected with is the one that counts.
	shrunk := func(b *hb.Builder) []int {
		b.State(tp0, 1, 0, 1, 10, 1, 2, 3)
		hw := hwEv(b, 3, 0, 188, 0, 200)
		crashUnflushed(b, "f0", "n2")
		truncEv(b, 2, 200, 0, 0, history.TruncationUnflushedLoss)
		b.Start(2)
		stateAssigned(b, tp0, 2, 1, []int32{3, 2, 1}, 2, 3, 1)
		b.State(tp0, 2, 1, 1, 11, 2, 3, 1)
		tr := truncEv(b, 3, 200, 0, 1, "leader-epoch (leader's end offset 0 for epoch 0)")
		stateAssigned(b, tp0, 2, 1, []int32{3, 2, 1}, 2, 1)
		b.State(tp0, 2, 1, 1, 12, 2, 1)
		return []int{hw, tr}
	}
	runCases(t, FollowerTruncation{}, []tcase{
		{name: "the crashed broker came first in the assignment", want: Valid, explain: KnownLostUnflushedElected, build: func(b *hb.Builder) []int {
			story(b, []int32{2, 3, 1})
			return nil
		}},
		{name: "the member that kept the records came first in the assignment", want: Invalid, explain: "truncated t-0 from 200 to 0", build: func(b *hb.Builder) []int {
			return []int{story(b, []int32{3, 2, 1})}
		}},
		{name: "the keeper came first and the leader later dropped it from its ISR", want: Invalid, explain: "truncated t-0 from 200 to 0", build: shrunk},
	})
}

// txnLoss is a loss of tp: broker 2 led it with ISR [2 3], crashed
// losing its unflushed suffix, and was elected again from ISR [2] alone.
func txnLoss(b *hb.Builder, tp history.TopicPartition) {
	b.State(tp, 2, 0, 1, 10, 2, 3)
	crashUnflushed(b, "f0", "n2")
	b.Add(history.Event{Kind: history.KindTruncation, Node: 2, Truncation: &history.Truncation{
		Topic: tp.Topic, Partition: tp.Partition, From: 20, To: 0, Reason: history.TruncationUnflushedLoss}})
	b.Start(2)
	restart(b, "f0", "n2")
	b.State(tp, 2, 1, 1, 11, 2)
}

// The transaction checker names what crash-lose-unflushed took from a log
// before a newer coordinator wrote below it: an older coordinator's marker
// and a batch of an older producer epoch above the newer marker, and a
// prepare whose __transaction_state partition lost it. Without the loss
// each stays a violation.
func TestTxnFencingUnflushedLoss(t *testing.T) {
	c := TxnFencing{Grace: time.Second}
	marker := func(crash bool) func(b *hb.Builder) {
		return func(b *hb.Builder) {
			txnInitAt(b, 1, "tx-1", 100, 0, 5)
			b.State(tp0, 2, 0, 1, 9, 2, 3)
			markerAt(b, 2, 100, 0, 5, true, 10, 0)
			if crash {
				txnLoss(b, tp0)
			}
			markerAt(b, 2, 100, 0, 6, false, 0, 0)
		}
	}
	batch := func(crash bool) func(b *hb.Builder) {
		return func(b *hb.Builder) {
			txnInitAt(b, 1, "tx-1", 100, 0, 5)
			b.State(tp0, 2, 0, 1, 9, 2, 3)
			batchAt(b, 2, 100, 0, 10, 11)
			if crash {
				txnLoss(b, tp0)
			}
			txnInitAt(b, 1, "tx-1", 100, 1, 6)
			markerAt(b, 2, 100, 1, 6, false, 0, 0)
		}
	}
	prepare := func(crash bool) func(b *hb.Builder) {
		return func(b *hb.Builder) {
			txnInitAt(b, 1, "tx-1", 100, 0, 5)
			b.Fault(true, "p", "partition")
			txnReqAt(b, 2, history.TxnAPIEndTxn, "tx-1", 100, 0, 5, history.TxnStatePrepareCommit, true, 0)
			if crash {
				txnLoss(b, history.TP("__transaction_state", 0))
			}
			b.Fault(false, "p", "partition")
			b.At(5000).Phase()
		}
	}
	runPromiseCases(t, c, []promiseCase{
		{name: "the older coordinator's marker was lost before the newer one took a lower offset", want: Valid, explain: KnownLostUnflushedISR, build: marker(true)},
		{name: "the older coordinator's marker above the newer one with no loss", want: Invalid, explain: "above the abort marker broker 2 had appended at offset 0", build: marker(false)},
		{name: "the fenced epoch's batch was lost before the newer marker took a lower offset", want: Valid, explain: KnownLostUnflushedISR, build: batch(true)},
		{name: "the fenced epoch's batch above the newer marker with no loss", want: Invalid, explain: "had to refuse the fenced producer's batch", build: batch(false)},
		{name: "the prepare was lost from its __transaction_state partition", want: Valid, explain: KnownLostUnflushedISR, build: prepare(true)},
		{name: "the prepare was never completed with no loss", want: Invalid, explain: "the transaction's markers never finished", build: prepare(false)},
	})
}
