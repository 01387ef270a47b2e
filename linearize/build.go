package linearize

// This file builds each partition's porcupine input from the client
// operations: which reads observed which produced value, where each produce
// is placed in the log, the gaps filled in, and the reads judged; Check
// (check.go) runs the result.

import (
	"math"
	"slices"
	"sort"

	"github.com/anishathalye/porcupine"

	"github.com/zkchaos/zkchaos/history"

	"github.com/zkchaos/zkchaos/internal/hugepage"
)

// plan is the history split for the per-partition builds: client
// operations by topic-partition (order sorted), client ids, time origin.
type plan struct {
	t0      int64
	order   []history.TopicPartition
	ops     [][]history.Operation // by order
	clients map[clientKey]int
}

type clientKey struct {
	src  string
	proc int
}

// clientID is the porcupine client (the visualization's lane) of op's
// process. plan numbers every process up front, in history order, so
// partitions built concurrently only read the map.
func (pl *plan) clientID(op history.Operation) int {
	return pl.clients[clientKey{op.Invoke.Source, op.Invoke.Op.Process}]
}

// newPlan splits ops, h's client operations (nil: paired here), by
// partition.
func newPlan(h *history.History, ops []history.Operation) *plan {
	pl := &plan{clients: map[clientKey]int{}}
	if len(h.Events) > 0 {
		pl.t0 = h.Events[0].Time
	}
	if ops == nil {
		ops, _ = history.Operations(h)
	}
	// Each op's partition is looked up once and the partitions' lists are
	// cut from one array sized by a count: appending to a list per
	// partition grew them by doubling, a tenth of the checker's allocation.
	at := map[history.TopicPartition]int32{} // → position in first-seen order
	var seen []history.TopicPartition
	var count []int
	which := make([]int32, len(ops))
	for i, op := range ops {
		k := clientKey{op.Invoke.Source, op.Invoke.Op.Process}
		if _, ok := pl.clients[k]; !ok {
			pl.clients[k] = len(pl.clients)
		}
		tp := op.Op().TP()
		j, ok := at[tp]
		if !ok {
			j = int32(len(seen))
			at[tp] = j
			seen = append(seen, tp)
			count = append(count, 0)
		}
		which[i] = j
		count[j]++
	}
	all := hugepage.Make[history.Operation](len(ops), len(ops))
	lists := make([][]history.Operation, len(seen))
	start := 0
	for j, n := range count {
		lists[j] = all[start : start : start+n]
		start += n
	}
	for i, op := range ops {
		lists[which[i]] = append(lists[which[i]], op)
	}
	pl.order = slices.Clone(seen)
	slices.SortFunc(pl.order, history.TopicPartition.Compare)
	pl.ops = make([][]history.Operation, len(pl.order))
	for i, tp := range pl.order {
		pl.ops[i] = lists[at[tp]]
	}
	return pl
}

// build returns every partition's porcupine history at once (sorted by
// topic-partition) and the time origin; Check builds them one per worker.
func build(h *history.History) ([]*partition, int64) {
	pl := newPlan(h, nil)
	parts := make([]*partition, 0, len(pl.order))
	for i, tp := range pl.order {
		parts = append(parts, buildPartition(tp, pl.ops[i], pl.t0, pl.clientID))
	}
	return parts, pl.t0
}

// release drops what only the search, the diagnosis and the visualization
// need, keeping the outcome.
func (p *partition) release() {
	p.ops, p.ins, p.outs, p.t, p.acks, p.maxAcked = nil, nil, nil, nil, nil, nil
}

// unknownProduce reports whether a produce's outcome is open: no response,
// info, an ok whose acks did not wait for the ISR (such a record may
// legitimately vanish), or NOT_ENOUGH_REPLICAS_AFTER_APPEND (appended, not
// acknowledged).
func unknownProduce(op history.Operation) bool {
	switch op.Outcome() {
	case history.OpOK:
		return op.Acks() != history.AcksAll
	case history.OpFail:
		return op.Complete.Op.ErrorCode == history.ErrNotEnoughReplicasAftr
	}
	return true
}

