package checkers

// The transaction fences (see doc.go's table): a partition leader's
// coordinator-epoch and producer-epoch checks, the transaction
// coordinator's producer-epoch checks, and the completion of every
// transaction the coordinator decided.

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/zkchaos/zkchaos/history"
)

// TxnFencing checks the fences of Kafka's transactions (KIP-98) on the
// coordinators' txn_request and the leaders' txn_marker and produce_append
// events.
//
// Row: transactions | a leader never appends a marker of a coordinator
// epoch older than one already committed for the producer, no fenced
// producer's request or batch takes effect, and a decided transaction is
// completed once faults heal | ProducerAppendInfo.appendEndTxnMarker and
// checkProducerEpoch, TransactionCoordinator.handleInitProducerId,
// handleAddPartitionsToTransaction, handleEndTransaction, the marker
// channel (TransactionMarkerChannelManager) and the completion it writes |
// txn_request (InitProducerId's answer, accepted AddPartitionsToTxn,
// AddOffsetsToTxn and EndTxn with their epochs, TxnComplete), txn_marker
// (committed markers: offset, producer and coordinator epochs), a
// produce_append's producer | three findings:
//
// (a) stale coordinator obeyed: a committed marker of a producer id on a
// partition sits at a higher offset than a committed marker of the same
// producer id carrying a higher coordinator epoch. Committed markers are
// in every later leader's log, so the leader that appended the second had
// the first and had to refuse it with TRANSACTION_COORDINATOR_FENCED.
// Markers appended but never committed are not judged: a deposed leader's
// divergent log may never have held the newer one.
//
// (b) fenced producer's write took effect: an AddPartitionsToTxn,
// AddOffsetsToTxn or EndTxn answered without an error carrying a producer
// epoch below one an InitProducerId had already given the same
// transactional id and producer id. A coordinator at the InitProducerId's
// coordinator epoch or a later one holds the new epoch (its own write, or
// loaded from the log) and must answer INVALID_PRODUCER_EPOCH. An older
// coordinator that had not yet been deposed may answer an
// AddPartitionsToTxn from its cache without writing, which changes
// nothing, so at an older coordinator epoch only an EndTxn that wrote
// PrepareCommit or PrepareAbort is judged. And a batch of that producer id
// at an older producer epoch than a committed marker below it, the batch
// committed too (its leader's produce_ack): both are in the one committed
// log, the marker first, so the leader had the newer epoch and had to
// refuse the batch (INVALID_PRODUCER_EPOCH). A batch never committed is
// not judged (a deposed leader's divergent log may lack the marker), nor is
// a fenced producer's first write to a partition the new epoch never
// reached, which Kafka 2.6.3 accepts (KIP-890 closes that in 3.6).
//
// (c) markers never finished: an EndTxn (or the coordinator's own abort of
// a timed-out or fenced transaction) wrote PrepareCommit or PrepareAbort
// and no TxnComplete of that transactional id, producer id and epoch
// followed within Grace after every fault healed (after the prepare, if it
// came later). A history that ends before that grace ran out is unknown
// for that transaction; one whose faults never healed is unknown too.
type TxnFencing struct {
	Grace time.Duration
}

// Name implements Checker.
func (TxnFencing) Name() string { return "txn-fencing" }

// txnInit is an InitProducerId answered with a producer id and epoch.
type txnInit struct {
	epoch      int16
	coordEpoch int32
	e          *history.Event
}

type txnPID struct {
	tid string
	pid int64
}

// txnWalk holds what the three findings share.
type txnWalk struct {
	t0 int64
	// ids names the transactional id of each producer id an
	// InitProducerId handed out.
	ids map[int64]string
	// committed are the committed markers, by partition and producer id.
	committed map[history.TopicPartition]map[int64][]*history.Event
}

