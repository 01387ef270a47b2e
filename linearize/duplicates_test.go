package linearize

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"pgregory.net/rapid"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// A non-idempotent producer's resend may append one value twice. Each case
// builds a history on top of "a" acknowledged at offset 0 (unless
// noBase) and returns the read completions that must be suspects (for
// Illegal) or nil.
func TestDuplicateAppends(t *testing.T) {
	for _, tc := range duplicateCases() {
		t.Run(tc.name, tc.run)
	}
}

// duplicateCase is one case of TestDuplicateAppends.
type duplicateCase struct {
	name     string
	noBase   bool
	build    func(b *hb.Builder) []int
	want     porcupine.CheckResult
	dups     int
	offsets  []int64 // of the first duplicate example
	acked    int64   // of the first duplicate example
	resolved int
}

// duplicateCases are TestDuplicateAppends' cases; read(b, proc, final,
// values at 1, 2, ...) reads the log back from offset 0, "a" first.
func duplicateCases() []duplicateCase {
	tp := history.TP("t", 0)
	read := func(b *hb.Builder, proc int, final bool, values ...string) int {
		recs := []history.Record{hb.Rec(0, "a")}
		for i, v := range values {
			recs = append(recs, hb.Rec(int64(i+1), v))
		}
		return b.ReadBack(proc, tp, 0, final, recs...)
	}
	ok := func(b *hb.Builder, proc int, offset int64) {
		b.Complete(proc, history.OpOK, tp, history.FProduce, offset)
	}
	return []duplicateCase{
		{
			// The run that raised the false alarm: the first attempt was
			// appended at 1 by the old leader and replicated; the resend
			// was appended again by the new leader and acknowledged at 2.
			name: "resend acknowledged after its first copy was read",
			build: func(b *hb.Builder) []int {
				b.Produce(1, tp, "p1-4")
				read(b, 4, false, "p1-4")
				ok(b, 1, 2)
				read(b, 99, true, "p1-4", "p1-4")
				return nil
			},
			want: porcupine.Ok, dups: 1, offsets: []int64{1, 2}, acked: 2,
		},
		{
			name: "resend, the acknowledged copy never read",
			build: func(b *hb.Builder) []int {
				b.Produce(1, tp, "p1-4")
				read(b, 4, false, "p1-4")
				ok(b, 1, 2)
				return nil
			},
			want: porcupine.Ok, dups: 1, offsets: []int64{1, 2}, acked: 2,
		},
		{
			// A delayed first attempt may land after the acknowledged resend.
			name: "copy appended after the acknowledged one",
			build: func(b *hb.Builder) []int {
				b.Produce(1, tp, "v")
				b.Produce(2, tp, "w")
				ok(b, 1, 1)
				ok(b, 2, 3)
				read(b, 99, true, "v", "v", "w")
				return nil
			},
			want: porcupine.Ok, dups: 1, offsets: []int64{1, 2}, acked: 1,
		},
		{
			name: "unknown produce read at two offsets",
			build: func(b *hb.Builder) []int {
				b.Produce(2, tp, "v")
				b.Complete(2, history.OpInfo, tp, history.FProduce, 0)
				read(b, 99, true, "v", "v")
				return nil
			},
			want: porcupine.Ok, dups: 1, offsets: []int64{1, 2}, acked: -1, resolved: 1,
		},
		{
			name: "copy read before its produce was invoked",
			build: func(b *hb.Builder) []int {
				bad := read(b, 4, false, "v")
				b.ProduceOK(1, tp, "v", 2)
				return []int{bad}
			},
			want: porcupine.Illegal, dups: 1, offsets: []int64{1, 2}, acked: 2,
		},
		{
			// The acknowledged copy itself read before the invoke: no
			// duplicate, still an anomaly.
			name: "acknowledged value read before its produce was invoked",
			build: func(b *hb.Builder) []int {
				bad := read(b, 4, false, "v")
				b.ProduceOK(1, tp, "v", 1)
				return []int{bad}
			},
			want: porcupine.Illegal,
		},
		{
			name: "copy at an offset another produce acknowledged",
			build: func(b *hb.Builder) []int {
				b.Produce(1, tp, "v")
				b.Produce(2, tp, "w")
				ok(b, 1, 1)
				ok(b, 2, 2)
				return []int{read(b, 4, false, "v", "v")}
			},
			want: porcupine.Illegal, dups: 1, offsets: []int64{1, 2}, acked: 1,
		},
		{
			// The copy at 1 must precede w at 2, acknowledged before v was
			// even invoked: a resend cannot explain it (the unknown u could
			// have filled the gap at 1, but v's copy was read there).
			name:   "copy the real-time order cannot fit",
			noBase: true,
			build: func(b *hb.Builder) []int {
				b.Produce(3, tp, "u")
				b.ProduceOK(1, tp, "a", 0)
				b.ProduceOK(2, tp, "w", 2)
				b.Complete(3, history.OpInfo, tp, history.FProduce, 0)
				b.ProduceOK(1, tp, "v", 3)
				read(b, 99, true, "v", "w", "v")
				return nil
			},
			want: porcupine.Illegal, dups: 1, offsets: []int64{1, 3}, acked: 3,
		},
		{
			// Kafka allows an empty fetch below committed records (a new
			// leader whose HW lags, KAFKA-2334): it constrains nothing.
			name: "empty read after a copy was read",
			build: func(b *hb.Builder) []int {
				b.Produce(1, tp, "v")
				read(b, 4, false, "v")
				b.ReadBack(4, tp, 1, false)
				ok(b, 1, 2)
				return nil
			},
			want: porcupine.Ok, dups: 1, offsets: []int64{1, 2}, acked: 2,
		},
		{
			name: "value of a failed produce read",
			build: func(b *hb.Builder) []int {
				b.Produce(1, tp, "v")
				b.Complete(1, history.OpFail, tp, history.FProduce, 0)
				return []int{read(b, 4, false, "v", "v")}
			},
			want: porcupine.Illegal,
		},
	}
}

