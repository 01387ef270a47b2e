package checkers

import (
	"fmt"
	"math"
	"slices"

	"github.com/zkchaos/zkchaos/history"
)

// ISR's second rule: no leader keeps in its ISR a replica whose log
// diverges from its own below its high watermark.

// heldRun is a run of offsets a broker's log holds at one leader epoch, as
// far as the history shows.
type heldRun struct {
	base, last int64
	epoch      int32
}

// heldLog is what the history shows of a broker's log of one partition:
// runs by offset, disjoint; offsets without a run are unknown, not absent.
type heldLog []heldRun

// cut drops every offset at or above from.
func (l heldLog) cut(from int64) heldLog {
	for len(l) > 0 {
		r := &l[len(l)-1]
		switch {
		case r.base >= from:
			l = l[:len(l)-1]
			continue
		case r.last >= from:
			r.last = from - 1
		}
		break
	}
	return l
}

// add records an append of base..last at epoch: a leader appends at its
// log end, so whatever the history still shows from base on is gone.
func (l heldLog) add(base, last int64, epoch int32) heldLog {
	l = l.cut(base)
	if n := len(l); n > 0 && l[n-1].epoch == epoch && l[n-1].last+1 == base {
		l[n-1].last = last
		return l
	}
	return append(l, heldRun{base, last, epoch})
}

// within appends to buf the runs of l inside base..last, clipped to it,
// and returns it. It looks from the end: acknowledgements are of the newest
// records.
func (l heldLog) within(buf []heldRun, base, last int64) []heldRun {
	k := len(l)
	for k > 0 && l[k-1].last >= base {
		k--
	}
	for _, r := range l[k:] {
		if r.base > last {
			break
		}
		buf = append(buf, heldRun{max(r.base, base), min(r.last, last), r.epoch})
	}
	return buf
}

// overlay records that the log holds run x, whatever the history showed
// there before; the rest of the log is kept.
func (l heldLog) overlay(x heldRun) heldLog {
	// Acknowledgements mostly cover the newest records: extend the last
	// run in place rather than copy the log.
	if n := len(l); n == 0 || x.base > l[n-1].last {
		return l.add(x.base, x.last, x.epoch)
	} else if t := &l[n-1]; x.base >= t.base && x.epoch == t.epoch {
		t.last = max(t.last, x.last)
		return l
	}
	out := make(heldLog, 0, len(l)+2)
	put := func(r heldRun) {
		if n := len(out); n > 0 && out[n-1].epoch == r.epoch && out[n-1].last+1 == r.base {
			out[n-1].last = r.last
			return
		}
		out = append(out, r)
	}
	placed := false
	for _, r := range l {
		if !placed && r.last >= x.base {
			if r.base < x.base {
				put(heldRun{r.base, x.base - 1, r.epoch})
			}
			put(x)
			placed = true
		}
		switch {
		case r.last < x.base:
			put(r)
		case r.last > x.last:
			put(heldRun{max(r.base, x.last+1), r.last, r.epoch})
		}
	}
	if !placed {
		put(x)
	}
	return out
}

// diverge returns the lowest offset both logs hold at different leader
// epochs, with each one's run there.
func diverge(a, b heldLog) (int64, heldRun, heldRun, bool) {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		x, y := a[i], b[j]
		if lo := max(x.base, y.base); lo <= min(x.last, y.last) && x.epoch != y.epoch {
			return lo, x, y, true
		}
		if x.last < y.last {
			i++
		} else {
			j++
		}
	}
	return 0, heldRun{}, heldRun{}, false
}

// leading is a broker process's leadership of a partition as it logged it:
// the leader epoch, its ISR, when each member joined it, and when it
// began: the first sign of this process leading, kept across its
// re-elections at newer epochs.
type leading struct {
	epoch  int32
	isr    []int32
	joined map[int32]int // member → the event that put it in this leader's ISR
	since  int
}

// What a leader did when check judged its ISR.
const (
	becameLeader = iota
	tookIn
	movedHW
)

