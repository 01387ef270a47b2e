package checkers

import (
	"fmt"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/history"
)

// LSO checks that no transaction hangs (KAFKA-12671, KIP-890): Grace after
// every fault healed, a partition whose leader's last stable offset is
// below its high watermark because a producer has a transaction open on it
// must have that transaction open at the producer's coordinator too (state
// Ongoing with the partition added), since only the coordinator ends a
// transaction, with a marker to each partition it knows of. A transaction
// the partition has open and the coordinator has completed, or never
// added the partition to, ends by no marker: the LSO stays there and
// read_committed consumers read nothing past it. The classic way in is a
// produce that reaches the leader after its transaction was aborted and
// the abort marker written, which a leader that does not verify with the
// coordinator appends.
//
// The partition's transactions come from its leaders' appends
// (produce_append with a transactional producer batch opens one, a
// txn_marker appended closes it), its LSO and HW from the last hw_advance
// of the broker that last took its leadership, and the coordinator's view
// from its txn_request events (the state each answer reports, the
// partitions added since the last completion). A coordinator with markers
// still to send (PrepareCommit, PrepareAbort) is not judged; a history that
// ends within the grace, or with a fault open, is unknown.
type LSO struct {
	Grace time.Duration
}

// Name implements Checker.
func (LSO) Name() string { return "lso" }

// openTxn is a transaction a partition's log has open for a producer.
type openTxn struct {
	first  int64
	epoch  int16
	append *history.Event
	// marker is the producer's last marker on the partition before it
	// opened (nil: none).
	marker *history.Event
}

// coordView is what a transactional id's coordinator last said of it.
type coordView struct {
	id       string
	pid      int64
	epoch    int16
	state    string
	ev       *history.Event // the event that reported state
	added    map[history.TopicPartition]bool
	complete *history.Event // the last completion written
}

// Check implements Checker.
func (c LSO) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	t0 := firstTime(h)
	hi := heal(h)
	opens := map[history.TopicPartition]map[int64]*openTxn{}
	markers := map[history.TopicPartition]map[int64]*history.Event{}
	leaders := map[history.TopicPartition]int32{}
	lastHW := map[history.TopicPartition]*history.Event{}
	views := map[string]*coordView{}
	idOf := map[int64]string{}
	for e := range eventsOf(h, history.KindProduceAppend, history.KindTxnMarker, history.KindRoleChange, history.KindHWAdvance,
		history.KindTxnRequest, history.KindTopicDeletion) {
		switch e.Kind {
		case history.KindProduceAppend:
			a := e.Append
			if a.Producer == nil || !a.Producer.Transactional {
				continue
			}
			tp := a.TP()
			if opens[tp] == nil {
				opens[tp] = map[int64]*openTxn{}
			}
			if opens[tp][a.Producer.ID] == nil {
				opens[tp][a.Producer.ID] = &openTxn{first: a.BaseOffset, epoch: a.Producer.Epoch, append: e, marker: markers[tp][a.Producer.ID]}
			}
		case history.KindTxnMarker:
			m := e.TxnMarker
			if m.ErrorCode != 0 || m.Offset < 0 {
				continue
			}
			tp := history.TP(m.Topic, m.Partition)
			delete(opens[tp], m.ProducerID)
			if markers[tp] == nil {
				markers[tp] = map[int64]*history.Event{}
			}
			markers[tp][m.ProducerID] = e
		case history.KindRoleChange:
			switch tp := e.Role.TP(); {
			case e.Role.Role == history.RoleLeader:
				leaders[tp] = e.Node
			case leaders[tp] == e.Node:
				delete(leaders, tp) // its later high watermarks are a follower's
			}
		case history.KindHWAdvance:
			if e.HW.LSO != nil && leaders[e.HW.TP()] == e.Node {
				lastHW[e.HW.TP()] = e
			}
		case history.KindTxnRequest:
			coordinatorSaw(views, idOf, e)
		case history.KindTopicDeletion:
			for tp := range lastHW {
				if tp.Topic == e.Deletion.Topic {
					delete(lastHW, tp)
					delete(opens, tp)
					delete(markers, tp)
				}
			}
		}
	}
	judged := 0
	for _, tp := range sortedTPs(lastHW) {
		hw := lastHW[tp]
		lso := *hw.HW.LSO
		if lso >= hw.HW.New {
			continue
		}
		var pid int64 = -1
		var o *openTxn
		for p, t := range opens[tp] {
			if t.first == lso && (o == nil || p < pid) {
				pid, o = p, t
			}
		}
		if o == nil {
			continue // held by a decided transaction whose marker the HW has not passed
		}
		judged++
		what := fmt.Sprintf("partition %s's last stable offset stayed at %d below its high watermark %d (broker %d, leader epoch %d, %s)",
			tp, lso, hw.HW.New, hw.Node, hw.HW.LeaderEpoch, at(hw, t0))
		v := views[idOf[pid]]
		if v == nil || v.ev == nil {
			r.cannotDecide("%s, held by producer %d's transaction from offset %d, and no coordinator event names producer %d, so whether its coordinator has it open is unknown.", what, pid, lso, pid)
			continue
		}
		if v.pid == pid && (v.state == "PrepareCommit" || v.state == "PrepareAbort") {
			continue // the coordinator is still sending markers
		}
		if v.pid == pid && v.state == "Ongoing" && v.added[tp] {
			continue // open at the coordinator too: the producer or its timeout ends it
		}
		since := max(o.append.Time, v.ev.Time, hi.at)
		evs := []int{hw.Index, o.append.Index, v.ev.Index}
		story := fmt.Sprintf("%s: producer %d epoch %d has a transaction open there from offset %d (appended by broker %d at +%s, event %d), %s, and its coordinator %s: a hanging transaction that no marker will end",
			what, pid, o.epoch, o.first, o.append.Node, rel(o.append.Time, t0), o.append.Index, markerStory(o.marker, t0), v.describe(pid, tp, t0))
		if o.marker != nil {
			evs = append(evs, o.marker.Index)
		}
		switch {
		case !hi.healed:
			r.cannotDecide("%s; %s, so it cannot be judged.", story, hi.inForce)
		case hi.end-since > int64(c.Grace):
			r.violateAt(since+int64(c.Grace), evs, "%s; still so when the history ended (+%s), %s after every fault healed (+%s), the append and the coordinator's answer (grace %s).",
				story, rel(hi.end, t0), time.Duration(hi.end-since).Round(10*time.Millisecond), rel(hi.at, t0), c.Grace)
		default:
			r.cannotDecide("%s; the history ends (+%s) within the %s grace.", story, rel(hi.end, t0), c.Grace)
		}
	}
	r.detail("partitions_with_lso", len(lastHW))
	return r.result(fmt.Sprintf("no hanging transaction: of the %d partitions whose leaders reported a last stable offset, %d ended with it below the high watermark because of an open transaction, each open at its coordinator too.", len(lastHW), judged))
}

