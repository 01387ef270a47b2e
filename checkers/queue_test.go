package checkers

import (
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// Builders of queue histories: producers write to client-0, consumers to
// client-1 and client-2, the drain to final. The topic is "q".

func qop(b *hb.Builder, src string, op history.QueueOp) int {
	op.Topic = "q"
	return b.Add(history.Event{Kind: history.KindQueueOp, Source: src, Queue: &op})
}

// qsend is one send micro-op: key, value and the offset its completion
// gives (-1: none).
type qsend struct {
	key    int32
	value  int64
	offset int64
}

// qtxn appends a producer's operation of sends with its outcome;
// transactional ones ask to commit (commitStart) when commit is set.
func qtxn(b *hb.Builder, proc int, transactional bool, outcome history.OpType, commit bool, sends ...qsend) int {
	inv := history.QueueOp{Type: history.OpInvoke, Process: proc, F: history.QueueTxn, Transactional: transactional}
	for _, s := range sends {
		inv.Mops = append(inv.Mops, history.QueueMop{F: history.MopSend, Key: s.key, Value: s.value})
	}
	qop(b, "client-0", inv)
	done := inv
	done.Type = outcome
	done.Mops = nil
	for _, s := range sends {
		done.Mops = append(done.Mops, history.QueueMop{F: history.MopSend, Key: s.key, Value: s.value, Offset: s.offset})
	}
	if commit {
		done.CommitStart = b.Now() // asked for as the completion is recorded
	}
	return qop(b, "client-0", done)
}

// qsent appends an acknowledged non-transactional send.
func qsent(b *hb.Builder, key int32, value, offset int64) {
	qtxn(b, 0, false, history.OpOK, false, qsend{key, value, offset})
}

// recs is a poll of key returning offset/value pairs.
func recs(key int32, ov ...int64) history.QueuePoll {
	p := history.QueuePoll{Key: key}
	for i := 0; i+1 < len(ov); i += 2 {
		p.Records = append(p.Records, history.QueueRecord{Offset: ov[i], Value: ov[i+1]})
	}
	return p
}

// member is a group member's assignment.
func member(name string, gen int32, keys ...int32) *history.QueueAssignment {
	return &history.QueueAssignment{Mode: history.QueueSubscribed, Group: "g", Member: name, Generation: gen, Keys: keys}
}

// assigned is an assigning consumer's assignment.
func assigned(epoch int, keys ...int32) *history.QueueAssignment {
	return &history.QueueAssignment{Mode: history.QueueAssigned, Generation: -1, Epoch: epoch, Keys: keys}
}

// qpoll appends a consumer's poll and returns its completion.
func qpoll(b *hb.Builder, src string, proc int, iso string, a *history.QueueAssignment, final bool, polled ...history.QueuePoll) int {
	inv := history.QueueOp{Type: history.OpInvoke, Process: proc, F: history.QueueTxn, Isolation: iso, Final: final,
		Mops: []history.QueueMop{{F: history.MopPoll}}}
	qop(b, src, inv)
	done := inv
	done.Type, done.Assignment = history.OpOK, a
	done.Mops = []history.QueueMop{{F: history.MopPoll, Polled: polled}}
	return qop(b, src, done)
}

// qassign appends an assigning consumer's assign of keys from offsets
// (key, offset pairs).
func qassign(b *hb.Builder, src string, proc int, final bool, ko ...int64) {
	op := history.QueueOp{Type: history.OpInvoke, Process: proc, F: history.QueueAssign, Final: final}
	for i := 0; i+1 < len(ko); i += 2 {
		op.Offsets = append(op.Offsets, history.QueueOffset{Key: int32(ko[i]), Offset: ko[i+1]})
	}
	qop(b, src, op)
	op.Type = history.OpOK
	qop(b, src, op)
}

// qcommit appends a member's commit of (key, offset) pairs.
func qcommit(b *hb.Builder, src string, proc int, a *history.QueueAssignment, outcome history.OpType, ko ...int64) {
	op := history.QueueOp{Type: history.OpInvoke, Process: proc, F: history.QueueCommit, Assignment: a}
	for i := 0; i+1 < len(ko); i += 2 {
		op.Offsets = append(op.Offsets, history.QueueOffset{Key: int32(ko[i]), Offset: ko[i+1]})
	}
	qop(b, src, op)
	op.Type = outcome
	qop(b, src, op)
}

// qdrain appends a drain of key 0 returning polled, read to end.
func qdrain(b *hb.Builder, iso string, end int64, polled ...history.QueuePoll) {
	qassign(b, "final", 1_000_000, true, 0, 0)
	qpoll(b, "final", 1_000_000, iso, assigned(1, 0), true, polled...)
	op := history.QueueOp{Type: history.OpInvoke, Process: 1_000_000, F: history.QueueDrained, Final: true}
	qop(b, "final", op)
	op.Type, op.Offsets = history.OpOK, []history.QueueOffset{{Key: 0, Offset: end}}
	qop(b, "final", op)
}

const ru, rc = history.ReadUncommitted, history.ReadCommitted

func noQueueOps(b *hb.Builder) {
	b.ProduceOK(1, history.TP("chaos", 0), "p1-1", 0)
}

func TestQueueLog(t *testing.T) {
	runPromiseCases(t, QueueLog{}, []promiseCase{
		{name: "no queue operations", want: Valid, explain: "no queue operations", build: noQueueOps},
		{name: "each value at one offset", want: Valid, build: func(b *hb.Builder) {
			qsent(b, 0, 1, 0)
			qsent(b, 0, 2, 1)
			qpoll(b, "client-1", 1, ru, assigned(1, 0), false, recs(0, 0, 1, 1, 2))
			qpoll(b, "client-2", 2, ru, assigned(1, 0), false, recs(0, 1, 2))
		}},
		{name: "a value at two offsets", want: Invalid,
			explain: "duplicate: value 1 is at 2 offsets of q-0: offset 0 (process 0 (client-0), event 1) and offset 2 (process 1 (client-1), event 5)",
			build: func(b *hb.Builder) {
				qsent(b, 0, 1, 0)
				qsent(b, 0, 2, 1)
				qpoll(b, "client-1", 1, ru, assigned(1, 0), false, recs(0, 0, 1, 1, 2, 2, 1))
			}},
		{name: "an offset with two values", want: Invalid,
			explain: "inconsistent offsets: offset 1 of q-0 holds value 2 (process 0 (client-0), event 3) and value 3 (process 1 (client-1), event 5)",
			build: func(b *hb.Builder) {
				qsent(b, 0, 1, 0)
				qsent(b, 0, 2, 1)
				qpoll(b, "client-1", 1, ru, assigned(1, 0), false, recs(0, 0, 1, 1, 3))
			}},
	})
}

func TestQueueLostWrite(t *testing.T) {
	runPromiseCases(t, QueueLostWrite{}, []promiseCase{
		{name: "no queue operations", want: Valid, build: noQueueOps},
		{name: "every acknowledged value polled and in the drain", want: Valid, build: func(b *hb.Builder) {
			qsent(b, 0, 1, 0)
			qsent(b, 0, 2, 1)
			qpoll(b, "client-1", 1, ru, assigned(1, 0), false, recs(0, 0, 1))
			qdrain(b, ru, 2, recs(0, 0, 1, 1, 2))
		}},
		{name: "an aborted value missing is no loss", want: Valid, build: func(b *hb.Builder) {
			qtxn(b, 0, true, history.OpFail, false, qsend{0, 1, 0})
			qtxn(b, 0, true, history.OpOK, true, qsend{0, 2, 2})
			qdrain(b, rc, 4, recs(0, 2, 2))
		}},
		{name: "acknowledged, never polled, the drain read past it", want: Invalid,
			explain: "lost write: value 2, sent to q-0 by process 0 (client-0) and acknowledged at offset 1 (event 3), was never polled, though the drain read q-0 from offset 0 to its end offset 3 (event 9)",
			build: func(b *hb.Builder) {
				qsent(b, 0, 1, 0)
				qsent(b, 0, 2, 1)
				qdrain(b, ru, 3, recs(0, 0, 1, 2, 7))
			}},
		{name: "acknowledged, never polled, a poll read past it", want: Invalid,
			explain: "was never polled, though process 1 (client-1) polled offset 2 of q-0 (event 5)",
			build: func(b *hb.Builder) {
				qsent(b, 0, 1, 0)
				qsent(b, 0, 2, 1)
				qpoll(b, "client-1", 1, ru, assigned(1, 0), false, recs(0, 0, 1, 2, 7))
			}},
		{name: "polled during the run, missing from the drain", want: Invalid,
			explain: "lost write: value 2 at offset 1 of q-0, polled by process 1 (client-1) (event 5), is missing from the drain, which read q-0 from offset 0 to its end offset 1",
			build: func(b *hb.Builder) {
				qsent(b, 0, 1, 0)
				qsent(b, 0, 2, 1)
				qpoll(b, "client-1", 1, ru, assigned(1, 0), false, recs(0, 0, 1, 1, 2))
				qdrain(b, ru, 1, recs(0, 0, 1))
			}},
		{name: "acknowledged, never polled, nothing read past it", want: Unknown,
			explain: "1 committed values sent to q-0 were never polled",
			build: func(b *hb.Builder) {
				qsent(b, 0, 1, 0)
				qsent(b, 0, 2, 1)
				qpoll(b, "client-1", 1, ru, assigned(1, 0), false, recs(0, 0, 1))
			}},
	})
}

func TestQueuePoll(t *testing.T) {
	runPromiseCases(t, QueuePoll{}, []promiseCase{
		{name: "no queue operations", want: Valid, build: noQueueOps},
		{name: "forward within assignments; a new one from its own start; members from the committed offset", want: Valid, build: func(b *hb.Builder) {
			for v := int64(0); v < 6; v++ {
				qsent(b, 0, 10+v, v)
			}
			qassign(b, "client-1", 1, false, 0, 0)
			qpoll(b, "client-1", 1, ru, assigned(1, 0), false, recs(0, 0, 10, 1, 11))
			qpoll(b, "client-1", 1, ru, assigned(1, 0), false, recs(0, 2, 12))
			qassign(b, "client-1", 1, false, 0, 1)
			qpoll(b, "client-1", 1, ru, assigned(2, 0), false, recs(0, 1, 11, 2, 12, 3, 13))
			m1 := member("m1", 1, 0)
			qpoll(b, "client-2", 2, ru, m1, false, recs(0, 0, 10, 1, 11))
			qcommit(b, "client-2", 2, m1, history.OpOK, 0, 2)
			// A rebalance: the member resumes from the commit.
			qpoll(b, "client-2", 2, ru, member("m1", 2, 0), false, recs(0, 2, 12, 3, 13))
			// A refused commit does not move the group; a re-read is no skip.
			qcommit(b, "client-2", 2, member("m1", 2, 0), history.OpFail, 0, 4)
			qpoll(b, "client-2", 2, ru, member("m1", 3, 0), false, recs(0, 2, 12))
		}},
		{name: "aborted records and markers are no skip", want: Valid, build: func(b *hb.Builder) {
			qtxn(b, 0, true, history.OpOK, true, qsend{0, 1, 0})
			qtxn(b, 0, true, history.OpFail, false, qsend{0, 2, 2})
			qtxn(b, 0, true, history.OpOK, true, qsend{0, 3, 4})
			qassign(b, "client-1", 1, false, 0, 0)
			qpoll(b, "client-1", 1, rc, assigned(1, 0), false, recs(0, 0, 1, 4, 3))
		}},
		{name: "offsets going back within an assignment", want: Invalid,
			explain: `nonmonotonic poll: process 2 (client-2) polled offset 0 of q-0 (value 10, event 7) after offset 1 (event 5), as member "m1" of group "g" in generation 1`,
			build: func(b *hb.Builder) {
				qsent(b, 0, 10, 0)
				qsent(b, 0, 11, 1)
				qpoll(b, "client-2", 2, ru, member("m1", 1, 0), false, recs(0, 0, 10, 1, 11))
				qpoll(b, "client-2", 2, ru, member("m1", 1, 0), false, recs(0, 0, 10))
			}},
		{name: "a skip between polls", want: Invalid,
			explain: "poll skip: process 1 (client-1) polled offset 0 of q-0 (event 9) and next offset 2 (value 12, event 11), in its assignment 1, skipping offset 1 (value 11)",
			build: func(b *hb.Builder) {
				qsent(b, 0, 10, 0)
				qsent(b, 0, 11, 1)
				qsent(b, 0, 12, 2)
				qassign(b, "client-1", 1, false, 0, 0)
				qpoll(b, "client-1", 1, ru, assigned(1, 0), false, recs(0, 0, 10))
				qpoll(b, "client-1", 1, ru, assigned(1, 0), false, recs(0, 2, 12))
			}},
		{name: "a member starting above the committed offset", want: Invalid,
			explain: `poll skip: process 2 (client-2) began reading q-0 at offset 3 (value 13, event 13), above offset 1, the group's committed offset (commit by process 1 (client-1), event 11), as member "m2" of group "g" in generation 2, skipping offset 1 (value 11), offset 2 (value 12)`,
			build: func(b *hb.Builder) {
				for v := int64(0); v < 4; v++ {
					qsent(b, 0, 10+v, v)
				}
				qpoll(b, "client-1", 1, ru, member("m1", 1, 0), false, recs(0, 0, 10))
				qcommit(b, "client-1", 1, member("m1", 1, 0), history.OpOK, 0, 1)
				qpoll(b, "client-2", 2, ru, member("m2", 2, 0), false, recs(0, 3, 13))
			}},
		{name: "a member starting above an empty group's earliest offset", want: Invalid,
			explain: "above offset 0, the group's committed offset (none committed before, so the earliest offset)",
			build: func(b *hb.Builder) {
				qsent(b, 0, 10, 0)
				qsent(b, 0, 11, 1)
				qpoll(b, "client-2", 2, ru, member("m2", 1, 0), false, recs(0, 1, 11))
			}},
	})
}

func TestQueueIsolation(t *testing.T) {
	runPromiseCases(t, QueueIsolation{}, []promiseCase{
		{name: "no queue operations", want: Valid, build: noQueueOps},
		{name: "committed values after their commit; aborted ones only read uncommitted", want: Valid, build: func(b *hb.Builder) {
			qtxn(b, 0, true, history.OpOK, true, qsend{0, 1, 0})
			qtxn(b, 0, true, history.OpFail, false, qsend{0, 2, 2})
			qpoll(b, "client-1", 1, rc, assigned(1, 0), false, recs(0, 0, 1))
			qpoll(b, "client-2", 2, ru, assigned(1, 0), false, recs(0, 0, 1, 2, 2))
		}},
		{name: "an aborted value read committed", want: Invalid,
			explain: "aborted read: value 2, sent to q-0 in a transaction by process 0 (client-0) that it never asked to commit (aborted, event 3), was polled at read_committed by process 1 (client-1) (event 5)",
			build: func(b *hb.Builder) {
				qtxn(b, 0, true, history.OpOK, true, qsend{0, 1, 0})
				qtxn(b, 0, true, history.OpFail, false, qsend{0, 2, 2})
				qpoll(b, "client-1", 1, rc, assigned(1, 0), false, recs(0, 0, 1, 2, 2))
			}},
		{name: "a value read before its commit was asked for", want: Invalid,
			explain: "uncommitted read: value 1, sent to q-0 in a transaction by process 0 (client-0) (event 0), was polled at read_committed by process 1 (client-1) (event 2), before the producer asked to commit it",
			build: func(b *hb.Builder) {
				b.Add(history.Event{Kind: history.KindQueueOp, Source: "client-0", Queue: &history.QueueOp{Type: history.OpInvoke, Process: 0, F: history.QueueTxn, Topic: "q", Transactional: true,
					Mops: []history.QueueMop{{F: history.MopSend, Key: 0, Value: 1}}}})
				qop(b, "client-1", history.QueueOp{Type: history.OpInvoke, Process: 1, F: history.QueueTxn, Isolation: rc, Mops: []history.QueueMop{{F: history.MopPoll}}})
				qop(b, "client-1", history.QueueOp{Type: history.OpOK, Process: 1, F: history.QueueTxn, Isolation: rc, Assignment: assigned(1, 0),
					Mops: []history.QueueMop{{F: history.MopPoll, Polled: []history.QueuePoll{recs(0, 0, 1)}}}})
				commit := b.Now() + 5*hb.Ms
				qop(b, "client-0", history.QueueOp{Type: history.OpOK, Process: 0, F: history.QueueTxn, Transactional: true, CommitStart: commit,
					Mops: []history.QueueMop{{F: history.MopSend, Key: 0, Value: 1, Offset: 0}}})
			}},
		{name: "a failed plain send read", want: Invalid,
			explain: "failed send read: value 1, whose send to q-0 by process 0 (client-0) failed (event 1",
			build: func(b *hb.Builder) {
				qtxn(b, 0, false, history.OpFail, false, qsend{0, 1, -1})
				qpoll(b, "client-1", 1, ru, assigned(1, 0), false, recs(0, 0, 1))
			}},
	})
}

func TestQueueGroup(t *testing.T) {
	runPromiseCases(t, QueueGroup{}, []promiseCase{
		{name: "no queue operations", want: Valid, build: noQueueOps},
		{name: "one owner per partition and generation", want: Valid, build: func(b *hb.Builder) {
			qpoll(b, "client-1", 1, ru, member("m1", 1, 0, 1), false)
			qpoll(b, "client-2", 2, ru, member("m2", 1, 2), false)
			qpoll(b, "client-1", 1, ru, member("m1", 2, 0), false)
			qpoll(b, "client-2", 2, ru, member("m2", 2, 1, 2), false)
			// A member left behind at generation 2 is no owner of 3.
			qpoll(b, "client-1", 1, ru, member("m1", 2, 0), false)
			qpoll(b, "client-2", 2, ru, member("m2", 3, 0, 1, 2), false)
		}},
		{name: "two members holding one partition in one generation", want: Invalid,
			explain: `two owners: members "m1" (process 1 (client-1), event 1) and "m2" (process 2 (client-2), event 3) of group "g" both held q-1 in generation 4`,
			build: func(b *hb.Builder) {
				qpoll(b, "client-1", 1, ru, member("m1", 4, 0, 1), false)
				qpoll(b, "client-2", 2, ru, member("m2", 4, 1, 2), false)
			}},
	})
}

// modelProbe is a checker that keeps the queue model it was given.
type modelProbe struct{ got **queueModel }

func (modelProbe) Name() string { return "model-probe" }

func (p modelProbe) Check(h *history.History) Result {
	*p.got = queueModelOf(h)
	return Result{Verdict: Valid}
}

// Under Run the queue checkers share one model of the history, and judge
// with it what each judges alone; after Run nothing of it is kept.
func TestQueueModelSharedUnderRun(t *testing.T) {
	b := hb.New()
	qsent(b, 0, 1, 0)
	qsent(b, 0, 2, 1)
	qpoll(b, "client-1", 1, ru, assigned(1, 0), false, recs(0, 0, 1))
	qdrain(b, ru, 3, recs(0, 0, 1, 2, 7))
	h := b.History()
	var a, c *queueModel
	cs := []Checker{QueueLog{}, modelProbe{&a}, QueueLostWrite{}, QueuePoll{}, modelProbe{&c}, QueueIsolation{}, QueueGroup{}}
	res, _ := Run(h, cs)
	if a == nil || a != c {
		t.Fatalf("queue models under Run: %p and %p, want one shared model", a, c)
	}
	if _, ok := queueModels.Load(h); ok {
		t.Fatal("Run kept the queue model after it returned")
	}
	if queueModelOf(h) == a {
		t.Fatal("a checker called on its own got Run's model")
	}
	for i, ch := range cs {
		if _, ok := ch.(modelProbe); ok {
			continue
		}
		alone := ch.Check(h)
		if res[i].Verdict != alone.Verdict || res[i].Explanation != alone.Explanation {
			t.Errorf("%s under Run: %s %q; alone: %s %q", ch.Name(), res[i].Verdict, res[i].Explanation, alone.Verdict, alone.Explanation)
		}
	}
	if res[2].Verdict != Invalid {
		t.Errorf("queue-lost-write on a history with a lost write: %s, want invalid", res[2].Verdict)
	}
}

// A consumer that reads backwards after a leader answered its fetch
// OFFSET_OUT_OF_RANGE: a deposed leader's answer makes it the known anomaly
// (the client reset by its policy); the current leader's answer, or none,
// leaves it a violation.
func TestQueuePollResetByOutOfRange(t *testing.T) {
	tp := history.TP("q", 0)
	outOfRange := func(b *hb.Builder, node, epoch int32, offset, leo int64) int {
		return b.Add(history.Event{Kind: history.KindReplicaFetch, Node: node, ReplicaFetch: &history.ReplicaFetch{Topic: tp.Topic, Partition: tp.Partition,
			Replica: -1, CurrentLeaderEpoch: -1, LeaderEpoch: epoch, ErrorCode: history.ErrOffsetOutOfRange, FetchOffset: offset, LogEndOffset: leo}})
	}
	for _, tc := range []backwardsCase{
		{name: "a deposed leader's answer", want: Valid, known: true,
			answer:  func(b *hb.Builder) { outOfRange(b, 1, 0, 3, 2) },
			explain: "broker 1 answered a consumer fetch of q-0 at offset 3 with OFFSET_OUT_OF_RANGE (event 12), its log ending at 2 at leader epoch 0, while broker 2 had led q-0 at leader epoch 1"},
		{name: "the current leader's answer", want: Invalid,
			answer:  func(b *hb.Builder) { outOfRange(b, 2, 1, 3, 2) },
			explain: "broker 2 answered a consumer fetch of q-0 at offset 3 with OFFSET_OUT_OF_RANGE (event 12), its log ending at 2 at leader epoch 1, the partition's newest leadership"},
		{name: "an answer for another offset", want: Invalid,
			answer:  func(b *hb.Builder) { outOfRange(b, 1, 0, 7, 2) },
			explain: "nonmonotonic poll: process 1 (client-1) polled offset 0 of q-0 (value 10, event 14), below offset 3 it was assigned from (event 11), in its assignment 1."},
		{name: "no answer", want: Invalid, answer: func(*hb.Builder) {},
			explain: "nonmonotonic poll: process 1 (client-1) polled offset 0 of q-0 (value 10, event 13), below offset 3 it was assigned from (event 11), in its assignment 1."},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, KnownDeposedLeaderOutOfRange, recs(0, 0, 10, 1, 11)) })
	}
}

