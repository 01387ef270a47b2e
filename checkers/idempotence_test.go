package checkers

import (
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// idemProduce appends an idempotent producer's produce of value and its
// completion (offset only for ok) and returns both event indices.
func idemProduce(b *hb.Builder, proc int, value string, typ history.OpType, offset int64) (int, int) {
	i := b.Op(history.ClientOp{Type: history.OpInvoke, Process: proc, F: history.FProduce, Topic: tp0.Topic,
		Partition: tp0.Partition, Value: value, Acks: history.AcksAll, Idempotent: true})
	c := b.Op(history.ClientOp{Type: typ, Process: proc, F: history.FProduce, Topic: tp0.Topic,
		Partition: tp0.Partition, Value: value, Offset: offset, Acks: history.AcksAll, Idempotent: true})
	return i, c
}

func TestIdempotence(t *testing.T) {
	runCases(t, Idempotence{}, []tcase{
		{name: "acknowledged record at two offsets of the final read", want: Invalid,
			explain: `record "p1-2" (produce invoked at event 2, acknowledged at offset 1 at event 3) is in t-0 at offsets 1 (read by event 5) and 2 (read by event 5)`,
			build: func(b *hb.Builder) []int {
				idemProduce(b, 1, "p1-1", history.OpOK, 0)
				i, c := idemProduce(b, 1, "p1-2", history.OpOK, 1)
				f := finalRead(b, hb.Rec(0, "p1-1"), hb.Rec(1, "p1-2"), hb.Rec(2, "p1-2"))
				return []int{i, c, f}
			}},
		{name: "copies seen by two different reads", want: Invalid, explain: "offsets 0 (read by event 3) and 1 (read by event 5)",
			build: func(b *hb.Builder) []int {
				i, c := idemProduce(b, 1, "v", history.OpOK, 0)
				r1 := b.ReadBack(4, tp0, 0, false, hb.Rec(0, "v"))
				r2 := b.ReadBack(4, tp0, 1, false, hb.Rec(1, "v"))
				return []int{i, c, r1, r2}
			}},
		{name: "each record once", want: Valid, explain: "each of the 2 records acknowledged to idempotent producers is at one offset",
			build: func(b *hb.Builder) []int {
				idemProduce(b, 1, "a", history.OpOK, 0)
				idemProduce(b, 2, "b", history.OpOK, 1)
				b.ReadBack(4, tp0, 0, false, hb.Rec(0, "a"), hb.Rec(1, "b"))
				finalRead(b, hb.Rec(0, "a"), hb.Rec(1, "b"))
				return nil
			}},
		{name: "non-idempotent resend appended twice is not judged here", want: Valid,
			explain: "no acknowledged produce of an idempotent producer",
			build: func(b *hb.Builder) []int {
				produceOK(b, 1, "v", 0)
				finalRead(b, hb.Rec(0, "v"), hb.Rec(1, "v"))
				return nil
			}},
		{name: "unacknowledged record at two offsets is counted, not judged", want: Valid,
			explain: "each of the 1 records",
			build: func(b *hb.Builder) []int {
				idemProduce(b, 1, "a", history.OpOK, 0)
				idemProduce(b, 2, "u", history.OpInfo, 0)
				finalRead(b, hb.Rec(0, "a"), hb.Rec(1, "u"), hb.Rec(2, "u"))
				return nil
			}},
		{name: "offset that changed value is durability's, not a duplicate", want: Valid,
			build: func(b *hb.Builder) []int {
				idemProduce(b, 1, "v", history.OpOK, 1)
				b.ReadBack(4, tp0, 0, false, hb.Rec(0, "a"), hb.Rec(1, "v"))
				finalRead(b, hb.Rec(0, "a"), hb.Rec(1, "w"), hb.Rec(2, "v"))
				return nil
			}},
	})

	// The unacknowledged copies are in the details.
	b := hb.New()
	idemProduce(b, 2, "u", history.OpInfo, 0)
	finalRead(b, hb.Rec(0, "u"), hb.Rec(1, "u"))
	res := Idempotence{}.Check(b.History())
	if res.Verdict != Valid || res.Details["unacknowledged_duplicates"] != 1 {
		t.Fatalf("%s: %s %v", res.Verdict, res.Explanation, res.Details)
	}
	if !strings.Contains(res.Explanation, "no acknowledged produce") {
		t.Errorf("explanation %q", res.Explanation)
	}
}

// The linearizable checker counts every value appended twice under the known
// anomaly duplicate-append (linearize does not tell producers apart), but
// does not call an idempotent producer's copy a resend: its example points
// to the idempotence checker, which judges it invalid.
func TestDuplicateAppendNamesIdempotentProducer(t *testing.T) {
	for _, tc := range []struct {
		name       string
		idempotent bool
		want       string
		verdict    Verdict
	}{
		{"non-idempotent resend", false, "a non-idempotent producer's resend", Valid},
		{"idempotent copy", true, "an idempotent producer's record appended twice", Invalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := hb.New()
			produceOK(b, 1, "a", 0)
			if tc.idempotent {
				idemProduce(b, 2, "v", history.OpOK, 1)
			} else {
				produceOK(b, 2, "v", 1)
			}
			finalRead(b, hb.Rec(0, "a"), hb.Rec(1, "v"), hb.Rec(2, "v"))
			h := b.History()
			lin := Linearizable{Timeout: testConfig().LinearizeTimeout}.Check(h)
			var example string
			for _, k := range lin.Known {
				if k.Name == KnownDuplicateAppend {
					example = k.Example
				}
			}
			if !strings.Contains(example, tc.want) {
				t.Errorf("duplicate-append example %q does not say %q", example, tc.want)
			}
			if got := (Idempotence{}).Check(h).Verdict; got != tc.verdict {
				t.Errorf("idempotence verdict %s, want %s", got, tc.verdict)
			}
		})
	}
}
