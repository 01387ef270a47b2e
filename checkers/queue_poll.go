package checkers

// The queue checkers that judge consumers: each consumer's polls go
// forward without skipping (queue-poll), and a group's members never share
// a partition in one generation (queue-group).

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/zkchaos/zkchaos/history"
)

// QueuePoll checks each consumer's polls within one assignment (an
// assigning consumer's assign operation up to its next one; a group
// member's generation): offsets go forward (no nonmonotonic poll), and no
// readable value lies between two consecutive offsets a consumer polled
// (no poll skip). An assignment's first poll of a partition starts at the
// offset it was assigned from; a group member's starts at the group's
// committed offset, the largest committed (or maybe committed) for the
// partition before that poll returned, 0 when none was: a member that
// starts higher skipped what the group had not yet consumed. A readable
// value is one whose send committed, or that a read_committed poll
// returned, or that a poll returned from a non-transactional send that
// did not fail: aborted records and transaction markers fill offsets no
// consumer reads. A poll and a value on either side of a loss that
// crash-lose-unflushed explains (unflushed.go) read two logs: its known
// anomaly.
type QueuePoll struct{}

// Name implements Checker.
func (QueuePoll) Name() string { return "queue-poll" }

// pollStream is one consumer process's current assignment.
type pollStream struct {
	mode, group, member string
	gen                 int32
	epoch               int
	starts              map[int32]int64 // an assigning consumer's start offsets
	assigned            *history.Event  // the assign's completion
	last                map[int32]*history.Event
	lastOffset          map[int32]int64
	// read is the process's last poll of each partition across its
	// assignments, where an assigning consumer's next start offset
	// comes from.
	read map[int32]polledAt
}

// polledAt is a poll that returned offset of a partition.
type polledAt struct {
	offset int64
	e      *history.Event
}

// queueCommit is a commit that may have taken effect.
type queueCommit struct {
	at     int64 // invoke time
	offset int64
	e      *history.Event
}

// Check implements Checker.
func (c QueuePoll) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	m := queueModelOf(h)
	if len(m.ops) == 0 {
		return noQueue(r)
	}
	commits := queueCommits(m)
	resets := outOfRangeOf(h)
	quorum := newQuorumLosses(h)
	streams := map[[2]any]*pollStream{}
	reads := map[[2]any]map[int32]polledAt{}
	polls := 0
	for i := range m.ops {
		op := &m.ops[i]
		q := op.Op()
		if op.Outcome() != history.OpOK {
			continue
		}
		k := [2]any{op.Invoke.Source, q.Process}
		if q.F == history.QueueAssign {
			st := &pollStream{mode: history.QueueAssigned, epoch: -1, starts: map[int32]int64{}, assigned: op.Complete}
			for _, o := range q.Offsets {
				st.starts[o.Key] = o.Offset
			}
			streams[k] = st
			continue
		}
		a := q.Assignment
		if q.F != history.QueueTxn || a == nil {
			continue
		}
		st := streams[k]
		switch {
		case a.Mode == history.QueueSubscribed && (st == nil || st.mode != a.Mode || st.member != a.Member || st.gen != a.Generation):
			st = &pollStream{mode: a.Mode, group: a.Group, member: a.Member, gen: a.Generation}
			streams[k] = st
		case a.Mode == history.QueueAssigned && st != nil && st.epoch < 0:
			st.epoch = a.Epoch
		case a.Mode == history.QueueAssigned && (st == nil || st.epoch != a.Epoch):
			// An assignment whose assign operation is not in the history:
			// its start offsets are not known.
			st = &pollStream{mode: a.Mode, epoch: a.Epoch}
			streams[k] = st
		}
		if st.last == nil {
			st.last, st.lastOffset = map[int32]*history.Event{}, map[int32]int64{}
		}
		if reads[k] == nil {
			reads[k] = map[int32]polledAt{}
		}
		st.read = reads[k]
		for _, mop := range q.Mops {
			for _, p := range mop.Polled {
				polls++
				for _, rec := range p.Records {
					c.judge(r, m, resets, quorum, st, commits, op.Complete, p.Key, rec)
				}
			}
		}
	}
	r.detail("partition_polls", polls)
	return r.result(fmt.Sprintf("every consumer's polls (%d partition polls) went forward within each assignment without skipping a readable value, each assignment starting at its assigned offset and each group member at the group's committed offset.", polls))
}

