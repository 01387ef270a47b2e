package checkers

import (
	"fmt"
	"maps"
	"sort"

	"github.com/zkchaos/zkchaos/history"
)

// LeaderUniqueness checks that one partition never has two leaders:
//   - never two brokers becoming leader of, appending to, or acknowledging
//     writes for one partition at the same leader epoch;
//   - never two leaders acknowledging acks=all writes in overlapping time:
//     once a leader of a newer epoch acknowledged offset o, no leader of an
//     older epoch on another broker acknowledges an offset at or above o.
//     (An old leader finishing an ack for an offset below the new leader's
//     first ack is benign: that record is already on the new leader.)
//   - a partition's state znode never goes back in leader epoch in
//     ZooKeeper order: every writer of /brokers/topics/T/partitions/P/state
//     (the controller, and the leader for its ISR changes) writes
//     conditionally on the zkVersion it read, so a newer leader decision is
//     never replaced by an older one (KafkaController's
//     updateLeaderAndIsr, ReplicationUtils.updateLeaderAndIsr).
type LeaderUniqueness struct{}

// Name implements Checker.
func (LeaderUniqueness) Name() string { return "leader-uniqueness" }

// Check implements Checker.
func (c LeaderUniqueness) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	type epochKey struct {
		tp    history.TopicPartition
		epoch int32
	}
	type claim struct {
		node int32
		idx  int
		what string
	}
	claims := map[epochKey]claim{} // first broker to act as leader at (tp, epoch)
	flagged := map[epochKey]bool{}
	type ackSpan struct {
		node     int32
		minBase  int64
		firstIdx int
	}
	acks := map[history.TopicPartition]map[int32]ackSpan{} // tp → epoch → first acks at that epoch
	nAcks, nClaims, nPairs := 0, 0, 0

	claimLeader := func(e *history.Event, tp history.TopicPartition, epoch int32, what string) {
		nClaims++
		k := epochKey{tp, epoch}
		first, ok := claims[k]
		if !ok {
			nPairs++
			claims[k] = claim{e.Node, e.Index, what}
			return
		}
		if first.node != e.Node && !flagged[k] {
			flagged[k] = true
			r.violate([]int{first.idx, e.Index},
				"brokers %d and %d both acted as leader of %s at leader epoch %d (%s event %d, %s %s).",
				first.node, e.Node, tp, epoch, first.what, first.idx, what, ev(e))
		}
	}

	for e := range eventsOf(h, history.KindRoleChange, history.KindProduceAppend, history.KindProduceAck, history.KindTopicDeletion) {
		switch e.Kind {
		case history.KindTopicDeletion:
			// A topic deleted and created again starts at leader epoch
			// 0: the new incarnation's leaders claim the epochs anew.
			if d := e.Deletion; d.Step == history.DeletionCompleted {
				inTopic := func(k epochKey) bool { return k.tp.Topic == d.Topic }
				maps.DeleteFunc(claims, func(k epochKey, _ claim) bool { return inTopic(k) })
				maps.DeleteFunc(flagged, func(k epochKey, _ bool) bool { return inTopic(k) })
				maps.DeleteFunc(acks, func(tp history.TopicPartition, _ map[int32]ackSpan) bool { return tp.Topic == d.Topic })
			}
		case history.KindRoleChange:
			if e.Role.Role == history.RoleLeader {
				claimLeader(e, e.Role.TP(), e.Role.LeaderEpoch, "became leader")
			}
		case history.KindProduceAppend:
			claimLeader(e, e.Append.TP(), e.Append.LeaderEpoch, "appended")
		case history.KindProduceAck:
			a := e.Append
			tp := a.TP()
			claimLeader(e, tp, a.LeaderEpoch, "acknowledged")
			if a.Acks != history.AcksAll {
				continue
			}
			nAcks++
			byEpoch := acks[tp]
			if byEpoch == nil {
				byEpoch = map[int32]ackSpan{}
				acks[tp] = byEpoch
			}
			// The lowest newer epoch that conflicts, so output is deterministic.
			var (
				hit   ackSpan
				hitEp int32
				found bool
			)
			for epoch, s := range byEpoch {
				if epoch > a.LeaderEpoch && s.node != e.Node && a.LastOffset >= s.minBase && (!found || epoch < hitEp) {
					hit, hitEp, found = s, epoch, true
				}
			}
			if k := (epochKey{tp, a.LeaderEpoch}); found && !flagged[k] {
				flagged[k] = true
				r.violate([]int{hit.firstIdx, e.Index},
					"broker %d acknowledged acks=all offsets %d-%d of %s as leader epoch %d (%s) after broker %d had acknowledged offset %d as leader epoch %d (event %d): two leaders acknowledged overlapping writes.",
					e.Node, a.BaseOffset, a.LastOffset, tp, a.LeaderEpoch, ev(e), hit.node, hit.minBase, hitEp, hit.firstIdx)
			}
			if s, ok := byEpoch[a.LeaderEpoch]; !ok || a.BaseOffset < s.minBase {
				if ok {
					s.minBase = a.BaseOffset
				} else {
					s = ackSpan{node: e.Node, minBase: a.BaseOffset, firstIdx: e.Index}
				}
				byEpoch[a.LeaderEpoch] = s
			}
		}
	}
	nStates := c.stateEpochs(h, r)
	// Keep violations in history order regardless of map iteration above.
	sort.SliceStable(r.violations, func(a, b int) bool {
		return r.violations[a].Events[len(r.violations[a].Events)-1] < r.violations[b].Events[len(r.violations[b].Events)-1]
	})
	r.detail("leader_claims", nClaims)
	r.detail("acks_all_acknowledgements", nAcks)
	r.detail("partition_states_ordered", nStates)
	return r.result(fmt.Sprintf("%d leader claims over %d (partition, leader epoch) pairs were unique, %d acks=all acknowledgements never overlapped another leader's and %d partitions' states never went back in leader epoch.",
		nClaims, nPairs, nAcks, nStates))
}

