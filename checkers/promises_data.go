package checkers

// The data-plane promises: each checker here judges one layer of a
// broker's data plane on its own promise, from the brokers' event logs, so
// that a slip is caught where it happens, before (and whether or not) a
// later failure turns it into acknowledged records lost at the final read.
// Each rule's doc comment holds its row of the promise table:
// layer | promise | Kafka code that keeps it | event-log evidence | rule.

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/zkchaos/zkchaos/history"
)

// recoveryReason prefixes the reason of the truncation events a broker logs
// for what start-up recovery cut from a log (dataplane.Manager.openLog).
const recoveryReason = "start-up recovery"

func isRecovery(t *history.Truncation) bool { return strings.HasPrefix(t.Reason, recoveryReason) }

// nodeTP keys a broker's replica of a partition.
type nodeTP struct {
	tp   history.TopicPartition
	node int32
}

// offsetMark is an offset and the event that showed it.
type offsetMark struct {
	off  int64
	idx  int
	time int64
	why  string
}

// deletedReplicas returns the partitions of an accepted StopReplica with
// delete that broker e.Node applied: their logs are gone, so what the
// broker held of them before says nothing of its later log.
func deletedReplicas(e *history.Event) []history.TopicPartition {
	if !acceptedControl(e) || e.Control.API != history.APIStopReplica || !e.Control.DeletePartition {
		return nil
	}
	var out []history.TopicPartition
	for _, p := range e.Control.Partitions {
		if p.ErrorCode == history.ErrNone {
			out = append(out, p.TP())
		}
	}
	return out
}

// cleanLeader says who led tp at leader epoch epoch and whether that
// leader was elected from the ISR of the state it replaced (in ZooKeeper
// order); known is false when no state with that epoch is in the history.
// The first state of a partition is clean: its leader is in the ISR the
// controller created it with.
func cleanLeader(vs zkStates, epoch int32) (leader int32, clean, known bool) {
	for i, s := range vs.ordered {
		if s.LeaderEpoch != epoch {
			continue
		}
		for j := i - 1; j >= 0; j-- {
			if p := vs.ordered[j]; p.LeaderEpoch < epoch {
				return s.Leader, p.Leader == s.Leader || slices.Contains(p.ISR, s.Leader), true
			}
		}
		return s.Leader, true, true
	}
	return -1, false, false
}

// ---- follower truncation ---------------------------------------------------

// FollowerTruncation checks the follower's truncation on a leader change.
//
// Row: replication (follower fetcher) | a follower of a leader elected from
// the ISR never truncates below the high watermark it had: every record
// below it is committed, and the new leader, an ISR member, holds it |
// AbstractFetcherThread.truncateToEpochEndOffsets and
// ReplicaFetcherThread.truncate (which warns "Truncating ... below high
// watermark" as abnormal); the end offset comes from
// LeaderEpochFileCache.endOffsetFor on the leader (OffsetsForLeaderEpoch) |
// the follower's truncation (To, LeaderEpoch), its own hw_advance events
// (the high watermark it had; after a restart, its last checkpoint entry,
// which the new process restores), the partition states in ZooKeeper order
// (the new leader was in the replaced state's ISR) | a truncation other
// than start-up recovery to below min(that high watermark, the log end it
// cut from), under a leader the history shows elected from the ISR, is a
// violation. A leader from outside the ISR (unclean, query-leo) is not
// judged: the ISR and election checkers own it.
type FollowerTruncation struct{}

// Name implements Checker.
func (FollowerTruncation) Name() string { return "truncation" }

