package checkers

// The data-plane promise of the idempotent producer state (see
// promises_data.go).

import (
	"fmt"
	"maps"
	"slices"

	"github.com/zkchaos/zkchaos/history"
)

// ---- idempotent producer state across leaders ------------------------------

// Kafka error codes a leader answers an idempotent batch with when its
// producer state does not continue the producer's sequence.
const (
	errOutOfOrderSequence int16 = 45
	errDuplicateSequence  int16 = 46
	errUnknownProducerID  int16 = 59
)

// ProducerContinuity checks that a leader's idempotent producer state
// continues its predecessors'.
//
// Row: replication (idempotent producer state) | a new leader continues
// every producer's sequence where the committed log leaves it: it accepts
// the next sequence, and answers a resend of a committed batch with its
// original offsets | ProducerStateManager, rebuilt from the log
// (Log.loadProducerState) and kept by every append, leader's and
// follower's (Log.appendAsFollower → ProducerAppendInfo);
// Log.analyzeAndValidateProducerState answers duplicates from
// ProducerStateEntry.findDuplicateBatch | produce_append's producer id,
// epoch, sequences and record values, produce_ack, the client's
// idempotent produces (process, value, outcome, error code) and the
// leaders' role changes | three findings: (1) a leader appends a batch of a
// producer id and epoch with the same sequences again, at another offset,
// although its own log held the first copy (its own append, or records of
// that leader epoch it replicated and did not cut since; a leader that
// crash-lose-unflushed cut below its own appends and that refills the same
// epoch from there writes another lineage, whose records at those offsets
// are not the first copy, and Kafka, whose producer state went with the
// cut, accepts the resend of an unknown producer at any sequence:
// ProducerAppendInfo.checkSequence); (2) a client
// process whose produce was appended under a new producer id although it
// had no unknown outcome, after its previous produce to that partition was
// acknowledged (franz-go takes a new producer id only after a leader
// refused a sequence: OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID);
// (3) an idempotent produce answered OUT_OF_ORDER_SEQUENCE_NUMBER,
// DUPLICATE_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID after the process's
// previous produce to that partition was acknowledged. (2) and (3) are not
// judged while a broker whose latest role was leader at an epoch older
// than the acknowledged append's still led in its own view: that deposed
// leader may lack the batch and refuse its successor legitimately. (2) is
// a known anomaly (lost-unflushed-quorum, lost-unflushed-isr,
// lost-unflushed-leader) when the broker that appended under the new id
// led while crash-lose-unflushed had cut its log below the acknowledged
// batch, after that batch: its producer state went with the cut.
type ProducerContinuity struct{}

// Name implements Checker.
func (ProducerContinuity) Name() string { return "producer-state" }

