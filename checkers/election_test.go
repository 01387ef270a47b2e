package checkers

import (
	"slices"
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// electionKind builds one kind of controller election of t-0 by controller
// 2, whose process ran with policy: ZooKeeper holds leader 1 with ISR isr
// (event prev), the kind's trigger follows, then controller 2 writes leader
// elected with ISR newISR at leader epoch 2 (event write).
type electionKind struct {
	name    string
	trigger func(b *hb.Builder)
}

var electionKinds = []electionKind{
	// Broker 1 died: leaderForOffline.
	{"offline", func(b *hb.Builder) {
		b.Add(history.Event{Kind: history.KindNodeStop, Node: 1, Process: &history.Process{Incarnation: 1, Reason: "killed"}})
	}},
	// Broker 1 asked to shut down: leaderForControlledShutdown.
	{"controlled shutdown", func(b *hb.Builder) {
		b.Add(history.Event{Kind: history.KindControlledShutdown, Node: 2, Shutdown: &history.Shutdown{BrokerID: 1, BrokerEpoch: 50,
			CachedBrokerEpoch: 50, ControllerEpoch: 1, Verdict: history.VerdictAccepted}})
	}},
	// An admin asked for the preferred leader: leaderForPreferredReplica.
	{"preferred", func(b *hb.Builder) {
		b.Op(history.ClientOp{Type: history.OpInvoke, Process: 9, F: history.FPreferredElection, Topic: "t", Partition: 0})
	}},
	// An admin moved the replicas: leaderForReassign.
	{"reassignment", func(b *hb.Builder) {
		b.Op(history.ClientOp{Type: history.OpInvoke, Process: 9, F: history.FReassign, Topic: "t", Partition: 0, Value: "[3,2,1]"})
	}},
}

func buildElection(b *hb.Builder, k electionKind, policy string, isr []int32, elected int32, newISR ...int32) (prev, write int) {
	startPolicy(b, 2, policy)
	prev = isrWatch(b, 10, 0, 1, 1, isr...)
	k.trigger(b)
	write = isrWrite(b, 2, 1, 12, 0, 1, elected, 2, newISR...)
	return prev, write
}

// Every election kind picks inside the ISR ZooKeeper held; one from outside
// by a process not running the unclean policy is a violation, whatever it
// cost (here nothing was acknowledged).
func TestElectionInsideISR(t *testing.T) {
	for _, k := range electionKinds {
		runCases(t, ISR{}, []tcase{
			{name: k.name + ": from outside the ISR", want: Invalid,
				explain: `elected broker 3 leader of t-0 at leader epoch 2 with ISR [2 3] (event 3, +0s) from outside the ISR [1 2] ZooKeeper held (event 1), and its process ran with offline-election policy "offline" (node_start event 0)`,
				build: func(b *hb.Builder) []int {
					prev, write := buildElection(b, k, "offline", []int32{1, 2}, 3, 2, 3)
					return []int{prev, write}
				}},
			{name: k.name + ": inside the ISR", want: Valid, explain: "the one controller election picked its leader inside the ISR ZooKeeper held",
				build: func(b *hb.Builder) []int {
					buildElection(b, k, "offline", []int32{1, 2, 3}, 3, 2, 3)
					return nil
				}},
			{name: k.name + ": unclean policy", want: Valid, explain: "unclean-election ×1",
				build: func(b *hb.Builder) []int {
					buildElection(b, k, "unclean", []int32{1, 2}, 3, 3)
					return nil
				}},
		})
	}
	runCases(t, ISR{}, []tcase{
		{name: "no policy logged", want: Invalid, explain: "its process (node_start event 0) logged no offline-election policy",
			build: func(b *hb.Builder) []int {
				prev, write := buildElection(b, electionKinds[0], "", []int32{1}, 3, 3)
				return []int{prev, write}
			}},
		{name: "no process start logged", want: Invalid, explain: "the history has no node_start of its process",
			build: func(b *hb.Builder) []int {
				prev := isrWatch(b, 10, 0, 1, 1, 1)
				write := isrWrite(b, 2, 1, 12, 0, 1, 3, 2, 3)
				return []int{prev, write}
			}},
		// A leader's own ISR write and a state whose predecessor the
		// history does not show elect nobody.
		{name: "leader's own ISR write", want: Valid, build: func(b *hb.Builder) []int {
			startPolicy(b, 2, "offline")
			isrWatch(b, 10, 0, 1, 1, 1, 2)
			isrWrite(b, 1, 0, 11, 0, 1, 1, 1, 1)
			return nil
		}},
		{name: "replaced state unseen", want: Valid, build: func(b *hb.Builder) []int {
			startPolicy(b, 2, "offline")
			isrWatch(b, 10, 0, 1, 1, 1, 2)
			isrWrite(b, 2, 1, 13, 4, 5, 3, 2, 3)
			return nil
		}},
	})
}

// shrunkThenElected: controller 2's process runs policy; broker 1 leads
// t-0 with ISR [1 2], acknowledges "a" at 0 (event ack) and shrinks the
// ISR to [1] (event shrink); mid runs; then controller 2 elects broker 3
// at leader epoch 2 with ISR [3] (event write).
func shrunkThenElected(b *hb.Builder, policy string, mid func(b *hb.Builder)) (ack, shrink, write int) {
	startPolicy(b, 2, policy)
	isrWatch(b, 10, 0, 1, 1, 1, 2)
	_, ack = b.ProduceOK(0, tp0, "a", 0)
	shrink = isrWrite(b, 1, 0, 11, 0, 1, 1, 1, 1)
	if mid != nil {
		mid(b)
	}
	write = isrWrite(b, 2, 1, 12, 1, 2, 3, 2, 3)
	return ack, shrink, write
}

// uncleanStory is shrunkThenElected with broker 1 acknowledging "b" at 1
// before it dies; the final read returns final from offset 0.
func uncleanStory(b *hb.Builder, policy string, final ...history.Record) (acks []int, write, read int) {
	var c int
	a, _, write := shrunkThenElected(b, policy, func(b *hb.Builder) { _, c = b.ProduceOK(0, tp0, "b", 1) })
	read = finalRead(b, final...)
	return []int{a, c}, write, read
}

// An unclean election is the known anomaly unclean-election listing what it
// cost; Durability does not count those records again; StrictElections
// makes it invalid.
func TestUncleanElectionCost(t *testing.T) {
	for _, tc := range []struct {
		name    string
		c       Checker
		policy  string
		final   []history.Record
		want    Verdict
		explain string
		known   string // the known anomaly's example, "" for none
	}{
		{name: "cost two records", c: ISR{}, policy: "unclean", final: []history.Record{hb.Rec(0, "c")}, want: Valid,
			known: `it cost 2 acknowledged records that broker 3 lacked: "a" at offset 0 (acknowledged at event 3, +0s; "c" in the final read); "b" at offset 1 (acknowledged at event 6, +10ms; missing from the final read) (final read event 9).`},
		{name: "cost nothing", c: ISR{}, policy: "unclean", final: []history.Record{hb.Rec(0, "a"), hb.Rec(1, "b")}, want: Valid,
			known: "it cost no acknowledged record: every one acknowledged before it that broker 3 was not known to hold is in the final read (event 9)."},
		{name: "strict elections", c: ISR{StrictElections: true}, policy: "unclean", final: []history.Record{hb.Rec(0, "c")}, want: Invalid,
			explain: "known anomaly unclean-election (strict elections): controller 2 (epoch 1) elected broker 3 leader of t-0 at leader epoch 2 with ISR [3]",
			known:   "it cost 2 acknowledged records"},
		{name: "strict elections, nothing lost", c: ISR{StrictElections: true}, policy: "unclean", final: []history.Record{hb.Rec(0, "a"), hb.Rec(1, "b")}, want: Invalid,
			explain: "known anomaly unclean-election (strict elections)", known: "it cost no acknowledged record"},
		{name: "durability leaves the cost to the anomaly", c: Durability{}, policy: "unclean", final: []history.Record{hb.Rec(0, "c")}, want: Valid,
			explain: "but 2 that unclean elections cost (known anomaly unclean-election, listed by the isr checker)"},
		{name: "durability: the same loss without the unclean policy", c: Durability{}, policy: "offline", final: []history.Record{hb.Rec(0, "c")}, want: Invalid,
			explain: `acknowledged record "a" at t-0 offset 0 (events 2, 3) reads back as "c" in the final read (event 9): it was overwritten (and 1 more violations).`},
		{name: "isr: the same election without the unclean policy", c: ISR{}, policy: "offline", final: []history.Record{hb.Rec(0, "c")}, want: Invalid,
			explain: `from outside the ISR [1] ZooKeeper held (event 4), and its process ran with offline-election policy "offline" (node_start event 0)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := hb.New()
			acks, write, _ := uncleanStory(b, tc.policy, tc.final...)
			r := tc.c.Check(b.History())
			if r.Verdict != tc.want || !strings.Contains(r.Explanation, tc.explain) {
				t.Fatalf("%s: %s; want %s containing %q", r.Verdict, r.Explanation, tc.want, tc.explain)
			}
			if tc.known == "" {
				if len(r.Known) != 0 {
					t.Fatalf("known anomalies %+v, want none", r.Known)
				}
				return
			}
			if len(r.Known) != 1 || r.Known[0].Name != KnownUncleanElection || !strings.Contains(r.Known[0].Example, tc.known) ||
				!slices.Contains(r.Known[0].Events, write) {
				t.Fatalf("known anomalies %+v, want %s containing %q and event %d", r.Known, KnownUncleanElection, tc.known, write)
			}
			if strings.Contains(tc.known, "cost 2") {
				for _, a := range acks {
					if !slices.Contains(r.Known[0].Events, a) {
						t.Fatalf("known anomaly events %v lack acknowledgement %d", r.Known[0].Events, a)
					}
				}
			}
			t.Log(r.Known[0].Example)
		})
	}
}

// The query-leo policy elects from outside the ISR only the longest log:
// valid when the elected replica held every acknowledged record, a
// violation when it did not.
func TestQueryLEOElection(t *testing.T) {
	runCases(t, ISR{}, []tcase{
		{name: "longest log elected", want: Valid, build: func(b *hb.Builder) []int {
			shrunkThenElected(b, "query-leo", func(b *hb.Builder) { hwMove(b, 3, 0, 1, 1) })
			return nil
		}},
		{name: "elected replica lacked a record", want: Invalid,
			explain: `its process ran with offline-election policy "query-leo" (node_start event 0), which elects from outside the ISR only the replica with the longest log, yet broker 3 did not hold every acknowledged record: the highest acknowledged offset, 0 (event 3`,
			build: func(b *hb.Builder) []int {
				ack, prev, write := shrunkThenElected(b, "query-leo", nil)
				return []int{ack, prev, write}
			}},
	})
}

// A partition whose unclean election cost acknowledged records cannot be
// one log; linearizable says so and leaves the finding to the known
// anomaly. The same history without the unclean policy is a violation.
func TestLinearizableAfterUncleanElection(t *testing.T) {
	build := func(policy string) *history.History {
		b := hb.New()
		shrunkThenElected(b, policy, func(b *hb.Builder) {
			b.ProduceOK(0, tp0, "b", 1)
			b.ReadBack(4, tp0, 0, false, hb.Rec(0, "a"), hb.Rec(1, "b"))
		})
		b.ProduceOK(0, tp0, "c", 0)
		finalRead(b, hb.Rec(0, "c"))
		return b.History()
	}
	c := Linearizable{Timeout: testConfig().LinearizeTimeout}
	if r := c.Check(build("unclean")); r.Verdict != Valid ||
		!strings.Contains(r.Explanation, "0 of 1 partitions (5 operations) are linearizable as a log; partition t-0 is not linearizable after controller 2's unclean election of broker 3 (event 9), which cost 2 acknowledged records (known anomaly unclean-election, reported by the isr checker)") {
		t.Fatalf("unclean: %s: %s", r.Verdict, r.Explanation)
	}
	if r := c.Check(build("offline")); r.Verdict != Invalid || !strings.Contains(r.Explanation, "partition t-0 is not linearizable") {
		t.Fatalf("offline: %s: %s", r.Verdict, r.Explanation)
	}
}

// The new leader of an unclean election reuses the offsets it lacked: an
// offset acknowledged with two values because of it is the election's cost,
// not a second finding; without the unclean policy it is a violation.
func TestDurabilityOffsetReusedAfterUncleanElection(t *testing.T) {
	build := func(policy string) *history.History {
		b := hb.New()
		shrunkThenElected(b, policy, nil)
		b.ProduceOK(0, tp0, "c", 0)
		finalRead(b, hb.Rec(0, "c"))
		return b.History()
	}
	r := Durability{}.Check(build("unclean"))
	if r.Verdict != Valid || !strings.Contains(r.Explanation, "but 1 that unclean elections cost (known anomaly unclean-election, listed by the isr checker), and no offset was read with two values but 1 whose record an unclean election cost and the new leader replaced") {
		t.Fatalf("unclean: %s: %s", r.Verdict, r.Explanation)
	}
	r = Durability{}.Check(build("offline"))
	if r.Verdict != Invalid || !strings.Contains(r.Explanation, `offset 0 of t-0 was acknowledged with two values: "a" (event 3) and "c" (event 7)`) {
		t.Fatalf("offline: %s: %s", r.Verdict, r.Explanation)
	}
}
