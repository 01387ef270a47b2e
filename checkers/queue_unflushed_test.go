package checkers

import (
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// qappend records node's append of value v at offset o of q-0 at leader
// epoch epoch.
func qappend(b *hb.Builder, node, epoch int32, o int64, v string) int {
	return b.Add(history.Event{Kind: history.KindProduceAppend, Node: node, Append: &history.Append{Topic: "q", Partition: 0,
		BaseOffset: o, LastOffset: o, LeaderEpoch: epoch, Acks: -1, Values: []string{v}}})
}

// A transactional send appended before crash-lose-unflushed but answered
// only after the crashed broker was elected again (its transaction waited
// for a coordinator) held an offset the new leader then gave another value:
// the append, not the answer, says the value was in the log before the
// crash. An append logged after the election, or none, leaves the
// crash before the only sighting, and the two values stay a violation.
func TestQueueLogUnflushedAppendBeforeAnswer(t *testing.T) {
	qtp := history.TP("q", 0)
	for _, c := range []struct {
		name    string
		before  bool // the append is logged before the crash
		after   bool // the append is logged after the election
		want    Verdict
		explain string
	}{
		{"appended before the crash", true, false, Valid, "offset 0 of q-0 held value 10"},
		{"appended after the election", false, true, Invalid, "inconsistent offsets: offset 0 of q-0"},
		{"no append logged", false, false, Invalid, "inconsistent offsets: offset 0 of q-0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := hb.New()
			b.State(qtp, 1, 0, 1, 10, 1)
			inv := history.QueueOp{Type: history.OpInvoke, Process: 0, F: history.QueueTxn, Transactional: true,
				Mops: []history.QueueMop{{F: history.MopSend, Key: 0, Value: 10}}}
			qop(b, "client-0", inv)
			if c.before {
				qappend(b, 1, 0, 0, "10")
			}
			crashUnflushed(b, "f1", "n1")
			b.Start(1)
			restart(b, "f1", "n1")
			b.State(qtp, 1, 1, 1, 12, 1) // broker 1, alone in the ISR, elected with its cut log
			if c.after {
				qappend(b, 1, 1, 0, "10")
			}
			done := inv
			done.Type, done.Error = history.OpInfo, "COORDINATOR_NOT_AVAILABLE"
			done.Mops = []history.QueueMop{{F: history.MopSend, Key: 0, Value: 10, Offset: 0}}
			qop(b, "client-0", done)
			qsent(b, 0, 20, 0)
			r := QueueLog{}.Check(b.History())
			wantFinding(t, r, c.want, KnownLostUnflushedISR, c.explain)
		})
	}
}

// qcut records the nemesis's cut of node's q-0 log by crash-lose-unflushed.
func qcut(b *hb.Builder, node int32, from, to int64) int {
	return b.Add(history.Event{Kind: history.KindTruncation, Source: "nemesis", Node: node, Truncation: &history.Truncation{
		Topic: "q", Partition: 0, From: from, To: to, Reason: history.TruncationUnflushedLoss}})
}