// checkDivergentISRMembers reports leaders whose ISR held a replica whose
// log differed from theirs below their high watermark, and returns how
// many ISR joins and leader high-watermark advances it judged.
func checkDivergentISRMembers(h *history.History, r *report) (joins, advances int) {
	w := &divergenceWalk{
		h: h, r: r, t0: firstTime(h),
		held:     map[nodeTP]heldLog{},
		sources:  map[nodeTP][]heldSource{},
		lead:     map[nodeTP]*leading{},
		hw:       map[nodeTP]int64{},
		reported: map[isrFinding]bool{},
		quorum:   newQuorumLosses(h),
		aheadHW:  map[nodeTP]aheadAdvance{},

		aheadAcks:    map[nodeTP][]*history.Event{},
		unflushedCut: map[nodeTP]int{},
	}
	for e := range eventsOf(h, history.KindNodeStart, history.KindProduceAppend, history.KindProduceAck, history.KindTruncation, history.KindControlRequest, history.KindRoleChange, history.KindISRChange, history.KindHWAdvance) {
		switch e.Kind {
		case history.KindNodeStart:
			w.nodeStart(e)
		case history.KindProduceAppend:
			w.produceAppend(e)
		case history.KindProduceAck:
			w.produceAck(e)
		case history.KindTruncation:
			w.truncation(e)
		case history.KindControlRequest:
			w.controlRequest(e)
		case history.KindRoleChange:
			w.roleChange(e)
		case history.KindISRChange:
			w.isrChange(e)
		case history.KindHWAdvance:
			w.hwAdvance(e)
		}
	}
	return w.joins, w.advances
}

// divergenceWalk is what checkDivergentISRMembers knows at a point of its
// walk through a history.
type divergenceWalk struct {
	h  *history.History
	r  *report
	t0 int64

	held    map[nodeTP]heldLog
	sources map[nodeTP][]heldSource
	lead    map[nodeTP]*leading
	hw      map[nodeTP]int64 // -1: not known since the process started

	reported map[isrFinding]bool
	buf      []heldRun
	quorum   *quorumLosses
	// aheadHW holds a leader's high-watermark advance logged at a newer
	// leader epoch than its last role change: Partition.makeLeader moves
	// the high watermark under the new ISR inside a LeaderAndIsr, and the
	// broker logs that request's role changes after its effects. The
	// advance is judged at that role change, against the ISR it was made
	// under.
	aheadHW map[nodeTP]aheadAdvance
	// aheadAcks holds the acks=all acknowledgements a leader logged after
	// such an advance and before its role change: the high watermark
	// passed them under the new ISR, so they are credited to its members
	// at that role change. Crediting the ISR of the previous role change
	// would credit a member the LeaderAndIsr removed, for instance one
	// that crashed and lost its log.
	aheadAcks map[nodeTP][]*history.Event
	// unflushedCut holds, per broker and partition, the crash-lose-
	// unflushed cut of its log (the event) not yet followed by a leader
	// taking it back into an ISR. A leader that led before the cut keeps
	// the member's last fetch from before its crash
	// (Partition.makeLeader resets followers' fetch state only for a new
	// leader, so a re-election at a newer epoch keeps it) and moves its
	// high watermark on it while the ISR lists the member: its
	// acknowledgements then say nothing of what the cut log holds.
	unflushedCut map[nodeTP]int

	joins, advances int
}

// aheadAdvance is a high-watermark advance waiting for the role change of
// its leader epoch: the event that logged it.
type aheadAdvance struct {
	epoch int32
	idx   int
}

// heldSource is how a broker came to hold a run of records, to name the
// event: its own produce_append, or another leader's acks=all produce_ack
// while it was in that leader's ISR.
type heldSource struct {
	heldRun
	idx    int // the first event of the run
	leader int32
	kind   history.Kind
	end    int // the last event merged into the run
}

// isrFinding is one divergence reported, so that it is reported once.
type isrFinding struct {
	tp      history.TopicPartition
	member  int32
	offset  int64
	me, you int32
}

// addSource merges a run that continues the last one, so the list grows
// with leaderships, not with records.
func (w *divergenceWalk) addSource(k nodeTP, s heldSource) {
	ss := w.sources[k]
	if n := len(ss); n > 0 {
		if p := &ss[n-1]; p.leader == s.leader && p.kind == s.kind && p.epoch == s.epoch && s.base <= p.last+1 && p.base <= s.last+1 {
			p.base, p.last = min(p.base, s.base), max(p.last, s.last)
			p.end = s.idx
			return
		}
	}
	s.end = s.idx
	w.sources[k] = append(ss, s)
}

