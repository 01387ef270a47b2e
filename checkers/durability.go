package checkers

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/zkchaos/zkchaos/history"
)

// Durability checks that no acknowledged write is lost: every acks=all
// produce that completed ok is present in the final reads at its
// acknowledged offset with its value; no offset is ever read (or
// acknowledged) with two different values. Produces with unknown outcomes
// are never required to be present. Lost and divergent records are listed
// in Details. It is linear in the history and is the primary data-loss
// detector; linearizability is the stricter, costlier second opinion.
type Durability struct{}

// Name implements Checker.
func (Durability) Name() string { return "durability" }

// LostRecord is an acknowledged record missing from, or different in, the
// final reads.
type LostRecord struct {
	Partition string `json:"partition"`
	Offset    int64  `json:"offset"`
	Value     string `json:"value"`
	Found     string `json:"found,omitempty"` // the value the final read had there, if any
	Events    []int  `json:"events"`
}

// DivergentOffset is an offset seen with two different values.
type DivergentOffset struct {
	Partition string   `json:"partition"`
	Offset    int64    `json:"offset"`
	Values    []string `json:"values"`
	Events    []int    `json:"events"`
}

type seenValue struct {
	value string
	idx   int
}

// Check implements Checker.
func (c Durability) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	ops := operations(h)

	type acked struct {
		offset    int64
		value     string
		invoke    int
		completed int
	}
	ackedBy := map[history.TopicPartition][]acked{}
	read := map[history.TopicPartition]*offsetValues{}  // every ok read
	final := map[history.TopicPartition]*offsetValues{} // final reads only
	finalFrom := map[history.TopicPartition]int64{}     // lowest start offset of a final read
	finalIdx := map[history.TopicPartition]int{}
	var divergent []DivergentOffset
	divFlag := map[history.TopicPartition]map[int64]bool{}
	markDivergent := func(tp history.TopicPartition, off int64, a, b seenValue, how string) {
		if divFlag[tp] == nil {
			divFlag[tp] = map[int64]bool{}
		}
		if divFlag[tp][off] {
			return
		}
		divFlag[tp][off] = true
		divergent = append(divergent, DivergentOffset{Partition: tp.String(), Offset: off,
			Values: []string{a.value, b.value}, Events: []int{a.idx, b.idx}})
		r.violate([]int{a.idx, b.idx}, "offset %d of %s was %s with two values: %q (event %d) and %q (event %d).",
			off, tp, how, a.value, a.idx, b.value, b.idx)
	}

	nAcked := 0
	for _, op := range ops {
		o := op.Op()
		if op.Outcome() != history.OpOK {
			continue
		}
		tp := o.TP()
		switch o.F {
		case history.FProduce:
			if op.Acks() != history.AcksAll {
				continue
			}
			nAcked++
			ackedBy[tp] = append(ackedBy[tp], acked{op.Offset(), o.Value, op.Invoke.Index, op.Complete.Index})
		case history.FRead:
			m := read[tp]
			if m == nil {
				m = &offsetValues{}
				read[tp] = m
			}
			isFinal := op.Final()
			var fm *offsetValues
			if isFinal {
				fm = final[tp]
				if fm == nil {
					fm = &offsetValues{}
					final[tp] = fm
					finalFrom[tp] = o.Offset
					finalIdx[tp] = op.Complete.Index
				} else if o.Offset < finalFrom[tp] {
					finalFrom[tp] = o.Offset
				}
			}
			for _, rec := range op.Records() {
				sv := seenValue{rec.Value, op.Complete.Index}
				if prev, ok := m.get(rec.Offset); ok {
					if prev.value != rec.Value {
						markDivergent(tp, rec.Offset, prev, sv, "read")
					}
				} else {
					m.set(rec.Offset, sv)
				}
				if isFinal {
					if _, ok := fm.get(rec.Offset); !ok {
						fm.set(rec.Offset, sv)
					}
				}
			}
		}
	}

	var lost []LostRecord
	unverified := 0
	for _, tp := range sortedTPs(ackedBy) {
		list := ackedBy[tp]
		slices.SortStableFunc(list, func(a, b acked) int { return cmp.Compare(a.offset, b.offset) })
		// Two acknowledgements of one offset with different values.
		for i := 1; i < len(list); i++ {
			if list[i].offset == list[i-1].offset && list[i].value != list[i-1].value {
				markDivergent(tp, list[i].offset, seenValue{list[i-1].value, list[i-1].completed},
					seenValue{list[i].value, list[i].completed}, "acknowledged")
			}
		}
		fm, ok := final[tp]
		if !ok {
			unverified += len(list)
			r.cannotDecide("no final read of %s, so its %d acknowledged records could not be verified.", tp, len(list))
			continue
		}
		before := 0
		for _, a := range list {
			if a.offset < finalFrom[tp] {
				before++
				continue
			}
			got, present := fm.get(a.offset)
			if present && got.value == a.value {
				continue
			}
			lr := LostRecord{Partition: tp.String(), Offset: a.offset, Value: a.value, Events: []int{a.invoke, a.completed}}
			if present {
				lr.Found = got.value
				lr.Events = append(lr.Events, got.idx)
				r.violate(lr.Events, "acknowledged record %q at %s offset %d (events %d, %d) reads back as %q in the final read (event %d): it was overwritten.",
					a.value, tp, a.offset, a.invoke, a.completed, got.value, got.idx)
			} else {
				lr.Events = append(lr.Events, finalIdx[tp])
				r.violate(lr.Events, "acknowledged record %q at %s offset %d (events %d, %d) is missing from the final read (event %d): it was lost.",
					a.value, tp, a.offset, a.invoke, a.completed, finalIdx[tp])
			}
			lost = append(lost, lr)
		}
		if before > 0 {
			unverified += before
			r.cannotDecide("the final read of %s started at offset %d, above %d acknowledged records, which could not be verified.", tp, finalFrom[tp], before)
		}
	}
	if len(lost) > 0 {
		r.detail("lost", capList(lost))
	}
	if len(divergent) > 0 {
		r.detail("divergent", capList(divergent))
	}
	r.detail("acknowledged", nAcked)
	r.detail("lost_count", len(lost))
	r.detail("divergent_count", len(divergent))
	if unverified > 0 {
		r.detail("unverified", unverified)
	}
	return r.result(fmt.Sprintf("all %d acknowledged acks=all records are in the final reads at their offsets, and no offset was read with two values.", nAcked))
}

