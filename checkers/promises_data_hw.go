package checkers

// The data-plane promises of the high watermark (see promises_data.go).

import (
	"fmt"
	"slices"

	"github.com/zkchaos/zkchaos/history"
)

// ---- leader high watermark within the ISR ------------------------------------

// HWWithinISR checks the leader's high watermark against its ISR.
//
// Row: replication (leader high watermark) | a leader's high watermark
// never passes its own log end nor an offset some ISR member lacks |
// Partition.maybeIncrementLeaderHW (the minimum log end offset over the
// ISR and the caught-up replicas, from Replica.updateFetchState) |
// the leader's hw_advance (New, LEO, LeaderEpoch), its ISR (role_change,
// then its successful isr_change events), and each member's own showings
// of its log end offset afterwards: a truncation's From, an hw_advance's
// LEO, a produce_append's BaseOffset | an ISR member that later shows a
// log end below the leader's high watermark, having truncated neither in
// between nor at a newer leader epoch before the advance (so its log end
// only grew and was below that high watermark at every fetch it sent), is
// a violation; so is a leader high watermark above its own LEO. An
// advance logged before the role change of its leader epoch (the one
// Partition.makeLeader makes inside a LeaderAndIsr, logged before that
// request's role changes) is judged at that role change, under its ISR.
type HWWithinISR struct{}

// Name implements Checker.
func (HWWithinISR) Name() string { return "hw-within-isr" }

// Check implements Checker.
func (c HWWithinISR) Check(h *history.History) Result {
	st := &hwISR{r: &report{name: c.Name()}, t0: firstTime(h), lead: map[nodeTP]*hwLeading{}, lastCut: map[nodeTP]hwCut{},
		pending: map[nodeTP]hwClaim{}, ahead: map[nodeTP][]*history.Event{}}
	for e := range eventsOf(h, history.KindNodeStart, history.KindRoleChange, history.KindISRChange, history.KindControlRequest, history.KindProduceAppend, history.KindTruncation, history.KindHWAdvance) {
		switch e.Kind {
		case history.KindNodeStart:
			forgetProcess(st.lead, e.Node)
			forgetProcess(st.ahead, e.Node)
		case history.KindRoleChange:
			st.roleChange(e)
		case history.KindISRChange:
			// A shrink drops the member. A joining member is not judged:
			// the leader writes the expand in the background and counts
			// the member only once the write is back, so the event does
			// not say from which advance on it was counted.
			k := nodeTP{e.ISR.TP(), e.Node}
			if l := st.lead[k]; l != nil && e.ISR.Outcome == history.ZKOK && e.ISR.LeaderEpoch == l.epoch {
				l.isr = slices.DeleteFunc(l.isr, func(m int32) bool { return !slices.Contains(e.ISR.New, m) })
			}
		case history.KindControlRequest:
			for _, tp := range deletedReplicas(e) {
				k := nodeTP{tp, e.Node}
				delete(st.pending, k)
				st.lastCut[k] = hwCut{reset: true, time: e.Time, idx: e.Index}
			}
		case history.KindProduceAppend:
			st.observe(nodeTP{e.Append.TP(), e.Node}, e.Append.BaseOffset, e, "where it appended as leader")
		case history.KindTruncation:
			k := nodeTP{e.Truncation.TP(), e.Node}
			rec := isRecovery(e.Truncation)
			if !rec {
				st.observe(k, e.Truncation.From, e, "where its truncation started")
			}
			delete(st.pending, k)
			// crash-lose-unflushed resets the member's log as recovery
			// does: a leader that has not yet noticed the crash counts
			// the member's last fetch, which the cut then undid.
			st.lastCut[k] = hwCut{epoch: e.Truncation.LeaderEpoch, reset: rec || isUnflushedLoss(e.Truncation), time: e.Time, idx: e.Index}
		case history.KindHWAdvance:
			k := nodeTP{e.HW.TP(), e.Node}
			if e.HW.LEO != nil {
				st.observe(k, *e.HW.LEO, e, "its log end offset when its own high watermark moved")
			}
			if e.HW.New <= e.HW.Old {
				continue
			}
			if l := st.lead[k]; l == nil || e.HW.LeaderEpoch > l.epoch {
				st.ahead[k] = append(st.ahead[k], e)
				continue
			}
			st.judge(e, st.lead[k])
		}
	}
	r := st.r
	r.detail("leader_hw_advances", st.advances)
	r.detail("member_log_ends_judged", st.shown)
	return r.result(fmt.Sprintf("no leader's high watermark passed its own log end or an offset an ISR member lacked (%d advances, %d member log ends judged).", st.advances, st.shown))
}

