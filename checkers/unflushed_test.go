package checkers

import (
	"fmt"
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// crashUnflushed records crash-lose-unflushed of broker node (its start,
// with what it dropped) and returns the start's index; restart records
// its stop.
func crashUnflushed(b *hb.Builder, id string, node string) int {
	return b.Add(history.Event{Kind: history.KindFaultStart, Fault: &history.Fault{ID: id, Name: crashLoseUnflushed,
		Targets: []string{node}, Detail: "SIGKILL; dropped unflushed t-0 offsets [0, 2)"}})
}

func restart(b *hb.Builder, id, node string) int {
	return b.Fault(false, id, crashLoseUnflushed, node)
}

// takeIn records leader taking follower back into t-0's ISR (an ok expand).
func takeIn(b *hb.Builder, leader, follower int32) int {
	return b.Add(history.Event{Kind: history.KindISRChange, Node: leader, ISR: &history.ISRChange{Topic: "t", Partition: 0,
		Action: history.ISRExpand, Old: []int32{leader}, New: []int32{leader, follower}, Outcome: history.ZKOK}})
}

// The durability checker names a loss that follows crash-lose-unflushed of
// two of a partition's replicas at once as the known anomaly, and keeps
// every other loss a violation.
func TestDurabilityUnflushedQuorum(t *testing.T) {
	cases := []struct {
		name    string
		build   func(b *hb.Builder)
		want    Verdict
		known   bool
		isr     bool // the known anomaly is lost-unflushed-isr
		explain []string
	}{
		{name: "the whole ISR, two replicas, crashes at once: known anomaly", want: Valid, known: true,
			explain: []string{"t-0 offset 0", "broker 1 crashed at", "broker 2 crashed at", "never taken back into an ISR", "broker 2 led at leader epoch 2", "offsets [0, 2)"},
			build: func(b *hb.Builder) {
				b.State(tp0, 1, 1, 1, 10, 1, 2)
				produceOK(b, 1, "a", 0)
				produceOK(b, 2, "b", 1)
				crashUnflushed(b, "f1", "n1")
				crashUnflushed(b, "f2", "n2")
				restart(b, "f1", "n1")
				restart(b, "f2", "n2")
				b.State(tp0, 2, 2, 1, 11, 2) // broker 2 back, elected with what it kept
				finalRead(b)
			}},
		{name: "the new leader reuses a lost offset: known anomaly, for the loss and the two values", want: Valid, known: true,
			explain: []string{"was read with two values", "in between: broker 1 crashed at"},
			build: func(b *hb.Builder) {
				b.State(tp0, 1, 1, 1, 10, 1, 2)
				produceOK(b, 1, "a", 0)
				b.ReadBack(5, tp0, 0, false, hb.Rec(0, "a"))
				crashUnflushed(b, "f1", "n1")
				crashUnflushed(b, "f2", "n2")
				restart(b, "f1", "n1")
				restart(b, "f2", "n2")
				b.State(tp0, 2, 2, 1, 11, 2)
				finalRead(b, hb.Rec(0, "x"))
			}},
		{name: "two values at an offset before the crashes: violation", want: Invalid, explain: []string{"with two values"},
			build: func(b *hb.Builder) {
				b.State(tp0, 1, 1, 1, 10, 1, 2)
				b.ReadBack(5, tp0, 0, false, hb.Rec(0, "a"))
				b.ReadBack(5, tp0, 0, false, hb.Rec(0, "y"))
				crashUnflushed(b, "f1", "n1")
				crashUnflushed(b, "f2", "n2")
				restart(b, "f1", "n1")
				restart(b, "f2", "n2")
				finalRead(b)
			}},
		{name: "the ISR shrank to the second crashed broker: known anomaly", want: Valid, known: true,
			explain: []string{"broker 1 crashed at", "broker 2 crashed at"},
			build: func(b *hb.Builder) {
				b.State(tp0, 1, 1, 1, 10, 1, 2, 3)
				produceOK(b, 1, "a", 0)
				produceOK(b, 2, "b", 1)
				b.State(tp0, 1, 1, 1, 11, 1, 2) // broker 3 fell behind
				crashUnflushed(b, "f1", "n1")
				b.State(tp0, 2, 2, 1, 12, 2)
				crashUnflushed(b, "f2", "n2")
				restart(b, "f1", "n1")
				restart(b, "f2", "n2")
				b.State(tp0, 2, 3, 1, 13, 2) // broker 2 back, elected with what it kept
				finalRead(b)
			}},
		{name: "a broker down since before the record and another crashing after it: known anomaly", want: Valid, known: true,
			explain: []string{"broker 1 crashed at", "broker 2 crashed at", "broker 1 led at leader epoch 3"},
			build: func(b *hb.Builder) {
				b.State(tp0, 2, 1, 1, 10, 2, 1)
				crashUnflushed(b, "f1", "n1")
				b.State(tp0, 2, 2, 1, 11, 2, 3)
				produceOK(b, 1, "a", 0)
				produceOK(b, 2, "b", 1)
				b.State(tp0, 2, 2, 1, 12, 2)
				crashUnflushed(b, "f2", "n2")
				restart(b, "f1", "n1")
				b.State(tp0, 1, 3, 1, 13, 1) // stale ISR member elected before fetching
				restart(b, "f2", "n2")
				finalRead(b)
			}},
		{name: "two crash at once but a third ISR member survives: violation", want: Invalid, explain: []string{"was lost"},
			build: func(b *hb.Builder) {
				b.State(tp0, 1, 1, 1, 10, 1, 2, 3)
				produceOK(b, 1, "a", 0)
				crashUnflushed(b, "f1", "n1")
				crashUnflushed(b, "f2", "n2")
				b.State(tp0, 3, 2, 1, 11, 3) // the survivor leads
				restart(b, "f1", "n1")
				restart(b, "f2", "n2")
				finalRead(b)
			}},
		{name: "the second crash after the first rejoined: violation", want: Invalid, explain: []string{"was lost"},
			build: func(b *hb.Builder) {
				b.State(tp0, 1, 1, 1, 10, 1, 2)
				produceOK(b, 1, "a", 0)
				crashUnflushed(b, "f1", "n1")
				b.State(tp0, 2, 2, 1, 11, 2)
				restart(b, "f1", "n1")
				takeIn(b, 2, 1) // n1 fetched it back
				b.State(tp0, 2, 2, 1, 12, 2, 1)
				crashUnflushed(b, "f2", "n2")
				b.State(tp0, 1, 3, 1, 13, 1)
				restart(b, "f2", "n2")
				finalRead(b)
			}},
		{name: "the first rejoined before the nemesis logged its restart: violation", want: Invalid, explain: []string{"was lost"},
			build: func(b *hb.Builder) {
				b.State(tp0, 1, 1, 1, 10, 1, 2)
				produceOK(b, 1, "a", 0)
				crashUnflushed(b, "f1", "n1")
				b.State(tp0, 2, 2, 1, 11, 2)
				b.Start(1)
				takeIn(b, 2, 1) // fetched back at once
				b.State(tp0, 2, 2, 1, 12, 2, 1)
				restart(b, "f1", "n1")
				crashUnflushed(b, "f2", "n2")
				b.State(tp0, 1, 3, 1, 13, 1)
				restart(b, "f2", "n2")
				finalRead(b)
			}},
		{name: "one replica crashed, elected from an ISR of itself alone: known anomaly", want: Valid, known: true, isr: true,
			explain: []string{"broker 1 crashed at", "never taken back into an ISR", "broker 1 led at leader epoch 2 elected with ISR [1]", "Every member of the ISR"},
			build: func(b *hb.Builder) {
				b.State(tp0, 1, 1, 1, 10, 1, 2, 3)
				produceOK(b, 1, "a", 0)
				produceOK(b, 2, "b", 1)
				crashUnflushed(b, "f1", "n1")
				restart(b, "f1", "n1")
				b.State(tp0, 1, 2, 1, 11, 1) // the ISR had shrunk to the crashed broker
				finalRead(b)
			}},
		{name: "one replica crashed, elected while another ISR member kept the record: violation", want: Invalid, explain: []string{"was lost"},
			build: func(b *hb.Builder) {
				b.State(tp0, 1, 1, 1, 10, 1, 2, 3)
				produceOK(b, 1, "a", 0)
				crashUnflushed(b, "f1", "n1")
				restart(b, "f1", "n1")
				b.State(tp0, 1, 2, 1, 11, 1, 2) // broker 2 never crashed
				finalRead(b)
			}},
		{name: "one replica crashed, elected alone, but the record came after its crash: violation", want: Invalid, explain: []string{"was lost"},
			build: func(b *hb.Builder) {
				b.State(tp0, 1, 1, 1, 10, 1, 2, 3)
				crashUnflushed(b, "f1", "n1")
				produceOK(b, 1, "a", 0)
				restart(b, "f1", "n1")
				b.State(tp0, 1, 2, 1, 11, 1)
				finalRead(b)
			}},
		{name: "one replica crashed, elected alone after it was taken back into an ISR: violation", want: Invalid, explain: []string{"was lost"},
			build: func(b *hb.Builder) {
				b.State(tp0, 2, 1, 1, 10, 2, 1)
				produceOK(b, 1, "a", 0)
				crashUnflushed(b, "f1", "n1")
				restart(b, "f1", "n1")
				takeIn(b, 2, 1) // fetched back up to the high watermark
				b.State(tp0, 1, 2, 1, 11, 1)
				finalRead(b)
			}},
		{name: "the crashes came before the record was written: violation", want: Invalid, explain: []string{"was lost"},
			build: func(b *hb.Builder) {
				b.State(tp0, 1, 1, 1, 10, 1, 2)
				crashUnflushed(b, "f1", "n1")
				crashUnflushed(b, "f2", "n2")
				restart(b, "f1", "n1")
				restart(b, "f2", "n2")
				produceOK(b, 1, "a", 0)
				finalRead(b)
			}},
		{name: "a crashed broker outside the ISR does not count: violation", want: Invalid, explain: []string{"was lost"},
			build: func(b *hb.Builder) {
				b.State(tp0, 1, 1, 1, 10, 1, 2)
				produceOK(b, 1, "a", 0)
				crashUnflushed(b, "f1", "n1")
				crashUnflushed(b, "f3", "n3")
				restart(b, "f1", "n1")
				restart(b, "f3", "n3")
				b.State(tp0, 1, 2, 1, 11, 1, 2)
				finalRead(b)
			}},
		{name: "two replicas crash at once, nothing lost: clean", want: Valid,
			explain: []string{"all 1 acknowledged acks=all records are in the final reads"},
			build: func(b *hb.Builder) {
				b.State(tp0, 1, 1, 1, 10, 1, 2, 3)
				produceOK(b, 1, "a", 0)
				crashUnflushed(b, "f1", "n1")
				crashUnflushed(b, "f2", "n2")
				restart(b, "f1", "n1")
				restart(b, "f2", "n2")
				finalRead(b, hb.Rec(0, "a"))
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := verdictOf(t, Durability{}, c.build, c.want)
			text := r.Explanation
			if c.known {
				name := KnownLostUnflushedQuorum
				if c.isr {
					name = KnownLostUnflushedISR
				}
				if len(r.Known) != 1 || r.Known[0].Name != name {
					t.Fatalf("known anomalies %+v, want %s", r.Known, name)
				}
				text = r.Known[0].Example
				if r.Known[0].Count != 2 {
					t.Errorf("%s counted %d times, want 2 (both records)", name, r.Known[0].Count)
				}
				if !strings.Contains(r.Explanation, name) {
					t.Errorf("explanation %q does not name %s", r.Explanation, name)
				}
			} else if len(r.Known) != 0 {
				t.Errorf("known anomalies %+v, want none", r.Known)
			}
			for _, want := range c.explain {
				if !strings.Contains(text, want) {
					t.Errorf("%q does not say %q", text, want)
				}
			}
		})
	}
}

// The truncation checker names a follower's cut below its high watermark
// under a leader that led while exposed in a quorum loss, and keeps it a
// violation when only that leader crashed; the nemesis's own record of a
// cut is never judged as a follower's.
func TestFollowerTruncationUnflushedQuorum(t *testing.T) {
	base := func(b *hb.Builder, isr []int32, crashed ...string) {
		b.State(tp0, 1, 0, 1, 10, 1, 2, 3)
		hwEv(b, 3, 0, 188, 0, 200)
		hwEv(b, 2, 0, 188, 0, 200)
		for i, n := range crashed {
			crashUnflushed(b, fmt.Sprintf("f%d", i), n)
		}
		truncEv(b, 2, 200, 0, 0, history.TruncationUnflushedLoss)
		b.Start(2)
		b.State(tp0, 2, 1, 1, 11, isr...)
	}
	runCases(t, FollowerTruncation{}, []tcase{
		{name: "a quorum crashed and an exposed replica leads", want: Valid, explain: KnownLostUnflushedQuorum, build: func(b *hb.Builder) []int {
			base(b, []int32{2, 3}, "n1", "n2")
			truncEv(b, 3, 200, 0, 1, "leader-epoch (leader's end offset 0 for epoch 0)")
			return nil
		}},
		{name: "only the new leader crashed, another ISR member kept the records", want: Invalid, explain: "truncated t-0 from 200 to 0", build: func(b *hb.Builder) []int {
			base(b, []int32{2, 3}, "n2")
			tr := truncEv(b, 3, 200, 0, 1, "leader-epoch (leader's end offset 0 for epoch 0)")
			return []int{tr}
		}},
		{name: "only the new leader crashed, elected from an ISR of itself alone", want: Valid, explain: KnownLostUnflushedISR, build: func(b *hb.Builder) []int {
			base(b, []int32{2}, "n2")
			truncEv(b, 3, 200, 0, 1, "leader-epoch (leader's end offset 0 for epoch 0)")
			return nil
		}},
	})
}

// The ISR checker names a leader's log differing from a member's below
// the high watermark when that leader led while exposed in a quorum loss,
// and keeps it a violation when only the leader crashed.
func TestISRDivergentUnflushedQuorum(t *testing.T) {
	story := func(b *hb.Builder, crashed ...string) (join int) {
		_, _, join = divergenceCut(b, func(b *hb.Builder) {
			for i, n := range crashed {
				crashUnflushed(b, fmt.Sprintf("f%d", i), n)
			}
			b.Start(2)
		}, nil)
		return join
	}
	runCases(t, ISR{}, []tcase{
		{name: "a quorum crashed and an exposed replica leads", want: Valid, explain: KnownLostUnflushedQuorum, build: func(b *hb.Builder) []int {
			story(b, "n2", "n3")
			return nil
		}},
		{name: "only the new leader crashed, elected from an ISR of itself alone", want: Valid, explain: KnownLostUnflushedISR, build: func(b *hb.Builder) []int {
			story(b, "n2")
			return nil
		}},
		{name: "the new leader crashed only after its election", want: Invalid, explain: "took broker 1 into its ISR", build: func(b *hb.Builder) []int {
			_, _, join := divergenceCut(b, func(b *hb.Builder) { b.Start(2) }, func(b *hb.Builder) { crashUnflushed(b, "f0", "n2") })
			return []int{join}
		}},
	})
}

// A member whose log crash-lose-unflushed cut during the leadership may
// have been counted on its last fetch before the crash: hw-within-isr
// does not hold its later, shorter log against the leader's advance; a
// truncation of another reason before the advance does not excuse it.
func TestHWWithinISRUnflushedLoss(t *testing.T) {
	runCases(t, HWWithinISR{}, []tcase{
		{name: "the member's page cache was lost", want: Valid, build: func(b *hb.Builder) []int {
			roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2)
			truncEv(b, 2, 10, 0, 0, history.TruncationUnflushedLoss)
			hwEv(b, 1, 0, 10, 1, 10)
			b.Start(2)
			hwEv(b, 2, 0, 5, 1, 6)
			return nil
		}},
		{name: "the member's page cache was lost while its leader led an earlier epoch", want: Valid, build: func(b *hb.Builder) []int {
			roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2, 3)
			truncEv(b, 2, 10, 0, 0, history.TruncationUnflushedLoss)
			hwEv(b, 1, 0, 10, 2, 10) // logged before the role change of epoch 2
			roleEv(b, 1, history.RoleLeader, 1, 2, 1, 2)
			b.Start(2)
			hwEv(b, 2, 0, 5, 2, 6)
			return nil
		}},
		{name: "a new leader counts no fetch from before the member's crash", want: Invalid, explain: "broker 2's log ended at 6", build: func(b *hb.Builder) []int {
			roleEv(b, 1, history.RoleFollower, 3, 1, 1, 2, 3)
			truncEv(b, 2, 10, 0, 0, history.TruncationUnflushedLoss)
			adv := hwEv(b, 1, 0, 10, 2, 10)
			roleEv(b, 1, history.RoleLeader, 1, 2, 1, 2)
			b.Start(2)
			obs := hwEv(b, 2, 0, 5, 2, 6)
			return []int{adv, obs}
		}},
		{name: "the member truncated at the same epoch before the advance", want: Invalid, explain: "broker 2's log ended at 6", build: func(b *hb.Builder) []int {
			roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2)
			truncEv(b, 2, 10, 0, 1, "high-watermark")
			adv := hwEv(b, 1, 0, 10, 1, 10)
			obs := hwEv(b, 2, 0, 5, 1, 6)
			return []int{adv, obs}
		}},
	})
}

