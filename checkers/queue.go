package checkers

// The queue workload's checkers (see doc.go's table of client promises):
// what every one of them reads from the history's queue operations, built
// once per history (queueModelOf) and only read by the checkers.

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/zkchaos/zkchaos/history"
)

// queueValue is everything the history says about one sent value.
type queueValue struct {
	v   int64
	key int32
	// send is the operation that sent it (nil: no operation of the
	// history sent it), outcome that operation's.
	send    *history.QueueOperation
	outcome history.OpType
	// acked is the offset its send's completion gave, -1 without one.
	acked int64
	// seen maps each offset a poll returned it at to the first such poll's
	// completion; rcSeen is the first read_committed poll that returned it
	// (nil: none), with the poll's completion time.
	seen      map[int64]*history.Event
	rcSeen    *history.Event
	finalSeen bool
}

// readable says whether the value is one a consumer at any isolation level
// must be able to read: its send committed, or a read_committed poll
// returned it, or a poll returned it although no transaction wrote it.
func (qv *queueValue) readable() bool {
	if qv.outcome == history.OpOK || qv.rcSeen != nil {
		return true
	}
	return len(qv.seen) > 0 && qv.send != nil && !qv.send.Invoke.Queue.Transactional && qv.outcome != history.OpFail
}

// offsetAt is the value's offset: the acknowledged one, else the lowest a
// poll returned it at; -1 when neither.
func (qv *queueValue) offsetAt() int64 {
	if qv.acked >= 0 {
		return qv.acked
	}
	off := int64(-1)
	for o := range qv.seen {
		if off < 0 || o < off {
			off = o
		}
	}
	return off
}

// queueModel is a history's queue operations, by value and by partition.
type queueModel struct {
	t0     int64
	topic  string
	ops    []history.QueueOperation
	values map[int64]*queueValue
	// at maps partition → offset → the values there with an event that
	// put them there (a send's completion, a poll's).
	at map[int32]map[int64]map[int64]*history.Event
	// top is, per partition, the highest offset any poll returned and
	// that poll's completion.
	top map[int32]*history.Event
	// topOffset is the offset of top.
	topOffset map[int32]int64
	// drained: the partitions the drain read in full, with their end
	// offsets; drain is the drained op's completion (nil: no drain ended).
	drained map[int32]int64
	drain   *history.Event
	// readable, per partition, the offsets holding a readable value,
	// sorted.
	readable map[int32][]int64
	// appended is the first produce_append of each value at its offset:
	// when a leader put it in its log, which can be long before its send's
	// completion (a transaction whose end waits for a coordinator).
	appended map[queuePlace]*history.Event
}

// queuePlace is a value at an offset of partition key.
type queuePlace struct {
	key       int32
	offset, v int64
}

// queueModels holds, for each history Run is checking, the builder of its
// queue model: the first queue checker to ask builds it and the other four
// wait for that one, so a history's queue operations are paired and
// indexed by value once, and not at all on a log run, whose checkers never
// ask.
var queueModels sync.Map // *history.History → func() *queueModel

// queueModelOf returns h's queue model, shared under Run; a checker called
// on its own builds its own.
func queueModelOf(h *history.History) *queueModel {
	if v, ok := queueModels.Load(h); ok {
		return v.(func() *queueModel)()
	}
	return newQueueModel(h)
}