// hwISR is what HWWithinISR knows while it reads a history.
type hwISR struct {
	r       *report
	t0      int64
	lead    map[nodeTP]*hwLeading
	lastCut map[nodeTP]hwCut
	pending map[nodeTP]hwClaim // the highest high watermark a leader counted the member for
	// ahead holds a leader's high-watermark advances logged at a newer
	// leader epoch than its last role change: Partition.makeLeader moves
	// the high watermark under the new ISR inside a LeaderAndIsr, and the
	// broker logs that request's role changes after its effects. They are
	// judged at the role change of their epoch, against its ISR.
	ahead           map[nodeTP][]*history.Event
	advances, shown int
}

type hwLeading struct {
	epoch int32
	since int64 // when the leadership began
	isr   []int32
}

type hwClaim struct {
	hw     int64
	leader int32
	epoch  int32
	idx    int
	time   int64
}

// hwCut is a cut the member's later log ends do not show: a truncation (its
// leader epoch), a restart's recovery or a deleted log (reset).
type hwCut struct {
	epoch int32
	reset bool
	time  int64
	idx   int
}

func (st *hwISR) observe(k nodeTP, leo int64, e *history.Event, what string) {
	p, ok := st.pending[k]
	if !ok {
		return
	}
	delete(st.pending, k)
	st.shown++
	if leo >= p.hw {
		return
	}
	st.r.violate([]int{p.idx, e.Index}, "broker %d advanced %s's high watermark to %d at leader epoch %d (event %d, +%s) with %s in its ISR, but %s's log ended at %d afterwards (%s, event %d, +%s) without a truncation in between: offsets %d to %d were counted as held by an ISR member that never had them (Partition.maybeIncrementLeaderHW takes the minimum log end offset over the ISR).",
		p.leader, k.tp, p.hw, p.epoch, p.idx, rel(p.time, st.t0), nodeName(k.node), nodeName(k.node), leo, what, e.Index, rel(e.Time, st.t0), leo, p.hw-1)
}

func (st *hwISR) roleChange(e *history.Event) {
	k := nodeTP{e.Role.TP(), e.Node}
	early := st.ahead[k]
	delete(st.ahead, k)
	if e.Role.Role != history.RoleLeader {
		delete(st.lead, k)
		return
	}
	l := &hwLeading{epoch: e.Role.LeaderEpoch, since: e.Time, isr: slices.Clone(e.Role.ISR)}
	if prev := st.lead[k]; prev != nil {
		// A leader staying leader at a newer epoch keeps what it knew
		// of its followers' log ends (Partition.makeLeader resets them
		// only for a new leader), so a member's log reset since the
		// earlier epoch began may still be counted.
		l.since = prev.since
	}
	st.lead[k] = l
	for _, a := range early {
		// The leadership began with the request, before its advances
		// were logged.
		l.since = min(l.since, a.Time)
		st.judge(a, l)
	}
}

// judge counts advance e of leadership l and holds each ISR member to its
// new high watermark.
func (st *hwISR) judge(e *history.Event, l *hwLeading) {
	k := nodeTP{e.HW.TP(), e.Node}
	if e.HW.LeaderEpoch != l.epoch {
		return
	}
	st.advances++
	if e.HW.LEO != nil && e.HW.New > *e.HW.LEO {
		st.r.violate([]int{e.Index}, "broker %d advanced %s's high watermark to %d at leader epoch %d (event %d, +%s) while its own log ended at %d: a high watermark is never above the leader's log end offset.",
			e.Node, k.tp, e.HW.New, l.epoch, e.Index, rel(e.Time, st.t0), *e.HW.LEO)
	}
	for _, m := range l.isr {
		if m == e.Node {
			continue
		}
		mk := nodeTP{k.tp, m}
		// A member that follows a newer leader (this one is deposed),
		// or whose log was reset during this leadership, may have had
		// more when it last fetched; so may one cut after an advance
		// judged late (the cut's own log end was not held to it).
		if c, ok := st.lastCut[mk]; ok && (c.epoch > l.epoch || (c.reset && c.time >= l.since) || c.idx > e.Index) {
			continue
		}
		if p, ok := st.pending[mk]; !ok || e.HW.New > p.hw {
			st.pending[mk] = hwClaim{hw: e.HW.New, leader: e.Node, epoch: l.epoch, idx: e.Index, time: e.Time}
		}
	}
}

// ---- follower high watermark -------------------------------------------------

// FollowerHW checks the follower's high watermark.
//
// Row: replication (follower fetcher) | a follower's high watermark is
// never above its leader's nor above its own log end: it is
// min(leader's high watermark, own log end offset) |
// ReplicaFetcherThread.processPartitionData (log.updateHighWatermark(
// partitionData.highWatermark), which Log.updateHighWatermark caps at the
// log end offset) | the follower's hw_advance (New, LEO, LeaderEpoch), its
// role_change (which leader at which epoch), the leader's hw_advance
// events while it led at that epoch | a follower high watermark above the
// highest one its leader logged for that leadership, or above the
// follower's own LEO, is a violation.
type FollowerHW struct{}

