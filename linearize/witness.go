package linearize

import (
	"cmp"
	"slices"

	"github.com/anishathalye/porcupine"
)

// witness looks for a linearization of one partition's operations without
// a search, and returns true only when it found one and replayed it through
// logModel. A false answer decides nothing: the caller then runs porcupine,
// which gives the verdict (and the diagnosis) exactly as before.
//
// Why no search is needed on the histories build makes: every produce has
// a definite relative offset and the model accepts produce(o) only when the
// log length is o, so produces must take effect in offset order, each once.
// Reads change nothing and need only the log to cover their last record.
// Giving each produce the earliest point in its interval not before the
// previous one's, and each read the earliest point in its interval not
// before the produce of its last record, is then an exact test: any
// linearization's points are no earlier than these, so if these do not fit
// their intervals nothing does. Porcupine's cache would instead keep a copy
// of the linearized-set bitset per step, quadratic in the operations (about
// 120 MB for one partition of 31,500).
//
// The replay is what makes a true answer safe regardless of that argument:
// each operation's point lies in its [Call, Return] (so an operation that
// returned before another was called comes first, the real-time order
// porcupine checks), and logModel.Step accepts every operation in point
// order.
func witness(ops []porcupine.Operation) bool {
	type placed struct {
		at   int64
		kind opKind // produces before reads at one point
		rank int64  // produce: its offset; read: its last record
		op   int
	}
	prods := make([]int, 0, len(ops)) // op indices, by offset
	for i, op := range ops {
		in, ok := op.Input.(*input)
		if !ok || op.Call > op.Return {
			return false
		}
		if in.kind == produceOp {
			out, ok := op.Output.(*output)
			if !ok || out.offset < 0 {
				return false // an open offset would need a search
			}
			prods = append(prods, i)
		}
	}
	slices.SortFunc(prods, func(a, b int) int {
		return cmp.Compare(ops[a].Output.(*output).offset, ops[b].Output.(*output).offset)
	})
	order := make([]placed, 0, len(ops))
	points := make([]int64, len(prods)) // by offset
	var prev int64
	for k, i := range prods {
		op := ops[i]
		if op.Output.(*output).offset != int64(k) {
			return false // a gap or two produces at one offset
		}
		at := max(op.Call, prev)
		if k == 0 {
			at = op.Call
		}
		if at > op.Return {
			return false
		}
		points[k], prev = at, at
		order = append(order, placed{at: at, kind: produceOp, rank: int64(k), op: i})
	}
	for i, op := range ops {
		if op.Input.(*input).kind != readOp {
			continue
		}
		at, rank := op.Call, int64(-1)
		if out, ok := op.Output.(*output); ok && len(out.records) > 0 {
			rank = out.records[len(out.records)-1].Offset - op.Input.(*input).t.base
			if rank < 0 || rank >= int64(len(points)) {
				return false
			}
			at = max(at, points[rank])
		}
		if at > op.Return {
			return false
		}
		order = append(order, placed{at: at, kind: readOp, rank: rank, op: i})
	}
	slices.SortFunc(order, func(a, b placed) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.kind, b.kind), cmp.Compare(a.rank, b.rank))
	})
	state := logModel.Init()
	for _, pl := range order {
		op := ops[pl.op]
		if pl.at < op.Call || pl.at > op.Return {
			return false
		}
		var ok bool
		if ok, state = logModel.Step(state, op.Input, op.Output); !ok {
			return false
		}
	}
	return true
}