// A follower that followed no leader since a broker that lost its
// unflushed suffix was elected with an ISR of itself alone, and that
// truncates below its high watermark under a later leader descended from
// that one, lost its records to that election (lost-unflushed-isr), also
// when it was told of a leader since but its log did not move under it;
// one that followed a leader since then, or whose role is unknown, is
// judged.
func TestFollowerTruncationInheritedUnflushedLoss(t *testing.T) {
	story := func(b *hb.Builder, between func(b *hb.Builder)) int {
		b.State(tp0, 1, 0, 1, 10, 1, 2, 3)
		if between != nil {
			roleEv(b, 3, history.RoleFollower, 1, 0, 1, 2, 3)
		}
		hwEv(b, 3, 0, 188, 0, 200)
		hwEv(b, 2, 0, 188, 0, 200)
		b.State(tp0, 1, 0, 1, 11, 1) // brokers 2 and 3 fell out of the ISR
		crashUnflushed(b, "f1", "n1")
		truncEv(b, 1, 200, 0, 0, history.TruncationUnflushedLoss)
		b.Start(1)
		b.State(tp0, 1, 1, 1, 12, 1) // the ISR's one member, back empty
		roleEv(b, 2, history.RoleFollower, 1, 1, 1)
		truncEv(b, 2, 200, 0, 1, "leader-epoch (leader's end offset 0 for epoch 0, ours 200)")
		b.State(tp0, 1, 1, 1, 13, 1, 2)
		if between != nil {
			between(b)
		}
		b.State(tp0, 2, 2, 1, 14, 2)
		return truncEv(b, 3, 200, 0, 2, "leader-epoch (leader's end offset 0 for epoch 0, ours 200)")
	}
	runCases(t, FollowerTruncation{}, []tcase{
		{name: "the follower kept its log from before the election", want: Valid, explain: KnownLostUnflushedISR + " ×2", build: func(b *hb.Builder) []int {
			story(b, func(*hb.Builder) {})
			return nil
		}},
		{name: "the follower followed the exposed leader since", want: Invalid, explain: "truncated t-0 from 200 to 0 (event", build: func(b *hb.Builder) []int {
			tr := story(b, func(b *hb.Builder) {
				roleEv(b, 3, history.RoleFollower, 1, 1, 1, 2, 3)
				hwEv(b, 3, 188, 189, 1, 200)
			})
			return []int{tr}
		}},
		{name: "the follower was told of the exposed leader and never fetched from it", want: Valid, explain: KnownLostUnflushedISR + " ×2", build: func(b *hb.Builder) []int {
			story(b, func(b *hb.Builder) { roleEv(b, 3, history.RoleFollower, 1, 1, 1, 2, 3) })
			return nil
		}},
		{name: "the follower's roles are unknown", want: Invalid, explain: "truncated t-0 from 200 to 0 (event", build: func(b *hb.Builder) []int {
			tr := story(b, nil)
			return []int{tr}
		}},
	})
}

