package checkers

import (
	"fmt"
	"math"
	"slices"

	"github.com/zkchaos/zkchaos/history"
)

// A topic deleted and created again at the same name is a new topic to
// Kafka: its partitions start at leader epoch 0, offset 0 and znode
// version 0 (TopicDeletionManager.completeDeleteTopic removes every trace
// of the old one). So every per-partition rule that compares one state
// with an earlier one starts again at the new incarnation: the state
// versions carry their incarnation (zkState.inc, counted where the znode
// version goes back to 0), and the time a topic is being deleted or is
// absent (a deletion window) is no time a partition owes a leader.

// deletionWindow is the time a topic was being deleted or did not exist:
// from the first controller's topic_deletion started (or ineligible) to the first state of
// its next incarnation (math.MaxInt64 if none followed).
type deletionWindow struct {
	from, to int64
	started  int // the topic_deletion started event
}

// deletionWindows holds each topic's deletion windows, in time order.
type deletionWindows map[string][]deletionWindow

// during says whether topic was being deleted, or absent, at time t.
func (d deletionWindows) during(topic string, t int64) bool {
	for _, w := range d[topic] {
		if t >= w.from && t < w.to {
			return true
		}
	}
	return false
}

// startAt returns the start of the deletion window of topic that holds
// time t, if one does.
func (d deletionWindows) startAt(topic string, t int64) (int64, bool) {
	for _, w := range d[topic] {
		if t >= w.from && t < w.to {
			return w.from, true
		}
	}
	return 0, false
}

// windowAt returns the deletion window of topic that holds time t, if one
// does.
func (d deletionWindows) windowAt(topic string, t int64) (deletionWindow, bool) {
	for _, w := range d[topic] {
		if t >= w.from && t < w.to {
			return w, true
		}
	}
	return deletionWindow{}, false
}

// findDeletionWindows reads the controllers' topic_deletion events: a
// window opens at the first started or ineligible of a deletion and closes
// at the first state version of the topic's next incarnation (never, when
// the topic was not created again). Which deletion an event belongs to is
// told by the incarnation current at its time: a started or ineligible
// under an incarnation that already has a window is a controller resuming
// that deletion (at its failover), one under a later incarnation begins
// the next deletion. (Deciding this before the windows' ends were known
// took a topic's second deletion for a resumed first one, and owed its
// deleted partition a leader for the rest of the run.)
func findDeletionWindows(h *history.History) deletionWindows {
	type begin struct {
		time int64
		idx  int
	}
	begins := map[string][]begin{}
	for e := range eventsOf(h, history.KindTopicDeletion) {
		d := e.Deletion
		// A controller that finds a deletion halted at its failover logs
		// it ineligible without starting it: the topic is being deleted
		// all the same.
		if d == nil || (d.Step != history.DeletionStarted && d.Step != history.DeletionIneligible) {
			continue
		}
		begins[d.Topic] = append(begins[d.Topic], begin{e.Time, e.Index})
	}
	out := deletionWindows{}
	if len(begins) == 0 {
		return out
	}
	first := map[string]map[int]int64{} // topic → incarnation → first state time
	for tp, s := range partitionStates(h) {
		if _, ok := begins[tp.Topic]; !ok {
			continue
		}
		if first[tp.Topic] == nil {
			first[tp.Topic] = map[int]int64{}
		}
		for _, v := range s.ordered {
			if t, ok := first[tp.Topic][v.inc]; !ok || v.time < t {
				first[tp.Topic][v.inc] = v.time
			}
		}
	}
	for topic, bs := range begins {
		// incAt: the latest incarnation whose first state is at or before t.
		incAt := func(t int64) int {
			k := -1
			for inc, ft := range first[topic] {
				if ft <= t && inc > k {
					k = inc
				}
			}
			return k
		}
		seen := map[int]bool{}
		for _, b := range bs {
			k := incAt(b.time)
			if seen[k] {
				continue // a controller resumed this incarnation's deletion
			}
			seen[k] = true
			to := int64(math.MaxInt64)
			if t, ok := first[topic][k+1]; ok && t > b.time {
				to = t
			}
			out[topic] = append(out[topic], deletionWindow{from: b.time, to: to, started: b.idx})
		}
	}
	return out
}

