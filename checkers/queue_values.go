package checkers

// The queue checkers that judge values: one offset and one value
// (queue-log), lost writes, and what read_committed consumers may see
// (queue-isolation).

import (
	"fmt"
	"maps"
	"slices"

	"github.com/zkchaos/zkchaos/history"
)

// QueueLog checks that the queue topic's partitions are logs: a value is
// at one offset (no duplicate), and an offset holds one value (no
// inconsistent offsets), as every send's acknowledgement and every poll
// showed them. Kafka's idempotent producer writes each value once, and a
// committed offset never changes, except when crash-lose-unflushed took it
// from every replica the controller could elect before a new leader wrote
// there (the known anomalies of unflushed.go).
type QueueLog struct{}

// Name implements Checker.
func (QueueLog) Name() string { return "queue-log" }

// Check implements Checker.
func (c QueueLog) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	m := queueModelOf(h)
	if len(m.ops) == 0 {
		return noQueue(r)
	}
	quorum := newQuorumLosses(h)
	for _, v := range slices.Sorted(maps.Keys(m.values)) {
		qv := m.values[v]
		offs := map[int64]*history.Event{}
		if qv.acked >= 0 {
			offs[qv.acked] = qv.send.Complete
		}
		for o, e := range qv.seen {
			if offs[o] == nil {
				offs[o] = e
			}
		}
		if len(offs) < 2 {
			continue
		}
		list := slices.Sorted(maps.Keys(offs))
		a, b := offs[list[0]], offs[list[1]]
		r.violate([]int{a.Index, b.Index}, "duplicate: value %d is at %d offsets of %s: offset %d (%s, event %d, %s) and offset %d (%s, event %d, %s); an idempotent producer's value is written once.",
			v, len(list), m.tp(qv.key), list[0], who(a), a.Index, m.when(a), list[1], who(b), b.Index, m.when(b))
	}
	for _, key := range slices.Sorted(maps.Keys(m.at)) {
		for _, o := range slices.Sorted(maps.Keys(m.at[key])) {
			vals := m.at[key][o]
			if len(vals) < 2 {
				continue
			}
			list := slices.Sorted(maps.Keys(vals))
			a, b := vals[list[0]], vals[list[1]]
			if m.lostBetween(r, quorum, key, m.inLog(key, o, list[0], a), m.inLog(key, o, list[1], b), fmt.Sprintf("offset %d of %s held value %d (%s, event %d, %s) and value %d (%s, event %d, %s)",
				o, m.tp(key), list[0], who(a), a.Index, m.when(a), list[1], who(b), b.Index, m.when(b))) {
				continue
			}
			r.violate([]int{a.Index, b.Index}, "inconsistent offsets: offset %d of %s holds value %d (%s, event %d, %s) and value %d (%s, event %d, %s); a committed offset holds one value for the life of the partition.",
				o, m.tp(key), list[0], who(a), a.Index, m.when(a), list[1], who(b), b.Index, m.when(b))
		}
	}
	r.detail("values", len(m.values))
	return r.result(fmt.Sprintf("each of the %d values sent or polled is at one offset, and every offset holds one value.", len(m.values)))
}

// QueueLostWrite checks that no value the log must hold is missing: a
// committed send (or a value a consumer that may only see committed
// records polled) that no poll returned although polls, or the drain, read
// past its offset; and a value polled during the run that the drain, which
// read its partition in full, did not return. A loss that
// crash-lose-unflushed explains (unflushed.go) is its known anomaly.
type QueueLostWrite struct{}

// Name implements Checker.
func (QueueLostWrite) Name() string { return "queue-lost-write" }

