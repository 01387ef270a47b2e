package checkers

import (
	"fmt"
	"slices"
	"time"

	"github.com/zkchaos/zkchaos/history"
)

// DecisionDelivery checks that a controller tells a partition's new leader
// every state it wrote that ZooKeeper applied. A controller's state change
// writes the partition's state znode and then, at the end of the state
// machine's batch, sends the LeaderAndIsr carrying that state to the
// partition's live replicas; each broker's requests go out in the order
// they were queued. A state that landed in ZooKeeper but was never sent
// names a leader that does not know it leads: clients are sent to the old
// leader (or to none) while ZooKeeper, and every controller after a
// failover, take the untold state as the partition's truth.
//
//	layer | promise | Kafka 2.6.3 code | event-log evidence | checker rule
//	controller channel | every partition state a controller wrote and ZooKeeper applied reaches the leader it names in a LeaderAndIsr, before any later state of that partition from the same controller | PartitionStateMachine.doHandleStateChanges and ReplicaStateMachine (removeReplicasFromIsr, the reassignment's updateLeaderEpoch) → KafkaZkClient.updateLeaderAndIsr, whose ZooKeeperClient.handleRequests waits for ZooKeeper's answer; ControllerBrokerRequestBatch.addLeaderAndIsrRequestForBrokers for each written partition, sendRequestsToBrokers at the end of the batch; RequestSendThread sends a broker's queue in order | the controller's zk_write of the state (leader, leader epoch, attempt), the watcher's zk_watch and the nodes' writes of the state znode (what ZooKeeper applied), the same process's control_sent LeaderAndIsr (target broker, each partition's leader epoch, Queued), the same process's earlier requests to the leader (MeantBrokerEpoch) | decision-delivery: a state version that ZooKeeper holds, written by a controller process that later sent its leader a LeaderAndIsr for the partition at a higher leader epoch, with no LeaderAndIsr at the state's own epoch to that broker in between
//
//	controller channel, metadata | every such state reaches every broker the controller held live in an UpdateMetadata, before any later state of that partition from the same controller | ControllerBrokerRequestBatch.addLeaderAndIsrRequestForBrokers adds addUpdateMetadataRequestForBrokers(liveOrShuttingDownBrokerIds, the partition); RequestSendThread sends a broker's queue in order | the same writes; the same process's control_sent UpdateMetadata (target broker, each partition's leader epoch, Queued) | decision-delivery: a state ZooKeeper holds, written by a controller process that later sent a broker it held live an UpdateMetadata naming the partition at a higher leader epoch, with none at the state's own epoch to that broker in between
//
// Not owed (to the leader and to the other brokers alike): a state the controller's next write of the partition replaced
// within the same decision (a write re-issued after a lost connection
// whose first attempt had landed meets BADVERSION, and the retry decides
// again one leader epoch up, as Kafka's electLeaderForPartitions loop
// does: attempt 2 or more); a state whose leader the controller did not hold
// live, at the registration the later LeaderAndIsr was meant for, when it
// wrote the state (it sends only to the brokers in its live set: a leader
// whose registration it had not yet taken in, or whose session had
// expired, is sent only the newest state once it is); a state of
// a topic being deleted (no LeaderAndIsr is sent for those); a state
// naming no leader. A controller that resigned or stopped before sending
// the later LeaderAndIsr owes nothing: the untold state is then its
// successor's to carry.
type DecisionDelivery struct{}

// Name implements Checker.
func (DecisionDelivery) Name() string { return "decision-delivery" }

// ctlWrite is one controller state write of a partition.
type ctlWrite struct {
	ev   *history.Event
	proc int // the writing process's node_start index, -1 if not in the history
}

// laiSend is a LeaderAndIsr a controller process sent one broker for one
// partition.
type laiSend struct {
	ev          *history.Event
	proc        int
	target      int32
	leaderEpoch int32
	queued      int64 // when it was queued (its log time in older histories)
}