// Check implements Checker.
func (c FollowerTruncation) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	if len(h.Events) == 0 {
		return r.result("the history is empty: no truncation to judge.")
	}
	t0 := h.Events[0].Time
	states := partitionStates(h)
	hw := map[nodeTP]offsetMark{}   // the high watermark each replica has now, when known
	ckpt := map[nodeTP]offsetMark{} // each broker's latest checkpoint entries
	judged, unjudged := 0, 0
	for i := range h.Events {
		e := &h.Events[i]
		switch e.Kind {
		case history.KindNodeStart:
			// The new process restores its high watermarks from the
			// checkpoint file, which holds the last write logged.
			for k := range hw {
				if k.node == e.Node {
					delete(hw, k)
				}
			}
			for k, m := range ckpt {
				if k.node == e.Node {
					hw[k] = offsetMark{off: m.off, idx: m.idx, time: m.time, why: fmt.Sprintf("restored from its checkpoint write (event %d)", m.idx)}
				}
			}
		case history.KindHWAdvance:
			hw[nodeTP{e.HW.TP(), e.Node}] = offsetMark{off: e.HW.New, idx: e.Index, time: e.Time, why: fmt.Sprintf("set by hw_advance event %d at +%s", e.Index, rel(e.Time, t0))}
		case history.KindHWCheckpoint:
			if e.Checkpoint == nil {
				continue
			}
			for k := range ckpt {
				if k.node == e.Node {
					delete(ckpt, k)
				}
			}
			for _, en := range e.Checkpoint.Entries {
				ckpt[nodeTP{history.TP(en.Topic, en.Partition), e.Node}] = offsetMark{off: en.HW, idx: e.Index, time: e.Time}
			}
		case history.KindControlRequest:
			for _, tp := range deletedReplicas(e) {
				delete(hw, nodeTP{tp, e.Node})
				delete(ckpt, nodeTP{tp, e.Node})
			}
		case history.KindTruncation:
			t := e.Truncation
			k := nodeTP{t.TP(), e.Node}
			// The file keeps the entry until the next write, but the
			// restored high watermark is capped at the log end.
			if c, ok := ckpt[k]; ok && t.To < c.off {
				c.off = t.To
				ckpt[k] = c
			}
			m, ok := hw[k]
			if isRecovery(t) {
				// The restored high watermark is capped at the log end.
				if ok && t.To < m.off {
					m.off = t.To
					hw[k] = m
				}
				continue
			}
			if !ok {
				unjudged++
				continue
			}
			had := min(m.off, t.From)
			if t.To >= had {
				judged++
				continue
			}
			leader, clean, known := cleanLeader(states[t.TP()], t.LeaderEpoch)
			if !known || !clean {
				unjudged++
				continue
			}
			judged++
			r.violate([]int{m.idx, e.Index}, "%s, following broker %d at leader epoch %d (elected from the ISR), truncated %s from %d to %d (event %d, +%s, reason %q), below its high watermark %d (%s): every offset below that high watermark was committed and the new leader, an ISR member, holds it, so the follower threw away %d committed records (Kafka's ReplicaFetcherThread truncates to the leader's epoch end offset, never below the high watermark under a clean leader).",
				nodeName(e.Node), leader, t.LeaderEpoch, t.TP(), t.From, t.To, e.Index, rel(e.Time, t0), t.Reason, had, m.why, had-t.To)
		}
	}
	r.detail("truncations_judged", judged)
	r.detail("truncations_not_judged", unjudged)
	return r.result(fmt.Sprintf("no follower truncated below its high watermark under a leader elected from the ISR (%d truncations judged, %d without a known high watermark or clean leader).", judged, unjudged))
}

// ---- log durability across restarts ------------------------------------------

// LogRetention checks that a broker's log keeps what it held committed,
// across restarts in particular.
//
// Row: storage (start-up recovery) | a log recovered at start-up keeps
// every record the broker acknowledged as leader and every record below
// the high watermark it had or checkpointed; recovery may drop only a torn
// last batch, which a kill never leaves below those (a kill keeps the page
// cache) | Log.recover and LogSegment.recover (truncate at the first
// invalid batch after the recovery point),
// ReplicaManager.checkpointHighWatermarks | the broker's produce_ack with
// acks=all, its hw_checkpoint entries and hw_advance events (every offset
// below a replica's high watermark is in its log, committed), its
// truncation events (what a logged cut removed), and every showing of its
// log end offset: a start-up recovery truncation's To, a truncation's
// From, a produce_append's BaseOffset, an hw_advance's LEO | a log end
// offset shown below the highest offset the broker acknowledged,
// checkpointed or had below its high watermark, with no truncation logged
// in between that explains it, is a violation.
type LogRetention struct{}

