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
// Except when the newer marker was appended later, at a lower offset,
// after crash-lose-unflushed took the older one from every replica the
// controller could elect (the known anomalies of unflushed.go): no leader
// held both.
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
// refuse the batch (INVALID_PRODUCER_EPOCH); except after
// crash-lose-unflushed took the batch from the log before the marker was
// appended below it, as in (a). A batch never committed is
// not judged (a deposed leader's divergent log may lack the marker), nor is
// a fenced producer's first write to a partition the new epoch never
// reached, which Kafka 2.6.3 accepts (KIP-890 closes that in 3.6).
//
// (c) markers never finished: an EndTxn (or the coordinator's own abort of
// a timed-out or fenced transaction) wrote PrepareCommit or PrepareAbort
// and nothing showed it completed within Grace after every fault healed
// (after the prepare, if it came later): neither a TxnComplete of that
// transactional id, producer id and epoch nor a later coordinator that
// loaded the id and took its requests (see unfinished). A history that
// ends before that grace ran out is unknown for that transaction; one
// whose faults never healed is unknown too. A prepare that
// crash-lose-unflushed took from every replica of its __transaction_state
// partition the controller could elect (the known anomalies of
// unflushed.go) is that anomaly: no later coordinator can load it.
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
	// quorum names a marker lost to crash-lose-unflushed (unflushed.go)
	// before a newer coordinator's marker took a lower offset.
	quorum *quorumLosses
}

