package checkers

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/zkchaos/zkchaos/history"
)

// Idempotence checks what an idempotent producer is promised (KIP-98): the
// leader appends each of its records once, however often the producer
// resends it, because it keeps every producer's last sequence numbers per
// partition in the log and answers a resend with the original offset, also
// after a leader change. A record acknowledged to an idempotent producer and
// read at two offsets is a violation.
//
// Only produces whose history says they were idempotent
// (history.ClientOp.Idempotent) are judged; a non-idempotent producer's
// resend appended twice is the known anomaly duplicate-append, which the
// linearizable checker names. A value counts as being at an offset when
// every read of that offset returned it: an offset that also held another
// value changed, which the durability checker judges, and a record lost and
// re-appended by its producer is not a duplicate. A produce whose outcome is
// unknown (info) was never acknowledged, so its copies are counted in the
// details, not judged.
type Idempotence struct{}

// Name implements Checker.
func (Idempotence) Name() string { return "idempotence" }

// Check implements Checker.
func (Idempotence) Check(h *history.History) Result {
	r := &report{name: "idempotence"}
	ops := operations(h)

	// Only values an idempotent producer produced are judged, so only
	// their sightings are kept: one slot per such (partition, value), with
	// each distinct offset reads returned it at and the first read that did
	// (reads in invoke order). A history without idempotent produces costs
	// one pass over the operations.
	type tpVal struct {
		tp  history.TopicPartition
		val string
	}
	type tpOff struct {
		tp  history.TopicPartition
		off int64
	}
	slot := map[tpVal]int32{}
	for _, op := range ops {
		if o := op.Op(); o.F == history.FProduce && o.Idempotent {
			if _, ok := slot[tpVal{o.TP(), o.Value}]; !ok {
				slot[tpVal{o.TP(), o.Value}] = int32(len(slot))
			}
		}
	}
	seen := make([]sightings, len(slot))
	reads := 0
	for _, op := range ops {
		if op.Op().F != history.FRead || op.Outcome() != history.OpOK {
			continue
		}
		reads++
		if len(slot) == 0 {
			continue
		}
		tp := op.Op().TP()
		for _, rec := range op.Records() {
			if i, ok := slot[tpVal{tp, rec.Value}]; ok {
				seen[i].add(rec.Offset, op.Complete.Index)
			}
		}
	}
	// An offset counts for a value only when every read of it returned
	// that value. Only offsets of values read at two or more matter, so
	// only those are tracked: the one value seen there, or that there were
	// several.
	type held struct {
		val   string
		multi bool
	}
	at := map[tpOff]*held{}
	for v, i := range slot {
		if seen[i].n < 2 {
			continue
		}
		for _, s := range seen[i].all() {
			at[tpOff{v.tp, s.off}] = nil
		}
	}
	if len(at) > 0 {
		for _, op := range ops {
			if op.Op().F != history.FRead || op.Outcome() != history.OpOK {
				continue
			}
			tp := op.Op().TP()
			for _, rec := range op.Records() {
				k := tpOff{tp, rec.Offset}
				hd, ok := at[k]
				switch {
				case !ok:
				case hd == nil:
					at[k] = &held{val: rec.Value}
				case hd.val != rec.Value:
					hd.multi = true
				}
			}
		}
	}

	acked, unackedDups := 0, 0
	for _, op := range ops {
		o := op.Op()
		if o.F != history.FProduce || !o.Idempotent {
			continue
		}
		outcome := op.Outcome()
		if outcome == history.OpOK {
			acked++
		}
		tp := o.TP()
		i, ok := slot[tpVal{tp, o.Value}]
		if !ok || seen[i].n < 2 {
			continue
		}
		var stable []offRead
		for _, s := range seen[i].all() {
			if hd := at[tpOff{tp, s.off}]; hd != nil && !hd.multi {
				stable = append(stable, s)
			}
		}
		if len(stable) < 2 {
			continue
		}
		slices.SortFunc(stable, func(a, b offRead) int { return cmp.Compare(a.off, b.off) })
		if outcome != history.OpOK {
			unackedDups++
			continue
		}
		a, b := stable[0].off, stable[1].off
		ra, rb := stable[0].read, stable[1].read
		events := []int{op.Invoke.Index, op.Complete.Index, ra}
		if rb != ra {
			events = append(events, rb)
		}
		more := ""
		if len(stable) > 2 {
			more = fmt.Sprintf(" (and at %d further offsets)", len(stable)-2)
		}
		r.violate(events, "idempotent producer process %d's record %q (produce invoked at event %d, acknowledged at offset %d at event %d) is in %s at offsets %d (read by event %d) and %d (read by event %d)%s: the leader appended a resend again instead of answering it with the original offset",
			o.Process, o.Value, op.Invoke.Index, op.Offset(), op.Complete.Index, tp, a, ra, b, rb, more)
	}
	r.detail("idempotent_acknowledged", acked)
	if unackedDups > 0 {
		r.detail("unacknowledged_duplicates", unackedDups)
	}
	if acked == 0 {
		return r.result("no acknowledged produce of an idempotent producer to check")
	}
	return r.result(fmt.Sprintf("each of the %d records acknowledged to idempotent producers is at one offset in every read (%d reads)", acked, reads))
}

// offRead is one offset a value was read at and the first read (its
// completion index) that returned it there.
type offRead struct {
	off  int64
	read int
}

// sightings are the distinct offsets one value was read at, in the order
// first seen; the first is inline since a value is nearly always at one.
type sightings struct {
	n     int
	first offRead
	more  []offRead
}

func (s *sightings) add(off int64, read int) {
	if s.n > 0 {
		if s.first.off == off {
			return
		}
		for _, m := range s.more {
			if m.off == off {
				return
			}
		}
		s.more = append(s.more, offRead{off, read})
	} else {
		s.first = offRead{off, read}
	}
	s.n++
}

func (s *sightings) all() []offRead {
	if s.n == 0 {
		return nil
	}
	return append([]offRead{s.first}, s.more...)
}