// stateEpochs checks that each partition state's leader_epoch never
// decreases in ZooKeeper order (see zkStates), and returns how many
// partitions' states it could order. The write and the watcher's
// observation of one znode version share a zxid and count once (the write,
// which names its writer).
func (LeaderUniqueness) stateEpochs(h *history.History, r *report) int {
	states := partitionStates(h)
	var t0 int64
	if len(h.Events) > 0 {
		t0 = h.Events[0].Time
	}
	n := 0
	for _, tp := range sortedTPs(states) {
		obs := states[tp].ordered
		if len(obs) == 0 {
			continue
		}
		n++
		if states[tp].byZxid() {
			obs = oneByZxid(obs)
		}
		maxO, prev := obs[0], obs[0]
		for _, o := range obs[1:] {
			if o.inc != maxO.inc {
				// The topic was deleted and created again: leader
				// epochs start again at 0.
				maxO, prev = o, o
				continue
			}
			// A run of versions at one older epoch (the stale writer's
			// further ISR changes) is one regression, reported once.
			if o.LeaderEpoch < maxO.LeaderEpoch && o.LeaderEpoch != prev.LeaderEpoch {
				r.violate([]int{maxO.idx, o.idx},
					"partition %s's state went back in ZooKeeper from leader %d at leader epoch %d (%s) to leader %d at leader epoch %d (%s): the later write replaced a newer leader decision with an older one.",
					tp, maxO.Leader, maxO.LeaderEpoch, describeState(maxO, t0), o.Leader, o.LeaderEpoch, describeState(o, t0))
			}
			if o.LeaderEpoch > maxO.LeaderEpoch {
				maxO = o
			}
			prev = o
		}
	}
	return n
}

// oneByZxid keeps one observation per zxid in obs (sorted by zxid),
// preferring a node's write, which names its writer, to the watcher's view
// of the same version. obs is shared with other checkers and stays as it is.
func oneByZxid(obs []zkState) []zkState {
	out := obs[:0:0]
	for _, o := range obs {
		if n := len(out); n > 0 && out[n-1].zxid == o.zxid {
			if out[n-1].watcher && !o.watcher {
				out[n-1] = o
			}
			continue
		}
		out = append(out, o)
	}
	return out
}

// describeState names who wrote or saw the version, its zxid, event and
// time.
func describeState(o zkState, t0 int64) string {
	who := "seen by the ZooKeeper watcher"
	if !o.watcher {
		who = fmt.Sprintf("written by broker %d", o.writer)
	}
	if o.zxid > 0 {
		return fmt.Sprintf("%s, zxid %d, event %d, +%s", who, o.zxid, o.idx, rel(o.time, t0))
	}
	return fmt.Sprintf("%s, event %d, +%s", who, o.idx, rel(o.time, t0))
}