// Check implements Checker.
func (c TxnFencing) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	w := &txnWalk{t0: firstTime(h), ids: map[int64]string{}, committed: map[history.TopicPartition]map[int64][]*history.Event{}}
	for e := range eventsOf(h, history.KindTxnRequest, history.KindTxnMarker) {
		switch {
		case e.Kind == history.KindTxnRequest && e.Txn.API == history.TxnAPIInitProducerID && e.Txn.ErrorCode == 0 &&
			e.Txn.AssignedProducerID != nil && *e.Txn.AssignedProducerID >= 0:
			w.ids[*e.Txn.AssignedProducerID] = e.Txn.TransactionalID
		case e.Kind == history.KindTxnMarker && e.TxnMarker.ErrorCode == 0 && e.TxnMarker.Offset >= 0:
			m := e.TxnMarker
			tp := history.TP(m.Topic, m.Partition)
			if w.committed[tp] == nil {
				w.committed[tp] = map[int64][]*history.Event{}
			}
			w.committed[tp][m.ProducerID] = append(w.committed[tp][m.ProducerID], e)
		}
	}
	markers := w.staleCoordinatorMarkers(r)
	requests := w.fencedRequests(h, r)
	batches := w.fencedBatches(h, r)
	prepared := c.unfinished(h, w, r)
	r.detail("committed_markers", markers)
	r.detail("txn_requests_judged", requests)
	r.detail("txn_batches_judged", batches)
	r.detail("transactions_prepared", prepared)
	return r.result(fmt.Sprintf("no leader took a committed marker of an older coordinator epoch (%d committed markers), no fenced producer's request (%d accepted) or batch (%d transactional batches) took effect, and each of the %d transactions decided was completed.",
		markers, requests, batches, prepared))
}

// tidOf names a producer id's transactional id for explanations.
func (w *txnWalk) tidOf(pid int64) string {
	if id, ok := w.ids[pid]; ok {
		return fmt.Sprintf("transactional id %q, producer id %d", id, pid)
	}
	return fmt.Sprintf("producer id %d", pid)
}

func decision(commit bool) string {
	if commit {
		return "commit"
	}
	return "abort"
}

// staleCoordinatorMarkers is finding (a); it returns how many committed
// markers it read.
func (w *txnWalk) staleCoordinatorMarkers(r *report) int {
	n := 0
	for _, tp := range sortedTPs(w.committed) {
		byPID := w.committed[tp]
		for _, pid := range slices.Sorted(maps.Keys(byPID)) {
			ms := slices.Clone(byPID[pid])
			n += len(ms)
			slices.SortStableFunc(ms, func(a, b *history.Event) int { return cmp.Compare(a.TxnMarker.Offset, b.TxnMarker.Offset) })
			var top *history.Event
			for _, e := range ms {
				m := e.TxnMarker
				if top != nil && m.CoordinatorEpoch < top.TxnMarker.CoordinatorEpoch && m.Offset > top.TxnMarker.Offset {
					t := top.TxnMarker
					r.violate([]int{top.Index, e.Index}, "%s appended the %s marker of %s (producer epoch %d) to %s at offset %d carrying coordinator epoch %d, committed (event %d, +%s), above the %s marker %s had appended at offset %d carrying coordinator epoch %d, committed (event %d, +%s): the leader held that marker and had to refuse the older coordinator's with TRANSACTION_COORDINATOR_FENCED (ProducerAppendInfo.appendEndTxnMarker), so a deposed transaction coordinator decided a transaction the newer one already had.",
						nodeName(e.Node), decision(m.Commit), w.tidOf(pid), m.ProducerEpoch, tp, m.Offset, m.CoordinatorEpoch, e.Index, rel(e.Time, w.t0),
						decision(t.Commit), nodeName(top.Node), t.Offset, t.CoordinatorEpoch, top.Index, rel(top.Time, w.t0))
				}
				if top == nil || m.CoordinatorEpoch > top.TxnMarker.CoordinatorEpoch {
					top = e
				}
			}
		}
	}
	return n
}

// txnActs are the client requests finding (b) judges at the coordinator.
var txnActs = []string{history.TxnAPIAddPartitions, history.TxnAPIAddOffsets, history.TxnAPIEndTxn}