// Name implements Checker.
func (LogRetention) Name() string { return "log-retention" }

// Check implements Checker.
func (c LogRetention) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	if len(h.Events) == 0 {
		return r.result("the history is empty: no log to judge.")
	}
	t0 := h.Events[0].Time
	held := map[nodeTP]offsetMark{} // the end of what the broker held committed
	cutSince := map[nodeTP]int64{}  // the lowest cut of each log since its broker's last checkpoint write
	started := map[int32]int{}      // the broker's latest node_start
	shown := 0
	raise := func(k nodeTP, off int64, e *history.Event, why string) {
		if m, ok := held[k]; !ok || off > m.off {
			held[k] = offsetMark{off: off, idx: e.Index, time: e.Time, why: why}
		}
	}
	observe := func(k nodeTP, leo int64, e *history.Event, what string) {
		shown++
		m, ok := held[k]
		if !ok || leo >= m.off {
			return
		}
		events := []int{m.idx, e.Index}
		restart := ""
		if s, ok := started[k.node]; ok && s > m.idx {
			events = append(events, s)
			restart = fmt.Sprintf(", across its restart at event %d", s)
		}
		r.violate(events, "%s's log of %s ended at %d (%s, event %d, +%s) although it held offsets up to %d (%s, event %d, +%s)%s, and no truncation was logged in between: %d records it held committed are gone from its log (Kafka's recovery drops only an invalid tail, and a kill keeps every write in the page cache).",
			nodeName(k.node), k.tp, leo, what, e.Index, rel(e.Time, t0), m.off-1, m.why, m.idx, rel(m.time, t0), restart, m.off-leo)
		m.off = leo // report a loss once
		held[k] = m
	}
	for i := range h.Events {
		e := &h.Events[i]
		switch e.Kind {
		case history.KindNodeStart:
			started[e.Node] = e.Index
		case history.KindProduceAck:
			if a := e.Append; a.Acks == history.AcksAll {
				raise(nodeTP{a.TP(), e.Node}, a.LastOffset+1, e, "acknowledged by it as leader to an acks=all producer")
			}
		case history.KindProduceAppend:
			observe(nodeTP{e.Append.TP(), e.Node}, e.Append.BaseOffset, e, "where it appended as leader")
		case history.KindHWAdvance:
			k := nodeTP{e.HW.TP(), e.Node}
			if e.HW.LEO != nil {
				observe(k, *e.HW.LEO, e, "its log end offset when its high watermark moved")
			}
			// Every record below a replica's high watermark is in its log
			// (the high watermark never passes the log end) and committed.
			raise(k, e.HW.New, e, "below its high watermark")
		case history.KindHWCheckpoint:
			if e.Checkpoint == nil {
				continue
			}
			// A write reads each high watermark before it is logged, so a
			// truncation logged since the node's previous write may
			// postdate the value read: the entry counts up to that cut.
			for _, en := range e.Checkpoint.Entries {
				k := nodeTP{history.TP(en.Topic, en.Partition), e.Node}
				hw := en.HW
				if to, ok := cutSince[k]; ok {
					hw = min(hw, to)
				}
				raise(k, hw, e, "below the high watermark it checkpointed")
			}
			for k := range cutSince {
				if k.node == e.Node {
					delete(cutSince, k)
				}
			}
		case history.KindControlRequest:
			for _, tp := range deletedReplicas(e) {
				delete(held, nodeTP{tp, e.Node})
			}
		case history.KindTruncation:
			t := e.Truncation
			k := nodeTP{t.TP(), e.Node}
			if isRecovery(t) {
				observe(k, t.To, e, "after start-up recovery cut a torn tail")
				if to, ok := cutSince[k]; !ok || t.To < to {
					cutSince[k] = t.To
				}
				continue
			}
			observe(k, t.From, e, "where a truncation started")
			if to, ok := cutSince[k]; !ok || t.To < to {
				cutSince[k] = t.To
			}
			if m, ok := held[k]; ok && t.To < m.off {
				m.off = t.To // a logged cut: other checkers judge whether it was right
				held[k] = m
			}
		}
	}
	r.detail("log_ends_shown", shown)
	return r.result(fmt.Sprintf("no broker's log ended below what it had acknowledged or checkpointed without a logged truncation (%d log ends judged).", shown))
}

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
// a violation; so is a leader high watermark above its own LEO.
type HWWithinISR struct{}

