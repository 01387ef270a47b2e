package checkers

import (
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
	"github.com/zkchaos/zkchaos/linearize"
)

// A non-idempotent producer's resend appends one value twice: reported as
// a duplicate, never invalid by itself; what a resend cannot explain stays
// invalid.
func TestLinearizableDuplicates(t *testing.T) {
	rec := func(off int64, v string) history.Record { return history.Record{Offset: off, Value: v} }
	c := Linearizable{Timeout: testConfig().LinearizeTimeout}
	runCases(t, c, []tcase{
		{name: "resend acknowledged after its first copy was read", want: Valid,
			explain: `linearizable as a log; 1 duplicate append from client resends (values "p1-4" at offsets 1 and 2 of t-0)`,
			build: func(b *hb.Builder) []int {
				produceOK(b, 1, "a", 0)
				b.Produce(1, tp0, "p1-4")
				b.Read(4, tp0, 0, false)
				b.ReadOK(4, tp0, 0, false, rec(0, "a"), rec(1, "p1-4"))
				b.Complete(1, history.OpOK, tp0, history.FProduce, 2)
				finalRead(b, rec(0, "a"), rec(1, "p1-4"), rec(2, "p1-4"))
				return nil
			}},
		{name: "copy read before its produce was invoked", want: Invalid, explain: "no produce wrote there",
			build: func(b *hb.Builder) []int {
				produceOK(b, 1, "a", 0)
				b.Read(4, tp0, 0, false)
				bad := b.ReadOK(4, tp0, 0, false, rec(0, "a"), rec(1, "v"))
				b.Produce(1, tp0, "v")
				b.Complete(1, history.OpOK, tp0, history.FProduce, 2)
				return []int{bad}
			}},
		{name: "copy where another value was acknowledged", want: Invalid, explain: "not linearizable",
			build: func(b *hb.Builder) []int {
				produceOK(b, 1, "a", 0)
				produceOK(b, 1, "v", 1)
				produceOK(b, 2, "w", 2)
				b.Read(4, tp0, 0, false)
				bad := b.ReadOK(4, tp0, 0, false, rec(0, "a"), rec(1, "v"), rec(2, "v"))
				return []int{bad}
			}},
	})

	// The details carry the count and an example with its events.
	b := hb.New()
	produceOK(b, 1, "a", 0)
	inv := b.Produce(1, tp0, "v")
	b.Read(4, tp0, 0, false)
	read := b.ReadOK(4, tp0, 0, false, rec(0, "a"), rec(1, "v"))
	ack := b.Complete(1, history.OpOK, tp0, history.FProduce, 2)
	res := c.Check(b.History())
	if res.Verdict != Valid || !strings.Contains(res.Explanation, "1 duplicate append") {
		t.Fatalf("%s: %s", res.Verdict, res.Explanation)
	}
	ex, _ := res.Details["duplicate_examples"].([]linearize.Duplicate)
	if res.Details["duplicates"] != 1 || len(ex) != 1 {
		t.Fatalf("details %+v", res.Details)
	}
	if d := ex[0]; d.Value != "v" || d.Acknowledged != 2 || len(d.Offsets) != 2 || d.Offsets[0] != 1 ||
		len(d.Events) != 3 || d.Events[0] != inv || d.Events[1] != read || d.Events[2] != ack {
		t.Errorf("example %+v (want events %d, %d, %d)", d, inv, read, ack)
	}

	// Without duplicates the sentence is unchanged.
	b = hb.New()
	produceOK(b, 1, "a", 0)
	if res := c.Check(b.History()); !strings.HasSuffix(res.Explanation, "linearizable as a log.") || res.Details["duplicates"] != 0 {
		t.Errorf("%s %+v", res.Explanation, res.Details)
	}
}