// A consumer that read q-0 up to offset 2 and is assigned from 3 reads from
// the log start after the partition's newest leader answered its fetch
// OFFSET_OUT_OF_RANGE: crash-lose-unflushed explains it when the answering
// leader, alone in its ISR, had lost offset 2 in its crash, or when such a
// loss came after the consumer's read and before the answer of a leader
// descending from it. A crash that did not cut offset 2, a read after the
// loss, or an ISR member that kept the offset leave it a violation.
func TestQueuePollUnflushedOutOfRange(t *testing.T) {
	qtp := history.TP("q", 0)
	outOfRange := func(b *hb.Builder, node, epoch int32, offset, leo int64) {
		b.Add(history.Event{Kind: history.KindReplicaFetch, Node: node, ReplicaFetch: &history.ReplicaFetch{Topic: "q", Partition: 0,
			Replica: -1, CurrentLeaderEpoch: epoch, LeaderEpoch: epoch, ErrorCode: history.ErrOffsetOutOfRange, FetchOffset: offset, LogEndOffset: leo}})
	}
	listed := func(b *hb.Builder, node, epoch int32, offset int64) {
		b.Add(history.Event{Kind: history.KindListOffsets, Node: node, Listed: &history.ListOffsets{Topic: "q", Partition: 0,
			Timestamp: -1, CurrentLeaderEpoch: epoch, LeaderEpoch: epoch, Offset: offset, HighWatermark: offset, LogEndOffset: offset}})
	}
	for _, c := range []struct {
		name      string
		byList    bool    // the answer is a ListOffsets answer listing the log start
		byReport  bool    // no broker answer: the client reports records lost (KIP-320) and moves to 0
		cutFrom   int64   // the crash's cut of broker 1's log, from cutFrom to 0 (none when 0)
		isr       []int32 // broker 1's ISR when elected after its restart
		readAfter bool    // the consumer read offset 2 of the new log after the election
		answerBy  int32   // broker answering: 1 at leader epoch 1, 2 at leader epoch 2
		fetchAt   int64   // the fetch offset answered (3 when 0)
		leo       int64   // the answering leader's log end (1 when 0)
		value3    string  // offset 3 holds a readable value: "old" (before the crash), "new" (after the answer)
		want      Verdict
		known     string
		explain   string
	}{
		{name: "the exposed leader's answer", cutFrom: 3, isr: []int32{1}, answerBy: 1, want: Valid, known: KnownLostUnflushedISR,
			explain: "broker 1's crash at +10ms (event 11) had cut its log of q-0 from offset 3 to 0, and after crash-lose-unflushed every member of the ISR its new leader was elected with had lost its unflushed suffix"},
		{name: "a later leader's answer, the loss after the read", cutFrom: 3, isr: []int32{1}, answerBy: 2, want: Valid, known: KnownLostUnflushedISR,
			explain: "broker 1's crash at +10ms (event 11) had cut its log of q-0 from offset 3 to 0"},
		{name: "the exposed leader's ListOffsets answer", byList: true, cutFrom: 3, isr: []int32{1}, answerBy: 1, want: Valid, known: KnownLostUnflushedISR,
			explain: "broker 1 answered the consumer's ListOffsets of q-0 for the latest offset with 0 (event 24, +20ms), its high watermark at leader epoch 1 (the request carried current leader epoch 1), its log ending at 0, and the client moved its start offset 3 down to that listed end: broker 1's crash at +10ms (event 11) had cut its log of q-0 from offset 3 to 0"},
		{name: "a later leader's ListOffsets answer, the read after the loss", byList: true, cutFrom: 3, isr: []int32{1}, readAfter: true, answerBy: 2, want: Invalid,
			explain: "the partition's newest leadership, so that leader listed a latest offset below one the consumer had been assigned from"},
		{name: "the answer past offsets of markers", cutFrom: 5, isr: []int32{1}, answerBy: 1, fetchAt: 5, want: Valid, known: KnownLostUnflushedISR,
			explain: "broker 1 answered a consumer fetch of q-0 at offset 5 with OFFSET_OUT_OF_RANGE"},
		{name: "the answer past offsets of markers, a value there only in the new log", cutFrom: 5, isr: []int32{1}, answerBy: 1, fetchAt: 5, value3: "new", want: Valid, known: KnownLostUnflushedISR,
			explain: "broker 1 answered a consumer fetch of q-0 at offset 5 with OFFSET_OUT_OF_RANGE"},
		{name: "the answer past a readable value", cutFrom: 5, isr: []int32{1}, answerBy: 1, fetchAt: 5, leo: 4, value3: "old", want: Invalid,
			explain: "nonmonotonic poll: process 1 (client-1) polled offset 0 of q-0 (value 20, event 28, +30ms), below offset 3 it was assigned from (event 25, +30ms), in its assignment 2."},
		{name: "another consumer's answer past a readable value, the leader's log ending below the offset", cutFrom: 5, isr: []int32{1}, answerBy: 1, fetchAt: 5, value3: "old", want: Valid, known: KnownLostUnflushedISR,
			explain: "broker 1 answered a consumer fetch of q-0 at offset 5 with OFFSET_OUT_OF_RANGE"},
		{name: "the client's own report of records lost, its leader exposed", byReport: true, cutFrom: 3, isr: []int32{1}, answerBy: 1, want: Valid, known: KnownLostUnflushedISR,
			explain: "the client reported records lost"},
		{name: "the client's own report of records lost, an ISR member kept the offset", byReport: true, cutFrom: 3, isr: []int32{1, 2}, answerBy: 1, want: Invalid,
			explain: "nonmonotonic poll: process 1 (client-1) polled offset 0 of q-0"},
		{name: "the crash cut nothing", isr: []int32{1}, answerBy: 1, want: Invalid,
			explain: "the partition's newest leadership, so that leader's log had lost offsets"},
		{name: "the crash cut above the offset read", cutFrom: 2, isr: []int32{1}, answerBy: 1, want: Invalid,
			explain: "the partition's newest leadership, so that leader's log had lost offsets"},
		{name: "an ISR member kept the offset", cutFrom: 3, isr: []int32{1, 2}, answerBy: 1, want: Invalid,
			explain: "the partition's newest leadership, so that leader's log had lost offsets"},
		{name: "a later leader's answer, the read after the loss", cutFrom: 3, isr: []int32{1}, readAfter: true, answerBy: 2, want: Invalid,
			explain: "the partition's newest leadership, so that leader's log had lost offsets"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := hb.New()
			ledBy1Sent3(b)
			qassign(b, "client-1", 1, false, 0, 0)
			qpoll(b, "client-1", 1, ru, assigned(1, 0), false, recs(0, 0, 10, 1, 11, 2, 12))
			if c.value3 == "old" {
				qsent(b, 0, 13, 3)
			}
			crashUnflushed(b, "f1", "n1")
			if c.cutFrom > 0 {
				qcut(b, 1, c.cutFrom, 0)
			}
			b.Start(1)
			restart(b, "f1", "n1")
			b.State(qtp, 1, 1, 1, 12, c.isr...)
			qsent(b, 0, 20, 0)
			qsent(b, 0, 21, 1)
			qsent(b, 0, 22, 2)
			epoch := 2
			if c.readAfter {
				qassign(b, "client-1", 1, false, 0, 0)
				qpoll(b, "client-1", 1, ru, assigned(epoch, 0), false, recs(0, 0, 20, 1, 21, 2, 22))
				epoch++
			}
			if c.answerBy == 2 {
				b.State(qtp, 2, 2, 1, 13, 2, 1)
			}
			qassign(b, "client-1", 1, false, 0, 3)
			switch {
			case c.byList:
				listed(b, c.answerBy, c.answerBy, 0)
			case c.byReport:
				inv := history.QueueOp{Type: history.OpInvoke, Process: 1, F: history.QueueTxn, Isolation: ru, Mops: []history.QueueMop{{F: history.MopPoll}}}
				qop(b, "client-1", inv)
				done := inv
				done.Type, done.Assignment, done.Error = history.OpOK, assigned(epoch, 0), "lost records"
				done.DataLoss = []history.QueueDataLoss{{Key: 0, ConsumedTo: 3, ConsumedToEpoch: 1, ResetTo: 0, ResetToEpoch: 1}}
				qop(b, "client-1", done)
			default:
				outOfRange(b, c.answerBy, c.answerBy, max(c.fetchAt, 3), max(c.leo, 1))
			}
			qpoll(b, "client-1", 1, ru, assigned(epoch, 0), false, recs(0, 0, 20))
			if c.value3 == "new" {
				qsent(b, 0, 23, 3)
			}
			r := QueuePoll{}.Check(b.History())
			wantFinding(t, r, c.want, c.known, c.explain)
		})
	}
}