// The queue checkers name what a loss of q-0 to crash-lose-unflushed
// explains (lost-unflushed-isr: broker 1 crashed and was elected with an
// ISR of itself alone) and keep it a violation when broker 1 was elected
// with broker 2, which never crashed, in its ISR.
func TestQueueUnflushedLoss(t *testing.T) {
	qtp := history.TP("q", 0)
	// before: the old log holds value 10 at offset 0 and value 11 at offset
	// 2 (offset 1 a transaction's marker), which a poll read; then broker 1
	// crashes and comes back as leader with isr.
	story := func(b *hb.Builder, isr []int32) {
		b.State(qtp, 1, 0, 1, 10, 1, 2, 3)
		qsent(b, 0, 10, 0)
		qsent(b, 0, 11, 2)
		qassign(b, "client-1", 1, false, 0, 0)
		qpoll(b, "client-1", 1, ru, assigned(1, 0), false, recs(0, 0, 10, 2, 11))
		b.State(qtp, 1, 0, 1, 11, 1)
		crashUnflushed(b, "f1", "n1")
		b.Start(1)
		b.State(qtp, 1, 1, 1, 12, isr...)
		qsent(b, 0, 20, 0) // the new leader's log
		qsent(b, 0, 21, 1)
	}
	drain := func(b *hb.Builder) { qdrain(b, ru, 2, recs(0, 0, 20, 1, 21)) }
	for _, c := range []struct {
		name    string
		checker Checker
		isr     []int32
		want    Verdict
		explain string
	}{
		{"queue-log: an offset with two values", QueueLog{}, []int32{1}, Valid, "offset 0 of q-0 held value 10"},
		{"queue-log: an offset with two values, a member kept it", QueueLog{}, []int32{1, 2}, Invalid, "inconsistent offsets: offset 0 of q-0"},
		{"queue-lost-write: polled values missing from the drain", QueueLostWrite{}, []int32{1}, Valid, "value 10 at offset 0 of q-0, polled"},
		{"queue-lost-write: polled values missing from the drain, a member kept them", QueueLostWrite{}, []int32{1, 2}, Invalid, "lost write: value 10 at offset 0 of q-0"},
		{"queue-poll: the old log's poll skipped an offset the new log fills", QueuePoll{}, []int32{1}, Valid, "skipping offset 1 (value 21)"},
		{"queue-poll: the old log's poll skipped an offset the new log fills, a member kept it", QueuePoll{}, []int32{1, 2}, Invalid, "poll skip: process 1 (client-1) polled offset 0 of q-0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := hb.New()
			story(b, c.isr)
			drain(b)
			r := c.checker.Check(b.History())
			wantFinding(t, r, c.want, KnownLostUnflushedISR, c.explain)
		})
	}
}

// cutLog records the nemesis's cut of node's t-0 log by crash-lose-unflushed.
func cutLog(b *hb.Builder, node int32, from, to int64) int {
	return b.Add(history.Event{Kind: history.KindTruncation, Source: "nemesis", Node: node, Truncation: &history.Truncation{
		Topic: "t", Partition: 0, From: from, To: to, Reason: history.TruncationUnflushedLoss}})
}

// leaderCrashed is broker 1 leading t-0 at leader epoch 1 (ISR [1 2 3]),
// acknowledging "a" at 0 and "b" at 1, then crash-lose-unflushed of
// broker 1 cutting its log from 2 to cutTo (no cut logged when cutTo < 0)
// and its restart.
func leaderCrashed(b *hb.Builder, cutTo int64) {
	b.State(tp0, 1, 1, 1, 10, 1, 2, 3)
	produceOK(b, 1, "a", 0)
	produceOK(b, 2, "b", 1)
	crashUnflushed(b, "f1", "n1")
	if cutTo >= 0 {
		cutLog(b, 1, 2, cutTo)
	}
	b.Start(1)
	restart(b, "f1", "n1")
}

// The durability checker names a loss to a leader that crash-lose-unflushed
// cut and that led again at the same leader epoch after its restart (a
// controller that never handled its crash gave the epoch back), and keeps
// the loss a violation when there was no such crash, the cut did not
// reach the records, or a controller elected another leader in between.
func TestDurabilityUnflushedLeader(t *testing.T) {
	cases := []struct {
		name    string
		build   func(b *hb.Builder)
		want    Verdict
		explain []string
	}{
		{name: "the restarted leader leads at its epoch again: known anomaly", want: Valid,
			explain: []string{"broker 1 led t-0 at leader epoch 1", "its log cut from offset 2 to 0", "it led at the same leader epoch 1", "followers truncated"},
			build: func(b *hb.Builder) {
				leaderCrashed(b, 0)
				roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2, 3)
				finalRead(b)
			}},
		{name: "the restarted leader appends at its epoch before it logs the request: known anomaly, and the offset reused", want: Valid,
			explain: []string{"it led at the same leader epoch 1"},
			build: func(b *hb.Builder) {
				leaderCrashed(b, 0)
				pAppend(b, 1, 0, 0, 1, pbatch(9, 0), "c")
				roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2, 3)
				finalRead(b, hb.Rec(0, "c"))
			}},
		{name: "leadership at the same epoch without a crash: violation", want: Invalid,
			build: func(b *hb.Builder) {
				b.State(tp0, 1, 1, 1, 10, 1, 2, 3)
				produceOK(b, 1, "a", 0)
				produceOK(b, 2, "b", 1)
				b.Start(1)
				roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2, 3)
				finalRead(b)
			}},
		{name: "a crash with no cut logged: violation", want: Invalid,
			build: func(b *hb.Builder) {
				leaderCrashed(b, -1)
				roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2, 3)
				finalRead(b)
			}},
		{name: "the cut did not reach the records: violation", want: Invalid,
			build: func(b *hb.Builder) {
				leaderCrashed(b, 2)
				roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2, 3)
				finalRead(b)
			}},
		{name: "a new election from an ISR that held the records: violation", want: Invalid,
			build: func(b *hb.Builder) {
				leaderCrashed(b, 0)
				b.State(tp0, 2, 2, 1, 11, 2, 3)
				roleEv(b, 2, history.RoleLeader, 2, 2, 2, 3)
				finalRead(b)
			}},
		{name: "the crashed broker was a follower: violation", want: Invalid,
			build: func(b *hb.Builder) {
				b.State(tp0, 2, 1, 1, 10, 2, 1, 3)
				produceOK(b, 1, "a", 0)
				produceOK(b, 2, "b", 1)
				crashUnflushed(b, "f1", "n1")
				cutLog(b, 1, 2, 0)
				b.Start(1)
				restart(b, "f1", "n1")
				roleEv(b, 1, history.RoleFollower, 2, 1, 2, 1, 3)
				finalRead(b)
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := verdictOf(t, Durability{}, c.build, c.want)
			if c.want == Invalid {
				if len(r.Known) != 0 {
					t.Errorf("known anomalies %+v, want none", r.Known)
				}
				return
			}
			if len(r.Known) != 1 || r.Known[0].Name != KnownLostUnflushedLeader {
				t.Fatalf("known anomalies %+v, want %s", r.Known, KnownLostUnflushedLeader)
			}
			for _, want := range c.explain {
				if !strings.Contains(r.Known[0].Example, want) {
					t.Errorf("%q does not say %q", r.Known[0].Example, want)
				}
			}
		})
	}
}

// The producer-state checker names a client's new producer epoch forced by
// a leader whose producer state went with the log crash-lose-unflushed cut
// below the acknowledged batch, and keeps it a violation when the cut did
// not reach that batch.
func TestProducerContinuityUnflushedLeader(t *testing.T) {
	// Broker 1 leads t-0 at epoch 1 and commits p0-1 at offset 4, is cut
	// to cutTo, restarts and leads at epoch 1 again, where process 0's
	// next produce lands under producer epoch 1.
	build := func(cutTo int64) func(b *hb.Builder) []int {
		return func(b *hb.Builder) []int {
			b.State(tp0, 1, 1, 1, 10, 1, 2, 3)
			roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2, 3)
			idemInvoke(b, 0, "p0-1")
			app := pAppend(b, 1, 4, 4, 1, pbatch(7, 0), "p0-1")
			pAck(b, 1, 4, 4, 1)
			ok := idemDone(b, 0, "p0-1", history.OpOK, 4, 0)
			idemInvoke(b, 0, "p0-2")
			crashUnflushed(b, "f1", "n1")
			cutLog(b, 1, 8, cutTo)
			b.Start(1)
			restart(b, "f1", "n1")
			pb := pbatch(7, 0)
			pb.Epoch = 1
			again := pAppend(b, 1, cutTo, cutTo, 1, pb, "p0-2")
			roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2, 3)
			idemDone(b, 0, "p0-2", history.OpOK, cutTo, 0)
			return []int{app, ok, again}
		}
	}
	runCases(t, ProducerContinuity{}, []tcase{
		{name: "the restarted leader lost the committed batch", want: Valid, explain: KnownLostUnflushedLeader, build: func(b *hb.Builder) []int {
			build(2)(b)
			return nil
		}},
		{name: "the cut left the committed batch", want: Invalid, explain: "appended under a new producer id 7 (epoch 1)", build: build(5)},
	})
}

