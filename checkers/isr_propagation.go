package checkers

import (
	"fmt"
	"slices"
	"strings"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/zklayout"
)

// ISRPropagation checks both halves of ISR change propagation: every ISR
// change a leader wrote is named by a notification of its process, and a
// notification a controller deleted was taken in. A leader that changes a
// partition's ISR writes the new state itself and then, from its
// propagation task, an /isr_change_notification child naming the
// partition; the controller reads the notifications, reads the named
// partitions' states into its cache, sends UpdateMetadata to every live
// broker and deletes exactly the notifications it read. A controller that
// deletes a notification it never read keeps the ISR the leader replaced,
// and so does every broker's metadata cache (what clients are told) until
// the partition changes again.
//
//	layer | promise | Kafka 2.6.3 code | event-log evidence | checker rule
//	leader, ISR propagation | every ISR change a leader wrote is named by a notification of its process | Partition.expandIsr/shrinkIsr → ZkPartitionStateStore.updateIsr → ReplicaManager.recordIsrChange; maybePropagateIsrChanges writes every recorded partition and clears the set under one lock | the leader's zk_write of the state, then its isr_change (the node records the change before logging it), and its notification creates (Start, the partitions in Data) | isr-propagation: a change no notification of the process started after the write's answer names, although one started after the change was logged
//	controller, ISR propagation | a deleted notification's partitions are in the controller's cache at least as new as their states when it was created | ReplicaManager.maybePropagateIsrChanges → KafkaZkClient.propagateIsrChanges; KafkaController.processIsrChangeNotification (getAllIsrChangeNotifications, getPartitionsFromIsrChangeNotifications, updateLeaderAndIsrCache, sendUpdateMetadataRequest, deleteIsrChangeNotifications(sequenceNumbers) in finally) | the leader's zk_write create of the notification (its path, Start, the partitions in Data); every state write's zk_write (new zkVersion, answered before that Start); the controller's zk_write delete of the notification; the same controller process's control_sent UpdateMetadata (Queued, each partition's zkVersion) | isr-propagation: an UpdateMetadata the deleting process queued after the delete carries a named partition at a zkVersion below the newest one written before the notification was created
//
// A state written before the notification was sent is in ZooKeeper before
// it, so a controller that read the notification and then the state holds
// that version or a newer one, and its cache never goes back; every later
// UpdateMetadata carries it. The version comparison stops at a deletion of
// the partition's topic (a re-created topic counts its versions from 0),
// and a request queued after the delete is what the controller knew then,
// however long its send thread held it.
type ISRPropagation struct{}

// Name implements Checker.
func (ISRPropagation) Name() string { return "isr-propagation" }

// isrNotification is one notification a leader created.
type isrNotification struct {
	ev    *history.Event // the leader's zk_write create
	tps   []history.TopicPartition
	least map[history.TopicPartition]writtenState // the newest state version written before ev's Start
	del   *history.Event                          // a controller's successful delete
	proc  int                                     // the deleting process's node_start, -1 if none
}

// writtenState is a successful write of a partition state.
type writtenState struct {
	ev      *history.Event
	version int32
}