// judge checks one polled record against the stream's position.
func (QueuePoll) judge(r *report, m *queueModel, resets *outOfRange, quorum *quorumLosses, st *pollStream, commits map[string]map[int32][]queueCommit, e *history.Event, key int32, rec history.QueueRecord) {
	tp := m.tp(key)
	where := st.describe()
	prev, seen := st.last[key]
	last := st.lastOffset[key]
	before, wasRead := st.read[key]
	st.last[key], st.lastOffset[key] = e, rec.Offset
	st.read[key] = polledAt{rec.Offset, e}
	if seen {
		switch {
		case rec.Offset <= last:
			msg := fmt.Sprintf("%s polled offset %d of %s (value %d, event %d, %s) after offset %d (event %d, %s), %s",
				who(e), rec.Offset, tp, rec.Value, e.Index, m.when(e), last, prev.Index, m.when(prev), where)
			backwards(r, m, resets, quorum, []int{prev.Index, e.Index}, msg, e.Queue.Process, tp, last+1, prev.Time, e.Time, prev.Time)
		case rec.Offset > last+1:
			if skipped := m.readableIn(key, last+1, rec.Offset); len(skipped) > 0 && !m.writtenAfterLoss(r, quorum, key, e, rec, skipped,
				fmt.Sprintf("%s polled offset %d of %s (event %d, %s) and next offset %d (event %d, %s), skipping %s", who(e), last, tp, prev.Index, m.when(prev), rec.Offset, e.Index, m.when(e), m.valuesAt(key, skipped))) {
				r.violate([]int{prev.Index, e.Index}, "poll skip: %s polled offset %d of %s (event %d, %s) and next offset %d (value %d, event %d, %s), %s, skipping %s.",
					who(e), last, tp, prev.Index, m.when(prev), rec.Offset, rec.Value, e.Index, m.when(e), where, m.valuesAt(key, skipped))
			}
		}
		return
	}
	// The assignment's first record of the partition.
	var start int64
	var from string
	events := []int{e.Index}
	switch {
	case st.mode == history.QueueAssigned && st.starts != nil:
		s, ok := st.starts[key]
		if !ok {
			return
		}
		start, events = s, append(events, st.assigned.Index)
		from = fmt.Sprintf("it was assigned from (event %d, %s)", st.assigned.Index, m.when(st.assigned))
		if rec.Offset < start {
			msg := fmt.Sprintf("%s polled offset %d of %s (value %d, event %d, %s), below offset %d %s, %s",
				who(e), rec.Offset, tp, rec.Value, e.Index, m.when(e), start, from, where)
			readAt := int64(math.MinInt64)
			if wasRead && before.offset == start-1 {
				readAt = before.e.Time
			}
			if b, ok := resets.findListed(tp, start, rec.Offset, st.assigned.Time, e.Time); ok {
				listedBack(r, m, quorum, b, events, msg, start, readAt)
				return
			}
			backwards(r, m, resets, quorum, events, msg, e.Queue.Process, tp, start, st.assigned.Time, e.Time, readAt)
			return
		}
	case st.mode == history.QueueSubscribed:
		cm := committedBefore(commits[st.group][key], e.Time)
		from = "the group's committed offset (none committed before, so the earliest offset)"
		if cm != nil {
			start, events = cm.offset, append(events, cm.e.Index)
			from = fmt.Sprintf("the group's committed offset (commit by %s, event %d, %s)", who(cm.e), cm.e.Index, m.when(cm.e))
		}
	default:
		return
	}
	if rec.Offset > start {
		if skipped := m.readableIn(key, start, rec.Offset); len(skipped) > 0 && !m.writtenAfterLoss(r, quorum, key, e, rec, skipped,
			fmt.Sprintf("%s began reading %s at offset %d (event %d, %s), above offset %d, skipping %s", who(e), tp, rec.Offset, e.Index, m.when(e), start, m.valuesAt(key, skipped))) {
			r.violate(events, "poll skip: %s began reading %s at offset %d (value %d, event %d, %s), above offset %d, %s, %s, skipping %s.",
				who(e), tp, rec.Offset, rec.Value, e.Index, m.when(e), start, from, where, m.valuesAt(key, skipped))
		}
	}
}