// Check implements Checker.
func (c DecisionDelivery) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	t0 := firstTime(h)
	dw := findDeletionWindows(h)
	started := map[int32]int{} // node → its latest node_start
	writes := map[history.TopicPartition][]ctlWrite{}
	sends := map[history.TopicPartition][]laiSend{}
	metadata := map[history.TopicPartition][]laiSend{} // UpdateMetadata, one entry per partition and broker
	// toBroker holds every control request a controller process queued for
	// a broker, any API: the brokers it held live and at which epoch.
	type sentTo struct {
		node   int32
		proc   int
		target int32
	}
	type queuedFor struct {
		queued, meant int64
	}
	toBroker := map[sentTo][]queuedFor{}
	procOf := func(n int32) int {
		if i, ok := started[n]; ok {
			return i
		}
		return -1
	}
	for e := range eventsOf(h, history.KindNodeStart, history.KindZKWrite, history.KindControlSent) {
		switch e.Kind {
		case history.KindNodeStart:
			started[e.Node] = e.Index
		case history.KindZKWrite:
			w := e.ZKWrite
			if w == nil || w.State == nil || w.ControllerEpoch <= 0 {
				continue // not a controller's state write
			}
			tp := w.State.TP()
			writes[tp] = append(writes[tp], ctlWrite{ev: e, proc: procOf(e.Node)})
		case history.KindControlSent:
			ct := e.Control
			if ct == nil {
				continue
			}
			q := ct.Queued
			if q == 0 {
				q = e.Time
			}
			k := sentTo{e.Node, procOf(e.Node), ct.TargetBroker}
			toBroker[k] = append(toBroker[k], queuedFor{q, ct.MeantBrokerEpoch})
			into := sends
			switch ct.API {
			case history.APILeaderAndIsr:
			case history.APIUpdateMetadata:
				into = metadata
			default:
				continue
			}
			for _, p := range ct.Partitions {
				into[p.TP()] = append(into[p.TP()], laiSend{ev: e, proc: procOf(e.Node), target: ct.TargetBroker, leaderEpoch: p.LeaderEpoch, queued: q})
			}
		}
	}
	states := partitionStates(h)
	landed := func(tp history.TopicPartition, s *history.PartitionState) (zkState, bool) {
		for _, v := range states[tp].ordered {
			if v.Leader == s.Leader && v.LeaderEpoch == s.LeaderEpoch && v.ControllerEpoch == s.ControllerEpoch && slices.Equal(v.ISR, s.ISR) {
				return v, true
			}
		}
		return zkState{}, false
	}
	// heldLive says whether the writing process had already queued a
	// request for the leader's registration that the later request was
	// meant for: the controller then held that broker live when it wrote
	// (it sends only to the brokers in its live set, and a broker's
	// registration enters it through a broker change it handles between
	// events).
	heldLive := func(w ctlWrite, leader int32, meant int64) bool {
		for _, s := range toBroker[sentTo{w.ev.Node, w.proc, leader}] {
			if s.queued <= w.ev.ZKWrite.Start && s.meant == meant && meant != 0 {
				return true
			}
		}
		return false
	}
	judged, told, metaTold := 0, 0, 0
	for _, tp := range sortedTPs(writes) {
		ws := writes[tp]
		for i, w := range ws {
			st := w.ev.ZKWrite.State
			if st.Leader < 0 || dw.during(tp.Topic, w.ev.Time) {
				continue
			}
			// The same process's next write of the partition, if it
			// retried this decision, carries it instead.
			if next, ok := nextWriteOf(ws[i+1:], w); ok && next.ev.ZKWrite.Attempt > 1 {
				continue
			}
			v, ok := landed(tp, st)
			if !ok {
				continue
			}
			judged++
			zw := w.ev.ZKWrite
			outcome := "answered " + zw.Outcome
			if zw.Error != "" {
				outcome += " (" + zw.Error + ")"
			}
			seen := fmt.Sprintf("ZooKeeper holds it (version %d", v.version)
			if v.zxid > 0 {
				seen += fmt.Sprintf(", zxid %d", v.zxid)
			}
			seen += fmt.Sprintf(", logged at +%s)", rel(v.time, t0))
			wrote := fmt.Sprintf("controller %d (epoch %d) wrote %s's state: leader %d, leader epoch %d, ISR %v (write started +%s, %s after %s); %s",
				w.ev.Node, zw.ControllerEpoch, tp, st.Leader, st.LeaderEpoch, st.ISR, rel(zw.Start, t0), outcome,
				time.Duration(w.ev.Time-zw.Start).Round(time.Millisecond), seen)
			sent, later := deliveredTo(sends[tp], w, st.Leader, st.LeaderEpoch)
			if sent {
				told++
			}
			if later != nil && heldLive(w, st.Leader, later.ev.Control.MeantBrokerEpoch) && !dw.during(tp.Topic, later.queued) {
				r.violate([]int{w.ev.Index, v.idx, later.ev.Index},
					"%s, but the controller never sent broker %d a LeaderAndIsr at leader epoch %d for %s: its next one to broker %d for %s, queued at +%s, carried leader epoch %d, so from the write until then ZooKeeper named broker %d leader at an epoch broker %d was never told",
					wrote, st.Leader, st.LeaderEpoch, tp, st.Leader, tp, rel(later.queued, t0), later.leaderEpoch, st.Leader, st.Leader)
			}
			// KafkaController's batch adds an UpdateMetadata of every
			// partition it gave a LeaderAndIsr for to every live or
			// shutting-down broker (addLeaderAndIsrRequestForBrokers →
			// addUpdateMetadataRequestForBrokers): a broker the
			// controller held live when it wrote must see the state in
			// its metadata before any newer one.
			for _, b := range metadataTargets(metadata[tp], w) {
				ok, later := deliveredTo(metadata[tp], w, b, st.LeaderEpoch)
				if ok {
					metaTold++
				}
				if later == nil || !heldLive(w, b, later.ev.Control.MeantBrokerEpoch) || dw.during(tp.Topic, later.queued) {
					continue
				}
				r.violate([]int{w.ev.Index, v.idx, later.ev.Index},
					"%s, but the controller never sent broker %d an UpdateMetadata with %s at leader epoch %d: its next one to broker %d naming %s, queued at +%s, carried leader epoch %d, so until then broker %d answered clients' metadata requests with the leader the write replaced",
					wrote, b, tp, st.LeaderEpoch, b, tp, rel(later.queued, t0), later.leaderEpoch, b)
			}
		}
	}
	r.detail("states judged", judged)
	r.detail("sent to their leader", told)
	r.detail("sent in UpdateMetadata (state x broker)", metaTold)
	return r.result(fmt.Sprintf("%d controller state writes that ZooKeeper applied, %d sent to the leader they name, %d (state x broker) in UpdateMetadata to the brokers the controller held live", judged, told, metaTold))
}

