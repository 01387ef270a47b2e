package checkers

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/zkchaos/zkchaos/history"

	"github.com/zkchaos/zkchaos/internal/hugepage"
)

// Durability checks that no acknowledged write is lost: every acks=all
// produce that completed ok is present in the final reads at its
// acknowledged offset with its value; no offset is ever read (or
// acknowledged) with two different values. Produces with unknown outcomes
// are never required to be present. Lost and divergent records are listed
// in Details. It is linear in the history and is the primary data-loss
// detector; linearizability is the stricter, costlier second opinion.
//
// A lost record that an unclean election cost (see election.go: acknowledged
// before a controller running the unclean policy elected a leader from
// outside the ISR, which was not known to hold it) is listed in Details but
// is not a violation: it is the known anomaly unclean-election, which the
// ISR checker reports with the records it cost and which
// Config.StrictElections makes invalid. A record lost, or an offset read
// with two values, after crash-lose-unflushed hit two or more of the
// partition's replicas at once and one of them led before it fetched back
// what it lost, is the known anomaly lost-unflushed-quorum (unflushed.go):
// Kafka does not fsync appends, and does not promise that case. For an
// offset read with two values the crash may also come before the first
// value was read and after its produce was invoked, when the exposed
// broker led only after that read: a replica that kept the record served
// it until then.
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

// durabilityTP is what Durability gathers about one partition.
type durabilityTP struct {
	acked       []durabilityAck // acknowledged acks=all produces, in invoke order
	read, final offsetValues    // every ok read; final reads only
	hasFinal    bool
	finalFrom   int64 // lowest start offset of a final read
	finalIdx    int   // completion of the first final read
	divergent   map[int64]bool
	nAcked      int   // acknowledged produces, counted before acked is filled
	records     int   // records read
	top         int64 // highest offset acknowledged or read
}

type durabilityAck struct {
	offset    int64
	value     string
	invoke    int
	completed int
}

// tableSize is how many offsets of the partition the dense tables hold
// from the start: up to the highest offset seen, but no more than the
// records could fill twice over, so a garbage offset costs no memory.
func (pt *durabilityTP) tableSize() int64 {
	return max(0, min(pt.top+1, 2*int64(pt.records+pt.nAcked)+4096))
}

// Check implements Checker.
func (c Durability) Check(h *history.History) Result {
	ops := operations(h)
	d := &durabilityJudge{r: &report{name: c.Name()}}
	which := d.index(ops)
	d.gather(ops, which)
	d.judgeAcked()
	return d.result(h, ops)
}

// durabilityJudge is Durability's state: the partitions' tables and what
// it found.
type durabilityJudge struct {
	r     *report
	tps   []history.TopicPartition
	parts []*durabilityTP

	divergent     []DivergentOffset
	divergentText []string // the violation each divergence is, judged at the end
	divergentTP   []history.TopicPartition
	// Losses are judged once all are known: those an unclean election
	// cost are the known anomaly unclean-election (the ISR checker lists
	// them by election), not violations here. losses[i] explains lost[i].
	lost   []LostRecord
	losses []durabilityLoss

	nAcked, unverified int
}

// durabilityLoss is an acknowledged record missing or overwritten: the
// acknowledgement's event and the explanation.
type durabilityLoss struct {
	completed int
	text      string
	tp        history.TopicPartition
	invoke    int // the produce's invoke event
}

// index finds each op's partition (one map lookup per op) and sizes every
// partition's tables, which were grown record by record: a fifth of all
// the checkers' allocation. It returns each op's partition, -1 for an op
// that is neither an acknowledged acks=all produce nor an ok read.
func (d *durabilityJudge) index(ops []history.Operation) []int32 {
	at := map[history.TopicPartition]int32{}
	which := make([]int32, len(ops))
	for i, op := range ops {
		which[i] = -1
		o := op.Op()
		if op.Outcome() != history.OpOK {
			continue
		}
		produce := o.F == history.FProduce
		if (!produce || op.Acks() != history.AcksAll) && o.F != history.FRead {
			continue
		}
		tp := o.TP()
		j, ok := at[tp]
		if !ok {
			j = int32(len(d.parts))
			at[tp] = j
			d.tps = append(d.tps, tp)
			d.parts = append(d.parts, &durabilityTP{})
		}
		which[i] = j
		pt := d.parts[j]
		if produce {
			pt.nAcked++
			pt.top = max(pt.top, op.Offset())
		} else if recs := op.Records(); len(recs) > 0 {
			pt.records += len(recs)
			pt.top = max(pt.top, recs[len(recs)-1].Offset)
		}
	}
	for _, pt := range d.parts {
		pt.acked = make([]durabilityAck, 0, pt.nAcked)
		pt.read.reserve(pt.tableSize())
	}
	return which
}