// A consumer assigned from an exact offset that begins below it after a
// broker listed a latest offset below it: a deposed leader's answer makes it
// the known anomaly (the client moved its offset down to the listed end);
// the current leader's answer, or one above where it began, leaves it a
// violation.
func TestQueuePollMovedByListOffsets(t *testing.T) {
	tp := history.TP("q", 0)
	listed := func(b *hb.Builder, node, epoch int32, offset int64) int {
		return b.Add(history.Event{Kind: history.KindListOffsets, Node: node, Listed: &history.ListOffsets{Topic: tp.Topic, Partition: tp.Partition,
			Timestamp: -1, CurrentLeaderEpoch: epoch, LeaderEpoch: epoch, Offset: offset, HighWatermark: offset, LogEndOffset: 4}})
	}
	for _, tc := range []backwardsCase{
		{name: "a deposed leader's answer", want: Valid, known: true,
			answer:  func(b *hb.Builder) { listed(b, 1, 0, 1) },
			explain: "below offset 3 it was assigned from (event 11), in its assignment 1: broker 1 answered the consumer's ListOffsets of q-0 for the latest offset with 1 (event 12), its high watermark at leader epoch 0 (the request carried current leader epoch 0), its log ending at 4, while broker 2 had led q-0 at leader epoch 1"},
		{name: "the current leader's answer", want: Invalid,
			answer:  func(b *hb.Builder) { listed(b, 2, 1, 1) },
			explain: "broker 2 answered the consumer's ListOffsets of q-0 for the latest offset with 1 (event 12), its high watermark at leader epoch 1 (the request carried current leader epoch 1), its log ending at 4, and the client moved its start offset 3 down to that listed end, the partition's newest leadership"},
		{name: "an answer above where it began", want: Invalid,
			answer:  func(b *hb.Builder) { listed(b, 1, 0, 2) },
			explain: "nonmonotonic poll: process 1 (client-1) polled offset 1 of q-0 (value 11, event 14), below offset 3 it was assigned from (event 11), in its assignment 1."},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, KnownDeposedLeaderListOffsets, recs(0, 1, 11, 2, 12)) })
	}
}