// Name implements Checker.
func (FollowerHW) Name() string { return "follower-hw" }

// Check implements Checker.
func (c FollowerHW) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	t0 := firstTime(h)
	type leadKey struct {
		tp     history.TopicPartition
		leader int32
		epoch  int32
	}
	type following struct {
		leader int32
		epoch  int32
	}
	// nextOld[i] is the Old of the next hw_advance of the same replica
	// after hw_advance i: a broker logs every move, so only a next move
	// that starts where i ended proves that none is missing after i (a
	// trimmed history leaves moves out), and so that i's New was the
	// leader's high watermark until then.
	nextOld := map[int]int64{}
	lastMove := map[nodeTP]int{}
	for e := range eventsOf(h, history.KindHWAdvance) {
		k := nodeTP{e.HW.TP(), e.Node}
		if p, ok := lastMove[k]; ok {
			nextOld[p] = e.HW.Old
		}
		lastMove[k] = e.Index
	}
	cur := map[nodeTP]offsetMark{}        // each replica's latest high watermark, this process
	leaderMax := map[leadKey]offsetMark{} // the highest high watermark of a leadership
	follows := map[nodeTP]following{}
	judged := 0
	for e := range eventsOf(h, history.KindNodeStart, history.KindRoleChange, history.KindHWAdvance) {
		switch e.Kind {
		case history.KindNodeStart:
			forgetProcess(cur, e.Node)
			forgetProcess(follows, e.Node)
			// leaderMax outlives the leader's process: a follower paused
			// with its answer in the socket reads it after the leader
			// restarted, and takes the high watermark the old process sent.
		case history.KindRoleChange:
			k := nodeTP{e.Role.TP(), e.Node}
			delete(follows, k)
			switch e.Role.Role {
			case history.RoleLeader:
				if m, ok := cur[k]; ok {
					lk := leadKey{k.tp, e.Node, e.Role.LeaderEpoch}
					if x, ok := leaderMax[lk]; !ok || m.off > x.off {
						leaderMax[lk] = m
					}
				}
			case history.RoleFollower:
				follows[k] = following{e.Role.Leader, e.Role.LeaderEpoch}
			}
		case history.KindHWAdvance:
			k := nodeTP{e.HW.TP(), e.Node}
			m := offsetMark{off: e.HW.New, idx: e.Index, time: e.Time}
			cur[k] = m
			if e.HW.LEO != nil && e.HW.New > *e.HW.LEO {
				r.violate([]int{e.Index}, "%s moved %s's high watermark to %d (event %d, +%s) while its log ended at %d: a replica's high watermark is capped at its log end offset (Log.updateHighWatermark).",
					nodeName(e.Node), k.tp, e.HW.New, e.Index, rel(e.Time, t0), *e.HW.LEO)
			}
			f, ok := follows[k]
			if !ok || f.epoch != e.HW.LeaderEpoch {
				// A leader's own move: it counts for its leadership.
				lk := leadKey{k.tp, e.Node, e.HW.LeaderEpoch}
				if x, ok := leaderMax[lk]; !ok || m.off > x.off {
					leaderMax[lk] = m
				}
				continue
			}
			if e.HW.New <= e.HW.Old {
				continue
			}
			// A fetch the leader held in its long poll across its own move
			// to a newer epoch is answered with the newer epoch's high
			// watermark, so the leader's moves at that epoch and later count.
			var lm offsetMark
			ok = false
			for lk, m := range leaderMax {
				if lk.tp == k.tp && lk.leader == f.leader && lk.epoch >= f.epoch && (!ok || m.off > lm.off) {
					lm, ok = m, true
				}
			}
			if !ok {
				continue
			}
			if n, ok := nextOld[lm.idx]; !ok || n != lm.off {
				continue // no later move of the leader proves none is missing
			}
			judged++
			if e.HW.New > lm.off {
				r.violate([]int{lm.idx, e.Index}, "%s, following broker %d at leader epoch %d, moved %s's high watermark to %d (event %d, +%s), above the highest high watermark its leader had logged for that leadership, %d (event %d, +%s): a follower takes min(leader's high watermark, own log end offset) from each fetch response (ReplicaFetcherThread.processPartitionData).",
					nodeName(e.Node), f.leader, f.epoch, k.tp, e.HW.New, e.Index, rel(e.Time, t0), lm.off, lm.idx, rel(lm.time, t0))
			}
		}
	}
	r.detail("follower_hw_moves_judged", judged)
	return r.result(fmt.Sprintf("no follower's high watermark went above its leader's or its own log end (%d follower moves judged).", judged))
}