func newQueueModel(h *history.History) *queueModel {
	m := &queueModel{t0: firstTime(h), ops: history.QueueOperations(h), values: map[int64]*queueValue{},
		at: map[int32]map[int64]map[int64]*history.Event{}, top: map[int32]*history.Event{},
		topOffset: map[int32]int64{}, drained: map[int32]int64{}, readable: map[int32][]int64{}, appended: map[queuePlace]*history.Event{}}
	value := func(v int64, key int32) *queueValue {
		qv := m.values[v]
		if qv == nil {
			qv = &queueValue{v: v, key: key, acked: -1, outcome: history.OpInfo, seen: map[int64]*history.Event{}}
			m.values[v] = qv
		}
		return qv
	}
	for i := range m.ops {
		op := &m.ops[i]
		q := op.Op()
		if m.topic == "" {
			m.topic = q.Topic
		}
		if q.F == history.QueueDrained && op.Outcome() == history.OpOK {
			m.drain = op.Complete
			for _, e := range q.Offsets {
				m.drained[e.Key] = e.Offset
			}
		}
		if q.F != history.QueueTxn {
			continue
		}
		for _, mop := range q.Mops {
			switch mop.F {
			case history.MopSend:
				qv := value(mop.Value, mop.Key)
				qv.send, qv.outcome = op, op.Outcome()
				if op.Complete != nil && mop.Offset >= 0 {
					qv.acked = mop.Offset
					m.place(mop.Key, mop.Offset, mop.Value, op.Complete)
				}
			case history.MopPoll:
				if op.Outcome() != history.OpOK {
					continue
				}
				for _, p := range mop.Polled {
					for _, r := range p.Records {
						qv := value(r.Value, p.Key)
						if qv.seen[r.Offset] == nil {
							qv.seen[r.Offset] = op.Complete
						}
						if q.Isolation == history.ReadCommitted && qv.rcSeen == nil {
							qv.rcSeen = op.Complete
						}
						qv.finalSeen = qv.finalSeen || q.Final
						m.place(p.Key, r.Offset, r.Value, op.Complete)
						if t, ok := m.topOffset[p.Key]; !ok || r.Offset > t {
							m.topOffset[p.Key], m.top[p.Key] = r.Offset, op.Complete
						}
					}
				}
			}
		}
	}
	m.appends(h)
	for key, offs := range m.at {
		for o, vals := range offs {
			for v := range vals {
				if m.values[v].readable() {
					m.readable[key] = append(m.readable[key], o)
					break
				}
			}
		}
		slices.Sort(m.readable[key])
	}
	return m
}

// appends indexes the leaders' appends of the queue topic's values, one
// value per offset of the batch.
func (m *queueModel) appends(h *history.History) {
	for e := range eventsOf(h, history.KindProduceAppend) {
		a := e.Append
		if a == nil || a.Topic != m.topic || int64(len(a.Values)) != a.LastOffset-a.BaseOffset+1 {
			continue
		}
		for i, s := range a.Values {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				continue
			}
			at := queuePlace{a.Partition, a.BaseOffset + int64(i), v}
			if m.appended[at] == nil {
				m.appended[at] = e
			}
		}
	}
}

// inLog returns the earliest event that shows value v at offset o of
// partition key in a log: its leader's append when logged before e, else
// e (an event that showed it there).
func (m *queueModel) inLog(key int32, o, v int64, e *history.Event) *history.Event {
	if a := m.appended[queuePlace{key, o, v}]; a != nil && (e == nil || a.Time < e.Time) {
		return a
	}
	return e
}

// place notes that event e shows value v at offset o of partition key.
func (m *queueModel) place(key int32, o, v int64, e *history.Event) {
	offs := m.at[key]
	if offs == nil {
		offs = map[int64]map[int64]*history.Event{}
		m.at[key] = offs
	}
	vals := offs[o]
	if vals == nil {
		vals = map[int64]*history.Event{}
		offs[o] = vals
	}
	if vals[v] == nil {
		vals[v] = e
	}
}

// readableIn returns the readable offsets of partition key in [from, to).
func (m *queueModel) readableIn(key int32, from, to int64) []int64 {
	offs := m.readable[key]
	i := sort.Search(len(offs), func(i int) bool { return offs[i] >= from })
	j := sort.Search(len(offs), func(i int) bool { return offs[i] >= to })
	return offs[i:j]
}

// readableBefore reports whether an offset of partition key in [from, to)
// held a readable value by time t: its leader's append, or a send's answer
// or a poll that showed it there, came before t. An offset holds other
// values in other logs after crash-lose-unflushed; only one already there
// could have been returned by then.
func (m *queueModel) readableBefore(key int32, from, to, t int64) bool {
	for _, o := range m.readableIn(key, from, to) {
		for v, e := range m.at[key][o] {
			if m.values[v].readable() && m.inLog(key, o, v, e).Time < t {
				return true
			}
		}
	}
	return false
}

// valuesAt describes the offsets offs of partition key with their values,
// "offset 4 (value 17), offset 5 (value 23)", at most five.
func (m *queueModel) valuesAt(key int32, offs []int64) string {
	var parts []string
	for i, o := range offs {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more", len(offs)-5))
			break
		}
		vals := slices.Sorted(maps.Keys(m.at[key][o]))
		parts = append(parts, fmt.Sprintf("offset %d (value %s)", o, joinInts(vals)))
	}
	return strings.Join(parts, ", ")
}

