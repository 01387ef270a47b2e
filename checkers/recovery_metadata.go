package checkers

import (
	"fmt"
	"slices"

	"github.com/zkchaos/zkchaos/history"
)

// The recovery rule for brokers' metadata caches, the cluster view clients
// are given (Metadata answers: leader, leader epoch, ISR):
//
//	layer | promise | Kafka code | event-log evidence | checker rule
//	metadata | every live broker's metadata cache converges on ZooKeeper's partition states | KafkaController.sendUpdateMetadataRequest after every decision, the ISR change notifications (processIsrChangeNotification) and a broker's registration (onBrokerStartup sends it every partition); MetadataCache.updateMetadata | accepted UpdateMetadata control_request of each running broker's current process, with the partition states it carried; the watcher's partition states | recovery: a running, registered broker's cache (its process's accepted UpdateMetadata, replayed) lacks a partition or names another leader, leader epoch or ISR than ZooKeeper's last state
//
// An ISR change a leader wrote reaches the metadata caches only through its
// propagation task (a notification once the leader made no change for 5 s,
// or 60 s after its previous one) and the controller's handling of that
// notification, so a cache that differs from ZooKeeper in the ISR alone is
// judged from the first notification naming the partition created after
// the state took that ISR; before one exists the change is on its way (the
// leader's notifying is isr-propagation's to judge). Histories whose
// brokers did not log UpdateMetadata's partitions (written before they
// did) are not judged by it.

// notifiedAfter returns the first of notes (successful notification
// creates, in log order) naming tp logged after t.
func notifiedAfter(notes []noteSeen, tp history.TopicPartition, t int64) (*history.Event, bool) {
	for _, n := range notes {
		if n.ev.Time > t && slices.Contains(n.tps, tp) {
			return n.ev, true
		}
	}
	return nil, false
}

// isrNotifications lists the successful notification creates, in log order.
func isrNotifications(h *history.History) []noteSeen {
	var out []noteSeen
	for e := range eventsOf(h, history.KindZKWrite) {
		if tps, ok := notificationOf(e); ok && e.ZKWrite.Outcome == history.ZKOK {
			out = append(out, noteSeen{ev: e, tps: tps})
		}
	}
	return out
}

// metadataEntry is one partition in a broker process's metadata cache and
// the UpdateMetadata that put it there.
type metadataEntry struct {
	cp *history.ControlPartition
	ev *history.Event
}

// metadataCaches replays each node's accepted UpdateMetadata requests, from
// its latest node_start on: what its current process's cache holds at the
// end. ok is false when no UpdateMetadata in the history carried
// partitions.
func metadataCaches(h *history.History) (caches map[int32]map[history.TopicPartition]metadataEntry, ok bool) {
	caches = map[int32]map[history.TopicPartition]metadataEntry{}
	for e := range eventsOf(h, history.KindNodeStart, history.KindControlRequest) {
		if e.Kind == history.KindNodeStart {
			caches[e.Node] = map[history.TopicPartition]metadataEntry{}
			continue
		}
		if e.Control == nil || e.Control.API != history.APIUpdateMetadata || !acceptedControl(e) {
			continue
		}
		c := caches[e.Node]
		if c == nil {
			c = map[history.TopicPartition]metadataEntry{}
			caches[e.Node] = c
		}
		for i := range e.Control.Partitions {
			ok = true
			cp := &e.Control.Partitions[i]
			if cp.Leader == leaderDuringDelete {
				delete(c, cp.TP())
				continue
			}
			c[cp.TP()] = metadataEntry{cp, e}
		}
	}
	return caches, ok
}