// prod is a produce entering the model, at a definite absolute offset.
// dup marks an extra copy of an operation's value (a client resend that
// was appended again), as opposed to its primary append.
type prod struct {
	op     history.Operation
	offset int64
	ret    int64
	dup    bool
}

// maxGapFill bounds the offsets scanned for gaps, so a garbage offset in a
// history cannot make the checker allocate without limit.
const maxGapFill = 1 << 20

// fillGaps accounts for unknown produces that no read observed. Such a
// produce either never happened or landed at an offset no read reached. The
// only offsets where that matters are gaps: offsets between the lowest and
// highest known ones that no known produce holds (an acknowledged produce
// above a gap needs something below it). Each gap, lowest first, is given
// to an unseen produce, earliest invoked first, as a produce at that offset
// with an open return time; this never forbids a real ordering, because the
// k-th gap was filled no earlier than the k-th earliest invocation among all
// unseen produces. The remaining unseen produces are dropped: if they
// happened, nothing in the history depends on them.
func (p *partition) fillGaps(prods *[]prod, unseen []history.Operation, base int64) {
	if len(unseen) == 0 || len(*prods) == 0 {
		p.out.Dropped += len(unseen)
		return
	}
	held := make(map[int64]bool, len(*prods))
	top := base
	for _, pr := range *prods {
		held[pr.offset] = true
		top = max(top, pr.offset)
	}
	if top-base > maxGapFill {
		p.out.Dropped += len(unseen)
		return
	}
	sort.SliceStable(unseen, func(a, b int) bool { return unseen[a].Invoke.Time < unseen[b].Invoke.Time })
	next := 0
	for off := base; off < top && next < len(unseen); off++ {
		if held[off] {
			continue
		}
		*prods = append(*prods, prod{op: unseen[next], offset: off, ret: math.MaxInt64})
		next++
		p.out.Unresolved++
	}
	p.out.Dropped += len(unseen) - next
}

// sighting is where reads observed one value: for each offset it was
// returned at, the earliest return among those reads. A value normally
// sits at one offset, kept inline; further offsets (duplicate appends) are
// rare and go to more, so the common case allocates nothing extra.
type sighting struct {
	first obsAt
	more  []obsAt
}

// obsAt is one (value, offset) observation: the earliest return time of a
// read that returned the value there, and that read's completion index.
type obsAt struct {
	offset int64
	ret    int64
	read   int
}

// note records o, keeping the earliest return per offset.
func (s *sighting) note(o obsAt) {
	if s.first.offset == o.offset {
		if o.ret < s.first.ret {
			s.first = o
		}
		return
	}
	for i := range s.more {
		if s.more[i].offset == o.offset {
			if o.ret < s.more[i].ret {
				s.more[i] = o
			}
			return
		}
	}
	s.more = append(s.more, o)
}

// all returns every observation, the inline one first.
func (s sighting) all() []obsAt {
	if len(s.more) == 0 {
		return []obsAt{s.first}
	}
	return append([]obsAt{s.first}, s.more...)
}

// maxDuplicateExamples caps the duplicate appends described per partition;
// the rest are only counted.
const maxDuplicateExamples = 5

// buildPartition turns one partition's operations into porcupine input, in
// four steps: what reads observed (observeReads), which produces enter the
// model at which offsets (placeProduces, fillGaps), the value table and the
// produce operations (addProduces), and the reads, with the stale empty
// ones listed aside (addReads).
func buildPartition(tp history.TopicPartition, ops []history.Operation, t0 int64, clientID func(history.Operation) int) *partition {
	p := &partition{out: PartitionOutcome{Partition: tp.String()}}
	obs := observeReads(ops, t0)
	pl := p.placeProduces(ops, obs, t0)
	// Primaries before copies: where a copy and another op's primary claim
	// one offset the table keeps the primary, so the read that saw the copy
	// there is the suspect (the model rejects two appends at one offset
	// either way).
	prods := append(pl.prods, pl.copies...)
	p.fillGaps(&prods, pl.unseen, pl.base)
	// Every produce placed and at most every op of the partition again as
	// a read: sized once, since growing a slice of porcupine operations
	// by doubling was a quarter of the checker's allocation.
	n := len(prods) + len(ops)
	p.ops, p.ins, p.outs = hugepage.Make[porcupine.Operation](0, n), hugepage.Make[input](0, n), hugepage.Make[output](0, n)
	p.addProduces(tp, prods, pl.base, t0, clientID)
	p.addReads(ops, pl.early, t0, clientID)
	p.out.Ops = len(p.ops)
	return p
}