// backwardsCase is a consumer assigned q-0 from offset 3 (broker 1 led it at
// leader epoch 0, broker 2 since at epoch 1) whose first poll begins below
// 3, after whatever answer the case adds.
type backwardsCase struct {
	name    string
	answer  func(b *hb.Builder)
	want    Verdict
	known   bool // the anomaly named instead of a violation
	explain string
}

func (tc backwardsCase) run(t *testing.T, anomaly string, polled history.QueuePoll) {
	t.Helper()
	b := hb.New()
	role := func(node, epoch int32) {
		b.Add(history.Event{Kind: history.KindRoleChange, Node: node, Role: &history.Role{Topic: "q", Partition: 0, Role: history.RoleLeader, Leader: node, LeaderEpoch: epoch}})
	}
	role(1, 0)
	for v := int64(0); v < 4; v++ {
		qsent(b, 0, 10+v, v)
	}
	role(2, 1)
	qassign(b, "client-1", 1, false, 0, 3)
	tc.answer(b)
	qpoll(b, "client-1", 1, ru, assigned(1, 0), false, polled)
	r := QueuePoll{}.Check(b.History())
	if r.Verdict != tc.want {
		t.Fatalf("verdict %s, want %s: %s", r.Verdict, tc.want, r.Explanation)
	}
	text := r.Explanation
	for _, k := range r.Known {
		text += " " + k.Example
	}
	if got := len(r.Known) == 1 && r.Known[0].Name == anomaly; got != tc.known {
		t.Fatalf("known anomalies %+v, want %s: %v", r.Known, anomaly, tc.known)
	}
	if !strings.Contains(eventTimes.ReplaceAllString(text, ""), tc.explain) {
		t.Fatalf("explanation %q does not contain %q", text, tc.explain)
	}
}