// A group's coordinator hands out generation 1 again after
// crash-lose-unflushed took the group's records from every replica of its
// __consumer_offsets partition the controller could elect (broker 1, alone
// in the ISR): group-generation and queue-group name it. An ISR member that
// kept the records, or a crash before the newer generation was handed
// out, leave it a violation.
func TestGroupUnflushedLoss(t *testing.T) {
	co := history.TP(history.GroupMetadataTopic, 0)
	sync, join := history.GroupAPISync, history.GroupAPIJoin
	for _, c := range []struct {
		name       string
		checker    Checker
		isr        []int32 // broker 1's ISR when elected after its restart
		crashFirst bool    // the crash comes before generation 3 is handed out
		want       Verdict
		explain    string
	}{
		{"group-generation: the records lost", GroupGenerations{}, []int32{1}, false, Valid,
			`broker 1 answered SyncGroup of group "g" from member "m2" carrying generation 1 without an error (event 11, +10ms), after broker 1 had answered the group at generation 3 (event 2, +0s): crash-lose-unflushed took the group's records from __consumer_offsets-0 in between`},
		{"group-generation: an ISR member kept them", GroupGenerations{}, []int32{1, 2}, false, Invalid,
			`broker 1 answered SyncGroup of group "g" from member "m2" carrying generation 1 without an error`},
		{"group-generation: the crash before the newer generation", GroupGenerations{}, []int32{1}, true, Invalid,
			`broker 1 answered SyncGroup of group "g" from member "m2" carrying generation 1 without an error`},
		{"queue-group: the records lost", QueueGroup{}, []int32{1}, false, Valid,
			`members "m1" (process 1 (client-1), event 5, +10ms) and "m2" (process 2 (client-2), event 13, +10ms) of group "g" both held q-0 in generation 1: crash-lose-unflushed took the group's records from __consumer_offsets-0 between the first member's claim and the other's`},
		{"queue-group: an ISR member kept them", QueueGroup{}, []int32{1, 2}, false, Invalid,
			`two owners: members "m1" (process 1 (client-1), event 5) and "m2" (process 2 (client-2), event 13) of group "g" both held q-0 in generation 1`},
		{"queue-group: the crash before the first claim", QueueGroup{}, []int32{1}, true, Invalid,
			`two owners: members "m1" (process 1 (client-1)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, crash := crashableCoordinator(co, c.isr, c.crashFirst)
			groupReq(b, 1, join, "", -1, 1, 0)
			groupReq(b, 1, join, "m1", -1, 3, 0)
			groupReq(b, 1, sync, "m1", 3, 3, 0)
			qpoll(b, "client-1", 1, ru, member("m1", 1, 0), false)
			if !c.crashFirst {
				crash()
			}
			groupReq(b, 1, join, "m2", -1, 1, 0)
			groupReq(b, 1, sync, "m2", 1, 1, 0)
			qpoll(b, "client-2", 2, ru, member("m2", 1, 0), false)
			r := c.checker.Check(b.History())
			wantFinding(t, r, c.want, KnownLostUnflushedISR, c.explain)
		})
	}
}

// An offset of q-0 holds two values on either side of a quorum's
// crash-lose-unflushed (brokers 2 and 1, with broker 3 not yet back) that
// elected broker 1 between them; an earlier crash (broker 2's, with broker 3)
// whose exposed broker was elected only after the second value must not hide
// it. With no election of an exposed broker before the second value the
// two values stay a violation.
func TestQueueLogUnflushedEarlierElection(t *testing.T) {
	qtp := history.TP("q", 0)
	for _, c := range []struct {
		name     string
		electOne bool // broker 1, exposed, is elected before the second value
		want     Verdict
		explain  string
	}{
		{"the loss elected broker 1 before the second value", true, Valid, "offset 0 of q-0 held value 10"},
		{"no exposed broker elected before the second value", false, Invalid, "inconsistent offsets: offset 0 of q-0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := hb.New()
			b.State(qtp, 1, 1, 1, 10, 1, 2, 3)
			crashUnflushed(b, "f1", "n3")
			b.Start(3)
			restart(b, "f1", "n3")
			qsent(b, 0, 10, 0)
			crashUnflushed(b, "f2", "n2")
			crashUnflushed(b, "f3", "n1")
			b.Start(1)
			restart(b, "f3", "n1")
			if c.electOne {
				b.State(qtp, 1, 2, 1, 11, 1)
			}
			qsent(b, 0, 20, 0)
			b.Start(2)
			restart(b, "f2", "n2")
			b.State(qtp, 2, 3, 1, 12, 2)
			r := QueueLog{}.Check(b.History())
			wantFinding(t, r, c.want, KnownLostUnflushedQuorum, c.explain)
		})
	}
}

// A poll completes after crash-lose-unflushed with records its client had
// fetched from the old log before it (offset 2, appended before the crash),
// skipping offset 1, which held a transaction's marker there and a
// readable value only in the new leader's log: the two logs explain the
// skip when the crash cut the polled record's offset. A cut that left that
// offset, or no append of the polled record, leave it a poll skip.
func TestQueuePollUnflushedBufferedRecords(t *testing.T) {
	qtp := history.TP("q", 0)
	for _, c := range []struct {
		name     string
		cutFrom  int64 // broker 1's cut, from cutFrom to 0
		appended bool  // the polled records' appends are logged
		want     Verdict
	}{
		{"the crash cut the polled record", 3, true, Valid},
		{"the crash cut below the polled record only", 2, true, Invalid},
		{"no append of the polled records", 3, false, Invalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := hb.New()
			b.State(qtp, 1, 0, 1, 10, 1, 2)
			if c.appended {
				qappend(b, 1, 0, 0, "10")
				qappend(b, 1, 0, 2, "12")
			}
			qsent(b, 0, 10, 0)
			qsent(b, 0, 12, 2)
			qassign(b, "client-1", 1, false, 0, 0)
			crashUnflushed(b, "f1", "n1")
			qcut(b, 1, c.cutFrom, 0)
			b.Start(1)
			restart(b, "f1", "n1")
			b.State(qtp, 1, 1, 1, 12, 1)
			qappend(b, 1, 1, 0, "20")
			qappend(b, 1, 1, 1, "21")
			qsent(b, 0, 20, 0)
			qsent(b, 0, 21, 1)
			qpoll(b, "client-1", 1, ru, assigned(1, 0), false, recs(0, 0, 10, 2, 12))
			r := QueuePoll{}.Check(b.History())
			if r.Verdict != c.want {
				t.Fatalf("verdict %s, want %s: %s", r.Verdict, c.want, r.Explanation)
			}
			if c.want == Valid {
				if len(r.Known) != 1 || r.Known[0].Name != KnownLostUnflushedISR || !strings.Contains(r.Known[0].Example, "skipping offset 1 (value 21)") {
					t.Fatalf("known anomalies %+v, want %s", r.Known, KnownLostUnflushedISR)
				}
			} else if !strings.Contains(r.Explanation, "poll skip: process 1 (client-1) polled offset 0 of q-0") {
				t.Errorf("explanation %q", r.Explanation)
			}
		})
	}
}

// The answering leader crashed twice: the first crash (cutting only offset
// 0) left it exposed for good (a leader is never taken back into an ISR),
// the second cut the offset the consumer had read, and after it the broker
// led again at the same leader epoch, answering the consumer before it
// logged that. Its later crash, not the loss of the earlier one, took the
// offset: lost-unflushed-leader. With the second
// crash cutting nothing the poll stays a violation.
func TestQueuePollUnflushedLaterCrashOfLeader(t *testing.T) {
	qtp := history.TP("q", 0)
	for _, c := range []struct {
		name    string
		cutFrom int64 // the second crash's cut, from cutFrom to 0 (none when 0)
		want    Verdict
	}{
		{"the second crash cut the offset read", 4, Valid},
		{"the second crash cut nothing", 0, Invalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := hb.New()
			b.State(qtp, 1, 0, 1, 10, 1)
			crashUnflushed(b, "f1", "n1")
			qcut(b, 1, 1, 0)
			b.Start(1)
			restart(b, "f1", "n1")
			b.State(qtp, 1, 1, 1, 11, 1)
			for v := int64(0); v < 4; v++ {
				qsent(b, 0, 10+v, v)
			}
			qassign(b, "client-1", 1, false, 0, 0)
			qpoll(b, "client-1", 1, ru, assigned(1, 0), false, recs(0, 0, 10, 1, 11, 2, 12, 3, 13))
			crashUnflushed(b, "f2", "n1")
			if c.cutFrom > 0 {
				qcut(b, 1, c.cutFrom, 0)
			}
			b.Start(1)
			restart(b, "f2", "n1")
			// The broker answers at the epoch before it logs its role
			// change for it.
			b.Add(history.Event{Kind: history.KindReplicaFetch, Node: 1, ReplicaFetch: &history.ReplicaFetch{Topic: "q", Partition: 0,
				Replica: -1, CurrentLeaderEpoch: 1, LeaderEpoch: 1, ErrorCode: history.ErrOffsetOutOfRange, FetchOffset: 4, LogEndOffset: 0}})
			b.Add(history.Event{Kind: history.KindRoleChange, Node: 1, Role: &history.Role{Topic: "q", Partition: 0, Role: history.RoleLeader, Leader: 1, LeaderEpoch: 1, ISR: []int32{1}}})
			qsent(b, 0, 20, 0)
			qpoll(b, "client-1", 1, ru, assigned(1, 0), false, recs(0, 0, 20))
			r := QueuePoll{}.Check(b.History())
			if r.Verdict != c.want {
				t.Fatalf("verdict %s, want %s: %s", r.Verdict, c.want, r.Explanation)
			}
			if c.want == Valid && (len(r.Known) != 1 || r.Known[0].Name != KnownLostUnflushedLeader) {
				t.Fatalf("known anomalies %+v, want %s", r.Known, KnownLostUnflushedLeader)
			}
		})
	}
}

// A quorum loss lists broker 1 by an old crash it never fetched back from
// (it stayed in the ISR), while its later crash, after the consumer's read,
// cut the offset read; broker 3 then leads a log descending from broker 1's
// and answers the consumer OFFSET_OUT_OF_RANGE. The later crash is the
// loss's too: known anomaly. With that crash cutting nothing it stays a
// violation.
func TestQueuePollUnflushedLaterCrashInLoss(t *testing.T) {
	qtp := history.TP("q", 0)
	for _, c := range []struct {
		name    string
		cutFrom int64 // broker 1's later cut, from cutFrom to 0 (none when 0)
		want    Verdict
	}{
		{"the later crash cut the offset read", 4, Valid},
		{"the later crash cut nothing", 0, Invalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := hb.New()
			b.State(qtp, 2, 1, 1, 10, 1, 2, 3)
			crashUnflushed(b, "f1", "n1")
			qcut(b, 1, 1, 0)
			b.Start(1)
			restart(b, "f1", "n1")
			for v := int64(0); v < 4; v++ {
				qsent(b, 0, 10+v, v)
			}
			qassign(b, "client-1", 1, false, 0, 0)
			qpoll(b, "client-1", 1, ru, assigned(1, 0), false, recs(0, 0, 10, 1, 11, 2, 12, 3, 13))
			crashUnflushed(b, "f2", "n2")
			crashUnflushed(b, "f3", "n1")
			if c.cutFrom > 0 {
				qcut(b, 1, c.cutFrom, 0)
			}
			b.Start(1)
			restart(b, "f3", "n1")
			b.State(qtp, 1, 2, 1, 12, 1)
			b.State(qtp, 3, 3, 1, 13, 3, 1)
			qsent(b, 0, 20, 0)
			qassign(b, "client-1", 1, false, 0, 4)
			b.Add(history.Event{Kind: history.KindReplicaFetch, Node: 3, ReplicaFetch: &history.ReplicaFetch{Topic: "q", Partition: 0,
				Replica: -1, CurrentLeaderEpoch: 3, LeaderEpoch: 3, ErrorCode: history.ErrOffsetOutOfRange, FetchOffset: 4, LogEndOffset: 1}})
			qpoll(b, "client-1", 1, ru, assigned(2, 0), false, recs(0, 0, 20))
			r := QueuePoll{}.Check(b.History())
			if r.Verdict != c.want {
				t.Fatalf("verdict %s, want %s: %s", r.Verdict, c.want, r.Explanation)
			}
			if c.want == Valid && (len(r.Known) != 1 || r.Known[0].Name != KnownLostUnflushedQuorum || !strings.Contains(r.Known[0].Example, "had cut its log of q-0 from offset 4 to 0")) {
				t.Fatalf("known anomalies %+v, want %s", r.Known, KnownLostUnflushedQuorum)
			}
		})
	}
}

// A consumer's own report of records lost (franz-go's ErrDataLoss) stands
// only for the assignment it came in: after crash-lose-unflushed cut
// broker 1's q-0 from 3 to 0 and broker 1 was elected alone, a consumer
// that had read 0-2 reports the loss on a poll that returns nothing, and
// polls nothing more in that assignment, so no poll of it goes back. The
// process's next assignment starts at its own next offset, 3, and only a
// broker's answer can send its new client lower: the exposed leader's
// OFFSET_OUT_OF_RANGE is the known anomaly; without it the move is a
// violation, the earlier report notwithstanding. A group member that reports the loss and leaves is
// followed by a member that begins below the group's committed offset: a
// re-read, which skips nothing.
func TestQueuePollReportedLossThenNewAssignment(t *testing.T) {
	qtp := history.TP("q", 0)
	report := func(b *hb.Builder, a *history.QueueAssignment) {
		inv := history.QueueOp{Type: history.OpInvoke, Process: 1, F: history.QueueTxn, Isolation: ru, Mops: []history.QueueMop{{F: history.MopPoll}}}
		qop(b, "client-1", inv)
		done := inv
		done.Type, done.Assignment, done.Error = history.OpOK, a, "lost records"
		done.DataLoss = []history.QueueDataLoss{{Key: 0, ConsumedTo: 3, ConsumedToEpoch: 0, ResetTo: 0, ResetToEpoch: 0}}
		qop(b, "client-1", done)
	}
	for _, c := range []struct {
		name       string
		member     bool // a group member instead of an assigning consumer
		outOfRange bool // broker 1 answers the new client's fetch at 3 OFFSET_OUT_OF_RANGE
		want       Verdict
		known      string
		explain    string
	}{
		{name: "the new assignment sent back by the exposed leader", outOfRange: true, want: Valid, known: KnownLostUnflushedISR,
			explain: "below offset 3 it was assigned from (event 21, +20ms), in its assignment 2: broker 1 answered a consumer fetch of q-0 at offset 3 with OFFSET_OUT_OF_RANGE (event 22, +20ms), its log ending at 1 at leader epoch 1: broker 1's crash at +10ms (event 11) had cut its log of q-0 from offset 3 to 0"},
		{name: "the new assignment back with no answer", want: Invalid,
			explain: "nonmonotonic poll: process 1 (client-1) polled offset 0 of q-0 (value 20, event 23, +20ms), below offset 3 it was assigned from (event 21, +20ms), in its assignment 2."},
		{name: "a new member below the committed offset", member: true, want: Valid},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := hb.New()
			ledBy1Sent3(b)
			first := assigned(1, 0)
			if c.member {
				first = member("m1", 1, 0)
			} else {
				qassign(b, "client-1", 1, false, 0, 0)
			}
			qpoll(b, "client-1", 1, ru, first, false, recs(0, 0, 10, 1, 11, 2, 12))
			if c.member {
				qcommit(b, "client-1", 1, first, history.OpOK, 0, 3)
			}
			crashUnflushed(b, "f1", "n1")
			qcut(b, 1, 3, 0)
			b.Start(1)
			restart(b, "f1", "n1")
			b.State(qtp, 1, 1, 1, 12, 1)
			report(b, first)
			qsent(b, 0, 20, 0)
			next := assigned(2, 0)
			if c.member {
				next = member("m2", 2, 0)
			} else {
				qassign(b, "client-1", 1, false, 0, 3)
			}
			if c.outOfRange {
				b.Add(history.Event{Kind: history.KindReplicaFetch, Node: 1, ReplicaFetch: &history.ReplicaFetch{Topic: "q", Partition: 0,
					Replica: -1, CurrentLeaderEpoch: 1, LeaderEpoch: 1, ErrorCode: history.ErrOffsetOutOfRange, FetchOffset: 3, LogEndOffset: 1}})
			}
			qpoll(b, "client-1", 1, ru, next, false, recs(0, 0, 20))
			r := QueuePoll{}.Check(b.History())
			wantFinding(t, r, c.want, c.known, c.explain)
		})
	}
}

// ledBy1Sent3 appends q-0 led by broker 1 (ISR [1 2]) and the sends of
// values 10, 11 and 12 at offsets 0-2.
func ledBy1Sent3(b *hb.Builder) {
	b.State(history.TP("q", 0), 1, 0, 1, 10, 1, 2)
	qsent(b, 0, 10, 0)
	qsent(b, 0, 11, 1)
	qsent(b, 0, 12, 2)
}

// A consumer read q-0 up to offset 2 from broker 3, the one replica that
// still held it (brokers 2 and 1 had crashed with their logs cut to 0 and
// not been taken back), and is assigned from 3; broker 2 crashed again with
// nothing left to cut, then broker 3 crashed and lost its log too. Broker 2
// was elected from an ISR of itself, took broker 1 back in, and broker 1,
// elected next, answered the consumer's fetch at 3 OFFSET_OUT_OF_RANGE: a
// quorum's loss after the read, by broker 3's crash. The first loss after
// the read (broker 2's second crash, with brokers 2 and 1 exposed) cut
// nothing there, and must not hide the one that did. Without broker 3's cut
// nothing after the read took the offset, and it stays a violation.
func TestQueuePollUnflushedOutOfRangeLaterLoss(t *testing.T) {
	qtp := history.TP("q", 0)
	for _, c := range []struct {
		name    string
		cut3    bool // broker 3's crash cut its log from 3 to 0
		want    Verdict
		explain string
	}{
		{"the last holder's crash cut the offset", true, Valid,
			"broker 3's crash at +20ms (event 18) had cut its log of q-0 from offset 3 to 0, and after crash-lose-unflushed a quorum of its replicas lost their unflushed suffix at once"},
		{"the last holder kept the offset", false, Invalid,
			"the partition's newest leadership, so that leader's log had lost offsets a consumer had been able to read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := hb.New()
			b.State(qtp, 3, 8, 1, 10, 1, 2, 3)
			qsent(b, 0, 10, 0)
			qsent(b, 0, 11, 1)
			qsent(b, 0, 12, 2)
			crashUnflushed(b, "f1", "n2")
			qcut(b, 2, 3, 0)
			crashUnflushed(b, "f2", "n1")
			qcut(b, 1, 3, 0)
			b.Start(2)
			restart(b, "f1", "n2")
			qassign(b, "client-1", 1, false, 0, 0)
			qpoll(b, "client-1", 1, ru, assigned(1, 0), false, recs(0, 0, 10, 1, 11, 2, 12))
			crashUnflushed(b, "f3", "n2") // nothing unflushed to drop
			crashUnflushed(b, "f4", "n3")
			if c.cut3 {
				qcut(b, 3, 3, 0)
			}
			b.Start(2)
			restart(b, "f3", "n2")
			b.Start(1)
			restart(b, "f2", "n1")
			b.State(qtp, 2, 9, 1, 11, 2)
			b.Add(history.Event{Kind: history.KindISRChange, Node: 2, ISR: &history.ISRChange{Topic: "q", Partition: 0,
				Action: history.ISRExpand, Old: []int32{2}, New: []int32{1, 2}, LeaderEpoch: 9, Outcome: history.ZKOK}})
			b.State(qtp, 1, 10, 1, 12, 1)
			qsent(b, 0, 20, 0)
			qassign(b, "client-1", 1, false, 0, 3)
			b.Add(history.Event{Kind: history.KindReplicaFetch, Node: 1, ReplicaFetch: &history.ReplicaFetch{Topic: "q", Partition: 0,
				Replica: -1, CurrentLeaderEpoch: 10, LeaderEpoch: 10, ErrorCode: history.ErrOffsetOutOfRange, FetchOffset: 3, LogEndOffset: 1}})
			qpoll(b, "client-1", 1, ru, assigned(2, 0), false, recs(0, 0, 20))
			r := QueuePoll{}.Check(b.History())
			wantFinding(t, r, c.want, KnownLostUnflushedQuorum, c.explain)
		})
	}
}

// A poll hands out offset 2, which broker 3 appended at leader epoch 0
// after brokers 2 and 1 had crashed with their logs cut to 0, and skips
// offset 1, a marker there and a readable value only in the log broker 2
// led afterwards: broker 2 crashed again with nothing left to cut, then
// broker 3 crashed and lost offset 2. The loss of broker 2's second crash
// (brokers 2 and 1 exposed, broker 2 elected) cut nothing after the
// append; broker 3's crash did, and explains the two logs. Without broker
// 3's cut it stays a poll skip.
func TestQueuePollUnflushedBufferedLaterLoss(t *testing.T) {
	qtp := history.TP("q", 0)
	for _, c := range []struct {
		name string
		cut3 bool
		want Verdict
	}{
		{"the last holder's crash cut the polled record", true, Valid},
		{"the last holder kept it", false, Invalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := hb.New()
			b.State(qtp, 3, 0, 1, 10, 1, 2, 3)
			qassign(b, "client-1", 1, false, 0, 0)
			crashUnflushed(b, "f1", "n2")
			qcut(b, 2, 1, 0)
			crashUnflushed(b, "f2", "n1")
			qcut(b, 1, 1, 0)
			b.Start(2)
			restart(b, "f1", "n2")
			qappend(b, 3, 0, 0, "10")
			qappend(b, 3, 0, 2, "12")
			qsent(b, 0, 10, 0)
			qsent(b, 0, 12, 2)
			crashUnflushed(b, "f3", "n2") // nothing unflushed to drop
			crashUnflushed(b, "f4", "n3")
			if c.cut3 {
				qcut(b, 3, 3, 0)
			}
			b.Start(2)
			restart(b, "f3", "n2")
			b.State(qtp, 2, 1, 1, 12, 2)
			qappend(b, 2, 1, 0, "20")
			qappend(b, 2, 1, 1, "21")
			qsent(b, 0, 20, 0)
			qsent(b, 0, 21, 1)
			qpoll(b, "client-1", 1, ru, assigned(1, 0), false, recs(0, 0, 10, 2, 12))
			r := QueuePoll{}.Check(b.History())
			if r.Verdict != c.want {
				t.Fatalf("verdict %s, want %s: %s", r.Verdict, c.want, r.Explanation)
			}
			if c.want == Valid {
				if len(r.Known) != 1 || r.Known[0].Name != KnownLostUnflushedQuorum || !strings.Contains(r.Known[0].Example, "skipping offset 1 (value 21)") {
					t.Fatalf("known anomalies %+v, want %s", r.Known, KnownLostUnflushedQuorum)
				}
			} else if !strings.Contains(r.Explanation, "poll skip: process 1 (client-1) polled offset 0 of q-0") {
				t.Errorf("explanation %q", r.Explanation)
			}
		})
	}
}

// crashableCoordinator starts a history in which broker 1 leads co, the
// group coordinator's partition, at leader epoch 0 with ISR [1 2], and
// returns it with the step that crashes broker 1 with crash-lose-unflushed,
// restarts it and leaves co at leader epoch 1 with ISR isr; crashFirst
// takes that step at once.
func crashableCoordinator(co history.TopicPartition, isr []int32, crashFirst bool) (*hb.Builder, func()) {
	b := hb.New()
	b.State(co, 1, 0, 1, 10, 1, 2)
	crash := func() {
		crashUnflushed(b, "f1", "n1")
		b.Start(1)
		restart(b, "f1", "n1")
		b.State(co, 1, 1, 1, 12, isr...)
	}
	if crashFirst {
		crash()
	}
	return b, crash
}