// observations is what reads observed, by value. The map holds only an
// index into sights: reads return long runs of records, and a small map
// value keeps this loop (a good part of the whole check) cheap.
type observations struct {
	byValue  map[string]int32
	sights   []sighting
	produces int // the partition's produce operations
}

func (o *observations) get(v string) (sighting, bool) {
	i, ok := o.byValue[v]
	if !ok {
		return sighting{}, false
	}
	return o.sights[i], true
}

// observeReads records, for every value an ok read returned, each offset
// it was returned at with the earliest return there.
func observeReads(ops []history.Operation, t0 int64) *observations {
	// Values are (almost) all produced here, so the produce count sizes
	// both up front instead of growing them record by record.
	nprod := 0
	for _, op := range ops {
		if op.Op().F == history.FProduce {
			nprod++
		}
	}
	obs := &observations{byValue: make(map[string]int32, nprod), sights: make([]sighting, 0, nprod), produces: nprod}
	for _, op := range ops {
		if op.Op().F != history.FRead || op.Outcome() != history.OpOK {
			continue
		}
		o := obsAt{ret: op.Complete.Time - t0, read: op.Complete.Index}
		for _, r := range op.Records() {
			o.offset = r.Offset
			if i, ok := obs.byValue[r.Value]; ok {
				obs.sights[i].note(o)
				continue
			}
			obs.byValue[r.Value] = int32(len(obs.sights))
			obs.sights = append(obs.sights, sighting{first: o})
		}
	}
	return obs
}

// placement is which produces enter the model, and where.
type placement struct {
	prods  []prod              // primary appends: acknowledged or resolved
	copies []prod              // duplicate appends (client resends)
	unseen []history.Operation // unknown produces no read observed
	// early holds reads that returned a value before its produce was
	// invoked: no resend explains that, so they stay suspects.
	early map[int]bool
	base  int64 // lowest offset any placed append holds
}

// place gives an observed append the interval [invoke, first read that
// returned it there]; observed before invoked, it gets an open return so
// the model rejects the read, and the read is named as a suspect.
func (pl *placement) place(op history.Operation, o obsAt, t0 int64) int64 {
	if o.ret < op.Invoke.Time-t0 {
		if pl.early == nil {
			pl.early = map[int]bool{}
		}
		pl.early[o.read] = true
		return math.MaxInt64
	}
	return o.ret
}