// The truncation checker names a follower's cut to the log end of a leader
// that crash-lose-unflushed cut and that led again at the same leader
// epoch (the follower, already at that epoch, fetched past its end and
// truncated to it), and keeps the cut a violation without that crash.
func TestFollowerTruncationUnflushedLeader(t *testing.T) {
	// truncFirst logs the follower's truncation before the restarted
	// leader's role change: the leader acts on its LeaderAndIsr, and
	// answers the follower, before it logs the change. early puts the
	// truncation before the leader's restart. nextFirst has a new
	// controller write the next epoch, leader still broker 1, before the
	// restarted broker logs the role change at its old epoch that it acted
	// on first.
	type variant struct{ crash, truncFirst, early, nextFirst bool }
	build := func(v variant) func(b *hb.Builder) []int {
		return func(b *hb.Builder) []int {
			b.State(tp0, 1, 1, 1, 10, 1, 2, 3)
			roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2, 3)
			roleEv(b, 2, history.RoleFollower, 1, 1, 1, 2, 3)
			hw := hwEv(b, 2, 0, 188, 1, 200)
			if v.crash {
				crashUnflushed(b, "f1", "n1")
				cutLog(b, 1, 200, 0)
			}
			var tr int
			if v.early {
				tr = truncEv(b, 2, 200, 0, 1, "leader-epoch (leader's end offset 0 for epoch 1, ours 200)")
			}
			b.Start(1)
			if v.crash {
				restart(b, "f1", "n1")
			}
			if v.truncFirst {
				tr = truncEv(b, 2, 200, 0, 1, "leader-epoch (leader's end offset 0 for epoch 1, ours 200)")
			}
			if v.nextFirst {
				b.State(tp0, 1, 2, 2, 11, 1, 2, 3)
			}
			roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2, 3)
			if v.nextFirst {
				roleEv(b, 1, history.RoleLeader, 1, 2, 1, 2, 3)
			}
			if !v.truncFirst && !v.early {
				tr = truncEv(b, 2, 200, 0, 1, "offset-out-of-range (leader's log end offset 0)")
			}
			return []int{hw, tr}
		}
	}
	known := func(v variant) func(b *hb.Builder) []int {
		return func(b *hb.Builder) []int {
			build(v)(b)
			return nil
		}
	}
	runCases(t, FollowerTruncation{}, []tcase{
		{name: "the restarted leader was cut and leads at its epoch again", want: Valid, explain: KnownLostUnflushedLeader, build: known(variant{crash: true})},
		{name: "the follower's truncation is logged before the restarted leader's role change", want: Valid, explain: KnownLostUnflushedLeader,
			build: known(variant{crash: true, truncFirst: true})},
		{name: "a new controller's write of the next epoch is logged before the role change at the old one", want: Valid, explain: KnownLostUnflushedLeader,
			build: known(variant{crash: true, truncFirst: true, nextFirst: true})},
		{name: "the next epoch logged first, without the crash", want: Invalid, explain: "truncated t-0 from 200 to 0", build: build(variant{truncFirst: true, nextFirst: true})},
		{name: "the leader restarted without losing its log", want: Invalid, explain: "truncated t-0 from 200 to 0", build: build(variant{})},
		{name: "the follower truncated before the cut leader's restart", want: Invalid, explain: "truncated t-0 from 200 to 0", build: build(variant{crash: true, early: true})},
	})
}

// wantFinding checks r's verdict and that what it says contains explain
// (event times aside): the explanation, or for a valid r with known set
// the example of its one known anomaly, which must be named known.
func wantFinding(t *testing.T, r Result, want Verdict, known, explain string) {
	t.Helper()
	if r.Verdict != want {
		t.Fatalf("verdict %s, want %s: %s", r.Verdict, want, r.Explanation)
	}
	text := r.Explanation
	if want == Valid && known != "" {
		if len(r.Known) != 1 || r.Known[0].Name != known {
			t.Fatalf("known anomalies %+v, want %s", r.Known, known)
		}
		text = r.Known[0].Example
	}
	if !strings.Contains(eventTimes.ReplaceAllString(text, ""), eventTimes.ReplaceAllString(explain, "")) {
		t.Errorf("%q does not say %q", text, explain)
	}
}

// tcut records the nemesis's cut of node's t-0 log by crash-lose-unflushed.
func tcut(b *hb.Builder, node int32, from, to int64) int {
	return b.Add(history.Event{Kind: history.KindTruncation, Source: "nemesis", Node: node, Truncation: &history.Truncation{
		Topic: "t", Partition: 0, From: from, To: to, Reason: history.TruncationUnflushedLoss}})
}

// Broker 1 leads t-0 at leader epoch 2 and appends offsets 0-28; broker 2
// fetches them, then crash-lose-unflushed cuts its log to 0. Broker 1,
// re-elected at epoch 3 with ISR [1 2], moves its high watermark to 29 on
// broker 2's fetch from before the crash (Partition.makeLeader keeps a
// follower's fetch state unless the leader is new) and acknowledges offset
// 28 only then. Broker 3 later leads at epoch 19 with a log of its own and
// takes broker 2 in: that acknowledgement does not put offset 28 of epoch
// 2 in broker 2's cut log. A cut before the leader's election, or a member
// taken back into the ISR after the cut and before the acknowledgement,
// leave the acknowledgement counting and the divergence a violation.
func TestISRDivergentUnflushedStaleAck(t *testing.T) {
	story := func(b *hb.Builder, cutFirst, rejoin bool) (ack, join int) {
		started(b, 1, 2, 3)
		if cutFirst {
			crashUnflushed(b, "f1", "n2")
			tcut(b, 2, 29, 0)
			b.Start(2)
			restart(b, "f1", "n2")
		}
		roleISR(b, 1, history.RoleLeader, 1, 2, 1, 2, 3)
		roleISR(b, 2, history.RoleFollower, 1, 2, 1, 2, 3)
		appendEv(b, history.KindProduceAppend, 1, 2, 0, 28)
		if !cutFirst {
			crashUnflushed(b, "f1", "n2")
			tcut(b, 2, 29, 0)
			b.Start(2)
			restart(b, "f1", "n2")
		}
		if rejoin {
			isrChange(b, 1, history.ISRShrink, 2, []int32{1, 2, 3}, []int32{1, 3})
			isrChange(b, 1, history.ISRExpand, 2, []int32{1, 3}, []int32{1, 2, 3})
		}
		hwMove(b, 1, 0, 29, 3) // under the ISR of epoch 3, before its role change is logged
		ack = appendEv(b, history.KindProduceAck, 1, 2, 0, 28)
		roleISR(b, 1, history.RoleLeader, 1, 3, 1, 2)
		roleISR(b, 3, history.RoleLeader, 3, 19, 3)
		appendEv(b, history.KindProduceAppend, 3, 19, 0, 30)
		hwMove(b, 3, 0, 31, 19)
		roleISR(b, 2, history.RoleFollower, 3, 19, 3)
		join = isrChange(b, 3, history.ISRExpand, 19, []int32{3}, []int32{2, 3})
		return ack, join
	}
	runCases(t, ISR{}, []tcase{
		{name: "acknowledged on a fetch from before the member's crash", want: Valid, build: func(b *hb.Builder) []int {
			story(b, false, false)
			return nil
		}},
		{name: "the member cut before the leader's election", want: Invalid,
			explain: "broker 3, leader of t-0 at leader epoch 19, took broker 2 into its ISR with its high watermark at 31", build: func(b *hb.Builder) []int {
				ack, join := story(b, true, false)
				return []int{ack, join}
			}},
		{name: "the member taken back in after the cut", want: Invalid,
			explain: "broker 2 held offset 0 from leader epoch 2 (broker 1 acknowledged it at event", build: func(b *hb.Builder) []int {
				ack, join := story(b, false, true)
				return []int{ack, join}
			}},
	})
}