// Check implements Checker.
func (c ISRPropagation) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	t0 := firstTime(h)
	dw := findDeletionWindows(h)
	writes := map[history.TopicPartition][]writtenState{} // in log order
	var notes []*isrNotification
	byPath := map[string]*isrNotification{}
	started := map[int32]int{} // node → its latest node_start
	procOf := func(node int32) int {
		if i, ok := started[node]; ok {
			return i
		}
		return -1
	}
	var malformed int
	for e := range eventsOf(h, history.KindNodeStart, history.KindZKWrite) {
		if e.Kind == history.KindNodeStart {
			started[e.Node] = e.Index
			continue
		}
		w := e.ZKWrite
		if w == nil || w.Outcome != history.ZKOK {
			continue
		}
		if topic, part, ok := zklayout.ParseStatePath(w.Path); ok && w.Op != "delete" {
			tp := history.TP(topic, part)
			writes[tp] = append(writes[tp], writtenState{ev: e, version: w.NewVersion})
			continue
		}
		if !strings.HasPrefix(w.Path, zklayout.ISRChangeNotificationPath+"/") {
			continue
		}
		switch w.Op {
		case "create":
			tps, ok := notificationOf(e)
			if !ok {
				malformed++
				continue
			}
			n := &isrNotification{ev: e, tps: tps, least: map[history.TopicPartition]writtenState{}, proc: -1}
			for _, tp := range tps {
				if sw, ok := newestBefore(writes[tp], w.Start, dw, tp.Topic); ok {
					n.least[tp] = sw
				}
			}
			notes = append(notes, n)
			byPath[w.Path] = n
		case "delete":
			if n := byPath[w.Path]; n != nil && n.del == nil {
				n.del, n.proc = e, procOf(e.Node)
			}
		}
	}
	// The deleting process's UpdateMetadata requests, in log order.
	type umSent struct {
		ev   *history.Event
		proc int
	}
	var ums []umSent
	started = map[int32]int{}
	for e := range eventsOf(h, history.KindNodeStart, history.KindControlSent) {
		if e.Kind == history.KindNodeStart {
			started[e.Node] = e.Index
			continue
		}
		if e.Control != nil && e.Control.API == history.APIUpdateMetadata && e.Control.Queued != 0 && len(e.Control.Partitions) > 0 {
			ums = append(ums, umSent{e, procOf(e.Node)})
		}
	}
	deleted, checked := 0, 0
	for _, n := range notes {
		if n.del == nil {
			continue
		}
		deleted++
		reported := map[history.TopicPartition]bool{}
		for _, um := range ums {
			if um.ev.Node != n.del.Node || um.proc != n.proc || um.ev.Control.Queued <= n.del.Time {
				continue
			}
			for i := range um.ev.Control.Partitions {
				cp := &um.ev.Control.Partitions[i]
				tp := cp.TP()
				sw, ok := n.least[tp]
				if !ok || reported[tp] || cp.Leader == leaderDuringDelete {
					continue
				}
				checked++
				if cp.ZkVersion >= sw.version || deletedBetween(dw, tp.Topic, n.ev.ZKWrite.Start, um.ev.Control.Queued) {
					continue
				}
				reported[tp] = true
				c.violation(r, h, n, sw, um.ev, cp, t0)
			}
		}
	}
	recorded, told := c.leaders(h, r, t0)
	r.detail("isr_changes", recorded)
	r.detail("isr_changes_followed_by_a_notification", told)
	r.detail("notifications", len(notes))
	r.detail("notifications_deleted", deleted)
	r.detail("update_metadata_partitions_checked", checked)
	if malformed > 0 {
		r.detail("notifications_malformed", malformed)
	}
	leaderPart := fmt.Sprintf("each of the %d ISR changes leaders wrote that a later notification of their process could name (of %d) was named by one", told, recorded)
	if deleted == 0 {
		return r.result(fmt.Sprintf("%s; no controller deleted any of the %d ISR change notifications leaders created, so none could have been dropped unread.", leaderPart, len(notes)))
	}
	return r.result(fmt.Sprintf(leaderPart+"; every one of the %d ISR change notifications a controller deleted had been taken in: each of the %d partition states the deleting controller's later UpdateMetadata requests carried for a notified partition was at least as new as the state written before the notification was created.",
		deleted, checked))
}

// newestBefore returns the highest-version write of ws logged before t
// (answered, so in ZooKeeper before anything sent at t), among those of the
// topic's incarnation at t. Answers from different sessions may be logged
// out of version order, hence the maximum rather than the last.
func newestBefore(ws []writtenState, t int64, dw deletionWindows, topic string) (writtenState, bool) {
	var best writtenState
	found := false
	for i := len(ws) - 1; i >= 0; i-- {
		sw := ws[i]
		if sw.ev.Time >= t {
			continue
		}
		if found && deletedBetween(dw, topic, sw.ev.Time, best.ev.Time) {
			break
		}
		if !found || sw.version > best.version {
			best, found = sw, true
		}
	}
	return best, found
}

