package checkers

import (
	"testing"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// offsetFetch is coordinator node's OffsetFetch answer for group g: offset
// of q-0 (-1: none) with the partition's error code.
func offsetFetch(b *hb.Builder, node int32, offset int64, code int16) int {
	return b.Add(history.Event{Kind: history.KindGroupRequest, Node: node, Group: &history.GroupRequest{
		API: history.GroupAPIOffsetFetch, Group: "g", Generation: -1, GroupGeneration: 1,
		Offsets: []history.GroupOffset{{Topic: "q", Partition: 0, Offset: offset, ErrorCode: code}}}})
}

// commitAnswer is coordinator node's OffsetCommit answer to member at gen
// for offset of q-0, with the partition's error code.
func commitAnswer(b *hb.Builder, node int32, member string, gen int32, offset int64, code int16) int {
	return b.Add(history.Event{Kind: history.KindGroupRequest, Node: node, Group: &history.GroupRequest{
		API: history.GroupAPIOffsetCommit, Group: "g", Member: member, Generation: gen, GroupGeneration: gen, ErrorCode: code,
		Offsets: []history.GroupOffset{{Topic: "q", Partition: 0, Offset: offset, ErrorCode: code}}}})
}

// commitInvoke and commitDone are a member's commit of offset of key 0,
// invoked and completed apart, so that others can come in between.
func commitInvoke(b *hb.Builder, proc int, a *history.QueueAssignment, offset int64) history.QueueOp {
	op := history.QueueOp{Type: history.OpInvoke, Process: proc, F: history.QueueCommit, Assignment: a,
		Offsets: []history.QueueOffset{{Key: 0, Offset: offset}}}
	qop(b, srcOf(proc), op)
	return op
}

func commitDone(b *hb.Builder, op history.QueueOp, outcome history.OpType) int {
	op.Type = outcome
	return qop(b, srcOf(op.Process), op)
}

func srcOf(proc int) string { return "client-" + string(rune('0'+proc)) }

func TestQueueCommit(t *testing.T) {
	ok, info, fail := history.OpOK, history.OpInfo, history.OpFail
	m1, m2 := member("m1", 1, 0), member("m2", 2, 0)
	runPromiseCases(t, QueueCommit{}, []promiseCase{
		{name: "no queue operations", want: Valid, build: noQueueOps},
		{name: "fetches return the last acknowledged commit", want: Valid, build: func(b *hb.Builder) {
			offsetFetch(b, 1, -1, 0) // nothing committed yet
			qcommit(b, "client-1", 1, m1, ok, 0, 5)
			offsetFetch(b, 1, 5, 0)
			qcommit(b, "client-1", 1, m1, ok, 0, 10)
			offsetFetch(b, 1, 10, 0)
			// A member of the next generation commits lower (its
			// consumer was sent back): the group's offset goes down.
			qcommit(b, "client-2", 2, m2, ok, 0, 7)
			offsetFetch(b, 2, 7, 0)
		}},
		{name: "a fetch below the acknowledged commit", want: Invalid,
			explain: `lost commit: broker 2, coordinator of group "g", answered OffsetFetch of q-0 with offset 5 (event 4), below offset 10 that member "m1" committed in generation 1 (process 1 (client-1), invoked at event 2; acknowledged by the client's ok, event 3), and no commit that may have replaced it carried that offset`,
			build: func(b *hb.Builder) {
				qcommit(b, "client-1", 1, m1, ok, 0, 5)
				qcommit(b, "client-1", 1, m1, ok, 0, 10)
				offsetFetch(b, 2, 5, 0)
			}},
		{name: "a fetch with no offset after an acknowledged commit", want: Invalid,
			explain: `broker 1, coordinator of group "g", answered OffsetFetch of q-0 with no offset (event 2), below offset 10`,
			build: func(b *hb.Builder) {
				qcommit(b, "client-1", 1, m1, ok, 0, 10)
				offsetFetch(b, 1, -1, 0)
			}},
		{name: "two commits overlapping: either may be the last", want: Valid, build: func(b *hb.Builder) {
			x := commitInvoke(b, 1, m1, 10)
			y := commitInvoke(b, 2, m1, 5)
			commitDone(b, x, ok)
			commitDone(b, y, ok)
			offsetFetch(b, 1, 5, 0)
			offsetFetch(b, 1, 10, 0)
		}},
		{name: "a lower commit of unknown outcome may have landed", want: Valid, build: func(b *hb.Builder) {
			qcommit(b, "client-1", 1, m1, ok, 0, 10)
			qcommit(b, "client-2", 2, m2, info, 0, 5)
			offsetFetch(b, 1, 5, 0)
		}},
		{name: "an unknown commit of an older generation, replaced by a newer generation's", want: Invalid,
			explain: `answered OffsetFetch of q-0 with offset 5 (event 4), below offset 10 that member "m2" committed in generation 2`,
			build: func(b *hb.Builder) {
				x := commitInvoke(b, 1, m1, 5)
				qcommit(b, "client-2", 2, m2, ok, 0, 10)
				commitDone(b, x, info)
				offsetFetch(b, 1, 5, 0)
			}},
		{name: "a failed commit wrote nothing", want: Invalid,
			explain: `answered OffsetFetch of q-0 with offset 5 (event 4), below offset 10 that member "m1" committed in generation 1`,
			build: func(b *hb.Builder) {
				qcommit(b, "client-1", 1, m1, ok, 0, 10)
				qcommit(b, "client-2", 2, m2, fail, 0, 5)
				offsetFetch(b, 1, 5, 0)
			}},
		{name: "a fetch answered while the commit was in flight", want: Valid, build: func(b *hb.Builder) {
			qcommit(b, "client-1", 1, m1, ok, 0, 5)
			x := commitInvoke(b, 1, m1, 10)
			offsetFetch(b, 1, 5, 0)
			commitDone(b, x, ok)
		}},
		{name: "the coordinator acknowledged a commit whose client heard nothing", want: Invalid,
			explain: `answered OffsetFetch of q-0 with offset 5 (event 6), below offset 10 that member "m1" committed in generation 1 (process 1 (client-1), invoked at event 2; acknowledged by broker 1's answer, event 3)`,
			build: func(b *hb.Builder) {
				qcommit(b, "client-1", 1, m1, ok, 0, 5)
				x := commitInvoke(b, 1, m1, 10)
				commitAnswer(b, 1, "m1", 1, 10, 0)
				offsetFetch(b, 1, 10, 0)
				commitDone(b, x, info)
				offsetFetch(b, 1, 5, 0)
			}},
		{name: "a refused answer acknowledges nothing, an error answer is not judged", want: Valid, build: func(b *hb.Builder) {
			qcommit(b, "client-1", 1, m1, ok, 0, 5)
			x := commitInvoke(b, 1, m1, 10)
			commitAnswer(b, 1, "m1", 1, 10, history.ErrIllegalGeneration)
			commitDone(b, x, info)
			offsetFetch(b, 1, 5, 0)
			qcommit(b, "client-1", 1, m1, ok, 0, 12)
			offsetFetch(b, 1, -1, history.ErrNotCoordinator)
		}},
	})
}

// A deposed coordinator, not yet told that broker 2 leads the group's
// __consumer_offsets partition, answers an OffsetFetch from its cache
// without the commit broker 2 acknowledged: the known anomaly. Once told
// (or had it acknowledged the commit itself) the answer is a violation.
func TestQueueCommitDeposedCoordinator(t *testing.T) {
	m1 := member("m1", 1, 0)
	build := func(told, ackedByDeposed bool) func(b *hb.Builder) {
		return func(b *hb.Builder) {
			offsetsRole(b, 1, history.RoleLeader, 1, 0)
			qcommit(b, "client-1", 1, m1, history.OpOK, 0, 5)
			offsetsRole(b, 2, history.RoleLeader, 2, 1)
			if told {
				offsetsRole(b, 1, history.RoleFollower, 2, 1)
			}
			acker := int32(2)
			if ackedByDeposed {
				acker = 1
			}
			x := commitInvoke(b, 1, m1, 10)
			commitAnswer(b, acker, "m1", 1, 10, 0)
			commitDone(b, x, history.OpOK)
			offsetFetch(b, 1, 5, 0)
		}
	}
	for _, c := range []struct {
		name           string
		told, byItself bool
		want           Verdict
		explain        string
	}{
		{"deposed, answering from its cache", false, false, Valid,
			`broker 1, coordinator of group "g", answered OffsetFetch of q-0 with offset 5 (event 7), below offset 10 that member "m1" committed in generation 1 (process 1 (client-1), invoked at event 4; acknowledged by broker 2's answer, event 5), and no commit that may have replaced it carried that offset: broker 1 last led __consumer_offsets-0 at leader epoch 0 (role change event 0) while broker 2 had led it at leader epoch 1`},
		{"told of its successor", true, false, Invalid, `lost commit: broker 1, coordinator of group "g", answered OffsetFetch of q-0 with offset 5`},
		{"the deposed coordinator acknowledged the commit itself", false, true, Invalid, `lost commit: broker 1, coordinator of group "g"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := hb.New()
			build(c.told, c.byItself)(b)
			wantFinding(t, QueueCommit{}.Check(b.History()), c.want, KnownDeposedCoordinatorFetch, c.explain)
		})
	}
}

// crash-lose-unflushed takes an acknowledged commit from every replica of
// __consumer_offsets-0 its new leader was elected from (broker 1 alone in
// the ISR): the coordinator loads the group without it, the known anomaly.
// An ISR member that kept it, or a crash before the commit, leave a
// violation.
func TestQueueCommitUnflushedLoss(t *testing.T) {
	co := history.TP(history.GroupMetadataTopic, 0)
	m1 := member("m1", 1, 0)
	for _, c := range []struct {
		name       string
		isr        []int32
		crashFirst bool
		inFlight   bool // the crash comes while the commit waits for its answer
		want       Verdict
		explain    string
	}{
		{"the commit lost", []int32{1}, false, false, Valid,
			`broker 1, coordinator of group "g", answered OffsetFetch of q-0 with offset 5 (event 9), below offset 10 that member "m1" committed in generation 1 (process 1 (client-1), invoked at event 3; acknowledged by the client's ok, event 4), and no commit that may have replaced it carried that offset: crash-lose-unflushed took the commit from __consumer_offsets-0 in between`},
		{"the commit lost while its client waited", []int32{1}, false, true, Valid,
			`answered OffsetFetch of q-0 with offset 5 (event 9), below offset 10 that member "m1" committed in generation 1 (process 1 (client-1), invoked at event 3; acknowledged by the client's ok, event 8), and no commit that may have replaced it carried that offset: crash-lose-unflushed took the commit from __consumer_offsets-0 in between`},
		{"an ISR member kept it", []int32{1, 2}, false, false, Invalid, `lost commit: broker 1, coordinator of group "g", answered OffsetFetch of q-0 with offset 5`},
		{"the crash before the commit", []int32{1}, true, false, Invalid, `lost commit: broker 1, coordinator of group "g", answered OffsetFetch of q-0 with offset 5`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, crash := crashableCoordinator(co, c.isr, c.crashFirst)
			qcommit(b, "client-1", 1, m1, history.OpOK, 0, 5)
			x := commitInvoke(b, 1, m1, 10)
			if c.inFlight {
				crash()
			}
			commitDone(b, x, history.OpOK)
			if !c.crashFirst && !c.inFlight {
				crash()
			}
			offsetFetch(b, 1, 5, 0)
			wantFinding(t, QueueCommit{}.Check(b.History()), c.want, KnownLostUnflushedISR, c.explain)
		})
	}
}