// describe names the assignment for explanations.
func (st *pollStream) describe() string {
	if st.mode == history.QueueSubscribed {
		return fmt.Sprintf("as member %q of group %q in generation %d", st.member, st.group, st.gen)
	}
	return fmt.Sprintf("in its assignment %d", st.epoch)
}

// queueCommits lists, per group and partition, the commits that may have
// taken effect, in invoke order: ok, and info (an attempt reached a
// coordinator and the client heard nothing definite of it, or the history
// ended first). A failed commit wrote nothing: the workload records fail
// only when no attempt of it can have been appended to __consumer_offsets.
func queueCommits(m *queueModel) map[string]map[int32][]queueCommit {
	out := map[string]map[int32][]queueCommit{}
	for i := range m.ops {
		op := &m.ops[i]
		q := op.Op()
		if q.F != history.QueueCommit || q.Assignment == nil || op.Outcome() == history.OpFail {
			continue
		}
		e := op.Complete
		if e == nil {
			e = op.Invoke
		}
		g := out[q.Assignment.Group]
		if g == nil {
			g = map[int32][]queueCommit{}
			out[q.Assignment.Group] = g
		}
		for _, o := range q.Offsets {
			g[o.Key] = append(g[o.Key], queueCommit{at: op.Invoke.Time, offset: o.Offset, e: e})
		}
	}
	return out
}

// committedBefore is the commit with the largest offset among those
// invoked before t: the furthest position the group may have held then.
func committedBefore(cs []queueCommit, t int64) *queueCommit {
	n := sort.Search(len(cs), func(i int) bool { return cs[i].at >= t })
	var best *queueCommit
	for i := range cs[:n] {
		if best == nil || cs[i].offset > best.offset {
			best = &cs[i]
		}
	}
	return best
}

// QueueGroup checks that no two members of a consumer group held one
// partition in the same generation, as each member reported its
// partitions and generation when it polled: the group leader's
// assignment gives each partition to one member per generation, and a
// coordinator that hands out a generation number twice breaks that, except
// when crash-lose-unflushed took the group's records from its
// __consumer_offsets partition in between (a known anomaly of unflushed.go).
type QueueGroup struct{}

// Name implements Checker.
func (QueueGroup) Name() string { return "queue-group" }

// Check implements Checker.
func (c QueueGroup) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	m := queueModelOf(h)
	if len(m.ops) == 0 {
		return noQueue(r)
	}
	type claim struct {
		group string
		gen   int32
		key   int32
	}
	owners := map[claim]map[string]*history.Event{}
	var order []claim
	for i := range m.ops {
		op := &m.ops[i]
		a := op.Op().Assignment
		if op.Outcome() != history.OpOK || a == nil || a.Mode != history.QueueSubscribed || a.Generation < 0 {
			continue
		}
		for _, key := range a.Keys {
			cl := claim{a.Group, a.Generation, key}
			if owners[cl] == nil {
				owners[cl] = map[string]*history.Event{}
				order = append(order, cl)
			}
			if owners[cl][a.Member] == nil {
				owners[cl][a.Member] = op.Complete
			}
		}
	}
	var quorum *quorumLosses
	var parts map[string]int32
	for _, cl := range order {
		if len(owners[cl]) < 2 {
			continue
		}
		members := slices.Sorted(maps.Keys(owners[cl]))
		a, b := owners[cl][members[0]], owners[cl][members[1]]
		if quorum == nil {
			quorum, parts = newQuorumLosses(h), groupPartitions(h)
		}
		if groupClaimsLost(r, m, quorum, parts, cl.group, owners[cl], fmt.Sprintf("members %q (%s, event %d, %s) and %q (%s, event %d, %s) of group %q both held %s in generation %d",
			members[0], who(a), a.Index, m.when(a), members[1], who(b), b.Index, m.when(b), cl.group, m.tp(cl.key), cl.gen)) {
			continue
		}
		r.violate([]int{a.Index, b.Index}, "two owners: members %q (%s, event %d, %s) and %q (%s, event %d, %s) of group %q both held %s in generation %d; the group's assignment gives a partition to one member per generation.",
			members[0], who(a), a.Index, m.when(a), members[1], who(b), b.Index, m.when(b), cl.group, m.tp(cl.key), cl.gen)
	}
	r.detail("claims", len(order))
	return r.result(fmt.Sprintf("no two members of a group held one partition in one generation (%d partition-generation claims).", len(order)))
}