// Broker 3 leads t-0 at leader epoch 9 with ISR [1 2 3]; broker 1 has high
// watermark 130 and checkpoints it. crash-lose-unflushed cuts broker 2's
// log from 131 to 0 and, brokers 1 and 3 down, the controller elects
// broker 2 at epoch 10 with ISR [2] (lost-unflushed-isr). Broker 1 comes
// back and follows broker 2 at epoch 11, writes its restored high
// watermark to its checkpoint again, but is killed before its fetcher
// truncates; broker 3 truncates to broker 2's log and rejoins, and broker
// 2, leading without a break, is at epoch 12 with ISR [2 3] when broker 1,
// back again, truncates from 131 to 0: its log is still from before the
// election, and broker 2's is the cut one. The same truncation is a
// violation when no crash cut broker 2's log, when broker 1's high
// watermark was set under broker 2's leadership after the election, or
// when broker 3, which kept the records, led in between.
func TestFollowerTruncationUnflushedLeaderSinceCut(t *testing.T) {
	type variant struct{ crash, hwAfter, keeperBetween bool }
	// story returns broker 1's checkpoint write that its last process
	// restored and its last truncation.
	story := func(b *hb.Builder, v variant) (ckpt, tr int) {
		b.State(tp0, 3, 9, 1, 10, 1, 2, 3)
		roleEv(b, 1, history.RoleFollower, 3, 9, 1, 2, 3)
		hwEv(b, 1, 0, 130, 9, 131)
		hwEv(b, 2, 0, 130, 9, 131)
		checkpoint(b, 1, nil, cpe(0, 130))
		if v.crash {
			crashUnflushed(b, "f1", "n2")
			cutLog(b, 2, 131, 0)
		}
		b.Start(2)
		if v.crash {
			restart(b, "f1", "n2")
		}
		b.State(tp0, 2, 10, 1, 11, 2)
		roleEv(b, 2, history.RoleLeader, 2, 10, 2)
		b.Start(1)
		if v.hwAfter {
			roleEv(b, 1, history.RoleFollower, 2, 10, 2)
			truncEv(b, 1, 131, 0, 10, "leader-epoch (leader's end offset 0 for epoch 9, ours 131)")
			hwEv(b, 1, 0, 130, 10, 131)
		}
		b.State(tp0, 2, 11, 1, 12, 2)
		roleEv(b, 1, history.RoleFollower, 2, 11, 2)
		ckpt = checkpoint(b, 1, nil, cpe(0, 130)) // the value it holds, written again
		b.Start(3)
		roleEv(b, 3, history.RoleFollower, 2, 11, 2)
		if !v.keeperBetween {
			truncEv(b, 3, 131, 0, 11, "leader-epoch (leader's end offset 0 for epoch 9, ours 131)")
		}
		b.Add(history.Event{Kind: history.KindISRChange, Node: 2, ISR: &history.ISRChange{Topic: "t", Partition: 0,
			Action: history.ISRExpand, Old: []int32{2}, New: []int32{2, 3}, LeaderEpoch: 11, Outcome: history.ZKOK}})
		if v.keeperBetween {
			b.State(tp0, 3, 12, 1, 13, 3, 2)
			b.State(tp0, 2, 13, 1, 14, 2, 3)
		} else {
			b.State(tp0, 2, 12, 1, 13, 2, 3)
		}
		b.Start(1)
		epoch := int32(12)
		if v.keeperBetween {
			epoch = 13
		}
		roleEv(b, 1, history.RoleFollower, 2, epoch, 2, 3)
		tr = truncEv(b, 1, 131, 0, epoch, "leader-epoch (leader's end offset 0 for epoch 9, ours 131)")
		return ckpt, tr
	}
	build := func(v variant) func(b *hb.Builder) []int {
		return func(b *hb.Builder) []int {
			ckpt, tr := story(b, v)
			return []int{ckpt, tr}
		}
	}
	runCases(t, FollowerTruncation{}, []tcase{
		{name: "the leader's own cut log, led without a break since its exposed election", want: Valid,
			explain: KnownLostUnflushedISR, build: func(b *hb.Builder) []int {
				story(b, variant{crash: true})
				return nil
			}},
		{name: "no crash cut the leader's log", want: Invalid, explain: "truncated t-0 from 131 to 0", build: build(variant{})},
		{name: "the follower's high watermark was set under the exposed leader", want: Invalid,
			explain: "truncated t-0 from 131 to 0", build: build(variant{crash: true, hwAfter: true})},
		// Broker 3, which led at epoch 12 between the two leaderships of
		// broker 2, had truncated to 0 under broker 2 at epoch 11: its
		// leadership descends from the exposed election, so the follower's
		// cut is that election's loss however many leaders came between.
		{name: "a replica that had truncated under the exposed leader led in between", want: Valid, explain: KnownLostUnflushedISR,
			build: func(b *hb.Builder) []int {
				story(b, variant{crash: true, keeperBetween: true})
				return nil
			}},
	})
}

// The producer-state checker counts a quorum loss's leadership from its
// broker's restart: the restarted broker acts on its LeaderAndIsr, and
// appends the client's next batch under its new producer epoch, before
// its role change or the state is logged. Brokers 1 and 2 lead and follow
// t-0 at leader epoch 1 and commit p0-1 at offset 4; crash-lose-unflushed
// cuts both logs to 2; broker 2, started again, appends p0-2 at offset 2
// under producer epoch 1 at leader epoch 2, then the state electing it and
// its role change are logged. Without the crashes, or with broker 2 cut
// above the batch, the new producer epoch is a violation.
func TestProducerContinuityUnflushedQuorumAppendFirst(t *testing.T) {
	type variant struct {
		crash bool
		cutTo int64
	}
	build := func(v variant) func(b *hb.Builder) []int {
		return func(b *hb.Builder) []int {
			b.State(tp0, 1, 1, 1, 10, 1, 2)
			roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2)
			idemInvoke(b, 0, "p0-1")
			app := pAppend(b, 1, 4, 4, 1, pbatch(7, 0), "p0-1")
			pAck(b, 1, 4, 4, 1)
			ok := idemDone(b, 0, "p0-1", history.OpOK, 4, 0)
			idemInvoke(b, 0, "p0-2")
			if v.crash {
				crashUnflushed(b, "f1", "n1")
				crashUnflushed(b, "f2", "n2")
				cutLog(b, 1, 8, 2)
				cutLog(b, 2, 8, v.cutTo)
			}
			b.Start(2)
			if v.crash {
				restart(b, "f2", "n2")
			}
			pb := pbatch(7, 0)
			pb.Epoch = 1
			again := pAppend(b, 2, 2, 2, 2, pb, "p0-2")
			b.State(tp0, 2, 2, 1, 11, 2)
			roleEv(b, 2, history.RoleLeader, 2, 2, 2)
			idemDone(b, 0, "p0-2", history.OpOK, 2, 0)
			return []int{app, ok, again}
		}
	}
	runCases(t, ProducerContinuity{}, []tcase{
		{name: "a quorum lost the batch and the restarted broker appended before its election was logged", want: Valid,
			explain: KnownLostUnflushedQuorum, build: func(b *hb.Builder) []int {
				build(variant{crash: true, cutTo: 2})(b)
				return nil
			}},
		{name: "no crash", want: Invalid, explain: "appended under a new producer id 7 (epoch 1)", build: build(variant{})},
		{name: "the new leader's cut left the batch", want: Invalid, explain: "appended under a new producer id 7 (epoch 1)", build: build(variant{crash: true, cutTo: 6})},
	})
}

// A loss's leadership counts from its broker's restart only once the
// loss's crashes have all happened: a crash after what a checker judges
// explains nothing of it. Broker 2 leads t-0 at leader epoch 1 with ISR
// [1 2 3]; crash-lose-unflushed cuts broker 1's log from 200 to 0; broker
// 1, started again, is elected at epoch 2 with ISR [1 2 3], and broker 3,
// whose high watermark was 188, truncates to 0 under it: brokers 2 and 3
// kept the records, so that is a violation. Only afterwards does
// crash-lose-unflushed hit broker 2 too, and broker 1, still leading at
// epoch 2 (a quorum of exposed replicas, one leading), shrinks its ISR to
// itself: that quorum loss came after the truncation.
func TestFollowerTruncationUnflushedLaterCrash(t *testing.T) {
	// story is broker 1's exposed election and broker 3's truncation under
	// it; later runs after it.
	story := func(later func(b *hb.Builder)) func(b *hb.Builder) []int {
		return func(b *hb.Builder) []int {
			b.State(tp0, 2, 1, 1, 10, 1, 2, 3)
			hw := hwEv(b, 3, 0, 188, 1, 200)
			crashUnflushed(b, "f1", "n1")
			cutLog(b, 1, 200, 0)
			b.Start(1)
			restart(b, "f1", "n1")
			b.State(tp0, 1, 2, 1, 11, 1, 2, 3)
			tr := truncEv(b, 3, 200, 0, 2, "leader-epoch (leader's end offset 0 for epoch 1, ours 200)")
			roleEv(b, 1, history.RoleLeader, 1, 2, 1, 2, 3)
			later(b)
			return []int{hw, tr}
		}
	}
	runCases(t, FollowerTruncation{}, []tcase{
		{name: "the second crash came after the truncation", want: Invalid, explain: "truncated t-0 from 200 to 0", build: story(func(b *hb.Builder) {
			crashUnflushed(b, "f2", "n2")
			cutLog(b, 2, 200, 0)
			b.State(tp0, 1, 2, 1, 12, 1)
		})},
		// Broker 1's ISR shrink to itself at the same leader epoch is no
		// election: the ISR it was elected with held brokers 2 and 3,
		// which kept the records.
		{name: "the exposed leader later shrank its ISR to itself", want: Invalid, explain: "truncated t-0 from 200 to 0", build: story(func(b *hb.Builder) {
			b.State(tp0, 1, 2, 1, 12, 1)
		})},
	})
}

// A quorum loss needs a leadership that began while the quorum was
// exposed: a broker elected after its own crash from an ISR that kept the
// records is not excused when another member's crash later makes a quorum
// of exposed replicas, whether the state at its epoch is logged before or
// after what the ISR checker judges. Brokers 1-3 replicate t-0; broker 1
// leads at epoch 1 and appends 5-7 uncommitted; crash-lose-unflushed hits
// broker 2, which restarts and is elected at epoch 2 with ISR [2 3],
// appends 5-9 and takes broker 1 in while broker 1 still holds its own
// 5-7. With broker 3 crashed too before the election it is the quorum's
// known anomaly; with broker 3 crashed only after the role change it is a
// violation.
func TestISRDivergentUnflushedQuorumAfterElection(t *testing.T) {
	type variant struct{ thirdFirst, stateBeforeJoin bool }
	story := func(v variant) func(b *hb.Builder) []int {
		return func(b *hb.Builder) []int {
			started(b, 1, 2, 3)
			roleISR(b, 1, history.RoleLeader, 1, 1, 1, 2, 3)
			roleISR(b, 2, history.RoleFollower, 1, 1, 1, 2, 3)
			roleISR(b, 3, history.RoleFollower, 1, 1, 1, 2, 3)
			appendEv(b, history.KindProduceAppend, 1, 1, 0, 4)
			hwMove(b, 1, 0, 5, 1)
			hwMove(b, 2, 0, 5, 1)
			appendEv(b, history.KindProduceAppend, 1, 1, 5, 7)
			crashUnflushed(b, "f2", "n2")
			if v.thirdFirst {
				crashUnflushed(b, "f3", "n3")
			}
			b.Start(2)
			roleISR(b, 2, history.RoleLeader, 2, 2, 2, 3)
			appendEv(b, history.KindProduceAppend, 2, 2, 5, 9)
			hwMove(b, 2, 5, 10, 2)
			roleISR(b, 1, history.RoleFollower, 2, 2, 2, 3)
			if !v.thirdFirst {
				crashUnflushed(b, "f3", "n3")
			}
			if v.stateBeforeJoin {
				b.State(tp0, 2, 2, 1, 11, 2, 3)
			}
			join := isrChange(b, 2, history.ISRExpand, 2, []int32{2, 3}, []int32{1, 2, 3})
			if !v.stateBeforeJoin {
				b.State(tp0, 2, 2, 1, 11, 1, 2, 3)
			}
			return []int{join}
		}
	}
	runCases(t, ISR{}, []tcase{
		{name: "both crashed before the election", want: Valid, explain: KnownLostUnflushedQuorum, build: func(b *hb.Builder) []int {
			story(variant{thirdFirst: true})(b)
			return nil
		}},
		{name: "the third crashed after the election, the state logged after the join", want: Invalid, explain: "took broker 1 into its ISR", build: story(variant{})},
		{name: "the third crashed after the election, the state logged before the join", want: Invalid, explain: "took broker 1 into its ISR", build: story(variant{stateBeforeJoin: true})},
	})
}