// Name implements Checker.
func (HWWithinISR) Name() string { return "hw-within-isr" }

// Check implements Checker.
func (c HWWithinISR) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	if len(h.Events) == 0 {
		return r.result("the history is empty: no high watermark to judge.")
	}
	t0 := h.Events[0].Time
	type leading struct {
		epoch int32
		since int64 // when the leadership began
		isr   []int32
	}
	type claim struct {
		hw     int64
		leader int32
		epoch  int32
		idx    int
		time   int64
	}
	// A cut the member's later log ends do not show: a truncation (its
	// leader epoch), a restart's recovery or a deleted log (reset).
	type cut struct {
		epoch int32
		reset bool
		time  int64
	}
	lead := map[nodeTP]*leading{}
	lastCut := map[nodeTP]cut{}
	pending := map[nodeTP]claim{} // the highest high watermark a leader counted the member for
	advances, shown := 0, 0
	observe := func(k nodeTP, leo int64, e *history.Event, what string) {
		p, ok := pending[k]
		if !ok {
			return
		}
		delete(pending, k)
		shown++
		if leo >= p.hw {
			return
		}
		r.violate([]int{p.idx, e.Index}, "broker %d advanced %s's high watermark to %d at leader epoch %d (event %d, +%s) with %s in its ISR, but %s's log ended at %d afterwards (%s, event %d, +%s) without a truncation in between: offsets %d to %d were counted as held by an ISR member that never had them (Partition.maybeIncrementLeaderHW takes the minimum log end offset over the ISR).",
			p.leader, k.tp, p.hw, p.epoch, p.idx, rel(p.time, t0), nodeName(k.node), nodeName(k.node), leo, what, e.Index, rel(e.Time, t0), leo, p.hw-1)
	}
	for i := range h.Events {
		e := &h.Events[i]
		switch e.Kind {
		case history.KindNodeStart:
			for k := range lead {
				if k.node == e.Node {
					delete(lead, k)
				}
			}
		case history.KindRoleChange:
			k := nodeTP{e.Role.TP(), e.Node}
			if e.Role.Role == history.RoleLeader {
				lead[k] = &leading{epoch: e.Role.LeaderEpoch, since: e.Time, isr: slices.Clone(e.Role.ISR)}
			} else {
				delete(lead, k)
			}
		case history.KindISRChange:
			// A shrink drops the member. A joining member is not judged:
			// the leader writes the expand in the background and counts
			// the member only once the write is back, so the event does
			// not say from which advance on it was counted.
			k := nodeTP{e.ISR.TP(), e.Node}
			if l := lead[k]; l != nil && e.ISR.Outcome == history.ZKOK && e.ISR.LeaderEpoch == l.epoch {
				l.isr = slices.DeleteFunc(l.isr, func(m int32) bool { return !slices.Contains(e.ISR.New, m) })
			}
		case history.KindControlRequest:
			for _, tp := range deletedReplicas(e) {
				k := nodeTP{tp, e.Node}
				delete(pending, k)
				lastCut[k] = cut{reset: true, time: e.Time}
			}
		case history.KindProduceAppend:
			observe(nodeTP{e.Append.TP(), e.Node}, e.Append.BaseOffset, e, "where it appended as leader")
		case history.KindTruncation:
			k := nodeTP{e.Truncation.TP(), e.Node}
			rec := isRecovery(e.Truncation)
			if !rec {
				observe(k, e.Truncation.From, e, "where its truncation started")
			}
			delete(pending, k)
			lastCut[k] = cut{epoch: e.Truncation.LeaderEpoch, reset: rec, time: e.Time}
		case history.KindHWAdvance:
			k := nodeTP{e.HW.TP(), e.Node}
			if e.HW.LEO != nil {
				observe(k, *e.HW.LEO, e, "its log end offset when its own high watermark moved")
			}
			l := lead[k]
			if l == nil || e.HW.LeaderEpoch != l.epoch || e.HW.New <= e.HW.Old {
				continue
			}
			advances++
			if e.HW.LEO != nil && e.HW.New > *e.HW.LEO {
				r.violate([]int{e.Index}, "broker %d advanced %s's high watermark to %d at leader epoch %d (event %d, +%s) while its own log ended at %d: a high watermark is never above the leader's log end offset.",
					e.Node, k.tp, e.HW.New, l.epoch, e.Index, rel(e.Time, t0), *e.HW.LEO)
			}
			for _, m := range l.isr {
				if m == e.Node {
					continue
				}
				mk := nodeTP{k.tp, m}
				// A member that follows a newer leader (this one is
				// deposed), or whose log was reset during this
				// leadership, may have had more when it last fetched.
				if c, ok := lastCut[mk]; ok && (c.epoch > l.epoch || (c.reset && c.time >= l.since)) {
					continue
				}
				if p, ok := pending[mk]; !ok || e.HW.New > p.hw {
					pending[mk] = claim{hw: e.HW.New, leader: e.Node, epoch: l.epoch, idx: e.Index, time: e.Time}
				}
			}
		}
	}
	r.detail("leader_hw_advances", advances)
	r.detail("member_log_ends_judged", shown)
	return r.result(fmt.Sprintf("no leader's high watermark passed its own log end or an offset an ISR member lacked (%d advances, %d member log ends judged).", advances, shown))
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
	if len(h.Events) == 0 {
		return r.result("the history is empty: no high watermark to judge.")
	}
	t0 := h.Events[0].Time
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
	for i := range h.Events {
		if e := &h.Events[i]; e.Kind == history.KindHWAdvance {
			k := nodeTP{e.HW.TP(), e.Node}
			if p, ok := lastMove[k]; ok {
				nextOld[p] = e.HW.Old
			}
			lastMove[k] = i
		}
	}
	cur := map[nodeTP]offsetMark{}        // each replica's latest high watermark, this process
	leaderMax := map[leadKey]offsetMark{} // the highest high watermark of a leadership
	follows := map[nodeTP]following{}
	judged := 0
	for i := range h.Events {
		e := &h.Events[i]
		switch e.Kind {
		case history.KindNodeStart:
			for k := range cur {
				if k.node == e.Node {
					delete(cur, k)
				}
			}
			for k := range follows {
				if k.node == e.Node {
					delete(follows, k)
				}
			}
			for k := range leaderMax {
				if k.leader == e.Node {
					delete(leaderMax, k)
				}
			}
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
			lm, ok := leaderMax[leadKey{k.tp, f.leader, f.epoch}]
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

// ---- idempotent producer state across leaders ------------------------------

// Kafka error codes a leader answers an idempotent batch with when its
// producer state does not continue the producer's sequence.
const (
	errOutOfOrderSequence int16 = 45
	errDuplicateSequence  int16 = 46
	errUnknownProducerID  int16 = 59
)

// ProducerContinuity checks that a leader's idempotent producer state
// continues its predecessors'.
//
// Row: replication (idempotent producer state) | a new leader continues
// every producer's sequence where the committed log leaves it: it accepts
// the next sequence, and answers a resend of a committed batch with its
// original offsets | ProducerStateManager, rebuilt from the log
// (Log.loadProducerState) and kept by every append, leader's and
// follower's (Log.appendAsFollower → ProducerAppendInfo);
// Log.analyzeAndValidateProducerState answers duplicates from
// ProducerStateEntry.findDuplicateBatch | produce_append's producer id,
// epoch, sequences and record values, produce_ack, the client's
// idempotent produces (process, value, outcome, error code) and the
// leaders' role changes | three findings: (1) a leader appends a batch of a
// producer id and epoch with the same sequences again, at another offset,
// although its own log held the first copy (its own append, or records of
// that leader epoch it replicated and did not cut since); (2) a client
// process whose produce was appended under a new producer id although it
// had no unknown outcome, after its previous produce to that partition was
// acknowledged (franz-go takes a new producer id only after a leader
// refused a sequence: OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID);
// (3) an idempotent produce answered OUT_OF_ORDER_SEQUENCE_NUMBER,
// DUPLICATE_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID after the process's
// previous produce to that partition was acknowledged. (2) and (3) are not
// judged while a broker whose latest role was leader at an epoch older
// than the acknowledged append's still led in its own view: that deposed
// leader may lack the batch and refuse its successor legitimately.
type ProducerContinuity struct{}

// Name implements Checker.
func (ProducerContinuity) Name() string { return "producer-state" }

// Check implements Checker.
func (c ProducerContinuity) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	if len(h.Events) == 0 {
		return r.result("the history is empty: no producer to judge.")
	}
	t0 := h.Events[0].Time
	type seqKey struct {
		tp          history.TopicPartition
		id          int64
		epoch       int16
		first, last int32
	}
	type tpVal struct {
		tp  history.TopicPartition
		val string
	}
	// reached[replica][epoch]: how far the replica's log held records of
	// that leader epoch's lineage, lowered by its truncations. A replica
	// that follows epoch e holds e's lineage in its whole log after its
	// truncation (KIP-101), and keeps it when it leads a later epoch until
	// its first append there: tail[replica] is the lineage its log end
	// holds, and every showing of its log end counts for that lineage.
	reached := map[nodeTP]map[int32]offsetMark{}
	tail := map[nodeTP]int32{}
	reach := func(k nodeTP, epoch int32, leo int64, e *history.Event) {
		m := reached[k]
		if m == nil {
			m = map[int32]offsetMark{}
			reached[k] = m
		}
		if cur, ok := m[epoch]; !ok || leo > cur.off {
			m[epoch] = offsetMark{off: leo, idx: e.Index, time: e.Time}
		}
	}
	seen := map[seqKey]*history.Event{}
	apps := map[tpVal][]*history.Event{} // each value's appends, in history order
	roles := map[history.TopicPartition][]*history.Event{}
	starts := map[int32][]int64{}
	dups, appends := 0, 0
	checkDup := func(e *history.Event) {
		a := e.Append
		for _, v := range a.Values {
			apps[tpVal{a.TP(), v}] = append(apps[tpVal{a.TP(), v}], e)
		}
		if a.Producer == nil {
			return
		}
		appends++
		k := seqKey{a.TP(), a.Producer.ID, a.Producer.Epoch, a.Producer.FirstSeq, a.Producer.LastSeq}
		prev, ok := seen[k]
		seen[k] = e // later copies are judged against the latest
		if !ok || prev.Append.BaseOffset == a.BaseOffset {
			return
		}
		// The appending leader's own log held the first copy: its
		// own append, or replicated while it followed that epoch.
		held, ok := reached[nodeTP{a.TP(), e.Node}][prev.Append.LeaderEpoch]
		if !ok || held.off <= prev.Append.LastOffset {
			return // the first copy may be gone from this leader's log
		}
		dups++
		r.violate([]int{prev.Index, held.idx, e.Index}, "%s appended producer %d (epoch %d) sequences %d..%d to %s at offset %d, leader epoch %d (event %d, +%s), although its own log already held that batch at offset %d, where %s had appended it at leader epoch %d (event %d; %s's log held that epoch's records up to offset %d, event %d, +%s, and was not cut below it since): a leader's producer state, kept by every append and rebuilt from the log, answers a resend with the original offset (Log.analyzeAndValidateProducerState, ProducerStateEntry.findDuplicateBatch).",
			nodeName(e.Node), a.Producer.ID, a.Producer.Epoch, a.Producer.FirstSeq, a.Producer.LastSeq, a.TP(), a.BaseOffset, a.LeaderEpoch, e.Index, rel(e.Time, t0),
			prev.Append.BaseOffset, nodeName(prev.Node), prev.Append.LeaderEpoch, prev.Index, nodeName(e.Node), held.off-1, held.idx, rel(held.time, t0))
	}
	for i := range h.Events {
		e := &h.Events[i]
		switch e.Kind {
		case history.KindNodeStart:
			starts[e.Node] = append(starts[e.Node], e.Time)
		case history.KindRoleChange:
			roles[e.Role.TP()] = append(roles[e.Role.TP()], e)
			if e.Role.Role == history.RoleFollower {
				tail[nodeTP{e.Role.TP(), e.Node}] = e.Role.LeaderEpoch
			}
		case history.KindHWAdvance:
			k := nodeTP{e.HW.TP(), e.Node}
			if ep, ok := tail[k]; ok && e.HW.LEO != nil {
				reach(k, ep, *e.HW.LEO, e)
			}
		case history.KindTruncation:
			for ep, m := range reached[nodeTP{e.Truncation.TP(), e.Node}] {
				if e.Truncation.To < m.off {
					m.off = e.Truncation.To
					reached[nodeTP{e.Truncation.TP(), e.Node}][ep] = m
				}
			}
		case history.KindControlRequest:
			for _, tp := range deletedReplicas(e) {
				delete(reached, nodeTP{tp, e.Node})
			}
		case history.KindProduceAppend:
			a := e.Append
			k := nodeTP{a.TP(), e.Node}
			if ep, ok := tail[k]; ok && ep != a.LeaderEpoch {
				reach(k, ep, a.BaseOffset, e) // the log end the lineage reached
			}
			checkDup(e)
			tail[k] = a.LeaderEpoch
			reach(k, a.LeaderEpoch, a.LastOffset+1, e)
		}
	}
	// staleLeader names a broker that, at time t, still led tp in its own
	// view at an epoch older than epoch.
	staleLeader := func(tp history.TopicPartition, epoch int32, t int64) (int32, bool) {
		latest := map[int32]*history.Event{}
		for _, x := range roles[tp] {
			if x.Time > t {
				break
			}
			latest[x.Node] = x
		}
		for n, x := range latest {
			restarted := false
			for _, s := range starts[n] {
				if s > x.Time && s <= t {
					restarted = true
				}
			}
			if !restarted && x.Role.Role == history.RoleLeader && x.Role.LeaderEpoch < epoch {
				return n, true
			}
		}
		return 0, false
	}
	// firstApp is the first append of op's value; tookApp the append that
	// holds it at the offset its ok names (the copy that was committed).
	firstApp := func(op history.Operation) *history.Event {
		if as := apps[tpVal{op.Op().TP(), op.Op().Value}]; len(as) > 0 {
			return as[0]
		}
		return nil
	}
	tookApp := func(op history.Operation) *history.Event {
		for _, a := range apps[tpVal{op.Op().TP(), op.Op().Value}] {
			if a.Append.BaseOffset <= op.Offset() && op.Offset() <= a.Append.LastOffset {
				return a
			}
		}
		return nil
	}
	// Each client process's idempotent produces, in invoke order.
	byProc := map[int][]history.Operation{}
	for _, op := range operations(h) {
		if o := op.Op(); o.F == history.FProduce && o.Idempotent {
			byProc[o.Process] = append(byProc[o.Process], op)
		}
	}
	resets, refusals, unjudged := 0, 0, 0
	for _, proc := range slices.Sorted(maps.Keys(byProc)) {
		ops := byProc[proc]
		for k := 1; k < len(ops); k++ {
			cur := ops[k]
			tp := cur.Op().TP()
			var pred *history.Operation
			for j := k - 1; j >= 0; j-- {
				if ops[j].Op().TP() == tp {
					pred = &ops[j]
					break
				}
			}
			if pred == nil || pred.Outcome() != history.OpOK {
				continue
			}
			predApp := tookApp(*pred)
			// (3) the client was told its sequence was refused.
			if cur.Complete != nil && cur.Outcome() != history.OpOK {
				code := cur.Complete.Op.ErrorCode
				if code != errOutOfOrderSequence && code != errDuplicateSequence && code != errUnknownProducerID {
					continue
				}
				epoch := int32(-1)
				if predApp != nil {
					epoch = predApp.Append.LeaderEpoch
				}
				if _, stale := staleLeader(tp, epoch, cur.Complete.Time); stale {
					unjudged++
					continue
				}
				refusals++
				r.violate([]int{pred.Complete.Index, cur.Complete.Index}, "process %d's idempotent produce of %q to %s was answered with error %d (event %d, +%s) although its previous produce to %s, %q, had been acknowledged at offset %d (event %d, +%s): a leader's producer state continues the committed log (ProducerStateManager, rebuilt by Log.loadProducerState), so the next sequence is accepted.",
					proc, cur.Op().Value, tp, code, cur.Complete.Index, rel(cur.Complete.Time, t0), tp, pred.Op().Value, pred.Offset(), pred.Complete.Index, rel(pred.Complete.Time, t0))
				continue
			}
			// (2) the client took a new producer id between them.
			prev := ops[k-1]
			if cur.Outcome() != history.OpOK || prev.Outcome() != history.OpOK || predApp == nil {
				continue
			}
			ca, pa := firstApp(cur), tookApp(prev)
			if ca == nil || pa == nil || ca.Append.Producer == nil || pa.Append.Producer == nil || predApp.Append.Producer == nil {
				continue
			}
			if ca.Append.Producer.ID == pa.Append.Producer.ID && ca.Append.Producer.Epoch == pa.Append.Producer.Epoch {
				continue
			}
			if _, stale := staleLeader(tp, predApp.Append.LeaderEpoch, ca.Time); stale {
				unjudged++
				continue
			}
			resets++
			pp := predApp.Append.Producer
			r.violate([]int{predApp.Index, pred.Complete.Index, ca.Index}, "process %d's produce of %q to %s was appended under a new producer id %d (epoch %d) by %s at leader epoch %d (event %d, +%s), although the process had no unknown outcome and its previous produce to %s, %q, had been appended under producer id %d (epoch %d, sequence %d) at offset %d by %s at leader epoch %d (event %d) and acknowledged (event %d, +%s): franz-go takes a new producer id only after a leader refused its next sequence, which a leader holding the committed batch accepts (ProducerStateManager, rebuilt from the log by Log.loadProducerState and kept by follower appends).",
				proc, cur.Op().Value, tp, ca.Append.Producer.ID, ca.Append.Producer.Epoch, nodeName(ca.Node), ca.Append.LeaderEpoch, ca.Index, rel(ca.Time, t0),
				tp, pred.Op().Value, pp.ID, pp.Epoch, pp.LastSeq, predApp.Append.BaseOffset, nodeName(predApp.Node), predApp.Append.LeaderEpoch, predApp.Index, pred.Complete.Index, rel(pred.Complete.Time, t0))
		}
	}
	r.detail("idempotent_appends", appends)
	r.detail("producer_resets_judged", resets)
	r.detail("refusals_judged", refusals)
	r.detail("not_judged_deposed_leader", unjudged)
	return r.result(fmt.Sprintf("no leader appended again an idempotent batch its own log held (%d idempotent appends), and no client's producer sequence was refused after its previous produce to the partition was acknowledged (%d not judged: a deposed leader still led in its own view).", appends, unjudged))
}