// groupPartitions maps each group to its __consumer_offsets partition, as
// its coordinators' answers name it.
func groupPartitions(h *history.History) map[string]int32 {
	out := map[string]int32{}
	for e := range eventsOf(h, history.KindGroupRequest) {
		if e.Group != nil && e.Group.Group != "" {
			out[e.Group.Group] = e.Group.Partition
		}
	}
	return out
}

// groupClaimsLost reports whether crash-lose-unflushed explains members
// claiming one partition in one generation of group (firsts: each member's
// first claim, as was says): a loss of the group's __consumer_offsets
// partition after the first member's first claim whose exposed leader was
// elected before every other member's first claim. The coordinator
// loaded the group from that log without the generations it had written
// (GroupMetadataManager.loadGroupsForPartition) and handed their numbers
// out again. If so it names the known anomaly.
func groupClaimsLost(r *report, m *queueModel, quorum *quorumLosses, parts map[string]int32, group string, firsts map[string]*history.Event, was string) bool {
	p, ok := parts[group]
	if !ok {
		return false
	}
	claims := slices.SortedFunc(maps.Values(firsts), func(a, b *history.Event) int { return cmp.Compare(a.Time, b.Time) })
	tp := history.TP(history.GroupMetadataTopic, p)
	loss := quorum.between(tp, claims[0].Time, claims[1].Time)
	if loss == nil {
		return false
	}
	who, evs := describeQuorumLoss(loss, m.t0)
	r.knownAnomaly(loss.name(), append([]int{claims[0].Index, claims[1].Index}, evs...), "%s: crash-lose-unflushed took the group's records from %s between the first member's claim and the other's, so the coordinator loaded the group without the generations it had handed out (GroupMetadataManager.loadGroupsForPartition) and handed their numbers out again; %s (%s).",
		was, tp, loss.how(), who)
	return true
}

// backwards judges a poll that went below where its consumer stood (msg
// says where): a violation, unless a deposed leader's OFFSET_OUT_OF_RANGE
// answer for the offset the consumer stood at, between from and to, sent it
// back (the known anomaly KnownDeposedLeaderOutOfRange). An answer from the
// partition's current leader stays a violation, named in it: that leader's
// log lost offsets a consumer had been able to read; unless crash-lose-
// unflushed took the offset below the one the consumer stood at (the one it
// had read, at readAt when known, MinInt64 if not) as a loss of
// unflushed.go (lostByAnswerer): then Kafka lost it, and the loss names the
// known anomaly.
func backwards(r *report, m *queueModel, resets *outOfRange, quorum *quorumLosses, events []int, msg string, proc int, tp history.TopicPartition, at, from, to, readAt int64) {
	b, ok := resets.find(tp, at, from, to, func(f, t int64) bool { return !m.readableBefore(tp.Partition, at, f, t) })
	switch {
	case ok && b.successor != nil:
		r.knownAnomaly(KnownDeposedLeaderOutOfRange, append(events, b.answer.Index, b.successor.Index),
			"%s: %s, so the consumer reset its position by its reset policy (the log start): the deposed leader, not yet told of its successor, answered by its own shorter log (Kafka's Fetch fences only a consumer that names a newer leader epoch, KIP-320).", msg, b.why(m))
	case ok && lostByAnswerer(r, m, quorum, append(events, b.answer.Index), msg+": "+b.why(m), tp, b.answer.Node, b.answer.Time, b.answer.ReplicaFetch.LeaderEpoch, at-1, readAt):
	case ok:
		r.violate(append(events, b.answer.Index), "nonmonotonic poll: %s: %s, the partition's newest leadership, so that leader's log had lost offsets a consumer had been able to read.", msg, b.why(m))
	default:
		if s, ok := resets.findShort(tp, at, from, to); ok && lostByAnswerer(r, m, quorum, append(events, s.answer.Index), msg+": "+s.why(m), tp, s.answer.Node, s.answer.Time, s.answer.ReplicaFetch.LeaderEpoch, at-1, readAt) {
			return
		}
		if reportedLoss(r, m, resets, quorum, events, msg, proc, tp, at, from, to, readAt) {
			return
		}
		r.violate(events, "nonmonotonic poll: %s.", msg)
	}
}

