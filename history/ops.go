package history

import (
	"errors"
	"fmt"

	"github.com/zkchaos/zkchaos/internal/hugepage"
)

// ErrNoInvoke is wrapped by the reader's error for a completion (ok, fail
// or info) whose process has no invoke pending: the schema is one invoke,
// then exactly one completion, per process. Dropping such a completion
// would drop what it says (an acknowledged offset) from every verdict.
var ErrNoInvoke = errors.New("completion without an invoke")

// invokes tracks, for one source read in file order, which of its
// processes have an invoke waiting for its completion: the rule Operations
// pairs by, checked where the line number is still known.
type invokes map[int]struct{}

// note records op and returns an error for a completion with no invoke.
func (in invokes) note(op *ClientOp) error {
	if op.Type == OpInvoke {
		in[op.Process] = struct{}{}
		return nil
	}
	if _, ok := in[op.Process]; !ok {
		return fmt.Errorf("%w: %s %s of process %d on %s, and process %d has no invoke pending (each process invokes, then completes once)",
			ErrNoInvoke, op.F, op.Type, op.Process, op.TP(), op.Process)
	}
	delete(in, op.Process)
	return nil
}

// Operation pairs a client invoke with its completion (ok, fail or info).
type Operation struct {
	Invoke   *Event
	Complete *Event // nil: the history ended before the op completed (unknown)
}

// Outcome is the op's Jepsen type: OpOK, OpFail or OpInfo (an op with no
// completion is OpInfo: it may or may not have happened).
func (o Operation) Outcome() OpType {
	if o.Complete == nil {
		return OpInfo
	}
	return o.Complete.Op.Type
}

// Op returns the invoke's ClientOp (function, partition, value, acks).
func (o Operation) Op() *ClientOp { return o.Invoke.Op }

// Acks returns the producer acks setting, from the invoke or the completion.
func (o Operation) Acks() int {
	if o.Invoke.Op.Acks != 0 || o.Complete == nil {
		return o.Invoke.Op.Acks
	}
	return o.Complete.Op.Acks
}

// Offset is the produce's assigned offset (from the ok) or the read's fetch
// offset (from the invoke).
func (o Operation) Offset() int64 {
	if o.Invoke.Op.F == FProduce && o.Complete != nil {
		return o.Complete.Op.Offset
	}
	return o.Invoke.Op.Offset
}

// Records are what an ok read returned.
func (o Operation) Records() []Record {
	if o.Complete == nil {
		return nil
	}
	return o.Complete.Op.Records
}

// Final reports whether the op is one of the final reads.
func (o Operation) Final() bool {
	return o.Invoke.Op.Final || (o.Complete != nil && o.Complete.Op.Final)
}

// Operations pairs the client op events of h by (Source, Process), in invoke
// order. A completion without an invoke is returned in orphans (its index);
// a history read from files never has one (the reader rejects it with
// ErrNoInvoke and the line), so only a history built in memory can. A
// second invoke on a busy process closes the first as unknown (a client
// that lost track of an operation, which may or may not have happened).
func Operations(h *History) (ops []Operation, orphans []int) {
	type key struct {
		src  string
		proc int
	}
	pending := map[key]int{} // → position in ops
	// Sized by the op events (at most one invoke each) rather than grown:
	// the doubling copies were most of this function's time, and the
	// capacity an invoke-and-completion history leaves unused is never
	// touched.
	n := 0
	for i := range h.Events {
		if h.Events[i].Kind == KindOp {
			n++
		}
	}
	ops = hugepage.Make[Operation](0, n)
	for i := range h.Events {
		e := &h.Events[i]
		if e.Kind != KindOp || e.Op == nil {
			continue
		}
		k := key{e.Source, e.Op.Process}
		if e.Op.Type == OpInvoke {
			pending[k] = len(ops)
			ops = append(ops, Operation{Invoke: e})
			continue
		}
		p, ok := pending[k]
		if !ok {
			orphans = append(orphans, e.Index)
			continue
		}
		delete(pending, k)
		ops[p].Complete = e
	}
	return ops, orphans
}