// A follower's cut under a leader descended from an exposed election is
// that election's loss only when every leader since descends from it: a
// replica that kept the records (it never followed the exposed leader)
// and led in between gave them back to whoever followed it. Broker 3
// leads t-0 at leader epoch 9 and broker 1 holds high watermark 130;
// crash-lose-unflushed cuts broker 2's log from 131 to 0 and the
// controller elects it at epoch 10 with ISR [2] (lost-unflushed-isr).
// Broker 3 then leads at epoch 11, and broker 2 follows it; broker 2 leads
// again at epoch 12, and broker 1, down since epoch 9, truncates from 131
// to 0 under it. When broker 3 had truncated under broker 2 at epoch 10
// and been taken into its ISR, its leadership descends from the exposed
// election and the cut is that known anomaly; when it never followed
// broker 2, it held the records and the cut is a violation.
func TestFollowerTruncationUnflushedKeeperLedBetween(t *testing.T) {
	// underThird has broker 1 truncate under broker 3 at epoch 11, the
	// broker that may have kept the records leading at the follower's
	// own epoch, instead of under broker 2 at epoch 12.
	type variant struct{ descends, underThird bool }
	story := func(v variant) func(b *hb.Builder) []int {
		return func(b *hb.Builder) []int {
			b.State(tp0, 3, 9, 1, 10, 1, 2, 3)
			roleEv(b, 1, history.RoleFollower, 3, 9, 1, 2, 3)
			hwEv(b, 1, 0, 130, 9, 131)
			ckpt := checkpoint(b, 1, nil, cpe(0, 130))
			crashUnflushed(b, "f1", "n2")
			cutLog(b, 2, 131, 0)
			b.Start(2)
			restart(b, "f1", "n2")
			if v.underThird && !v.descends {
				// Elected ahead of broker 3, which the controller still
				// listed in the ISR while it was down, so that broker 3
				// is elected cleanly at epoch 11 without having followed.
				stateAssigned(b, tp0, 2, 10, []int32{2, 3, 1}, 2, 3)
				b.State(tp0, 2, 10, 1, 11, 2, 3)
				roleEv(b, 2, history.RoleLeader, 2, 10, 2, 3)
			} else {
				b.State(tp0, 2, 10, 1, 11, 2)
				roleEv(b, 2, history.RoleLeader, 2, 10, 2)
			}
			b.Start(3)
			if v.descends {
				roleEv(b, 3, history.RoleFollower, 2, 10, 2)
				truncEv(b, 3, 131, 0, 10, "leader-epoch (leader's end offset 0 for epoch 9, ours 131)")
				b.Add(history.Event{Kind: history.KindISRChange, Node: 2, ISR: &history.ISRChange{Topic: "t", Partition: 0,
					Action: history.ISRExpand, Old: []int32{2}, New: []int32{2, 3}, LeaderEpoch: 10, Outcome: history.ZKOK}})
				b.State(tp0, 2, 10, 1, 12, 2, 3)
			}
			b.State(tp0, 3, 11, 1, 13, 3, 2)
			roleEv(b, 3, history.RoleLeader, 3, 11, 3, 2)
			epoch, leader := int32(11), int32(3)
			if !v.underThird {
				roleEv(b, 2, history.RoleFollower, 3, 11, 3, 2)
				b.State(tp0, 2, 12, 1, 14, 2, 3)
				roleEv(b, 2, history.RoleLeader, 2, 12, 2, 3)
				epoch, leader = 12, 2
			}
			b.Start(1)
			roleEv(b, 1, history.RoleFollower, leader, epoch, 2, 3)
			tr := truncEv(b, 1, 131, 0, epoch, "leader-epoch (leader's end offset 0 for epoch 9, ours 131)")
			return []int{ckpt, tr}
		}
	}
	known := func(v variant) func(b *hb.Builder) []int {
		return func(b *hb.Builder) []int {
			story(v)(b)
			return nil
		}
	}
	runCases(t, FollowerTruncation{}, []tcase{
		{name: "the leader in between had followed the exposed leader", want: Valid, explain: KnownLostUnflushedISR, build: known(variant{descends: true})},
		{name: "the leader in between kept the records", want: Invalid, explain: "truncated t-0 from 131 to 0", build: story(variant{})},
		{name: "the follower's own leader had followed the exposed leader", want: Valid, explain: KnownLostUnflushedISR,
			build: known(variant{descends: true, underThird: true})},
		{name: "the follower's own leader kept the records", want: Invalid, explain: "truncated t-0 from 131 to 0", build: story(variant{underThird: true})},
	})
}

// An offset read with two values across an exposed election is that
// election's loss when the first value was written before the crash,
// although it was read only after it (from a replica that kept it, before
// the exposed broker led). The shape of an every-fix-on run of
// crash-lose-unflushed, bounce-node and kill-node: broker 1 leads chaos-0
// at leader epoch 2 with ISR [1 2 3] and holds "p2-246" at offset 0;
// crash-lose-unflushed cuts broker 2's log from 3 to 0; a read from broker
// 1 still sees "p2-246"; with brokers 1 and 3 down the controller elects
// broker 2 at epoch 3 with ISR [2] (lost-unflushed-isr), which writes
// "p19-491" at offset 0. The first value written after the crash, the
// first read after the exposed election, or no crash, leave the two values
// a violation.
func TestDurabilityUnflushedReadAfterCrash(t *testing.T) {
	type variant struct {
		crash, acked, writtenAfter, readAfterElection bool
	}
	build := func(v variant) func(b *hb.Builder) {
		return func(b *hb.Builder) {
			b.State(tp0, 1, 2, 1, 10, 1, 2, 3)
			write := func() {
				if v.acked {
					produceOK(b, 2, "p2-246", 0)
					return
				}
				b.Produce(2, tp0, "p2-246")
				b.Complete(2, history.OpInfo, tp0, history.FProduce, -1)
			}
			if !v.writtenAfter {
				write()
			}
			if v.crash {
				crashUnflushed(b, "f2", "n2")
				cutLog(b, 2, 3, 0)
			}
			b.Start(2)
			if v.crash {
				restart(b, "f2", "n2")
			}
			if v.writtenAfter {
				write()
			}
			read := func() { b.ReadBack(5, tp0, 0, false, hb.Rec(0, "p2-246")) }
			if !v.readAfterElection {
				read()
			}
			b.State(tp0, 2, 3, 1, 11, 2)
			roleEv(b, 2, history.RoleLeader, 2, 3, 2)
			if v.readAfterElection {
				read()
			}
			produceOK(b, 19, "p19-491", 0)
			finalRead(b, hb.Rec(0, "p19-491"))
		}
	}
	cases := []struct {
		name string
		v    variant
		want Verdict
	}{
		{"unacknowledged, read after the crash and before the exposed election: known anomaly", variant{crash: true}, Valid},
		{"acknowledged, read after the crash and before the exposed election: known anomaly", variant{crash: true, acked: true}, Valid},
		{"no crash: violation", variant{}, Invalid},
		{"written after the crash: violation", variant{crash: true, writtenAfter: true}, Invalid},
		{"read after the exposed election: violation", variant{crash: true, readAfterElection: true}, Invalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := verdictOf(t, Durability{}, build(c.v), c.want)
			if c.want == Invalid {
				if !strings.Contains(r.Explanation, `offset 0 of t-0 was read with two values: "p2-246"`) {
					t.Errorf("explanation %q does not name the two values", r.Explanation)
				}
				return
			}
			if len(r.Known) != 1 || r.Known[0].Name != KnownLostUnflushedISR {
				t.Fatalf("known anomalies %+v, want %s", r.Known, KnownLostUnflushedISR)
			}
			for _, want := range []string{`had lost it with its unflushed suffix after "p2-246" was written (its produce invoked at +`, "and the exposed broker led after the first read",
				"broker 2 crashed at", "broker 2 led at leader epoch 3 elected with ISR [2]"} {
				if !strings.Contains(r.Known[0].Example, want) {
					t.Errorf("%q does not say %q", r.Known[0].Example, want)
				}
			}
		})
	}
}