func joinInts(vs []int64) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, " and ")
}

// lostBetween reports whether crash-lose-unflushed explains what was is:
// a loss of partition key whose crashes all came after event first (the
// value was in the log by then) and whose exposed leader was elected
// before event second. If so it names the known anomaly.
func (m *queueModel) lostBetween(r *report, quorum *quorumLosses, key int32, first, second *history.Event, was string) bool {
	if first == nil || second == nil {
		return false
	}
	if first.Time > second.Time {
		first, second = second, first
	}
	loss := quorum.between(m.tp(key), first.Time, second.Time)
	if loss == nil {
		return false
	}
	who, evs := describeQuorumLoss(loss, m.t0)
	r.knownAnomaly(loss.name(), append([]int{first.Index, second.Index}, evs...), "%s, after crash-lose-unflushed: %s (%s).", was, loss.how(), who)
	return true
}

// writtenAfterLoss reports whether crash-lose-unflushed explains a poll
// skip that was describes: between poll e and the first sighting of every
// readable value at the skipped offsets lies a loss of partition key (its
// crashes after the earlier, its exposed leader elected before the later),
// so the poll and the value are of two logs: a poll before the loss read
// the old log, where those offsets held nothing readable (a transaction's
// marker, an aborted value), and the value came with the new leader's; a
// poll after it read the new log, which lost the old value. A client hands
// out records it fetched long before (they wait in its buffer), so the
// poll's record rec counts for the poll when its leader's append is known:
// from that append on, the old log held it, and a loss that cut its offset
// took that log. If so it names the known anomaly.
func (m *queueModel) writtenAfterLoss(r *report, quorum *quorumLosses, key int32, e *history.Event, rec history.QueueRecord, skipped []int64, was string) bool {
	if m.writtenAfter(r, quorum, key, e, -1, skipped, was) {
		return true
	}
	if a := m.inLog(key, rec.Offset, rec.Value, nil); a != nil && a.Time < e.Time {
		return m.writtenAfter(r, quorum, key, a, rec.Offset, skipped, was)
	}
	return false
}

// writtenAfter is writtenAfterLoss with the poll's read at event e; a loss
// must cut offset cut of the log (-1: any loss).
func (m *queueModel) writtenAfter(r *report, quorum *quorumLosses, key int32, e *history.Event, cut int64, skipped []int64, was string) bool {
	var loss *unflushedLoss
	evs := []int{e.Index}
	for _, o := range skipped {
		for v, pe := range m.at[key][o] {
			if !m.values[v].readable() {
				continue // an aborted value does not make its offset one to read
			}
			pe = m.inLog(key, o, v, pe)
			from, to := min(e.Time, pe.Time), max(e.Time, pe.Time)
			var l *unflushedLoss
			if cut >= 0 {
				l, _ = quorum.cutBetween(m.tp(key), from, to, cut)
			} else {
				l = quorum.between(m.tp(key), from, to)
			}
			if l == nil {
				return false
			}
			loss = l
			evs = append(evs, pe.Index)
		}
	}
	if loss == nil {
		return false
	}
	slices.Sort(evs)
	who, levs := describeQuorumLoss(loss, m.t0)
	r.knownAnomaly(loss.name(), append(evs, levs...), "%s, after crash-lose-unflushed: %s (%s); the skipped values were first seen after that election.", was, loss.how(), who)
	return true
}

// tp names partition key of the queue topic.
func (m *queueModel) tp(key int32) history.TopicPartition { return history.TP(m.topic, key) }

// when formats an event's time relative to the history's start.
func (m *queueModel) when(e *history.Event) string { return "+" + rel(e.Time, m.t0).String() }

// who names an operation's process and source.
func who(e *history.Event) string {
	return fmt.Sprintf("process %d (%s)", e.Queue.Process, e.Source)
}

// noQueue is the result of a queue checker on a history without queue
// operations.
func noQueue(r *report) Result {
	r.detail("queue_ops", 0)
	return r.result("no queue operations in this history (the queue workload did not run): nothing to judge.")
}