// reportedLoss judges a move back that the consumer itself reported as
// records lost (KIP-320: its OffsetForLeaderEpoch to the partition's leader
// was answered an end offset below its position, an answer no broker
// event records): the partition's newest leader when the report came is
// taken as the answering broker, and crash-lose-unflushed explains it as
// lostByAnswerer says, or nothing does.
func reportedLoss(r *report, m *queueModel, resets *outOfRange, quorum *quorumLosses, events []int, msg string, proc int, tp history.TopicPartition, at, from, to, readAt int64) bool {
	l, ok := resets.findDataLoss(proc, tp.Partition, at, from, to)
	if !ok {
		return false
	}
	lead, ok := quorum.leaderAt(tp, l.e.Time)
	if !ok {
		return false
	}
	why := fmt.Sprintf("the client reported records lost (event %d, %s): consumed to offset %d at leader epoch %d, moved to offset %d; broker %d led %s at leader epoch %d then (event %d)",
		l.e.Index, m.when(l.e), l.d.ConsumedTo, l.d.ConsumedToEpoch, l.d.ResetTo, lead.node, tp, lead.epoch, lead.idx)
	return lostByAnswerer(r, m, quorum, append(events, l.e.Index, lead.idx), msg+": "+why, tp, lead.node, l.e.Time, lead.epoch, at-1, readAt)
}

// lostByAnswerer reports whether crash-lose-unflushed explains why broker
// node, leading tp at leader epoch epoch, answered a consumer at
// answeredAt by a log without offset lost (msg says how), which the consumer
// had read (at readAt; MinInt64 when not known). Either a crash of that
// broker cut its log of tp at lost and it led at that epoch after, exposed,
// as a loss of unflushed.go (ledAfterCut); or a loss whose crashes all came after the read,
// one of them cutting lost, elected its exposed leader before the answer,
// and every later leader descends from that one. If so it names the known
// anomaly.
func lostByAnswerer(r *report, m *queueModel, quorum *quorumLosses, events []int, msg string, tp history.TopicPartition, node int32, answeredAt int64, epoch int32, lost, readAt int64) bool {
	if lost < 0 {
		return false
	}
	loss, x := quorum.ledAfterCut(tp, node, epoch, lost)
	if x == nil && readAt > math.MinInt64 {
		loss, x = quorum.cutBetween(tp, readAt, answeredAt, lost)
	}
	if x == nil {
		return false
	}
	cut := x.crash.cuts[tp]
	who, evs := describeQuorumLoss(loss, m.t0)
	r.knownAnomaly(loss.name(), append(events, evs...), "%s: broker %d's crash at %s (event %d) had cut its log of %s from offset %d to %d, and after crash-lose-unflushed %s (%s).",
		msg, x.crash.node, "+"+rel(x.crash.start.Time, m.t0).String(), x.crash.start.Index, tp, cut.From, cut.To, loss.how(), who)
	return true
}

// listedBack judges an assignment's first poll below its start offset that a
// ListOffsets answer below it explains: the known anomaly
// KnownDeposedLeaderListOffsets when the answering broker had been deposed,
// else a violation naming the answer (the partition's newest leader listed
// a latest offset below one a consumer had been able to read up to), unless
// crash-lose-unflushed took offset start-1, which the consumer had read (at
// readAt when known), as lostByAnswerer says.
func listedBack(r *report, m *queueModel, quorum *quorumLosses, b listedBy, events []int, msg string, start, readAt int64) {
	if b.successor != nil {
		r.knownAnomaly(KnownDeposedLeaderListOffsets, append(events, b.answer.Index, b.successor.Index),
			"%s: %s: the deposed leader, not yet told of its successor, answered by its own high watermark (ListOffsets fences only a client that names another leader epoch, KIP-320).", msg, b.why(m, start))
		return
	}
	if lostByAnswerer(r, m, quorum, append(events, b.answer.Index), msg+": "+b.why(m, start), b.answer.Listed.TP(), b.answer.Node, b.answer.Time, b.answer.Listed.LeaderEpoch, start-1, readAt) {
		return
	}
	r.violate(append(events, b.answer.Index), "nonmonotonic poll: %s: %s, the partition's newest leadership, so that leader listed a latest offset below one the consumer had been assigned from.", msg, b.why(m, start))
}