// metadata: every running, registered broker's metadata cache names each
// partition's leader, leader epoch and ISR as ZooKeeper's last state does.
func (Recovery) metadata(h *history.History, ps *nodeProcs, judge judgeFunc, t0 int64) {
	caches, logged := metadataCaches(h)
	if !logged || !ps.anyNode {
		return
	}
	tl := leaderTimelines(h)
	dw := findDeletionWindows(h)
	notes := isrNotifications(h)
	for _, tp := range sortedTPs(tl) {
		obs := tl[tp]
		if len(obs) == 0 {
			continue
		}
		last := obs[len(obs)-1]
		if dw.during(tp.Topic, last.at) || last.Leader < 0 {
			continue // deleted, or without a leader: the partitions rule says so
		}
		// The state has read so since obs[k].
		k := len(obs) - 1
		for k > 0 && obs[k-1].Leader == last.Leader && obs[k-1].LeaderEpoch == last.LeaderEpoch && sameMembers(obs[k-1].ISR, last.ISR) {
			k--
		}
		lastEv := &h.Events[last.idx]
		for _, b := range ps.sortedRunning() {
			p := ps.cur[b]
			if p == nil || p.reg == nil || (p.start != nil && p.reg.Time < p.start.Time) {
				continue // never registered: the registrations rule says so
			}
			got, ok := caches[b][tp]
			since, evs := max(obs[k].at, p.since(t0)), []int{obs[k].idx, last.idx}
			var what string
			switch {
			case !ok:
				what = fmt.Sprintf("broker %d's current process (started at %s, registered at %s) has no metadata for partition %s, whose state names leader %d at epoch %d with ISR %v (%s): no UpdateMetadata it accepted carried the partition",
					b, startedAt(p, t0), at(p.reg, t0), tp, last.Leader, last.LeaderEpoch, last.ISR, at(lastEv, t0))
				evs = append(evs, p.reg.Index)
				if p.start != nil {
					evs = append(evs, p.start.Index)
				}
			case got.cp.Leader == last.Leader && got.cp.LeaderEpoch == last.LeaderEpoch && !sameMembers(got.cp.ISR, last.ISR):
				n, ok := notifiedAfter(notes, tp, obs[k].at)
				if !ok {
					continue // on its way: no notification named it yet
				}
				since = max(since, n.Time)
				what = fmt.Sprintf("broker %d's metadata names ISR %v for partition %s (leader %d at epoch %d; UpdateMetadata from controller %d at controller epoch %d, zkVersion %d, %s), but its state has named ISR %v since %s (%s), and broker %d's notification %s naming it was created at %s: clients asking it are told a stale ISR",
					b, got.cp.ISR, tp, last.Leader, last.LeaderEpoch, got.ev.Control.ControllerID, got.ev.Control.ControllerEpoch, got.cp.ZkVersion, at(got.ev, t0),
					last.ISR, at(&h.Events[obs[k].idx], t0), at(lastEv, t0), n.Node, n.ZKWrite.Path, at(n, t0))
				evs = append(evs, got.ev.Index, n.Index)
			case got.cp.Leader != last.Leader || got.cp.LeaderEpoch != last.LeaderEpoch || !sameMembers(got.cp.ISR, last.ISR):
				what = fmt.Sprintf("broker %d's metadata names leader %d at epoch %d with ISR %v for partition %s (UpdateMetadata from controller %d at controller epoch %d, zkVersion %d, %s), but its state names leader %d at epoch %d with ISR %v (%s) since %s: clients asking it are told a stale ISR",
					b, got.cp.Leader, got.cp.LeaderEpoch, got.cp.ISR, tp, got.ev.Control.ControllerID, got.ev.Control.ControllerEpoch, got.cp.ZkVersion, at(got.ev, t0),
					last.Leader, last.LeaderEpoch, last.ISR, at(lastEv, t0), at(&h.Events[obs[k].idx], t0))
				evs = append(evs, got.ev.Index)
			default:
				continue
			}
			judge(since, dedupe(evs), what)
		}
	}
}

// sameMembers says whether two ISRs hold the same brokers: the order is
// the writer's and means nothing to a client.
func sameMembers(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