// fencedRequests is finding (b) at the coordinator; it returns how many
// accepted requests it judged.
func (w *txnWalk) fencedRequests(h *history.History, r *report) int {
	inits := map[txnPID][]txnInit{}
	judged := 0
	for e := range eventsOf(h, history.KindTxnRequest) {
		t := e.Txn
		if t.API == history.TxnAPIInitProducerID {
			if t.ErrorCode == 0 && t.AssignedProducerID != nil && t.AssignedEpoch != nil && *t.AssignedProducerID >= 0 {
				k := txnPID{t.TransactionalID, *t.AssignedProducerID}
				inits[k] = append(inits[k], txnInit{*t.AssignedEpoch, t.CoordinatorEpoch, e})
			}
			continue
		}
		if t.ErrorCode != 0 || !slices.Contains(txnActs, t.API) || t.TransactionalID == "" {
			continue
		}
		judged++
		wrote := t.API == history.TxnAPIEndTxn && (t.State == history.TxnStatePrepareCommit || t.State == history.TxnStatePrepareAbort)
		for _, in := range inits[txnPID{t.TransactionalID, t.ProducerID}] {
			if in.epoch <= t.ProducerEpoch || (t.CoordinatorEpoch < in.coordEpoch && !wrote) {
				continue
			}
			what := "answered it"
			if wrote {
				what = "wrote " + t.State + " for it"
			}
			r.violate([]int{in.e.Index, e.Index}, "%s, transaction coordinator at coordinator epoch %d, %s without an error: %s of transactional id %q, producer id %d, carrying producer epoch %d (event %d, +%s), after %s had given that producer id epoch %d at coordinator epoch %d (InitProducerId, event %d, +%s): a fenced producer's request took effect, where the coordinator answers INVALID_PRODUCER_EPOCH (TransactionCoordinator.handle%s).",
				nodeName(e.Node), t.CoordinatorEpoch, what, t.API, t.TransactionalID, t.ProducerID, t.ProducerEpoch, e.Index, rel(e.Time, w.t0),
				nodeName(in.e.Node), in.epoch, in.coordEpoch, in.e.Index, rel(in.e.Time, w.t0), coordinatorHandler(t.API))
			break
		}
	}
	return judged
}

func coordinatorHandler(api string) string {
	if api == history.TxnAPIEndTxn {
		return "EndTransaction"
	}
	return "AddPartitionsToTransaction"
}

// fencedBatches is finding (b) at the partition leaders; it returns how
// many committed batches of transactional producer ids it judged.
func (w *txnWalk) fencedBatches(h *history.History, r *report) int {
	type appendKey struct {
		node  int32
		tp    history.TopicPartition
		base  int64
		epoch int32
	}
	acks := map[appendKey]*history.Event{}
	for e := range eventsOf(h, history.KindProduceAck) {
		if e.Append.Acks == history.AcksAll {
			acks[appendKey{e.Node, e.Append.TP(), e.Append.BaseOffset, e.Append.LeaderEpoch}] = e
		}
	}
	judged := 0
	for e := range eventsOf(h, history.KindProduceAppend) {
		a := e.Append
		if a.Producer == nil {
			continue
		}
		if _, ok := w.ids[a.Producer.ID]; !ok {
			continue
		}
		ack, committed := acks[appendKey{e.Node, a.TP(), a.BaseOffset, a.LeaderEpoch}]
		if !committed {
			continue
		}
		judged++
		for _, me := range w.committed[a.TP()][a.Producer.ID] {
			m := me.TxnMarker
			if m.ProducerEpoch <= a.Producer.Epoch || m.Offset >= a.BaseOffset {
				continue
			}
			r.violate([]int{me.Index, e.Index, ack.Index}, "%s appended a batch of %s at producer epoch %d to %s at offsets %d..%d, leader epoch %d (event %d, +%s; committed, event %d), above the %s marker of producer epoch %d committed at offset %d (%s, coordinator epoch %d, event %d, +%s): the log carried the newer epoch, so the leader had to refuse the fenced producer's batch with INVALID_PRODUCER_EPOCH (ProducerAppendInfo.checkProducerEpoch).",
				nodeName(e.Node), w.tidOf(a.Producer.ID), a.Producer.Epoch, a.TP(), a.BaseOffset, a.LastOffset, a.LeaderEpoch, e.Index, rel(e.Time, w.t0), ack.Index,
				decision(m.Commit), m.ProducerEpoch, m.Offset, nodeName(me.Node), m.CoordinatorEpoch, me.Index, rel(me.Time, w.t0))
			break
		}
	}
	return judged
}