// Check implements Checker.
func (c ProducerContinuity) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	w := &producerWalk{
		r: r, t0: firstTime(h),
		reached: map[nodeTP]map[lineage]offsetMark{},
		tail:    map[nodeTP]int32{},
		ends:    map[epochOf]int64{},
		refills: map[epochOf][]int64{},
		seen:    map[producerSeqKey]seenBatch{},
		apps:    map[producerValue][]*history.Event{},
		roles:   map[history.TopicPartition][]*history.Event{},
		starts:  map[int32][]int64{},
		quorum:  newQuorumLosses(h),
	}
	for e := range eventsOf(h, history.KindNodeStart, history.KindRoleChange, history.KindHWAdvance, history.KindTruncation, history.KindControlRequest, history.KindProduceAppend) {
		switch e.Kind {
		case history.KindNodeStart:
			w.starts[e.Node] = append(w.starts[e.Node], e.Time)
		case history.KindRoleChange:
			w.roles[e.Role.TP()] = append(w.roles[e.Role.TP()], e)
			if e.Role.Role == history.RoleFollower {
				w.tail[nodeTP{e.Role.TP(), e.Node}] = e.Role.LeaderEpoch
			}
		case history.KindHWAdvance:
			k := nodeTP{e.HW.TP(), e.Node}
			if ep, ok := w.tail[k]; ok && e.HW.LEO != nil {
				w.reach(k, ep, *e.HW.LEO, e)
			}
		case history.KindTruncation:
			for ep, m := range w.reached[nodeTP{e.Truncation.TP(), e.Node}] {
				if e.Truncation.To < m.off {
					m.off = e.Truncation.To
					w.reached[nodeTP{e.Truncation.TP(), e.Node}][ep] = m
				}
			}
		case history.KindControlRequest:
			for _, tp := range deletedReplicas(e) {
				delete(w.reached, nodeTP{tp, e.Node})
			}
		case history.KindProduceAppend:
			a := e.Append
			k := nodeTP{a.TP(), e.Node}
			w.refilled(a)
			if ep, ok := w.tail[k]; ok && ep != a.LeaderEpoch {
				w.reach(k, ep, a.BaseOffset, e) // the log end the lineage reached
			}
			w.checkDup(e)
			w.tail[k] = a.LeaderEpoch
			w.reach(k, a.LeaderEpoch, a.LastOffset+1, e)
		}
	}
	// Each client process's idempotent produces, in invoke order.
	byProc := map[int][]history.Operation{}
	for _, op := range operations(h) {
		if o := op.Op(); o.F == history.FProduce && o.Idempotent {
			byProc[o.Process] = append(byProc[o.Process], op)
		}
	}
	for _, proc := range slices.Sorted(maps.Keys(byProc)) {
		w.judgeProcess(proc, byProc[proc])
	}
	r.detail("idempotent_appends", w.appends)
	r.detail("producer_resets_judged", w.resets)
	r.detail("refusals_judged", w.refusals)
	r.detail("not_judged_deposed_leader", w.unjudged)
	r.detail("refilled_leader_epochs", w.refillCount)
	r.detail("resends_of_refilled_batches", w.refilledDups)
	return r.result(fmt.Sprintf("no leader appended again an idempotent batch its own log held (%d idempotent appends), and no client's producer sequence was refused after its previous produce to the partition was acknowledged (%d not judged: a deposed leader still led in its own view).", w.appends, w.unjudged))
}

// producerWalk is what ProducerContinuity knows of the brokers' logs and
// roles as it walks a history.
type producerWalk struct {
	r  *report
	t0 int64

	// reached[replica][epoch]: how far the replica's log held records of
	// that leader epoch's lineage, lowered by its truncations. A replica
	// that follows epoch e holds e's lineage in its whole log after its
	// truncation (KIP-101), and keeps it when it leads a later epoch until
	// its first append there: tail[replica] is the lineage its log end
	// holds, and every showing of its log end counts for that lineage.
	reached map[nodeTP]map[lineage]offsetMark
	tail    map[nodeTP]int32
	// A leader epoch names one lineage only while its leader's log is
	// not cut below what it appended: crash-lose-unflushed can empty the
	// leader's log, and a controller that fails over with that broker
	// alive keeps its epoch (PartitionStateMachine.initializePartitionState
	// puts it Online, no election), so the leader appends other batches at
	// the same offsets of the same epoch. ends[tp, epoch] is the end of
	// the leader's appends in the epoch's current lineage; refills[tp,
	// epoch] the offset each refill began at, one more lineage each.
	ends    map[epochOf]int64
	refills map[epochOf][]int64

	seen   map[producerSeqKey]seenBatch
	apps   map[producerValue][]*history.Event // each value's appends, in history order
	roles  map[history.TopicPartition][]*history.Event
	starts map[int32][]int64
	// quorum names a reset forced by a leader that crash-lose-unflushed
	// cut below the acknowledged batch (its producer state went with it).
	quorum *quorumLosses

	dups, appends, resets, refusals, unjudged int
	refillCount, refilledDups                 int
}

// epochOf is a partition's leader epoch.
type epochOf struct {
	tp    history.TopicPartition
	epoch int32
}

