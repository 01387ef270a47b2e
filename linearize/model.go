// Package linearize owns the porcupine model of one Kafka partition's log and
// the conversion of a run history into porcupine operations: pairing client
// ops, resolving unknown-outcome produces from what reads observed, and
// partitioning per topic-partition. It reads only history types and never
// decides anything but linearizability; the checkers package turns its
// Outcome into a verdict.
//
// # Model
//
// A partition's log is a sequence of values. Produce(v) → offset o appends v
// at o; Read(o) → the consecutive records from o (possibly fewer than the
// log holds, as a fetch may stop early). Because every produce that enters the model has a definite
// offset (acknowledged; resolved from the read that observed it; or, for an
// unknown produce nobody observed, placed in an offset gap below an
// acknowledged one, see fillGaps), the value at each offset
// is fixed by the history itself, so the model's state is just the log's
// length: Equal and Hash are trivial and porcupine's cache is small. A
// produce at offset o is legal only when the length is o; a read is legal
// only when the length covers what it returned and every value it returned
// is the one produced at that offset (a value nobody produced is never
// legal).
//
// # What Kafka promises a consumer
//
// The model checks exactly Kafka's guarantees for Fetch: a record a read
// returns is committed, so it was produced at that offset, no later than
// the read returned, and never changes (one value per offset). Kafka does
// not promise that a fetch returns committed records: a new leader whose
// high watermark lags its predecessor's answers a fetch below that
// predecessor's high watermark with nothing (KAFKA-2334; KIP-207 added
// OFFSET_NOT_AVAILABLE to ListOffsets, never to Fetch). So a read that
// returned nothing constrains nothing and does not enter the model; a read
// that returned nothing at an offset below acknowledged produces is listed
// as a stale empty read (PartitionOutcome.StaleEmpty) for the checkers to
// classify with the node event log: the known anomaly KAFKA-2334 when a new
// leader answered it, a violation otherwise.
//
// Produce values must be unique per partition (the workload's job): they
// are how an unknown produce is recognized in a read, and how a duplicate
// append is told from a wrong value. A non-idempotent producer may append
// one record twice (its first attempt was appended but the response was
// lost, and the resend was appended again, possibly by a new leader), so a
// value read at an offset other than its acknowledged one, or an unknown
// produce read at several offsets, enters the model as one more produce of
// that value by the same operation at the offset read, from the op's invoke
// to the first read that returned it there. Such duplicates are counted,
// not judged: at-least-once delivery allows them. What a resend cannot
// explain stays illegal: a copy read before its op was invoked, a copy at an
// offset another produce holds, or one the real-time order cannot fit. Only acks=all
// produces that completed ok are taken as definite; an ok with weaker acks,
// an info, a missing completion, or NOT_ENOUGH_REPLICAS_AFTER_APPEND is an
// unknown outcome, and a fail is dropped. Unknown produces no read observed
// and no gap needs are dropped; this is what keeps porcupine from searching
// over open-ended operations, which on histories with faults would run until
// its timeout.
package linearize

import (
	"fmt"

	"github.com/anishathalye/porcupine"

	"github.com/zkchaos/zkchaos/history"

	"github.com/zkchaos/zkchaos/internal/hugepage"
)

type opKind uint8

const (
	produceOp opKind = iota + 1
	readOp
)

// table is the static part of one partition: the value produced at each
// (relative) offset, fixed by the resolved history.
type table struct {
	tp   string
	base int64 // absolute offset of relative offset 0
	// The value produced at each relative offset: offsets [0, len(dense))
	// are indexed (held marks those with a value), any other (a garbage
	// offset far out) is in sparse. Every read step looks up each record,
	// and an index costs a fraction of a hash lookup.
	dense  []string
	held   []bool
	sparse map[int64]string
	n      int // offsets holding a value
}

// newTable returns a table for offsets from base, indexed up to top
// (relative) but no further than the produces could fill twice over.
func newTable(tp string, base, top int64, produces int) *table {
	size := max(0, min(top+1, 2*int64(produces)+4096))
	return &table{tp: tp, base: base, dense: hugepage.Make[string](int(size), int(size)), held: hugepage.Make[bool](int(size), int(size))}
}

// value returns the value produced at relative offset rel.
func (t *table) value(rel int64) (string, bool) {
	if rel >= 0 && rel < int64(len(t.dense)) {
		return t.dense[rel], t.held[rel]
	}
	v, ok := t.sparse[rel]
	return v, ok
}

// add gives relative offset rel the value v unless it has one already.
func (t *table) add(rel int64, v string) {
	if rel >= 0 && rel < int64(len(t.dense)) {
		if !t.held[rel] {
			t.dense[rel], t.held[rel] = v, true
			t.n++
		}
		return
	}
	if _, ok := t.sparse[rel]; ok {
		return
	}
	if t.sparse == nil {
		t.sparse = map[int64]string{}
	}
	t.sparse[rel] = v
	t.n++
}

// input is a porcupine operation input.
type input struct {
	kind   opKind
	dup    bool   // produce: a duplicate append of value (a client resend); next to kind, in its padding
	value  string // produce
	offset int64  // read: relative start offset
	t      *table
	event  int // history index of the invoke
}

// output is a porcupine operation output.
type output struct {
	offset int64 // produce: relative offset, or -1 when unknown
	// records (read) are the history's own records, not copied: absolute
	// offsets, consecutive, none below the table's base.
	records []history.Record
}

// logModel is the partition-log model. Its state is the log length (int64).
var logModel = porcupine.Model{
	Init: func() interface{} { return int64(0) },
	Step: func(state, in, out interface{}) (bool, interface{}) {
		n := state.(int64)
		i, o := in.(*input), out.(*output)
		switch i.kind {
		case produceOp:
			if o.offset < 0 {
				// Unknown offset (never observed, no final read): it may
				// land at the end of the log, if no other produce owns
				// that offset.
				if _, taken := i.t.value(n); taken {
					return false, n
				}
				return true, n + 1
			}
			if o.offset != n {
				return false, n
			}
			return true, n + 1
		case readOp:
			if len(o.records) == 0 {
				// Never built (see the package doc): an empty fetch is
				// always allowed.
				return true, n
			}
			last := o.records[len(o.records)-1].Offset - i.t.base
			if n <= last {
				return false, n
			}
			for _, r := range o.records {
				if v, ok := i.t.value(r.Offset - i.t.base); !ok || v != r.Value {
					return false, n
				}
			}
			return true, n
		}
		return false, n
	},
	Equal: func(a, b interface{}) bool { return a.(int64) == b.(int64) },
	Hash:  func(s interface{}) uint64 { return uint64(s.(int64)) },
	DescribeOperation: func(in, out interface{}) string {
		i, o := in.(*input), out.(*output)
		switch i.kind {
		case produceOp:
			what := fmt.Sprintf("%q", i.value)
			if i.dup {
				what += ", duplicate"
			}
			if o.offset < 0 {
				return fmt.Sprintf("produce(%s) → ?", what)
			}
			return fmt.Sprintf("produce(%s) → %d", what, o.offset+i.t.base)
		default:
			if len(o.records) == 0 {
				return fmt.Sprintf("read(%d) → none", i.offset+i.t.base)
			}
			s := fmt.Sprintf("read(%d) → %q", i.offset+i.t.base, o.records[0].Value)
			if len(o.records) > 1 {
				s += fmt.Sprintf(" … %d records", len(o.records))
			}
			return s
		}
	},
	DescribeState: func(s interface{}) string { return fmt.Sprintf("log length %d", s.(int64)) },
}
