package checkers

import (
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
	ops, _ := history.Operations(h)

	type tpOff struct {
		tp  history.TopicPartition
		off int64
	}
	type tpVal struct {
		tp  history.TopicPartition
		val string
	}
	// held: the values each offset was read holding; first: the first read
	// event that returned value at an offset.
	held := map[tpOff][]string{}
	first := map[tpOff]map[string]int{}
	offsets := map[tpVal][]int64{}
	reads := 0
	for _, op := range ops {
		if op.Op().F != history.FRead || op.Outcome() != history.OpOK {
			continue
		}
		reads++
		tp := op.Op().TP()
		for _, rec := range op.Records() {
			k := tpOff{tp, rec.Offset}
			if first[k] == nil {
				first[k] = map[string]int{}
			}
			if _, ok := first[k][rec.Value]; ok {
				continue
			}
			first[k][rec.Value] = op.Complete.Index
			held[k] = append(held[k], rec.Value)
			v := tpVal{tp, rec.Value}
			offsets[v] = append(offsets[v], rec.Offset)
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
		var stable []int64
		for _, off := range offsets[tpVal{tp, o.Value}] {
			if len(held[tpOff{tp, off}]) == 1 {
				stable = append(stable, off)
			}
		}
		if len(stable) < 2 {
			continue
		}
		slices.Sort(stable)
		if outcome != history.OpOK {
			unackedDups++
			continue
		}
		a, b := stable[0], stable[1]
		ra, rb := first[tpOff{tp, a}][o.Value], first[tpOff{tp, b}][o.Value]
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