// markDivergent records that offset off of tp was seen (how) with two
// values, once per offset.
func (d *durabilityJudge) markDivergent(tp history.TopicPartition, pt *durabilityTP, off int64, a, b seenValue, how string) {
	if pt.divergent[off] {
		return
	}
	if pt.divergent == nil {
		pt.divergent = map[int64]bool{}
	}
	pt.divergent[off] = true
	d.divergent = append(d.divergent, DivergentOffset{Partition: tp.String(), Offset: off,
		Values: []string{a.value, b.value}, Events: []int{a.idx, b.idx}})
	d.divergentTP = append(d.divergentTP, tp)
	d.divergentText = append(d.divergentText, fmt.Sprintf("offset %d of %s was %s with two values: %q (event %d) and %q (event %d).",
		off, tp, how, a.value, a.idx, b.value, b.idx))
}

// gather lists each partition's acknowledged produces and fills its
// tables of what reads and final reads saw.
func (d *durabilityJudge) gather(ops []history.Operation, which []int32) {
	for i, op := range ops {
		j := which[i]
		if j < 0 {
			continue
		}
		tp, pt, o := d.tps[j], d.parts[j], op.Op()
		if o.F == history.FProduce {
			d.nAcked++
			pt.acked = append(pt.acked, durabilityAck{op.Offset(), o.Value, op.Invoke.Index, op.Complete.Index})
			continue
		}
		isFinal := op.Final()
		if isFinal {
			if !pt.hasFinal {
				pt.hasFinal = true
				pt.final.reserve(pt.tableSize())
				pt.finalFrom = o.Offset
				pt.finalIdx = op.Complete.Index
			} else if o.Offset < pt.finalFrom {
				pt.finalFrom = o.Offset
			}
		}
		for _, rec := range op.Records() {
			sv := seenValue{rec.Value, op.Complete.Index}
			if prev, ok := pt.read.get(rec.Offset); ok {
				if prev.value != rec.Value {
					d.markDivergent(tp, pt, rec.Offset, prev, sv, "read")
				}
			} else {
				pt.read.set(rec.Offset, sv)
			}
			if isFinal {
				if _, ok := pt.final.get(rec.Offset); !ok {
					pt.final.set(rec.Offset, sv)
				}
			}
		}
	}
}

// judgeAcked looks for every partition's acknowledged records in its
// final read, partitions in order.
func (d *durabilityJudge) judgeAcked() {
	order := make([]int, 0, len(d.parts)) // partitions with acknowledged produces, sorted
	for j, pt := range d.parts {
		if len(pt.acked) > 0 {
			order = append(order, j)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return d.tps[a].Compare(d.tps[b]) })
	for _, j := range order {
		d.judgePartition(d.tps[j], d.parts[j])
	}
}

func (d *durabilityJudge) judgePartition(tp history.TopicPartition, pt *durabilityTP) {
	list := pt.acked
	// By offset, ties in invoke order: the list is in invoke order, so
	// this is the stable sort it was, and pdqsort takes the nearly
	// sorted list in about one pass.
	slices.SortFunc(list, func(a, b durabilityAck) int {
		return cmp.Or(cmp.Compare(a.offset, b.offset), cmp.Compare(a.invoke, b.invoke))
	})
	// Two acknowledgements of one offset with different values.
	for i := 1; i < len(list); i++ {
		if list[i].offset == list[i-1].offset && list[i].value != list[i-1].value {
			d.markDivergent(tp, pt, list[i].offset, seenValue{list[i-1].value, list[i-1].completed},
				seenValue{list[i].value, list[i].completed}, "acknowledged")
		}
	}
	if !pt.hasFinal {
		d.unverified += len(list)
		d.r.cannotDecide("no final read of %s, so its %d acknowledged records could not be verified.", tp, len(list))
		return
	}
	fm := &pt.final
	before := 0
	for _, a := range list {
		if a.offset < pt.finalFrom {
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
			d.losses = append(d.losses, durabilityLoss{a.completed, fmt.Sprintf("acknowledged record %q at %s offset %d (events %d, %d) reads back as %q in the final read (event %d): it was overwritten.",
				a.value, tp, a.offset, a.invoke, a.completed, got.value, got.idx), tp, a.invoke})
		} else {
			lr.Events = append(lr.Events, pt.finalIdx)
			d.losses = append(d.losses, durabilityLoss{a.completed, fmt.Sprintf("acknowledged record %q at %s offset %d (events %d, %d) is missing from the final read (event %d): it was lost.",
				a.value, tp, a.offset, a.invoke, a.completed, pt.finalIdx), tp, a.invoke})
		}
		d.lost = append(d.lost, lr)
	}
	if before > 0 {
		d.unverified += before
		d.r.cannotDecide("the final read of %s started at offset %d, above %d acknowledged records, which could not be verified.", tp, pt.finalFrom, before)
	}
}

// uncleanRecord is a record an unclean election cost, by where it stood.
type uncleanRecord struct {
	tp    string
	off   int64
	value string
}