// txnKey is one transactional id's producer id and epoch: a transaction
// in flight is known by it (2.6.3 runs many transactions at one epoch,
// one after the other).
type txnKey struct {
	tid   string
	pid   int64
	epoch int16
}

// unfinished is finding (c); it returns how many prepares it read.
func (c TxnFencing) unfinished(h *history.History, w *txnWalk, r *report) int {
	type prepare struct {
		e    *history.Event
		done *history.Event
	}
	open := map[txnKey][]*prepare{}
	var all []*prepare
	for e := range eventsOf(h, history.KindTxnRequest) {
		t := e.Txn
		if t.ErrorCode != 0 || t.TransactionalID == "" {
			continue
		}
		k := txnKey{t.TransactionalID, t.ProducerID, t.ProducerEpoch}
		switch {
		case (t.API == history.TxnAPIEndTxn || t.API == history.TxnAPITimeout) &&
			(t.State == history.TxnStatePrepareCommit || t.State == history.TxnStatePrepareAbort):
			p := &prepare{e: e}
			open[k] = append(open[k], p)
			all = append(all, p)
		case t.API == history.TxnAPIComplete:
			for i, p := range open[k] {
				if p.e.Txn.Commit == t.Commit {
					p.done = e
					open[k] = slices.Delete(open[k], i, i+1)
					break
				}
			}
		}
	}
	hi := heal(h)
	for _, p := range all {
		t := p.e.Txn
		deadline := max(hi.at, p.e.Time) + int64(c.Grace)
		if p.done != nil && p.done.Time <= deadline {
			continue
		}
		written := "PrepareAbort"
		if t.Commit {
			written = "PrepareCommit"
		}
		switch {
		case !hi.healed:
			r.cannotDecide("fault event %d was never stopped, so whether the %s of transactional id %q (producer id %d, epoch %d, event %d) was completed after healing cannot be judged.",
				hi.openIdx, written, t.TransactionalID, t.ProducerID, t.ProducerEpoch, p.e.Index)
		case p.done != nil:
			r.violateAt(deadline, []int{p.e.Index, p.done.Index}, "%s wrote %s for transactional id %q, producer id %d, epoch %d, at coordinator epoch %d (%s, event %d, +%s), and its markers finished only at +%s (TxnComplete by %s at coordinator epoch %d, event %d), more than %s after every fault healed (+%s) and after the prepare: the coordinator keeps sending a decided transaction's markers to the partitions' leaders until each is written (TransactionMarkerChannelManager).",
				nodeName(p.e.Node), written, t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.CoordinatorEpoch, t.API, p.e.Index, rel(p.e.Time, w.t0),
				rel(p.done.Time, w.t0), nodeName(p.done.Node), p.done.Txn.CoordinatorEpoch, p.done.Index, c.Grace, rel(hi.at, w.t0))
		case hi.end < deadline:
			r.cannotDecide("%s wrote %s for transactional id %q (producer id %d, epoch %d, event %d) and no TxnComplete followed, but the history ends before the %s grace after healing ran out.",
				nodeName(p.e.Node), written, t.TransactionalID, t.ProducerID, t.ProducerEpoch, p.e.Index, c.Grace)
		default:
			r.violateAt(deadline, []int{p.e.Index}, "%s wrote %s for transactional id %q, producer id %d, epoch %d, at coordinator epoch %d (%s, event %d, +%s), over partitions %v, and no coordinator wrote its completion within %s after every fault healed (+%s): the transaction's markers never finished, so its partitions' last stable offset stays below it and read_committed consumers stop there.",
				nodeName(p.e.Node), written, t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.CoordinatorEpoch, t.API, p.e.Index, rel(p.e.Time, w.t0),
				t.Partitions, c.Grace, rel(hi.at, w.t0))
		}
	}
	return len(all)
}