// placeProduces decides each produce's offsets: an acknowledged one at its
// acknowledged offset (plus a duplicate wherever else its value was read),
// an unknown one that reads observed at the earliest-observed offset (plus
// duplicates), the rest left unseen for fillGaps.
func (p *partition) placeProduces(ops []history.Operation, obs *observations, t0 int64) *placement {
	// At most one primary per produce: sized once rather than grown.
	pl := &placement{base: math.MaxInt64, prods: make([]prod, 0, obs.produces)}
	for _, op := range ops {
		if op.Op().F != history.FProduce {
			continue
		}
		n := len(pl.copies)
		s, seen := obs.get(op.Op().Value)
		switch {
		case !unknownProduce(op):
			if op.Outcome() != history.OpOK {
				continue // failed: certainly did not happen
			}
			pl.prods = append(pl.prods, prod{op: op, offset: op.Offset(), ret: op.Complete.Time - t0})
			if !seen || (len(s.more) == 0 && s.first.offset == op.Offset() && s.first.ret >= op.Invoke.Time-t0) {
				break // the common case: read only where acknowledged, after the invoke
			}
			// Every offset it was read at other than the acknowledged one
			// is a duplicate append of this op: a non-idempotent producer's
			// resend, which may land anywhere from the invoke on (even
			// after the acknowledged copy, if the first attempt was
			// delayed) and no later than the first read that saw it.
			for _, o := range s.all() {
				if o.offset == op.Offset() {
					if o.ret < op.Invoke.Time-t0 {
						pl.place(op, o, t0) // only to flag the read
					}
					continue
				}
				pl.copies = append(pl.copies, prod{op: op, offset: o.offset, ret: pl.place(op, o, t0), dup: true})
			}
		default:
			if !seen {
				pl.unseen = append(pl.unseen, op)
				continue
			}
			// An unknown produce read at several offsets was appended at
			// each: the earliest-observed append is taken as the primary,
			// the others as duplicates, all placed the same way.
			all := s.all()
			primary := all[0]
			for _, o := range all[1:] {
				if o.ret < primary.ret {
					primary = o
				}
			}
			pl.prods = append(pl.prods, prod{op: op, offset: primary.offset, ret: pl.place(op, primary, t0)})
			p.out.Resolved++
			for _, o := range all {
				if o.offset != primary.offset {
					pl.copies = append(pl.copies, prod{op: op, offset: o.offset, ret: pl.place(op, o, t0), dup: true})
				}
			}
		}
		pl.base = min(pl.base, pl.prods[len(pl.prods)-1].offset)
		for _, c := range pl.copies[n:] {
			pl.base = min(pl.base, c.offset)
		}
		if len(pl.copies) > n {
			p.noteDuplicate(op, pl.prods[len(pl.prods)-1], pl.copies[n:], s)
		}
	}
	if pl.base == math.MaxInt64 {
		pl.base = 0
	}
	return pl
}

// push adds one porcupine operation. Its input and output are kept in
// arrays sized with p.ops, and the operation holds pointers to them: a
// struct boxed in an interface is an allocation of its own, one per
// operation, which was a sixth of the build's allocation.
func (p *partition) push(client int, in input, out output, call, ret int64) {
	p.ins = append(p.ins, in)
	p.outs = append(p.outs, out)
	p.ops = append(p.ops, porcupine.Operation{ClientId: client, Input: &p.ins[len(p.ins)-1], Call: call,
		Output: &p.outs[len(p.outs)-1], Return: ret, Metadata: in.event})
}

// addProduces fixes the value table and adds one porcupine produce per
// placed append; it also keeps the definite acknowledgements, by return
// time, for spotting stale empty reads.
func (p *partition) addProduces(tp history.TopicPartition, prods []prod, base, t0 int64, clientID func(history.Operation) int) {
	top := int64(-1)
	for _, pr := range prods {
		if pr.offset >= 0 {
			top = max(top, pr.offset-base)
		}
	}
	t := newTable(tp.String(), base, top, len(prods))
	p.t = t
	p.acks = make([]prod, 0, len(prods))
	for _, pr := range prods {
		if pr.offset >= 0 {
			t.add(pr.offset-base, pr.op.Op().Value)
		}
	}
	for _, pr := range prods {
		out := output{offset: -1}
		if pr.offset >= 0 {
			out.offset = pr.offset - base
		}
		p.push(clientID(pr.op), input{kind: produceOp, value: pr.op.Op().Value, dup: pr.dup, t: t, event: pr.op.Invoke.Index},
			out, pr.op.Invoke.Time-t0, pr.ret)
		if !pr.dup && !unknownProduce(pr.op) {
			p.acks = append(p.acks, pr)
		}
	}
	sort.Slice(p.acks, func(a, b int) bool { return p.acks[a].ret < p.acks[b].ret })
	p.maxAcked = make([]int64, len(p.acks))
	for i, a := range p.acks {
		p.maxAcked[i] = a.offset
		if i > 0 {
			p.maxAcked[i] = max(p.maxAcked[i], p.maxAcked[i-1])
		}
	}
}