// how says how broker k.node came to hold offset o at epoch, naming the
// latest event before before that shows it, and adds it to evs.
func (w *divergenceWalk) how(k nodeTP, o int64, epoch int32, before int, evs *[]int) string {
	ss := w.sources[k]
	for n := len(ss) - 1; n >= 0; n-- {
		s := ss[n]
		if s.idx >= before || s.epoch != epoch || o < s.base || o > s.last {
			continue
		}
		// A source stands for a run of appends or acknowledgements;
		// name the one that covered o. Only events merged into it count:
		// a later acknowledgement of o by the same leader may have been
		// made under an ISR without k.node.
		at := s.idx
		for j := min(before-1, s.end); j > s.idx; j-- {
			if x := &w.h.Events[j]; x.Node == s.leader && x.Append != nil && x.Kind == s.kind &&
				x.Append.TP() == k.tp && x.Append.BaseOffset <= o && o <= x.Append.LastOffset {
				at = j
				break
			}
		}
		*evs = append(*evs, at)
		t := rel(w.h.Events[at].Time, w.t0)
		if s.leader == k.node {
			return fmt.Sprintf("appended it itself as leader at event %d, +%s", at, t)
		}
		return fmt.Sprintf("broker %d acknowledged it at event %d, +%s, with broker %d in its ISR", s.leader, at, t, k.node)
	}
	return "as the history shows"
}

// sourceLeader returns the leader that wrote broker k.node's record at
// offset o at epoch, as the latest source before event before shows it.
func (w *divergenceWalk) sourceLeader(k nodeTP, o int64, epoch int32, before int) (int32, bool) {
	ss := w.sources[k]
	for n := len(ss) - 1; n >= 0; n-- {
		if s := ss[n]; s.idx < before && s.epoch == epoch && s.base <= o && o <= s.last {
			return s.leader, true
		}
	}
	return 0, false
}

// check judges member m of leader e.Node's ISR at the leader's current
// high watermark, after the leader did what at event e.
func (w *divergenceWalk) check(e *history.Event, tp history.TopicPartition, m int32, what int) {
	lk, mk := nodeTP{tp, e.Node}, nodeTP{tp, m}
	l := w.lead[lk]
	if m == e.Node || l == nil || len(w.held[mk]) == 0 || len(w.held[lk]) == 0 {
		return
	}
	o, mine, theirs, ok := diverge(w.held[lk], w.held[mk])
	if !ok || o >= w.hw[lk] {
		return
	}
	f := isrFinding{tp, m, o, mine.epoch, theirs.epoch}
	if w.reported[f] {
		return
	}
	w.reported[f] = true
	evs := []int{e.Index}
	var did string
	switch what {
	case becameLeader:
		did = fmt.Sprintf("became leader with broker %d in its ISR and its high watermark at %d", m, w.hw[lk])
		if a, ok := w.aheadHW[lk]; ok && a.epoch == l.epoch {
			evs = append(evs, a.idx)
			did += fmt.Sprintf(", having moved it there under that ISR at event %d before it logged the role change", a.idx)
		}
	case tookIn:
		did = fmt.Sprintf("took broker %d into its ISR with its high watermark at %d", m, w.hw[lk])
	default:
		did = fmt.Sprintf("moved its high watermark to %d with broker %d in its ISR", w.hw[lk], m)
		if j, ok := l.joined[m]; ok {
			evs = append(evs, j)
			did += fmt.Sprintf(" since event %d", j)
		}
	}
	theirs2 := w.how(mk, o, theirs.epoch, e.Index, &evs)
	mine2 := w.how(lk, o, mine.epoch, e.Index, &evs)
	// The leadership counts from its broker's restart, as truncation's and
	// producer-state's do (unflushedLoss.inForceAt).
	if in := w.quorum.ledBy(tp, e.Node, l.epoch); in != nil && in.inForceAt(e.Time) {
		// The leader came back without the suffix a quorum's page caches
		// held, and the member that kept it could not tell (KIP-101's
		// epochs match nothing the leader still has).
		who, cevs := describeQuorumLoss(in, w.t0)
		w.r.knownAnomaly(in.name(), append(evs, cevs...), "broker %d, leader of %s at leader epoch %d, %s (event %d, +%s) while broker %d's log differed from its own at offset %d (%s, leader epoch %d; its own from leader epoch %d), after %s: %s.",
			e.Node, tp, l.epoch, did, e.Index, rel(e.Time, w.t0), m, o, theirs2, theirs.epoch, mine.epoch, in.how(), who)
		return
	}
	// The member's records there may be a cut leader's: it led again at
	// its old epoch after crash-lose-unflushed cut its log below o and
	// wrote o anew, and the leader, which had kept the older record, took
	// the rest of that epoch from it without truncating below its own end
	// offset for the epoch. A leader's record of a newer epoch than the
	// member's is no such thing: the member failed to truncate.
	if src, ok := w.sourceLeader(mk, o, theirs.epoch, e.Index); ok && mine.epoch < theirs.epoch {
		if in := w.quorum.ledBy(tp, src, theirs.epoch); in != nil && in.inForceAt(e.Time) {
			if x := in.cutBelow(tp, src, math.MinInt64, o); x != nil {
				who, cevs := describeQuorumLoss(in, w.t0)
				cut := x.crash.cuts[tp]
				w.r.knownAnomaly(in.name(), append(evs, cevs...), "broker %d, leader of %s at leader epoch %d, %s (event %d, +%s) while broker %d's log differed from its own at offset %d (%s, leader epoch %d; its own from leader epoch %d): crash-lose-unflushed had cut broker %d's log of %s from %d to %d, and %s: %s.",
					e.Node, tp, l.epoch, did, e.Index, rel(e.Time, w.t0), m, o, theirs2, theirs.epoch, mine.epoch, src, tp, cut.From, cut.To, in.how(), who)
				return
			}
		}
	}
	w.r.violate(evs, "broker %d, leader of %s at leader epoch %d, %s (event %d, +%s), although broker %d's log differed from its own at offset %d, below that high watermark: broker %d held offset %d from leader epoch %d (%s) and had not truncated to %d or below since, while broker %d held it from leader epoch %d (%s).",
		e.Node, tp, l.epoch, did, e.Index, rel(e.Time, w.t0), m, o,
		m, o, theirs.epoch, theirs2, o, e.Node, mine.epoch, mine2)
}