// result reports the losses and divergences but those unclean elections
// cost: by acknowledgement, and by the record (partition, offset, value)
// whose offset the new leader reused.
func (d *durabilityJudge) result(h *history.History, ops []history.Operation) Result {
	r := d.r
	unclean := map[int]bool{}
	uncleanRec := map[uncleanRecord]bool{}
	if len(d.losses) > 0 || len(d.divergent) > 0 {
		for _, c := range uncleanCosts(h, ops) {
			for _, a := range c.lost {
				unclean[a.idx] = true
				uncleanRec[uncleanRecord{c.state().TP().String(), a.offset, a.value}] = true
			}
		}
	}
	excusedDivergent := 0
	unflushed := d.unflushedQuorum(h, ops)
	for i, dv := range d.divergent {
		if uncleanRec[uncleanRecord{dv.Partition, dv.Offset, dv.Values[0]}] || uncleanRec[uncleanRecord{dv.Partition, dv.Offset, dv.Values[1]}] {
			// One of the values is a record an unclean election cost:
			// the new leader reused its offset.
			excusedDivergent++
			continue
		}
		if unflushed.excusesDivergent(r, d.divergentTP[i], dv, d.divergentText[i]) {
			continue
		}
		r.violate(dv.Events, "%s", d.divergentText[i])
	}
	excused := 0
	for i, l := range d.losses {
		if unclean[l.completed] {
			excused++
			continue
		}
		if unflushed.excuses(r, l, d.lost[i]) {
			continue
		}
		r.violate(d.lost[i].Events, "%s", l.text)
	}
	if len(d.lost) > 0 {
		r.detail("lost", capList(d.lost))
	}
	if excused > 0 {
		r.detail("lost_to_unclean_election", excused)
	}
	if len(unflushed.lost) > 0 {
		r.detail("lost_to_unflushed_quorum", unflushed.lost)
	}
	if excusedDivergent > 0 {
		r.detail("divergent_after_unclean_election", excusedDivergent)
	}
	if unflushed.divergent > 0 {
		r.detail("divergent_after_unflushed_quorum", unflushed.divergent)
	}
	if len(d.divergent) > 0 {
		r.detail("divergent", capList(d.divergent))
	}
	r.detail("acknowledged", d.nAcked)
	r.detail("lost_count", len(d.lost))
	r.detail("divergent_count", len(d.divergent))
	if d.unverified > 0 {
		r.detail("unverified", d.unverified)
	}
	if n := len(unflushed.lost) + unflushed.divergent; n > 0 && excused == 0 && excusedDivergent == 0 {
		r.knownSaid = true
		return r.result(fmt.Sprintf("all %d acknowledged acks=all records are in the final reads at their offsets but %d lost, and no offset was read with two values but %d reused, after crash-lose-unflushed took them from every replica their partition's controller could elect (known anomaly %s).",
			d.nAcked, len(unflushed.lost), unflushed.divergent, strings.Join(unflushed.names, ", ")))
	}
	if excused > 0 {
		twice := "no offset was read with two values"
		if excusedDivergent > 0 {
			twice = fmt.Sprintf("no offset was read with two values but %d whose record an unclean election cost and the new leader replaced", excusedDivergent)
		}
		return r.result(fmt.Sprintf("all %d acknowledged acks=all records are in the final reads at their offsets but %d that unclean elections cost (known anomaly %s, listed by the isr checker), and %s.",
			d.nAcked, excused, KnownUncleanElection, twice))
	}
	return r.result(fmt.Sprintf("all %d acknowledged acks=all records are in the final reads at their offsets, and no offset was read with two values.", d.nAcked))
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
	// dense is by offset and holds idx+1, so that its zero value (fresh
	// memory, untouched until used) means nothing seen.
	dense  []seenValue
	n      int // offsets held in dense
	sparse map[int64]seenValue
}

// reserve sizes the dense table for offsets below size, before any set.
func (m *offsetValues) reserve(size int64) {
	if size <= int64(len(m.dense)) {
		return
	}
	if m.dense == nil {
		m.dense = hugepage.Make[seenValue](int(size), int(size))
		return
	}
	m.dense = slices.Grow(m.dense, int(size)-len(m.dense))[:size]
}

func (m *offsetValues) get(off int64) (seenValue, bool) {
	if off >= 0 && off < int64(len(m.dense)) {
		if v := m.dense[off]; v.idx > 0 {
			v.idx--
			return v, true
		}
	}
	v, ok := m.sparse[off] // also where dense has since grown over it
	return v, ok
}

// set records v at off, which holds nothing yet.
func (m *offsetValues) set(off int64, v seenValue) {
	if off >= 0 && off < 2*int64(m.n)+4096 {
		m.reserve(off + 1)
	}
	if off >= 0 && off < int64(len(m.dense)) {
		v.idx++
		m.dense[off] = v
		m.n++
		return
	}
	if m.sparse == nil {
		m.sparse = map[int64]seenValue{}
	}
	m.sparse[off] = v
}