// leaderDuringDelete is LeaderAndIsr.LeaderDuringDelete: an UpdateMetadata
// partition with it tells the broker to drop a topic being deleted.
const leaderDuringDelete = -2

// deletedBetween says whether topic was being deleted, or absent, at some
// time in [from, to]: its versions count again from 0 afterwards.
func deletedBetween(dw deletionWindows, topic string, from, to int64) bool {
	for _, w := range dw[topic] {
		if w.from <= to && w.to > from {
			return true
		}
	}
	return false
}

func (ISRPropagation) violation(r *report, h *history.History, n *isrNotification, sw writtenState, um *history.Event, cp *history.ControlPartition, t0 int64) {
	w, sent := n.ev.ZKWrite, um.Control
	wrote := fmt.Sprintf("zkVersion %d", sw.version)
	if st := sw.ev.ZKWrite.State; st != nil {
		wrote = fmt.Sprintf("zkVersion %d (leader %d, leader epoch %d, ISR %v)", sw.version, st.Leader, st.LeaderEpoch, st.ISR)
	}
	proc := "a process whose start is not in the history"
	if n.proc >= 0 {
		proc = fmt.Sprintf("the process started at event %d (+%s)", n.proc, rel(h.Events[n.proc].Time, t0))
	}
	r.violateAt(sent.Queued, dedupe([]int{sw.ev.Index, n.ev.Index, n.del.Index, um.Index}),
		"controller broker %d (%s, controller epoch %d) deleted ISR change notification %s at +%s (event %d), which broker %d had created at +%s (event %d) naming %s, "+
			"and at +%s queued UpdateMetadata for broker %d carrying %s at zkVersion %d (leader %d, leader epoch %d, ISR %v, event %d), "+
			"although broker %d had written %s at +%s (event %d), before the notification was created: the controller deleted the notification without taking in %s's ISR change, "+
			"so its cache and the brokers' metadata keep the ISR that change replaced.",
		n.del.Node, proc, sent.ControllerEpoch, w.Path, rel(n.del.Time, t0), n.del.Index, n.ev.Node, rel(w.Start, t0), n.ev.Index, cp.TP(),
		rel(sent.Queued, t0), sent.TargetBroker, cp.TP(), cp.ZkVersion, cp.Leader, cp.LeaderEpoch, cp.ISR, um.Index,
		sw.ev.Node, wrote, rel(sw.ev.Time, t0), sw.ev.Index, cp.TP())
}

// isrChangeSeen is one ISR change a leader process wrote: answered at
// answered (its zk_write), recorded for the propagation task before logged
// (its isr_change event).
type isrChangeSeen struct {
	ev       *history.Event
	answered int64
}

// notificationOf returns the partitions e names when it is a leader's
// create of an ISR change notification (any outcome) with readable data.
func notificationOf(e *history.Event) ([]history.TopicPartition, bool) {
	w := e.ZKWrite
	if e.Kind != history.KindZKWrite || w == nil || w.Op != "create" || !strings.HasPrefix(w.Path, zklayout.ISRChangeNotificationPath+"/") {
		return nil, false
	}
	got, err := zklayout.DecodeISRChangeNotification(w.Path, []byte(w.Data))
	if err != nil {
		return nil, false
	}
	tps := make([]history.TopicPartition, len(got))
	for i, p := range got {
		tps[i] = history.TP(p.Topic, p.Partition)
	}
	return tps, true
}

// noteSeen is one notification create a leader process started.
type noteSeen struct {
	ev  *history.Event
	tps []history.TopicPartition
}

