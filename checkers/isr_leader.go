package checkers

import (
	"fmt"
	"slices"

	"github.com/zkchaos/zkchaos/history"
)

// ---- rule: a leader outside its own ISR ------------------------------------

// checkLeaderInISR is an isr checker rule: no version of a
// partition's state znode names a leader that is not a member of its ISR.
// Every way Kafka's controller picks a leader picks it from the ISR
// (PartitionLeaderElectionAlgorithms: offline, reassignment, preferred and
// controlled-shutdown elections alike), and an unclean election, the one
// pick from outside, makes the ISR the leader alone; a leader's own ISR
// writes keep itself in. A leader outside its ISR was elected without
// being known to hold the committed log (the preferred election of a
// replica that is still catching up, say), and when the ISR members follow
// it they truncate to it, so acknowledged records go. Leader -1 (no
// leader: the offline state of KAFKA-3861's default policy) is exempt.
//
// Each state version is judged once: a node's successful write (the
// controller's, or a leader's ISR change), or the ZooKeeper watcher's
// observation of a version no node's log shows writing. The count of
// versions with a leader it judged goes in the details.
func checkLeaderInISR(h *history.History, r *report) {
	versions := partitionStates(h)
	t0 := firstTime(h)
	judged := 0
	for _, tp := range sortedTPs(versions) {
		vs := versions[tp]
		// What the nodes' writes show, so the watcher's observation of
		// the same version is not judged twice: by zxid, or (without
		// one) by the state itself.
		written := map[int64]bool{}
		var writtenStates []zkState
		for _, v := range slices.Concat(vs.ordered, vs.unordered) {
			if v.watcher {
				continue
			}
			if v.zxid > 0 {
				written[v.zxid] = true
			}
			writtenStates = append(writtenStates, v)
		}
		for _, v := range slices.Concat(vs.ordered, vs.unordered) {
			if v.Leader < 0 {
				continue
			}
			if v.watcher && (written[v.zxid] || (v.zxid == 0 && slices.ContainsFunc(writtenStates, func(w zkState) bool { return sameState(w, v) }))) {
				continue
			}
			judged++
			if slices.Contains(v.ISR, v.Leader) {
				continue
			}
			r.violate(leaderOutsideEvents(vs, v), "%s", leaderOutsideISR(h, vs, v, t0))
		}
	}
	r.detail("states_with_leader_judged", judged)
}

// sameState: two versions carry the same leader, leader epoch and ISR.
func sameState(a, b zkState) bool {
	return a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch && slices.Equal(a.ISR, b.ISR)
}

// previousState is the version v replaced, when the history shows it: the
// newest one before v in zxid order.
func previousState(vs zkStates, v zkState) (zkState, bool) {
	if v.zxid <= 0 || !vs.byZxid() {
		return zkState{}, false
	}
	var prev zkState
	found := false
	for _, o := range vs.ordered {
		if o.zxid >= v.zxid {
			break
		}
		prev, found = o, true
	}
	return prev, found
}

func leaderOutsideEvents(vs zkStates, v zkState) []int {
	if prev, ok := previousState(vs, v); ok {
		return []int{prev.idx, v.idx}
	}
	return []int{v.idx}
}

// leaderOutsideISR explains one version whose leader is outside its ISR:
// who wrote it (controller and its epoch, or the leader's own ISR write),
// the partition, leader, leader epoch, ISR, time, and the state it
// replaced.
func leaderOutsideISR(h *history.History, vs zkStates, v zkState, t0 int64) string {
	tp := v.TP()
	var who string
	switch w := h.Events[v.idx].ZKWrite; {
	case v.watcher:
		who = fmt.Sprintf("the ZooKeeper watcher saw %s's state (zxid %#x), which no node's log shows writing, with", tp, v.zxid)
	case w != nil && w.ControllerEpoch > 0:
		who = fmt.Sprintf("controller %d (epoch %d) wrote %s's state with", v.writer, w.ControllerEpoch, tp)
	default:
		who = fmt.Sprintf("broker %d wrote %s's state (a leader's ISR change, controller epoch %d in the state) with", v.writer, tp, v.ControllerEpoch)
	}
	was := "the state it replaced is not in the history"
	if prev, ok := previousState(vs, v); ok {
		was = fmt.Sprintf("it replaced leader %d at leader epoch %d with ISR %v (event %d, +%s)", prev.Leader, prev.LeaderEpoch, prev.ISR, prev.idx, rel(prev.time, t0))
	}
	return fmt.Sprintf("%s leader %d at leader epoch %d and ISR %v (event %d, +%s), a leader that is not a member of its own ISR; %s. Kafka elects a leader only from the ISR (an unclean election makes the ISR the leader alone), so broker %d was made leader without being known to hold the committed log, and the ISR members that follow it truncate to it.",
		who, v.Leader, v.LeaderEpoch, v.ISR, v.idx, rel(v.time, t0), was, v.Leader)
}