// lineage is a leader epoch's records as one run of its leader's appends
// wrote them: gen counts the refills before it.
type lineage struct {
	epoch int32
	gen   int
}

// seenBatch is an idempotent batch's latest append and its lineage.
type seenBatch struct {
	e   *history.Event
	gen int
}

// gen is the current lineage of tp's leader epoch.
func (w *producerWalk) gen(tp history.TopicPartition, epoch int32) int {
	return len(w.refills[epochOf{tp, epoch}])
}

// refilled notes a leader append a, starting a new lineage of its epoch
// when it lands below the end of the epoch's earlier appends.
func (w *producerWalk) refilled(a *history.Append) {
	k := epochOf{a.TP(), a.LeaderEpoch}
	if end, ok := w.ends[k]; ok && a.BaseOffset < end {
		w.refills[k] = append(w.refills[k], a.BaseOffset)
		w.refillCount++
		w.ends[k] = a.LastOffset + 1
		return
	}
	w.ends[k] = max(w.ends[k], a.LastOffset+1)
}

// heldFrom is how far replica k's log held the records of epoch's
// lineage gen at offset off: that lineage's own mark, or a later
// lineage's when every refill since began above off (the records below a
// refill are the same in both).
func (w *producerWalk) heldFrom(k nodeTP, epoch int32, gen int, off int64) (offsetMark, bool) {
	refills := w.refills[epochOf{k.tp, epoch}]
	var best offsetMark
	found := false
	for g := gen; g <= len(refills); g++ {
		if g > gen && refills[g-1] <= off {
			break
		}
		if m, ok := w.reached[k][lineage{epoch, g}]; ok && (!found || m.off > best.off) {
			best, found = m, true
		}
	}
	return best, found
}

// producerSeqKey is one idempotent batch: partition, producer and sequences.
type producerSeqKey struct {
	tp          history.TopicPartition
	id          int64
	epoch       int16
	first, last int32
}

// producerValue is a produced value in its partition.
type producerValue struct {
	tp  history.TopicPartition
	val string
}

// reach records that replica k's log held epoch's lineage up to leo.
func (w *producerWalk) reach(k nodeTP, epoch int32, leo int64, e *history.Event) {
	m := w.reached[k]
	if m == nil {
		m = map[lineage]offsetMark{}
		w.reached[k] = m
	}
	l := lineage{epoch, w.gen(k.tp, epoch)}
	if cur, ok := m[l]; !ok || leo > cur.off {
		m[l] = offsetMark{off: leo, idx: e.Index, time: e.Time}
	}
}

// checkDup judges append e against an earlier append of the same batch.
func (w *producerWalk) checkDup(e *history.Event) {
	a := e.Append
	for _, v := range a.Values {
		w.apps[producerValue{a.TP(), v}] = append(w.apps[producerValue{a.TP(), v}], e)
	}
	// A TxnOffsetCommit's batch on __consumer_offsets is the group
	// coordinator's (AppendOrigin.Coordinator): base sequence 0 every time,
	// never checked as a client's sequence.
	if a.Producer == nil || a.Topic == history.GroupMetadataTopic {
		return
	}
	w.appends++
	k := producerSeqKey{a.TP(), a.Producer.ID, a.Producer.Epoch, a.Producer.FirstSeq, a.Producer.LastSeq}
	s, ok := w.seen[k]
	prev := s.e
	// later copies are judged against the latest
	w.seen[k] = seenBatch{e, w.gen(a.TP(), a.LeaderEpoch)}
	if !ok || prev.Append.BaseOffset == a.BaseOffset {
		return
	}
	// The appending leader's own log held the first copy: its
	// own append, or replicated while it followed that epoch's lineage.
	held, ok := w.heldFrom(nodeTP{a.TP(), e.Node}, prev.Append.LeaderEpoch, s.gen, prev.Append.LastOffset)
	if !ok || held.off <= prev.Append.LastOffset {
		if w.gen(prev.Append.TP(), prev.Append.LeaderEpoch) > s.gen {
			w.refilledDups++ // the first copy's lineage was refilled
		}
		return // the first copy may be gone from this leader's log
	}
	w.dups++
	w.r.violate([]int{prev.Index, held.idx, e.Index}, "%s appended producer %d (epoch %d) sequences %d..%d to %s at offset %d, leader epoch %d (event %d, +%s), although its own log already held that batch at offset %d, where %s had appended it at leader epoch %d (event %d; %s's log held that epoch's records up to offset %d, event %d, +%s, and was not cut below it since): a leader's producer state, kept by every append and rebuilt from the log, answers a resend with the original offset (Log.analyzeAndValidateProducerState, ProducerStateEntry.findDuplicateBatch).",
		nodeName(e.Node), a.Producer.ID, a.Producer.Epoch, a.Producer.FirstSeq, a.Producer.LastSeq, a.TP(), a.BaseOffset, a.LeaderEpoch, e.Index, rel(e.Time, w.t0),
		prev.Append.BaseOffset, nodeName(prev.Node), prev.Append.LeaderEpoch, prev.Index, nodeName(e.Node), held.off-1, held.idx, rel(held.time, w.t0))
}