// capList keeps listings in results.json to a readable size.
func capList[T any](l []T) []T {
	if len(l) > 1000 {
		return l[:1000]
	}
	return l
}

// offsetValues maps a partition's offsets to what was seen there. Offsets
// are dense from near 0, so they index a slice; an offset far beyond those
// held (or negative) goes to a map, so a garbage offset cannot make it
// allocate without limit.
type offsetValues struct {
	dense  []seenValue // by offset; idx -1: nothing seen
	n      int         // offsets held in dense
	sparse map[int64]seenValue
}

func (m *offsetValues) get(off int64) (seenValue, bool) {
	if off >= 0 && off < int64(len(m.dense)) {
		if v := m.dense[off]; v.idx >= 0 {
			return v, true
		}
	}
	v, ok := m.sparse[off] // also where dense has since grown over it
	return v, ok
}

// set records v at off, which holds nothing yet.
func (m *offsetValues) set(off int64, v seenValue) {
	if off >= 0 && off < int64(len(m.dense)) {
		m.dense[off] = v
		m.n++
		return
	}
	if off >= 0 && off < 2*int64(m.n)+4096 {
		for int64(len(m.dense)) <= off {
			m.dense = append(m.dense, seenValue{idx: -1})
		}
		m.dense[off] = v
		m.n++
		return
	}
	if m.sparse == nil {
		m.sparse = map[int64]seenValue{}
	}
	m.sparse[off] = v
}