func (w *divergenceWalk) nodeStart(e *history.Event) {
	// A new process leads nothing and knows its high watermark
	// only from its checkpoint; its log stays on disk.
	forgetProcess(w.lead, e.Node)
	forgetProcess(w.aheadHW, e.Node)
	forgetProcess(w.aheadAcks, e.Node)
	for k := range w.hw {
		if k.node == e.Node {
			w.hw[k] = -1
		}
	}
}

func (w *divergenceWalk) produceAppend(e *history.Event) {
	a := e.Append
	k := nodeTP{a.TP(), e.Node}
	w.held[k] = w.held[k].add(a.BaseOffset, a.LastOffset, a.LeaderEpoch)
	w.addSource(k, heldSource{heldRun: heldRun{a.BaseOffset, a.LastOffset, a.LeaderEpoch}, idx: e.Index, leader: e.Node, kind: e.Kind})
}

func (w *divergenceWalk) produceAck(e *history.Event) {
	// An acks=all acknowledgement comes once the high watermark
	// passed the records, and the high watermark is the smallest
	// log end in the ISR: every member holds what the leader
	// holds there. The leader's own log says which epoch that
	// is; the acknowledgement's epoch may be newer (a retried
	// batch appended by an earlier leader).
	a := e.Append
	k := nodeTP{a.TP(), e.Node}
	l := w.lead[k]
	if a.Acks != history.AcksAll || l == nil {
		return
	}
	if _, ok := w.aheadHW[k]; ok {
		w.aheadAcks[k] = append(w.aheadAcks[k], e)
		return
	}
	w.creditAck(e, l)
}

// creditAck records that every member of leader l's ISR holds what the
// leader's log holds under acknowledgement e.
func (w *divergenceWalk) creditAck(e *history.Event, l *leading) {
	a := e.Append
	k := nodeTP{a.TP(), e.Node}
	w.buf = w.held[k].within(w.buf[:0], a.BaseOffset, a.LastOffset)
	for _, x := range w.buf {
		for _, m := range l.isr {
			mk := nodeTP{k.tp, m}
			if cut, ok := w.unflushedCut[mk]; ok && cut > l.since {
				continue // counted on a fetch from before its crash
			}
			if m != e.Node {
				w.held[mk] = w.held[mk].overlay(x)
				w.addSource(mk, heldSource{heldRun: x, idx: e.Index, leader: e.Node, kind: e.Kind})
			}
		}
	}
}