// coordinatorSaw folds one coordinator event into the views: which
// transactional id a producer id belongs to, the state the answer
// reported, the partitions added since the last completion.
func coordinatorSaw(views map[string]*coordView, idOf map[int64]string, e *history.Event) {
	t := e.Txn
	if t.TransactionalID == "" {
		return
	}
	v := views[t.TransactionalID]
	if v == nil {
		v = &coordView{id: t.TransactionalID, pid: -1, added: map[history.TopicPartition]bool{}}
		views[t.TransactionalID] = v
	}
	pid, epoch := t.ProducerID, t.ProducerEpoch
	if t.AssignedProducerID != nil && *t.AssignedProducerID >= 0 {
		pid, epoch = *t.AssignedProducerID, *t.AssignedEpoch
	}
	if pid >= 0 && t.ErrorCode == 0 {
		idOf[pid] = t.TransactionalID
		v.pid, v.epoch = pid, epoch
	}
	if t.State != "" {
		v.state, v.ev = t.State, e
	}
	switch {
	case t.ErrorCode != 0:
	case t.API == history.TxnAPIAddPartitions || t.API == history.TxnAPIAddOffsets:
		for _, tp := range t.Partitions {
			v.added[tp] = true
		}
	case t.API == history.TxnAPIComplete:
		v.added = map[history.TopicPartition]bool{}
		v.complete = e
	}
}

// describe says what the coordinator holds for pid and tp.
func (v *coordView) describe(pid int64, tp history.TopicPartition, t0 int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "(transactional id %q) last reported it %s at +%s (event %d)", v.id, v.state, rel(v.ev.Time, t0), v.ev.Index)
	switch {
	case v.pid != pid:
		fmt.Fprintf(&b, ", with the id now held by producer %d", v.pid)
	case v.state == "Ongoing":
		fmt.Fprintf(&b, ", without %s among the transaction's %d partitions", tp, len(v.added))
	}
	if v.complete != nil && v.complete != v.ev {
		fmt.Fprintf(&b, ", its last completion written at +%s (event %d)", rel(v.complete.Time, t0), v.complete.Index)
	}
	return b.String()
}

// markerStory says when the producer's last marker before the open
// transaction was written to the partition.
func markerStory(m *history.Event, t0 int64) string {
	if m == nil {
		return "no marker of that producer having been written there before"
	}
	kind := "ABORT"
	if m.TxnMarker.Commit {
		kind = "COMMIT"
	}
	return fmt.Sprintf("after its %s marker at offset %d (epoch %d, coordinator epoch %d) was written by broker %d at +%s (event %d)",
		kind, m.TxnMarker.Offset, m.TxnMarker.ProducerEpoch, m.TxnMarker.CoordinatorEpoch, m.Node, rel(m.Time, t0), m.Index)
}