// deliveredTo reports whether the first send in ss by w's process to
// broker target after w carries the partition at leaderEpoch, and else
// returns that first send if it carries a newer leader epoch (the
// controller went on without telling target the state w wrote).
func deliveredTo(ss []laiSend, w ctlWrite, target, leaderEpoch int32) (bool, *laiSend) {
	for j := range ss {
		s := &ss[j]
		if s.proc != w.proc || s.ev.Node != w.ev.Node || s.target != target || s.ev.Index < w.ev.Index {
			continue
		}
		if s.leaderEpoch == leaderEpoch {
			return true, nil
		}
		if s.leaderEpoch > leaderEpoch {
			return false, s
		}
	}
	return false, nil
}

// metadataTargets lists the brokers w's process sent an UpdateMetadata
// naming w's partition after w, in the order first sent.
func metadataTargets(ss []laiSend, w ctlWrite) []int32 {
	var out []int32
	for _, s := range ss {
		if s.proc == w.proc && s.ev.Node == w.ev.Node && s.ev.Index > w.ev.Index && !slices.Contains(out, s.target) {
			out = append(out, s.target)
		}
	}
	return out
}

// nextWriteOf returns the first write in rest by w's process.
func nextWriteOf(rest []ctlWrite, w ctlWrite) (ctlWrite, bool) {
	for _, n := range rest {
		if n.proc == w.proc && n.ev.Node == w.ev.Node {
			return n, true
		}
	}
	return ctlWrite{}, false
}