// run builds the case's history and checks it.
func (tc duplicateCase) run(t *testing.T) {
	b := hb.New()
	if !tc.noBase {
		b.ProduceOK(1, history.TP("t", 0), "a", 0)
	}
	suspects := tc.build(b)
	out := Check(b.History(), Options{Timeout: 5 * time.Second})
	p := out.Partitions[0]
	if out.Result != tc.want {
		t.Fatalf("result %s, want %s: %+v", out.Result, tc.want, p)
	}
	if p.Duplicates != tc.dups || p.Resolved != tc.resolved {
		t.Errorf("duplicates %d resolved %d, want %d and %d: %+v", p.Duplicates, p.Resolved, tc.dups, tc.resolved, p)
	}
	if tc.dups > 0 {
		if len(p.DuplicateExamples) == 0 {
			t.Fatalf("no duplicate example: %+v", p)
		}
		d := p.DuplicateExamples[0]
		if !slices.Equal(d.Offsets, tc.offsets) || d.Acknowledged != tc.acked || d.Partition != "t-0" || len(d.Events) < 2 {
			t.Errorf("example %+v, want offsets %v acknowledged %d", d, tc.offsets, tc.acked)
		}
	}
	for _, s := range suspects {
		if !slices.Contains(p.Suspects, s) {
			t.Errorf("suspects %v do not include read %d", p.Suspects, s)
		}
	}
	if tc.want == porcupine.Illegal && len(p.Suspects) == 0 && len(p.Stuck) == 0 {
		t.Errorf("illegal without a culprit: %+v", p)
	}
}