// Check implements Checker.
func (c TxnFencing) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	w := &txnWalk{t0: firstTime(h), ids: map[int64]string{}, committed: map[history.TopicPartition]map[int64][]*history.Event{}, quorum: newQuorumLosses(h)}
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
					if loss := w.quorum.between(tp, e.Time, top.Time); top.Time > e.Time && loss != nil {
						// The newer marker was appended after this one, at a
						// lower offset: the log lost this one in between, so
						// its leader never held the newer marker.
						who, evs := describeQuorumLoss(loss, w.t0)
						r.knownAnomaly(loss.name(), append([]int{e.Index, top.Index}, evs...), "%s appended the %s marker of %s (producer epoch %d) to %s at offset %d carrying coordinator epoch %d, committed (event %d, +%s), before %s appended the %s marker at offset %d carrying coordinator epoch %d, committed (event %d, +%s), below it: crash-lose-unflushed took the first from the log in between, so no leader held both; %s (%s).",
							nodeName(e.Node), decision(m.Commit), w.tidOf(pid), m.ProducerEpoch, tp, m.Offset, m.CoordinatorEpoch, e.Index, rel(e.Time, w.t0),
							nodeName(top.Node), decision(t.Commit), t.Offset, t.CoordinatorEpoch, top.Index, rel(top.Time, w.t0), loss.how(), who)
						continue
					}
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
			if loss := w.quorum.between(a.TP(), e.Time, me.Time); me.Time > e.Time && loss != nil {
				// The marker was appended after the batch, at a lower
				// offset: the log lost the batch in between, so its
				// leader never held the marker.
				who, evs := describeQuorumLoss(loss, w.t0)
				r.knownAnomaly(loss.name(), append([]int{e.Index, ack.Index, me.Index}, evs...), "%s appended a batch of %s at producer epoch %d to %s at offsets %d..%d, leader epoch %d (event %d, +%s; committed, event %d), before %s appended the %s marker of producer epoch %d at offset %d (coordinator epoch %d, event %d, +%s), below it: crash-lose-unflushed took the batch from the log in between, so no leader held both; %s (%s).",
					nodeName(e.Node), w.tidOf(a.Producer.ID), a.Producer.Epoch, a.TP(), a.BaseOffset, a.LastOffset, a.LeaderEpoch, e.Index, rel(e.Time, w.t0), ack.Index,
					nodeName(me.Node), decision(m.Commit), m.ProducerEpoch, m.Offset, m.CoordinatorEpoch, me.Index, rel(me.Time, w.t0), loss.how(), who)
				break
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
//
// A prepare is completed by:
//   - a TxnComplete of its transactional id, producer id, epoch and
//     decision at its coordinator epoch or a later one. It is matched to
//     the latest open prepare before it: one coordinator has one
//     transaction of an id in flight, so an older prepare still open is
//     one whose own completion went unreported. A completion at a later
//     coordinator epoch with no open prepare before it is matched to a
//     prepare of an older coordinator epoch answered after it: the deposed
//     coordinator appended the prepare, the new one loaded and finished
//     it, and the deposed one's append was acknowledged only then.
//   - a load of its __transaction_state partition at its coordinator
//     epoch or a later one, after it, that holds its transactional id,
//     followed by a request of that id the loaded coordinator took at that
//     epoch. The coordinator that wrote the completion can die or be cut
//     off after the record reached the followers and before its append
//     was acknowledged, so no TxnComplete is reported; the next load reads
//     the completion from the log, and a coordinator takes no
//     AddPartitionsToTxn, AddOffsetsToTxn, EndTxn or InitProducerId while
//     the id is in PrepareCommit or PrepareAbort
//     (TransactionCoordinator answers CONCURRENT_TRANSACTIONS until the
//     loaded transaction's markers are written and its completion with
//     them).
func (c TxnFencing) unfinished(h *history.History, w *txnWalk, r *report) int {
	type prepare struct {
		e    *history.Event
		done *history.Event
	}
	open := map[txnKey][]*prepare{}
	var all []*prepare
	var late []*history.Event // completions at a newer coordinator epoch with no open prepare before them
	var loads []*history.Event
	taken := map[string][]*history.Event{}
	for e := range eventsOf(h, history.KindTxnRequest) {
		t := e.Txn
		if t.ErrorCode != 0 {
			continue
		}
		if t.API == history.TxnLoadPartition {
			loads = append(loads, e)
			continue
		}
		if t.TransactionalID == "" {
			continue
		}
		k := txnKey{t.TransactionalID, t.ProducerID, t.ProducerEpoch}
		switch {
		case (t.API == history.TxnAPIEndTxn || t.API == history.TxnAPITimeout) &&
			(t.State == history.TxnStatePrepareCommit || t.State == history.TxnStatePrepareAbort):
			p := &prepare{e: e}
			open[k] = append(open[k], p)
			all = append(all, p)
			taken[t.TransactionalID] = append(taken[t.TransactionalID], e)
		case t.API == history.TxnAPIComplete:
			matched := false
			for i := len(open[k]) - 1; i >= 0; i-- {
				p := open[k][i]
				if p.e.Txn.Commit == t.Commit && p.e.Txn.CoordinatorEpoch <= t.CoordinatorEpoch {
					p.done = e
					open[k] = slices.Delete(open[k], i, i+1)
					matched = true
					break
				}
			}
			if !matched {
				late = append(late, e)
			}
		case t.API == history.TxnAPIAddPartitions || t.API == history.TxnAPIAddOffsets ||
			t.API == history.TxnAPIEndTxn || t.API == history.TxnAPIInitProducerID:
			taken[t.TransactionalID] = append(taken[t.TransactionalID], e)
		}
	}
	for _, p := range all {
		if p.done != nil {
			continue
		}
		t := p.e.Txn
		for i, d := range late {
			if d != nil && d.Index < p.e.Index && d.Txn.TransactionalID == t.TransactionalID && d.Txn.ProducerID == t.ProducerID &&
				d.Txn.ProducerEpoch == t.ProducerEpoch && d.Txn.Commit == t.Commit && d.Txn.CoordinatorEpoch > t.CoordinatorEpoch {
				p.done, late[i] = d, nil
				break
			}
		}
		if p.done == nil {
			p.done = loadedPast(p.e, loads, taken[t.TransactionalID])
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
			r.cannotDecide("%s, so whether the %s of transactional id %q (producer id %d, epoch %d, event %d) was completed after healing cannot be judged.",
				hi.inForce, written, t.TransactionalID, t.ProducerID, t.ProducerEpoch, p.e.Index)
		case p.done != nil:
			r.violateAt(deadline, []int{p.e.Index, p.done.Index}, "%s wrote %s for transactional id %q, producer id %d, epoch %d, at coordinator epoch %d (%s, event %d, +%s), and its markers finished only at +%s (%s by %s at coordinator epoch %d, event %d), more than %s after every fault healed (+%s) and after the prepare: the coordinator keeps sending a decided transaction's markers to the partitions' leaders until each is written (TransactionMarkerChannelManager).",
				nodeName(p.e.Node), written, t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.CoordinatorEpoch, t.API, p.e.Index, rel(p.e.Time, w.t0),
				rel(p.done.Time, w.t0), p.done.Txn.API, nodeName(p.done.Node), p.done.Txn.CoordinatorEpoch, p.done.Index, c.Grace, rel(hi.at, w.t0))
		case hi.end < deadline:
			r.cannotDecide("%s wrote %s for transactional id %q (producer id %d, epoch %d, event %d) and no TxnComplete followed, but the history ends before the %s grace after healing ran out.",
				nodeName(p.e.Node), written, t.TransactionalID, t.ProducerID, t.ProducerEpoch, p.e.Index, c.Grace)
		case w.quorum.between(history.TP("__transaction_state", t.Partition), p.e.Time, deadline) != nil:
			// The coordinator's log lost the prepare: a coordinator that
			// loads the partition afterwards does not know the
			// transaction, so no one sends its markers.
			loss := w.quorum.between(history.TP("__transaction_state", t.Partition), p.e.Time, deadline)
			who, evs := describeQuorumLoss(loss, w.t0)
			r.knownAnomaly(loss.name(), append([]int{p.e.Index}, evs...), "%s wrote %s for transactional id %q, producer id %d, epoch %d, at coordinator epoch %d (%s, event %d, +%s), over partitions %v, to __transaction_state-%d, and no coordinator wrote its completion: crash-lose-unflushed took the prepare from that log, so no coordinator loaded the transaction; %s (%s).",
				nodeName(p.e.Node), written, t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.CoordinatorEpoch, t.API, p.e.Index, rel(p.e.Time, w.t0),
				t.Partitions, t.Partition, loss.how(), who)
		default:
			r.violateAt(deadline, []int{p.e.Index}, "%s wrote %s for transactional id %q, producer id %d, epoch %d, at coordinator epoch %d (%s, event %d, +%s), over partitions %v, and no coordinator wrote its completion within %s after every fault healed (+%s): the transaction's markers never finished, so its partitions' last stable offset stays below it and read_committed consumers stop there.",
				nodeName(p.e.Node), written, t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.CoordinatorEpoch, t.API, p.e.Index, rel(p.e.Time, w.t0),
				t.Partitions, c.Grace, rel(hi.at, w.t0))
		}
	}
	return len(all)
}

// loadedPast is the first request of prepare p's transactional id (among
// taken, in history order) that a coordinator took at the coordinator
// epoch of a load of p's partition holding the id, the load after p and at
// p's coordinator epoch or a later one; nil if there is none.
func loadedPast(p *history.Event, loads, taken []*history.Event) *history.Event {
	var first *history.Event
	for _, l := range loads {
		lt := l.Txn
		if l.Index < p.Index || lt.Partition != p.Txn.Partition || lt.CoordinatorEpoch < p.Txn.CoordinatorEpoch ||
			!slices.Contains(lt.TransactionalIDs, p.Txn.TransactionalID) {
			continue
		}
		for _, e := range taken {
			if e.Index > l.Index && e.Node == l.Node && e.Txn.CoordinatorEpoch == lt.CoordinatorEpoch {
				if first == nil || e.Index < first.Index {
					first = e
				}
				break
			}
		}
	}
	return first
}