// A state naming a down broker leader is no leading: a quorum that forms
// before the broker restarts and leads at that epoch is the loss. Broker 3
// leads chaos-0 at leader epoch 7 with ISR [1 2 3] (broker 1's high
// watermark 425); crash-lose-unflushed cuts broker 3's log from 429 to 0
// while it is down; a controller that has not seen broker 3's session end
// removes the killed broker 1 from the ISR (broker 3, epoch 8, ISR [2 3]);
// crash-lose-unflushed then cuts broker 2's log; broker 3, started again,
// leads at epoch 8 and broker 1 truncates from 429 to 0 under it
// (lost-unflushed-quorum). With broker 3 started and leading at epoch 8
// before broker 2's crash, it was elected with broker 2 keeping the
// records: a violation.
func TestFollowerTruncationUnflushedQuorumStateWhileDown(t *testing.T) {
	story := func(ledFirst bool) func(b *hb.Builder) []int {
		return func(b *hb.Builder) []int {
			b.State(tp0, 3, 7, 1, 10, 1, 2, 3)
			hwEv(b, 1, 0, 425, 7, 429)
			hw := checkpoint(b, 1, nil, cpe(0, 425))
			crashUnflushed(b, "f3", "n3")
			cutLog(b, 3, 429, 0)
			b.Fault(true, "k1", "kill", "n1")
			b.State(tp0, 3, 8, 1, 11, 2, 3)
			if ledFirst {
				b.Start(3)
				roleEv(b, 3, history.RoleLeader, 3, 8, 2, 3)
			}
			crashUnflushed(b, "f2", "n2")
			cutLog(b, 2, 425, 0)
			if !ledFirst {
				b.Start(3)
			}
			b.Start(1)
			tr := truncEv(b, 1, 429, 0, 8, "leader-epoch (leader's end offset 0 for epoch 7, ours 429)")
			roleEv(b, 1, history.RoleFollower, 3, 8, 2, 3)
			if !ledFirst {
				roleEv(b, 3, history.RoleLeader, 3, 8, 2, 3)
			}
			return []int{hw, tr}
		}
	}
	runCases(t, FollowerTruncation{}, []tcase{
		{name: "the state was written while the leader was down", want: Valid, explain: KnownLostUnflushedQuorum, build: func(b *hb.Builder) []int {
			story(false)(b)
			return nil
		}},
		{name: "the restarted leader led before the second crash", want: Invalid, explain: "truncated t-0 from 429 to 0", build: story(true)},
	})
}

// The follower's high watermark need predate only the exposed election of
// the crash of the loss's own leader, and a broker that led since its own
// crash is exposed no more: it holds what it wrote. The shape of an
// every-fix-on run of crash-lose-unflushed, bounce-node and kill-node
// (seed 8, chaos-1): crash-lose-unflushed cuts broker 3's log, which is
// elected at leader epoch 8 with ISR [3] and refills it; broker 1 follows
// and reaches high watermark 300; broker 1 leads at epoch 10;
// crash-lose-unflushed cuts broker 2's log from 368 to 0 and broker 2 is
// elected at epoch 13 with ISR [2] (lost-unflushed-isr: broker 3, never
// taken back into an ISR but leading since its crash, is no exposed
// replica of it); broker 3 truncates under broker 2 and is taken into its
// ISR, leads at epoch 14, and broker 1, down since epoch 10, truncates
// from 368 to 0 under it. Without broker 2's crash, or with broker 2
// elected from ISR [2 3] (broker 3 kept what it wrote), the cut is a
// violation.
func TestFollowerTruncationUnflushedStaleQuorumExposure(t *testing.T) {
	type variant struct{ crash2, keeperInISR bool }
	story := func(v variant) func(b *hb.Builder) []int {
		return func(b *hb.Builder) []int {
			b.State(tp0, 3, 7, 1, 10, 1, 2, 3)
			crashUnflushed(b, "f3", "n3")
			cutLog(b, 3, 453, 0)
			b.Start(3)
			restart(b, "f3", "n3")
			b.State(tp0, 3, 8, 1, 11, 3)
			roleEv(b, 3, history.RoleLeader, 3, 8, 3)
			roleEv(b, 1, history.RoleFollower, 3, 8, 3)
			truncEv(b, 1, 453, 0, 8, "leader-epoch (leader's end offset 0 for epoch 7, ours 453)")
			roleEv(b, 2, history.RoleFollower, 3, 8, 3)
			truncEv(b, 2, 449, 0, 8, "leader-epoch (leader's end offset 0 for epoch 7, ours 449)")
			b.Add(history.Event{Kind: history.KindISRChange, Node: 3, ISR: &history.ISRChange{Topic: "t", Partition: 0,
				Action: history.ISRExpand, Old: []int32{3}, New: []int32{1, 2, 3}, LeaderEpoch: 8, Outcome: history.ZKOK}})
			b.State(tp0, 3, 8, 1, 12, 1, 2, 3)
			hwEv(b, 1, 0, 300, 8, 368)
			ckpt := checkpoint(b, 1, nil, cpe(0, 300))
			b.State(tp0, 1, 10, 1, 13, 1, 2)
			roleEv(b, 1, history.RoleLeader, 1, 10, 1, 2)
			hwEv(b, 1, 300, 300, 10, 368)
			if v.crash2 {
				crashUnflushed(b, "f2", "n2")
				cutLog(b, 2, 368, 0)
			}
			b.Start(2)
			if v.crash2 {
				restart(b, "f2", "n2")
			}
			isr := []int32{2}
			if v.keeperInISR {
				isr = []int32{2, 3}
			}
			b.State(tp0, 2, 13, 1, 14, isr...)
			roleEv(b, 2, history.RoleLeader, 2, 13, isr...)
			b.Start(3)
			roleEv(b, 3, history.RoleFollower, 2, 13, 2)
			truncEv(b, 3, 368, 0, 13, "leader-epoch (leader's end offset 0 for epoch 8, ours 368)")
			b.Add(history.Event{Kind: history.KindISRChange, Node: 2, ISR: &history.ISRChange{Topic: "t", Partition: 0,
				Action: history.ISRExpand, Old: []int32{2}, New: []int32{2, 3}, LeaderEpoch: 13, Outcome: history.ZKOK}})
			b.State(tp0, 2, 13, 1, 15, 2, 3)
			b.State(tp0, 3, 14, 1, 16, 2, 3)
			roleEv(b, 3, history.RoleLeader, 3, 14, 2, 3)
			b.Start(1)
			roleEv(b, 1, history.RoleFollower, 3, 14, 2, 3)
			tr := truncEv(b, 1, 368, 0, 14, "leader-epoch (leader's end offset 0 for epoch 8, ours 368)")
			return []int{ckpt, tr}
		}
	}
	runCases(t, FollowerTruncation{}, []tcase{
		{name: "broker 2's crash took the records broker 3 wrote after its own", want: Valid, explain: KnownLostUnflushedISR + " ×1", build: func(b *hb.Builder) []int {
			story(variant{crash2: true})(b)
			return nil
		}},
		{name: "no crash of broker 2", want: Invalid, explain: "truncated t-0 from 368 to 0", build: story(variant{})},
		{name: "broker 2 elected with broker 3, which kept what it wrote, in its ISR", want: Invalid, explain: "truncated t-0 from 368 to 0", build: story(variant{crash2: true, keeperInISR: true})},
	})
}

// A broker crashed twice before it was taken back into an ISR is exposed
// by its second crash for what it wrote in between. The shape of an
// every-fix-on run of crash-lose-unflushed, bounce-node and kill-node
// (seed 17, chaos-0): crash-lose-unflushed cuts broker 1's log; started
// again, broker 1 leads at leader epoch 2 with ISR [1] and acknowledges
// "p206-1918" at offset 3; crash-lose-unflushed cuts its log again, from 4
// to 3, and the controller elects it at epoch 3 from ISR [1]
// (lost-unflushed-isr); it writes "p15-1814" at offset 3. Without the
// second crash the overwrite is a violation.
func TestDurabilityUnflushedSecondCrash(t *testing.T) {
	build := func(second bool) func(b *hb.Builder) {
		return func(b *hb.Builder) {
			b.State(tp0, 1, 1, 1, 10, 1, 2, 3)
			crashUnflushed(b, "f1", "n1")
			cutLog(b, 1, 9, 3)
			b.Start(1)
			restart(b, "f1", "n1")
			b.State(tp0, 1, 2, 1, 11, 1)
			roleEv(b, 1, history.RoleLeader, 1, 2, 1)
			produceOK(b, 206, "p206-1918", 3)
			if second {
				crashUnflushed(b, "f2", "n1")
				cutLog(b, 1, 4, 3)
				b.Start(1)
				restart(b, "f2", "n1")
			}
			b.State(tp0, 1, 3, 1, 12, 1)
			roleEv(b, 1, history.RoleLeader, 1, 3, 1)
			produceOK(b, 15, "p15-1814", 3)
			finalRead(b, hb.Rec(3, "p15-1814"))
		}
	}
	t.Run("the second crash cut it: known anomaly", func(t *testing.T) {
		r := verdictOf(t, Durability{}, build(true), Valid)
		if len(r.Known) != 1 || r.Known[0].Name != KnownLostUnflushedISR {
			t.Fatalf("known anomalies %+v, want %s", r.Known, KnownLostUnflushedISR)
		}
		if !strings.Contains(r.Known[0].Example, "broker 1 led at leader epoch 3 elected with ISR [1]") {
			t.Errorf("%q does not name the election at epoch 3", r.Known[0].Example)
		}
	})
	t.Run("no second crash: violation", func(t *testing.T) {
		r := verdictOf(t, Durability{}, build(false), Invalid)
		if !strings.Contains(r.Explanation, `"p206-1918"`) {
			t.Errorf("explanation %q does not name the record", r.Explanation)
		}
	})
}