// A commit recorded as info may have been written (the client heard
// nothing definite of an attempt that reached a coordinator), so a member
// that begins at its offset skipped nothing. A failed commit wrote nothing
// (the workload records fail only when no attempt can have been appended),
// so it does not move the group even when a coordinator's OffsetFetch
// later returned its offset: that offset came from another commit, which
// counts on its own when it is in the history.
func TestQueuePollCommitOutcome(t *testing.T) {
	fetch := func(b *hb.Builder, offset int64) {
		b.Add(history.Event{Kind: history.KindGroupRequest, Node: 1, Group: &history.GroupRequest{API: history.GroupAPIOffsetFetch, Group: "g",
			Generation: -1, GroupGeneration: 2, Offsets: []history.GroupOffset{{Topic: "q", Partition: 0, Offset: offset}}}})
	}
	for _, c := range []struct {
		name    string
		outcome history.OpType // the commit of offset 5; "" never completed
		fetched bool           // a coordinator's OffsetFetch returned 5 after it
		want    Verdict
	}{
		{"accepted", history.OpOK, false, Valid},
		{"unknown", history.OpInfo, false, Valid},
		{"never completed", "", false, Valid},
		{"refused", history.OpFail, false, Invalid},
		{"refused, its offset fetched after", history.OpFail, true, Invalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := hb.New()
			for v := int64(0); v < 6; v++ {
				qsent(b, 0, 10+v, v)
			}
			qpoll(b, "client-1", 1, ru, member("m1", 1, 0), false, recs(0, 0, 10, 1, 11, 2, 12))
			qcommit(b, "client-1", 1, member("m1", 1, 0), history.OpOK, 0, 3)
			qpoll(b, "client-1", 1, ru, member("m1", 1, 0), false, recs(0, 3, 13, 4, 14))
			if c.outcome == "" {
				qop(b, "client-1", history.QueueOp{Type: history.OpInvoke, Process: 1, F: history.QueueCommit, Assignment: member("m1", 1, 0),
					Offsets: []history.QueueOffset{{Key: 0, Offset: 5}}})
			} else {
				qcommit(b, "client-1", 1, member("m1", 1, 0), c.outcome, 0, 5)
			}
			if c.fetched {
				fetch(b, 5)
			}
			qpoll(b, "client-2", 2, ru, member("m2", 2, 0), false, recs(0, 5, 15))
			r := QueuePoll{}.Check(b.History())
			if r.Verdict != c.want {
				t.Fatalf("verdict %s, want %s: %s", r.Verdict, c.want, r.Explanation)
			}
			for _, part := range []string{"poll skip: process 2 (client-2) began reading q-0 at offset 5 (value 15,",
				"above offset 3, the group's committed offset (commit by process 1 (client-1), event 15,", "skipping offset 3 (value 13), offset 4 (value 14)."} {
				if c.want == Invalid && !strings.Contains(r.Explanation, part) {
					t.Errorf("explanation %q does not contain %q", r.Explanation, part)
				}
			}
		})
	}
}
