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
			if r.Verdict != c.want {
				t.Fatalf("verdict %s, want %s: %s", r.Verdict, c.want, r.Explanation)
			}
			text := r.Explanation
			if c.want == Valid {
				if len(r.Known) != 1 || r.Known[0].Name != KnownLostUnflushedISR {
					t.Fatalf("known anomalies %+v, want %s", r.Known, KnownLostUnflushedISR)
				}
				text = r.Known[0].Example
			}
			if !strings.Contains(text, c.explain) {
				t.Errorf("%q does not say %q", text, c.explain)
			}
		})
	}
}