// leaders checks the leader's half: a process's propagation task writes
// every partition recorded since its last notification, holding the set's
// lock from its read to its clear, so a notification started after an ISR
// change was logged (recorded before) names that partition, or an earlier
// notification started after the write's answer already did. A change no
// such notification names, while one started after it was logged exists,
// was dropped from the set: the controller never hears of it. It returns
// the ISR changes written and how many were followed by a notification of
// their process.
func (ISRPropagation) leaders(h *history.History, r *report, t0 int64) (recorded, told int) {
	type proc struct {
		node  int32
		start int
	}
	changes := map[proc][]isrChangeSeen{}
	notes := map[proc][]noteSeen{}
	var order []proc
	started := map[int32]int{}
	lastWrite := map[int32]map[history.TopicPartition]int64{} // node → partition → its latest state write's answer
	for e := range eventsOf(h, history.KindNodeStart, history.KindZKWrite, history.KindISRChange) {
		key := proc{e.Node, -1}
		if i, ok := started[e.Node]; ok {
			key.start = i
		}
		switch {
		case e.Kind == history.KindNodeStart:
			started[e.Node] = e.Index
			lastWrite[e.Node] = nil
		case e.Kind == history.KindZKWrite && e.ZKWrite != nil:
			w := e.ZKWrite
			if topic, part, ok := zklayout.ParseStatePath(w.Path); ok && w.Op == "set" {
				if lastWrite[e.Node] == nil {
					lastWrite[e.Node] = map[history.TopicPartition]int64{}
				}
				lastWrite[e.Node][history.TP(topic, part)] = e.Time
				continue
			}
			if tps, ok := notificationOf(e); ok {
				notes[key] = append(notes[key], noteSeen{ev: e, tps: tps})
			}
		case e.Kind == history.KindISRChange && e.ISR != nil && e.ISR.Outcome == history.ZKOK:
			tp := history.TP(e.ISR.Topic, e.ISR.Partition)
			answered, ok := lastWrite[e.Node][tp]
			if !ok {
				continue // its write is not in the history
			}
			if _, seen := changes[key]; !seen {
				order = append(order, key)
			}
			changes[key] = append(changes[key], isrChangeSeen{ev: e, answered: answered})
		}
	}
	for _, key := range order {
		ns := notes[key]
		for _, c := range changes[key] {
			recorded++
			var after *noteSeen // the first notification started after the change was logged
			for i := range ns {
				if ns[i].ev.ZKWrite.Start > c.ev.Time {
					after = &ns[i]
					break
				}
			}
			if after == nil {
				continue // the history ends, or the process did, before its next notification
			}
			told++
			tp := history.TP(c.ev.ISR.Topic, c.ev.ISR.Partition)
			named := false
			for i := range ns {
				if ns[i].ev.ZKWrite.Start > c.answered && slices.Contains(ns[i].tps, tp) {
					named = true
					break
				}
			}
			if named {
				continue
			}
			proc := "a process whose start is not in the history"
			if key.start >= 0 {
				proc = fmt.Sprintf("the process started at event %d (+%s)", key.start, rel(h.Events[key.start].Time, t0))
			}
			r.violateAt(after.ev.ZKWrite.Start, []int{c.ev.Index, after.ev.Index},
				"broker %d (%s), leader of %s at leader epoch %d, changed its ISR %v → %v at zkVersion %d (%s at +%s, event %d), but its next ISR change notification, started at +%s (%s, event %d), named %v and no notification of that process named %s: the change was dropped from the propagation task's set, and the controller never read the new ISR.",
				key.node, proc, tp, c.ev.ISR.LeaderEpoch, c.ev.ISR.Old, c.ev.ISR.New, c.ev.ISR.ZkVersion, c.ev.ISR.Action, rel(c.ev.Time, t0), c.ev.Index,
				rel(after.ev.ZKWrite.Start, t0), after.ev.ZKWrite.Path, after.ev.Index, after.tps, tp)
		}
	}
	return recorded, told
}