// TopicDeletion checks what a topic deletion promises.
//
// Row: topic deletion | a deleted partition is gone: no broker acts on the
// old incarnation after deleting it, and the controller removes the topic
// only once every replica deleted its log | TopicDeletionManager
// (ReplicaDeletionStarted → ReplicaDeletionSuccessful, completeDeleteTopic),
// ReplicaManager.stopReplicas (deletePartition) | topic_deletion (the
// controller's started and completed, a broker's partition_deleted),
// produce_append, hw_advance, role_change | topic-deletion (deletion.go)
//
//   - After a broker deleted a partition (partition_deleted), it appends to
//     it or moves its high watermark only once it took a new role for it
//     (a LeaderAndIsr of the new incarnation); anything else acts on a log
//     that is gone.
//   - A controller's completed deletion of a topic follows, since the
//     deletion began, a partition_deleted of every replica of every
//     partition: the assignment the controller logged at the start (its
//     partitions) and the replicas the history's control requests name.
type TopicDeletion struct{}

// Name implements Checker.
func (TopicDeletion) Name() string { return "topic-deletion" }

// Check implements Checker.
func (c TopicDeletion) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	t0 := int64(0)
	if len(h.Events) > 0 {
		t0 = h.Events[0].Time
	}
	// deleted[node,tp] is the partition_deleted event after which node has
	// taken no new role for tp (-1: none pending).
	deleted := map[nodeTP]int{}
	// replicas: each partition's replica set, from the LeaderAndIsr
	// requests its brokers logged receiving.
	replicas := newReplicaTracker()
	// since[topic]: the deletions the brokers logged since the topic's
	// deletion began.
	since := map[string]map[nodeTP]bool{}
	deletions, acted := 0, 0
	for e := range eventsOf(h, history.KindTopicDeletion, history.KindRoleChange, history.KindProduceAppend, history.KindHWAdvance,
		history.KindNodeStart, history.KindControlRequest) {
		switch e.Kind {
		case history.KindNodeStart:
			forgetProcess(deleted, e.Node)
		case history.KindControlRequest:
			if e.Control.API == history.APILeaderAndIsr {
				replicas.leaderAndIsr(e.Control)
			}
		case history.KindRoleChange:
			if e.Role.Role != history.RoleStopped {
				delete(deleted, nodeTP{e.Role.TP(), e.Node})
			}
		case history.KindProduceAppend, history.KindHWAdvance:
			var tp history.TopicPartition
			what := ""
			if e.Append != nil {
				tp, what = e.Append.TP(), fmt.Sprintf("appended offsets %d-%d at leader epoch %d", e.Append.BaseOffset, e.Append.LastOffset, e.Append.LeaderEpoch)
			} else {
				tp, what = e.HW.TP(), fmt.Sprintf("moved its high watermark %d → %d", e.HW.Old, e.HW.New)
			}
			if i, ok := deleted[nodeTP{tp, e.Node}]; ok {
				acted++
				r.violate([]int{i, e.Index}, "broker %d deleted its replica of %s (%s) and then %s (%s) without a new role for it: it acted on the deleted incarnation's log.",
					e.Node, tp, at(&h.Events[i], t0), what, at(e, t0))
				delete(deleted, nodeTP{tp, e.Node}) // once per deletion
			}
		case history.KindTopicDeletion:
			d := e.Deletion
			switch d.Step {
			case history.PartitionDeleted:
				for _, p := range d.Partitions {
					k := nodeTP{history.TP(d.Topic, p), e.Node}
					deleted[k] = e.Index
					if since[d.Topic] != nil {
						since[d.Topic][k] = true
					}
				}
			case history.DeletionStarted:
				if since[d.Topic] == nil {
					since[d.Topic] = map[nodeTP]bool{}
				}
			case history.DeletionCompleted:
				deletions++
				done := since[d.Topic]
				var missing []string
				for _, p := range d.Partitions {
					tp := history.TP(d.Topic, p)
					for _, b := range replicas.of(tp) {
						if !done[nodeTP{tp, b}] {
							missing = append(missing, fmt.Sprintf("%s on broker %d", tp, b))
						}
					}
				}
				if len(missing) > 0 {
					slices.Sort(missing)
					r.violate([]int{e.Index}, "controller %d completed the deletion of topic %s at controller epoch %d (%s) although no deletion of %v was logged since it began: a replica that never deleted its log survives the topic.",
						e.Node, d.Topic, d.ControllerEpoch, at(e, t0), missing)
				}
				delete(since, d.Topic)
				replicas.deleted(d)
			}
		}
	}
	r.detail("deletions_completed", deletions)
	r.detail("acts_on_deleted_partitions", acted)
	return r.result(fmt.Sprintf("%d topic deletions completed after every replica deleted its log, and no broker acted on a partition it had deleted.", deletions))
}