// staleLeader names a broker that, at time t, still led tp in its own
// view at an epoch older than epoch.
func (w *producerWalk) staleLeader(tp history.TopicPartition, epoch int32, t int64) (int32, bool) {
	latest := map[int32]*history.Event{}
	for _, x := range w.roles[tp] {
		if x.Time > t {
			break
		}
		latest[x.Node] = x
	}
	for n, x := range latest {
		restarted := false
		for _, s := range w.starts[n] {
			if s > x.Time && s <= t {
				restarted = true
			}
		}
		if !restarted && x.Role.Role == history.RoleLeader && x.Role.LeaderEpoch < epoch {
			return n, true
		}
	}
	return 0, false
}

// firstApp is the first append of op's value; tookApp the append that
// holds it at the offset its ok names (the copy that was committed).
func (w *producerWalk) firstApp(op history.Operation) *history.Event {
	if as := w.apps[producerValue{op.Op().TP(), op.Op().Value}]; len(as) > 0 {
		return as[0]
	}
	return nil
}

func (w *producerWalk) tookApp(op history.Operation) *history.Event {
	for _, a := range w.apps[producerValue{op.Op().TP(), op.Op().Value}] {
		if a.Append.BaseOffset <= op.Offset() && op.Offset() <= a.Append.LastOffset {
			return a
		}
	}
	return nil
}