func (w *divergenceWalk) truncation(e *history.Event) {
	k := nodeTP{e.Truncation.TP(), e.Node}
	if isUnflushedLoss(e.Truncation) {
		w.unflushedCut[k] = e.Index
	}
	if t := e.Truncation; t.From < t.To {
		w.held[k] = nil // the log restarted at To: nothing before it is left
	} else {
		w.held[k] = w.held[k].cut(t.To)
	}
}

func (w *divergenceWalk) controlRequest(e *history.Event) {
	// A StopReplica may delete the log; the history does not say
	// whether it did, so what the broker held is no longer known
	// to be there.
	if e.Control.API != history.APIStopReplica || e.Control.Verdict != history.VerdictAccepted {
		return
	}
	for _, p := range e.Control.Partitions {
		if p.ErrorCode == history.ErrNone {
			delete(w.held, nodeTP{p.TP(), e.Node})
			delete(w.lead, nodeTP{p.TP(), e.Node})
		}
	}
}

func (w *divergenceWalk) roleChange(e *history.Event) {
	k := nodeTP{e.Role.TP(), e.Node}
	ahead, wasAhead := w.aheadHW[k]
	acks := w.aheadAcks[k]
	defer delete(w.aheadHW, k)
	defer delete(w.aheadAcks, k)
	if e.Role.Role != history.RoleLeader {
		delete(w.lead, k)
		return
	}
	l := &leading{epoch: e.Role.LeaderEpoch, isr: e.Role.ISR, joined: map[int32]int{}, since: e.Index}
	if wasAhead {
		// The advance logged before the role change was made under it.
		l.since = min(l.since, ahead.idx)
	}
	if old := w.lead[k]; old != nil {
		l.joined, l.since = old.joined, old.since
	}
	w.lead[k] = l
	for _, m := range l.isr {
		if _, ok := l.joined[m]; !ok {
			l.joined[m] = e.Index
		}
	}
	for m := range l.joined {
		if !slices.Contains(l.isr, m) {
			delete(l.joined, m)
		}
	}
	// An advance made under this leader epoch judges every member, not
	// only those that joined now.
	judgeAll := wasAhead && ahead.epoch == l.epoch
	if judgeAll {
		w.advances++
		for _, a := range acks {
			w.creditAck(a, l)
		}
	}
	for _, m := range l.isr {
		if m == e.Node {
			continue
		}
		if joined := l.joined[m] == e.Index; joined || judgeAll {
			if joined {
				w.joins++
			}
			w.check(e, k.tp, m, becameLeader)
		}
	}
}

func (w *divergenceWalk) isrChange(e *history.Event) {
	c := e.ISR
	k := nodeTP{c.TP(), e.Node}
	l := w.lead[k]
	if c.Outcome != history.ZKOK || l == nil || l.epoch != c.LeaderEpoch {
		return
	}
	var in []int32
	for _, m := range c.New {
		if !slices.Contains(l.isr, m) {
			in = append(in, m)
			l.joined[m] = e.Index
			// It fetched up to this leader's high watermark after its
			// restart: later acknowledgements count its fetches.
			delete(w.unflushedCut, nodeTP{c.TP(), m})
		}
	}
	for _, m := range l.isr {
		if !slices.Contains(c.New, m) {
			delete(l.joined, m)
		}
	}
	l.isr = c.New
	for _, m := range in {
		w.joins++
		w.check(e, k.tp, m, tookIn)
	}
}

func (w *divergenceWalk) hwAdvance(e *history.Event) {
	k := nodeTP{e.HW.TP(), e.Node}
	old, known := w.hw[k]
	w.hw[k] = e.HW.New
	l := w.lead[k]
	if l == nil || (known && e.HW.New <= old) {
		return
	}
	if e.HW.LeaderEpoch > l.epoch {
		w.aheadHW[k] = aheadAdvance{e.HW.LeaderEpoch, e.Index}
		return
	}
	w.advances++
	for _, m := range l.isr {
		w.check(e, k.tp, m, movedHW)
	}
}