// A broker that led after its restart from one crash and crashed again is
// exposed by the later crash: the loss of a leadership after it dates from
// that crash, not from the broker's first exposed election. The shape of
// an every-fix-on run of crash-lose-unflushed, bounce-node and kill-node
// (seed 21, chaos-0): crash-lose-unflushed hits brokers 2 and 3; broker 3,
// started again, leads at leader epoch 6 and brokers 1 and 2 rejoin; at
// epoch 7 broker 2 reaches high watermark 543; crash-lose-unflushed cuts
// broker 3's log from 544 to 0, then broker 1's; broker 3, started again,
// leads at epochs 8 and 9 (a quorum of exposed replicas); broker 1 follows
// it and rejoins, then leads at epoch 11, and broker 2, down since epoch
// 7, truncates from 544 to 0 under it. Without broker 3's second crash the
// cut is a violation.
func TestFollowerTruncationUnflushedCrashedAgain(t *testing.T) {
	story := func(again bool) func(b *hb.Builder) []int {
		return func(b *hb.Builder) []int {
			b.State(tp0, 3, 5, 1, 10, 1, 2, 3)
			crashUnflushed(b, "f0", "n2")
			cutLog(b, 2, 100, 0)
			crashUnflushed(b, "f1", "n3")
			cutLog(b, 3, 100, 0)
			b.Start(3)
			restart(b, "f1", "n3")
			b.State(tp0, 3, 6, 1, 11, 3)
			roleEv(b, 3, history.RoleLeader, 3, 6, 3)
			b.Start(2)
			restart(b, "f0", "n2")
			isrExpand(b, 3, 6, []int32{3}, []int32{1, 2, 3})
			b.State(tp0, 3, 6, 1, 12, 1, 2, 3)
			b.State(tp0, 3, 7, 1, 13, 1, 2, 3)
			roleEv(b, 3, history.RoleLeader, 3, 7, 1, 2, 3)
			roleEv(b, 2, history.RoleFollower, 3, 7, 1, 2, 3)
			hwEv(b, 2, 0, 543, 7, 544)
			ckpt := checkpoint(b, 2, nil, cpe(0, 543))
			if again {
				crashUnflushed(b, "f3", "n3")
				cutLog(b, 3, 544, 0)
			}
			crashUnflushed(b, "f4", "n1")
			cutLog(b, 1, 544, 0)
			b.Start(3)
			if again {
				restart(b, "f3", "n3")
			}
			b.State(tp0, 3, 8, 1, 14, 2, 3)
			roleEv(b, 3, history.RoleLeader, 3, 8, 2, 3)
			b.State(tp0, 3, 9, 1, 15, 3)
			roleEv(b, 3, history.RoleLeader, 3, 9, 3)
			b.Start(1)
			restart(b, "f4", "n1")
			roleEv(b, 1, history.RoleFollower, 3, 9, 3)
			isrExpand(b, 3, 9, []int32{3}, []int32{1, 3})
			b.State(tp0, 3, 9, 1, 16, 1, 3)
			b.State(tp0, 1, 11, 1, 17, 1)
			roleEv(b, 1, history.RoleLeader, 1, 11, 1)
			b.Start(2)
			roleEv(b, 2, history.RoleFollower, 1, 11, 1)
			tr := truncEv(b, 2, 544, 0, 11, "leader-epoch (leader's end offset 0 for epoch 7, ours 544)")
			return []int{ckpt, tr}
		}
	}
	runCases(t, FollowerTruncation{}, []tcase{
		{name: "broker 3's second crash and broker 1's made the quorum", want: Valid, explain: KnownLostUnflushedQuorum, build: func(b *hb.Builder) []int {
			story(true)(b)
			return nil
		}},
		{name: "broker 3 kept its log the second time", want: Invalid, explain: "truncated t-0 from 544 to 0", build: story(false)},
	})
}

// The follower's cut is the loss of the exposed election that took what
// it held, not of the first exposed election found between: an earlier
// re-election of the same broker from an older crash, after the follower
// reached its high watermark under it, does not explain the cut, and the
// later one does. The shape of an every-fix-on run of
// crash-lose-unflushed, bounce-node and kill-node (seed 29, chaos-0):
// broker 1, cut, is elected at leader epoch 6 with ISR [1]; broker 2
// follows it and reaches high watermark 96; broker 1 is elected again at
// epoch 7 with ISR [1]; crash-lose-unflushed cuts broker 1's log from 97
// to 0, and it is elected at epoch 8 with ISR [1]; broker 3 follows it and
// rejoins, then leads at epoch 9, and broker 2, down since epoch 7,
// truncates from 97 to 0 under it. Without the second crash the cut is a
// violation.
func TestFollowerTruncationUnflushedLaterExposedElection(t *testing.T) {
	story := func(again bool) func(b *hb.Builder) []int {
		return func(b *hb.Builder) []int {
			b.State(tp0, 1, 5, 1, 10, 1, 2, 3)
			crashUnflushed(b, "f1", "n1")
			cutLog(b, 1, 200, 0)
			b.Start(1)
			restart(b, "f1", "n1")
			b.State(tp0, 1, 6, 1, 11, 1)
			roleEv(b, 1, history.RoleLeader, 1, 6, 1)
			b.Start(2)
			roleEv(b, 2, history.RoleFollower, 1, 6, 1)
			truncEv(b, 2, 300, 0, 6, "leader-epoch (leader's end offset 0 for epoch 5, ours 300)")
			isrExpand(b, 1, 6, []int32{1}, []int32{1, 2})
			b.State(tp0, 1, 6, 1, 12, 1, 2)
			hwEv(b, 2, 0, 96, 6, 97)
			ckpt := checkpoint(b, 2, nil, cpe(0, 96))
			b.State(tp0, 1, 7, 1, 13, 1)
			roleEv(b, 1, history.RoleLeader, 1, 7, 1)
			if again {
				crashUnflushed(b, "f2", "n1")
				cutLog(b, 1, 97, 0)
			}
			b.Start(1)
			if again {
				restart(b, "f2", "n1")
			}
			b.State(tp0, 1, 8, 1, 14, 1)
			roleEv(b, 1, history.RoleLeader, 1, 8, 1)
			b.Start(3)
			roleEv(b, 3, history.RoleFollower, 1, 8, 1)
			isrExpand(b, 1, 8, []int32{1}, []int32{1, 3})
			b.State(tp0, 1, 8, 1, 15, 1, 3)
			b.State(tp0, 3, 9, 1, 16, 3)
			roleEv(b, 3, history.RoleLeader, 3, 9, 3)
			b.Start(2)
			roleEv(b, 2, history.RoleFollower, 3, 9, 3)
			tr := truncEv(b, 2, 97, 0, 9, "leader-epoch (leader's end offset 0 for epoch 6, ours 97)")
			return []int{ckpt, tr}
		}
	}
	runCases(t, FollowerTruncation{}, []tcase{
		{name: "the second crash took what the follower held", want: Valid, explain: KnownLostUnflushedISR, build: func(b *hb.Builder) []int {
			story(true)(b)
			return nil
		}},
		{name: "no second crash", want: Invalid, explain: "truncated t-0 from 97 to 0", build: story(false)},
	})
}

// A member whose log differs from its leader's below the high watermark
// because the member itself led again at its old epoch after
// crash-lose-unflushed cut its log (lost-unflushed-leader), rewriting the
// offsets the leader had kept from before, is that known anomaly: the
// leader fetched from it at that epoch and truncated only to its end
// offset for the epoch, keeping the older records below. The shape of an
// every-fix-on run of crash-lose-unflushed, bounce-node and kill-node
// (seed 35, chaos-2): broker 2 leads t-0 at leader epoch 0 and commits
// 0-4 with ISR [1 2 3]; broker 3 leads at epoch 1 and commits 5-9;
// crash-lose-unflushed cuts broker 3's log from 10 to 0; started again, it
// leads at epoch 1 and appends 0-1; broker 1 leads at epoch 2, moves its
// high watermark to 10 and takes broker 3 into its ISR. Without the cut
// the divergence is a violation.
func TestISRDivergentUnflushedLeaderMember(t *testing.T) {
	story := func(cut bool) func(b *hb.Builder) []int {
		return func(b *hb.Builder) []int {
			started(b, 1, 2, 3)
			roleISR(b, 2, history.RoleLeader, 2, 0, 1, 2, 3)
			appendEv(b, history.KindProduceAppend, 2, 0, 0, 4)
			appendEv(b, history.KindProduceAck, 2, 0, 0, 4)
			roleISR(b, 3, history.RoleLeader, 3, 1, 1, 2, 3)
			appendEv(b, history.KindProduceAppend, 3, 1, 5, 9)
			appendEv(b, history.KindProduceAck, 3, 1, 5, 9)
			if cut {
				crashUnflushed(b, "f1", "n3")
				tcut(b, 3, 10, 0)
			}
			b.Start(3)
			if cut {
				restart(b, "f1", "n3")
			}
			roleISR(b, 3, history.RoleLeader, 3, 1, 1, 2, 3)
			appendEv(b, history.KindProduceAppend, 3, 1, 0, 1)
			roleISR(b, 1, history.RoleLeader, 1, 2, 1, 2)
			hwMove(b, 1, 0, 10, 2)
			join := isrChange(b, 1, history.ISRExpand, 2, []int32{1, 2}, []int32{1, 2, 3})
			return []int{join}
		}
	}
	runCases(t, ISR{}, []tcase{
		{name: "the member led again at its epoch with its cut log", want: Valid, explain: KnownLostUnflushedLeader, build: func(b *hb.Builder) []int {
			story(true)(b)
			return nil
		}},
		{name: "the member led again at its epoch without a cut", want: Invalid, explain: "took broker 3 into its ISR", build: story(false)},
	})
}

// isrExpand appends leader's ok ISR expand of t-0 at epoch.
func isrExpand(b *hb.Builder, leader, epoch int32, old, new []int32) {
	b.Add(history.Event{Kind: history.KindISRChange, Node: leader, ISR: &history.ISRChange{Topic: "t", Partition: 0,
		Action: history.ISRExpand, Old: old, New: new, LeaderEpoch: epoch, Outcome: history.ZKOK}})
}