// judgeProcess judges one client process's idempotent produces, in
// invoke order, each against its previous produce to the same partition.
func (w *producerWalk) judgeProcess(proc int, ops []history.Operation) {
	for k := 1; k < len(ops); k++ {
		cur := ops[k]
		tp := cur.Op().TP()
		var pred *history.Operation
		for j := k - 1; j >= 0; j-- {
			if ops[j].Op().TP() == tp {
				pred = &ops[j]
				break
			}
		}
		if pred == nil || pred.Outcome() != history.OpOK {
			continue
		}
		predApp := w.tookApp(*pred)
		// (3) the client was told its sequence was refused.
		if cur.Complete != nil && cur.Outcome() != history.OpOK {
			code := cur.Complete.Op.ErrorCode
			if code != errOutOfOrderSequence && code != errDuplicateSequence && code != errUnknownProducerID {
				continue
			}
			epoch := int32(-1)
			if predApp != nil {
				epoch = predApp.Append.LeaderEpoch
			}
			if _, stale := w.staleLeader(tp, epoch, cur.Complete.Time); stale {
				w.unjudged++
				continue
			}
			w.refusals++
			w.r.violate([]int{pred.Complete.Index, cur.Complete.Index}, "process %d's idempotent produce of %q to %s was answered with error %d (event %d, +%s) although its previous produce to %s, %q, had been acknowledged at offset %d (event %d, +%s): a leader's producer state continues the committed log (ProducerStateManager, rebuilt by Log.loadProducerState), so the next sequence is accepted.",
				proc, cur.Op().Value, tp, code, cur.Complete.Index, rel(cur.Complete.Time, w.t0), tp, pred.Op().Value, pred.Offset(), pred.Complete.Index, rel(pred.Complete.Time, w.t0))
			continue
		}
		// (2) the client took a new producer id between them.
		prev := ops[k-1]
		if cur.Outcome() != history.OpOK || prev.Outcome() != history.OpOK || predApp == nil {
			continue
		}
		ca, pa := w.firstApp(cur), w.tookApp(prev)
		if ca == nil || pa == nil || ca.Append.Producer == nil || pa.Append.Producer == nil || predApp.Append.Producer == nil {
			continue
		}
		if ca.Append.Producer.ID == pa.Append.Producer.ID && ca.Append.Producer.Epoch == pa.Append.Producer.Epoch {
			continue
		}
		if _, stale := w.staleLeader(tp, predApp.Append.LeaderEpoch, ca.Time); stale {
			w.unjudged++
			continue
		}
		pp := predApp.Append.Producer
		// The leadership counts from its broker's restart: the broker
		// appends at its new epoch before it logs the role change, and
		// before the watcher may see the state.
		if loss := w.quorum.ledBy(tp, ca.Node, ca.Append.LeaderEpoch); loss != nil && loss.inForceAt(ca.Time) {
			if x := loss.cutBelow(tp, ca.Node, predApp.Time, predApp.Append.BaseOffset); x != nil {
				who, evs := describeQuorumLoss(loss, w.t0)
				cut := x.crash.cuts[tp]
				w.r.knownAnomaly(loss.name(), append([]int{predApp.Index, pred.Complete.Index, ca.Index}, evs...), "process %d's produce of %q to %s was appended under a new producer id %d (epoch %d) by %s at leader epoch %d (event %d, +%s) after its previous produce %q (producer id %d, epoch %d, sequence %d, offset %d, event %d) was acknowledged (event %d, +%s): crash-lose-unflushed cut %s's log of %s from %d to %d, below that batch, so the producer state it rebuilt from its log ended at an earlier sequence and refused the next one, and the client took a new producer epoch; %s (%s).",
					proc, cur.Op().Value, tp, ca.Append.Producer.ID, ca.Append.Producer.Epoch, nodeName(ca.Node), ca.Append.LeaderEpoch, ca.Index, rel(ca.Time, w.t0),
					pred.Op().Value, pp.ID, pp.Epoch, pp.LastSeq, predApp.Append.BaseOffset, predApp.Index, pred.Complete.Index, rel(pred.Complete.Time, w.t0),
					nodeName(ca.Node), tp, cut.From, cut.To, loss.how(), who)
				continue
			}
		}
		w.resets++
		w.r.violate([]int{predApp.Index, pred.Complete.Index, ca.Index}, "process %d's produce of %q to %s was appended under a new producer id %d (epoch %d) by %s at leader epoch %d (event %d, +%s), although the process had no unknown outcome and its previous produce to %s, %q, had been appended under producer id %d (epoch %d, sequence %d) at offset %d by %s at leader epoch %d (event %d) and acknowledged (event %d, +%s): franz-go takes a new producer id only after a leader refused its next sequence, which a leader holding the committed batch accepts (ProducerStateManager, rebuilt from the log by Log.loadProducerState and kept by follower appends).",
			proc, cur.Op().Value, tp, ca.Append.Producer.ID, ca.Append.Producer.Epoch, nodeName(ca.Node), ca.Append.LeaderEpoch, ca.Index, rel(ca.Time, w.t0),
			tp, pred.Op().Value, pp.ID, pp.Epoch, pp.LastSeq, predApp.Append.BaseOffset, nodeName(predApp.Node), predApp.Append.LeaderEpoch, predApp.Index, pred.Complete.Index, rel(pred.Complete.Time, w.t0))
	}
}