// addReads adds one porcupine read per ok read that returned records, and
// lists the empty ones below acknowledged produces as stale (see the
// package doc: an empty fetch constrains nothing).
func (p *partition) addReads(ops []history.Operation, early map[int]bool, t0 int64, clientID func(history.Operation) int) {
	t := p.t
	for _, op := range ops {
		if op.Op().F != history.FRead || op.Outcome() != history.OpOK {
			continue // a read that failed or timed out changed nothing
		}
		if len(op.Records()) == 0 {
			p.noteStaleEmpty(op, t0)
			continue
		}
		start := op.Op().Offset
		recs := judgedRecords(op.Records(), t.base)
		suspect := early[op.Complete.Index]
		for _, r := range recs {
			if v, ok := t.value(r.Offset - t.base); !ok || v != r.Value {
				suspect = true
			}
		}
		if suspect && len(p.out.Suspects) < 20 {
			p.out.Suspects = append(p.out.Suspects, op.Complete.Index)
		}
		if len(recs) == 0 {
			continue
		}
		p.push(clientID(op), input{kind: readOp, offset: max(start-t.base, 0), t: t, event: op.Invoke.Index},
			output{records: recs}, op.Invoke.Time-t0, op.Complete.Time-t0)
	}
}

// judgedRecords returns the records at or above base (those below were
// written before the workload and cannot be judged). Reads return runs of
// consecutive offsets, so that is a suffix of the history's own slice,
// shared rather than copied: copying every record read was the checker's
// largest allocation on histories of full polls.
func judgedRecords(all []history.Record, base int64) []history.Record {
	k := 0
	for k < len(all) && all[k].Offset < base {
		k++
	}
	rest := all[k:]
	if !slices.ContainsFunc(rest, func(r history.Record) bool { return r.Offset < base }) {
		return rest
	}
	var recs []history.Record // out of order: filter into a copy
	for _, r := range rest {
		if r.Offset >= base {
			recs = append(recs, r)
		}
	}
	return recs
}

// maxStaleExamples caps the stale empty reads described per partition; the
// rest are only counted.
const maxStaleExamples = 200

// noteStaleEmpty lists an empty read as stale when produces at or above
// its offset had been acknowledged before it began.
func (p *partition) noteStaleEmpty(op history.Operation, t0 int64) {
	call := op.Invoke.Time - t0
	from := op.Op().Offset
	i := sort.Search(len(p.acks), func(i int) bool { return p.acks[i].ret >= call }) - 1
	if i < 0 || p.maxAcked[i] < from {
		return
	}
	p.out.StaleEmptyCount++
	if len(p.out.StaleEmpty) >= maxStaleExamples {
		return
	}
	s := StaleRead{Partition: p.out.Partition, Invoke: op.Invoke.Index, Read: op.Complete.Index, Offset: from,
		Start: op.Invoke.Time, End: op.Complete.Time, FirstAck: -1}
	for _, a := range p.acks[:i+1] {
		if a.offset < from {
			continue
		}
		s.Acknowledged++
		if s.FirstAck < 0 {
			s.FirstAck, s.FirstValue, s.FirstOffset, s.FirstAckTime = a.op.Complete.Index, a.op.Op().Value, a.offset, a.op.Complete.Time
		}
	}
	p.out.StaleEmpty = append(p.out.StaleEmpty, s)
}

// noteDuplicate counts op's extra appends and describes the first few:
// every offset its value was at, the acknowledged one, and the events that
// show it (the produce's invoke and completion, and the first read that
// saw each copy).
func (p *partition) noteDuplicate(op history.Operation, primary prod, copies []prod, s sighting) {
	p.out.Duplicates += len(copies)
	if len(p.out.DuplicateExamples) >= maxDuplicateExamples {
		return
	}
	d := Duplicate{Partition: p.out.Partition, Value: op.Op().Value, Acknowledged: -1,
		Offsets: []int64{primary.offset}, Events: []int{op.Invoke.Index}}
	if !unknownProduce(op) {
		d.Acknowledged = primary.offset
	}
	if op.Complete != nil {
		d.Events = append(d.Events, op.Complete.Index)
	}
	for _, c := range copies {
		d.Offsets = append(d.Offsets, c.offset)
	}
	for _, o := range s.all() {
		d.Events = append(d.Events, o.read)
	}
	sort.Slice(d.Offsets, func(a, b int) bool { return d.Offsets[a] < d.Offsets[b] })
	sort.Ints(d.Events)
	d.Events = slices.Compact(d.Events)
	p.out.DuplicateExamples = append(p.out.DuplicateExamples, d)
}