// The partition of the stored run that raised the false alarm, cut to
// its client ops up to just after the duplicate was read at both offsets
// (testdata/resend-duplicate): kgo resent "p1-4" after the leader was
// SIGSTOPped; the first attempt sits at 4, the acknowledged resend at 5.
func TestStoredResendRun(t *testing.T) {
	h, err := history.ReadDir("testdata/resend-duplicate")
	if err != nil {
		t.Fatal(err)
	}
	out := Check(h, Options{Timeout: 10 * time.Second})
	if out.Result != porcupine.Ok || len(out.Partitions) != 1 {
		t.Fatalf("result %s: %+v", out.Result, out.Partitions)
	}
	p := out.Partitions[0]
	if p.Duplicates != 1 || len(p.DuplicateExamples) != 1 {
		t.Fatalf("duplicates %d: %+v", p.Duplicates, p)
	}
	if d := p.DuplicateExamples[0]; d.Value != "p1-4" || !slices.Equal(d.Offsets, []int64{4, 5}) || d.Acknowledged != 5 {
		t.Errorf("example %+v", d)
	}
}

// Property: a single log written by producers that sometimes append a
// value twice (a resend) and acknowledge either copy, read at random
// points, is never judged Illegal, and every duplicate is reported.
func TestResendsNeverFalseIllegal(t *testing.T) {
	tp := history.TP("t", 0)
	rapid.Check(t, func(rt *rapid.T) {
		procs := rapid.IntRange(1, 6).Draw(rt, "procs")
		steps := rapid.IntRange(1, 300).Draw(rt, "steps")
		b := hb.New()
		var log []string
		type pending struct {
			read   bool
			value  string
			copies []int64
			from   int64
		}
		busy := map[int]*pending{}
		seq, appended := 0, 0
		for s := 0; s < steps; s++ {
			proc := rapid.IntRange(0, procs-1).Draw(rt, "proc")
			p := busy[proc]
			switch {
			case p == nil && rapid.Bool().Draw(rt, "read"):
				from := rapid.Int64Range(0, int64(len(log))).Draw(rt, "from")
				b.Read(proc, tp, from, false)
				busy[proc] = &pending{read: true, from: from}
			case p == nil:
				seq++
				v := fmt.Sprintf("p%d-%d", proc, seq)
				b.Produce(proc, tp, v)
				busy[proc] = &pending{value: v}
			case p.read:
				// A fetch may stop early, but returns nothing only when
				// nothing is there: a non-empty prefix of the suffix.
				left := len(log) - int(p.from)
				n := rapid.IntRange(min(1, left), left).Draw(rt, "n")
				var recs []history.Record
				for i := p.from; i < p.from+int64(n); i++ {
					recs = append(recs, hb.Rec(i, log[i]))
				}
				b.ReadOK(proc, tp, p.from, false, recs...)
				delete(busy, proc)
			case len(p.copies) < 2 && rapid.IntRange(0, 2).Draw(rt, "effect") > 0:
				log = append(log, p.value) // an attempt is appended
				p.copies = append(p.copies, int64(len(log)-1))
				if len(p.copies) == 2 {
					appended++
				}
			case len(p.copies) == 0 || rapid.IntRange(0, 3).Draw(rt, "info") == 0:
				b.Complete(proc, history.OpInfo, tp, history.FProduce, 0)
				delete(busy, proc)
			default:
				ack := p.copies[rapid.IntRange(0, len(p.copies)-1).Draw(rt, "ack")]
				b.Complete(proc, history.OpOK, tp, history.FProduce, ack)
				delete(busy, proc)
			}
		}
		recs := make([]history.Record, len(log))
		for i, v := range log {
			recs[i] = hb.Rec(int64(i), v)
		}
		b.ReadBack(1000, tp, 0, true, recs...)
		out := Check(b.History(), Options{Timeout: 20 * time.Second})
		if out.Result == porcupine.Illegal {
			rt.Fatalf("history with resends judged Illegal: %+v", out.Partitions)
		}
		// The final read covers the whole log, so every second copy is seen.
		if len(out.Partitions) > 0 && out.Partitions[0].Duplicates != appended {
			rt.Fatalf("%d duplicates reported, %d appended: %+v", out.Partitions[0].Duplicates, appended, out.Partitions[0])
		}
	})
}