// Check implements Checker.
func (c QueueLostWrite) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	m := queueModelOf(h)
	if len(m.ops) == 0 {
		return noQueue(r)
	}
	unverified := map[int32]int{}
	judged := 0
	quorum := newQuorumLosses(h)
	for _, v := range slices.Sorted(maps.Keys(m.values)) {
		qv := m.values[v]
		if !qv.readable() {
			continue
		}
		judged++
		off := qv.offsetAt()
		end, drained := m.drained[qv.key]
		tp := m.tp(qv.key)
		switch {
		case len(qv.seen) == 0 && drained && m.lostBetween(r, quorum, qv.key, m.inLog(qv.key, off, v, qv.send.Complete), m.drain,
			fmt.Sprintf("value %d, acknowledged at offset %d of %s (event %d, %s), was never polled, though the drain read %s to its end offset %d (event %d, %s)",
				v, off, tp, qv.send.Complete.Index, m.when(qv.send.Complete), tp, end, m.drain.Index, m.when(m.drain))):
		case len(qv.seen) == 0 && drained:
			s := qv.send.Complete
			r.violate([]int{qv.send.Invoke.Index, s.Index, m.drain.Index}, "lost write: value %d, sent to %s by %s and acknowledged at offset %d (event %d, %s), was never polled, though the drain read %s from offset 0 to its end offset %d (event %d, %s).",
				v, tp, who(s), off, s.Index, m.when(s), tp, end, m.drain.Index, m.when(m.drain))
		case len(qv.seen) == 0 && m.topOffset[qv.key] > off && m.lostBetween(r, quorum, qv.key, m.inLog(qv.key, off, v, qv.send.Complete), m.top[qv.key],
			fmt.Sprintf("value %d, acknowledged at offset %d of %s (event %d, %s), was never polled, though a poll read %s past it (event %d, %s)",
				v, off, tp, qv.send.Complete.Index, m.when(qv.send.Complete), tp, m.top[qv.key].Index, m.when(m.top[qv.key]))):
		case len(qv.seen) == 0 && m.topOffset[qv.key] > off:
			s, t := qv.send.Complete, m.top[qv.key]
			r.violate([]int{qv.send.Invoke.Index, s.Index, t.Index}, "lost write: value %d, sent to %s by %s and acknowledged at offset %d (event %d, %s), was never polled, though %s polled offset %d of %s (event %d, %s).",
				v, tp, who(s), off, s.Index, m.when(s), who(t), m.topOffset[qv.key], tp, t.Index, m.when(t))
		case len(qv.seen) == 0:
			unverified[qv.key]++
		case drained && !qv.finalSeen && m.lostBetween(r, quorum, qv.key, m.inLog(qv.key, off, v, firstSeen(qv)), m.drain,
			fmt.Sprintf("value %d at offset %d of %s, polled (event %d, %s), is missing from the drain (event %d, %s)",
				v, off, tp, firstSeen(qv).Index, m.when(firstSeen(qv)), m.drain.Index, m.when(m.drain))):
		case drained && !qv.finalSeen:
			p := firstSeen(qv)
			r.violate([]int{p.Index, m.drain.Index}, "lost write: value %d at offset %d of %s, polled by %s (event %d, %s), is missing from the drain, which read %s from offset 0 to its end offset %d (event %d, %s).",
				v, off, tp, who(p), p.Index, m.when(p), tp, end, m.drain.Index, m.when(m.drain))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(unverified)) {
		r.cannotDecide("%d committed values sent to %s were never polled, and neither the drain nor any poll read %s past their offsets, so whether they were lost is not known.",
			unverified[key], m.tp(key), m.tp(key))
	}
	r.detail("values_judged", judged)
	r.detail("partitions_drained", len(m.drained))
	return r.result(fmt.Sprintf("each of the %d values that the log must hold was polled, and each one polled during the run is in the drain of its partition.", judged))
}

// QueueIsolation checks what consumers reading at read_committed saw: no
// value of a transaction its producer never asked to commit (aborted
// read), no value of a transaction before its producer asked to commit it
// (uncommitted read), and, at any isolation level, no value of a
// non-transactional send that certainly failed.
type QueueIsolation struct{}

// Name implements Checker.
func (QueueIsolation) Name() string { return "queue-isolation" }

// Check implements Checker.
func (c QueueIsolation) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	m := queueModelOf(h)
	if len(m.ops) == 0 {
		return noQueue(r)
	}
	judged := 0
	for _, v := range slices.Sorted(maps.Keys(m.values)) {
		qv := m.values[v]
		if qv.send == nil || len(qv.seen) == 0 {
			continue
		}
		inv, done := qv.send.Invoke, qv.send.Complete
		tp := m.tp(qv.key)
		if !inv.Queue.Transactional {
			if qv.outcome == history.OpFail {
				p := firstSeen(qv)
				r.violate([]int{done.Index, p.Index}, "failed send read: value %d, whose send to %s by %s failed (event %d, %s: %s), was polled by %s (event %d, %s).",
					v, tp, who(done), done.Index, m.when(done), done.Queue.Error, who(p), p.Index, m.when(p))
			}
			continue
		}
		p := qv.rcSeen
		if p == nil {
			continue
		}
		judged++
		if done == nil {
			continue // no completion: when it asked to commit is not known
		}
		commit := done.Queue.CommitStart
		if commit == 0 && qv.outcome != history.OpOK {
			r.violate([]int{inv.Index, done.Index, p.Index}, "aborted read: value %d, sent to %s in a transaction by %s that it never asked to commit (%s, event %d, %s), was polled at read_committed by %s (event %d, %s).",
				v, tp, who(inv), outcomeWord(qv.outcome), done.Index, m.when(done), who(p), p.Index, m.when(p))
			continue
		}
		if commit > 0 && p.Time < commit {
			r.violate([]int{inv.Index, done.Index, p.Index}, "uncommitted read: value %d, sent to %s in a transaction by %s (event %d), was polled at read_committed by %s (event %d, %s), before the producer asked to commit it (+%s; the transaction ended %s at event %d).",
				v, tp, who(inv), inv.Index, who(p), p.Index, m.when(p), rel(commit, m.t0), outcomeWord(qv.outcome), done.Index)
		}
	}
	r.detail("transactional_values_polled", judged)
	return r.result(fmt.Sprintf("no read_committed poll returned a value of an aborted transaction or one not yet asked to commit (%d transactional values polled at read_committed), and no poll a value of a failed send.", judged))
}

// firstSeen is the earliest poll that returned the value.
func firstSeen(qv *queueValue) *history.Event {
	var first *history.Event
	for _, e := range qv.seen {
		if first == nil || e.Index < first.Index {
			first = e
		}
	}
	return first
}

func outcomeWord(t history.OpType) string {
	switch t {
	case history.OpOK:
		return "committed"
	case history.OpFail:
		return "aborted"
	}
	return "with an unknown outcome"
}
