package checkers

// The data-plane promises: each checker here judges one layer of a
// broker's data plane on its own promise, from the brokers' event logs, so
// that a slip is caught where it happens, before (and whether or not) a
// later failure turns it into acknowledged records lost at the final read.
// Each rule's doc comment holds its row of the promise table:
// layer | promise | Kafka code that keeps it | event-log evidence | rule.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/zkchaos/zkchaos/history"
)

// recoveryReason prefixes the reason of the truncation events a broker logs
// for what start-up recovery cut from a log (dataplane.Manager.openLog).
const recoveryReason = "start-up recovery"

func isRecovery(t *history.Truncation) bool { return strings.HasPrefix(t.Reason, recoveryReason) }

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
// controller created it with. Only the incarnation of the topic in force
// at time t counts (a topic created again starts at leader epoch 0).
func cleanLeader(vs zkStates, epoch int32, t int64) (leader int32, clean, known bool) {
	inc := 0
	for _, s := range vs.ordered {
		if s.time <= t {
			inc = max(inc, s.inc)
		}
	}
	for i, s := range vs.ordered {
		if s.LeaderEpoch != epoch || s.inc != inc {
			continue
		}
		for j := i - 1; j >= 0 && vs.ordered[j].inc == inc; j-- {
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
// judged: the ISR and election checkers own it. The nemesis's record of
// crash-lose-unflushed cutting a down broker's log caps its high watermark
// as recovery does; a truncation below the high watermark after that fault
// hit every replica the controller could elect is the known anomaly
// lost-unflushed-quorum (two or more crashed at once), lost-unflushed-isr
// (the exposed leader's ISR held only crashed brokers) or
// lost-unflushed-leader (the cut leader led again at its epoch): under that leader,
// and under a later one for a follower that followed no leader since that
// election, its log being older than it (a role it logged no high
// watermark advance or truncation under is no following: its log did not
// move); and under that same broker at a later epoch when it led without
// a break since (no other broker led in between), a crash of it had cut
// its log at the offset the follower truncated to, and the follower held
// its high watermark from before that election (a checkpoint entry counts
// from when the replica came to hold the value it copies).
type FollowerTruncation struct{}

// Name implements Checker.
func (FollowerTruncation) Name() string { return "truncation" }

// Check implements Checker.
func (c FollowerTruncation) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	t0 := firstTime(h)
	states := partitionStates(h)
	quorum := newQuorumLosses(h)
	hw := map[nodeTP]offsetMark{}   // the high watermark each replica has now, when known
	ckpt := map[nodeTP]offsetMark{} // each broker's latest checkpoint entries
	judged, unjudged := 0, 0
	roles := map[nodeTP][]roleMark{} // each replica's role changes so far
	// acted is, per replica, the leader epochs at which its log moved: it
	// logged a high watermark advance or a truncation there.
	acted := map[nodeTP]map[int32]bool{}
	act := func(k nodeTP, epoch int32) {
		if acted[k] == nil {
			acted[k] = map[int32]bool{}
		}
		acted[k][epoch] = true
	}
	for e := range eventsOf(h, history.KindNodeStart, history.KindHWAdvance, history.KindHWCheckpoint, history.KindControlRequest, history.KindTruncation, history.KindRoleChange) {
		switch e.Kind {
		case history.KindRoleChange:
			if e.Role != nil {
				k := nodeTP{e.Role.TP(), e.Node}
				roles[k] = append(roles[k], roleMark{epoch: e.Role.LeaderEpoch, time: e.Time})
			}
		case history.KindNodeStart:
			// The new process restores its high watermarks from the
			// checkpoint file, which holds the last write logged.
			forgetProcess(hw, e.Node)
			for k, m := range ckpt {
				if k.node == e.Node {
					hw[k] = offsetMark{off: m.off, idx: m.idx, time: m.time, why: fmt.Sprintf("restored from its checkpoint write (event %d)", m.idx)}
				}
			}
		case history.KindHWAdvance:
			act(nodeTP{e.HW.TP(), e.Node}, e.HW.LeaderEpoch)
			hw[nodeTP{e.HW.TP(), e.Node}] = offsetMark{off: e.HW.New, idx: e.Index, time: e.Time, why: fmt.Sprintf("set by hw_advance event %d at +%s", e.Index, rel(e.Time, t0))}
		case history.KindHWCheckpoint:
			if e.Checkpoint == nil {
				continue
			}
			forgetProcess(ckpt, e.Node)
			for _, en := range e.Checkpoint.Entries {
				k := nodeTP{history.TP(en.Topic, en.Partition), e.Node}
				// The entry's time is when the replica came to hold
				// that high watermark: the write only copies it.
				at := e.Time
				if m, ok := hw[k]; ok && m.off == en.HW {
					at = min(at, m.time)
				}
				ckpt[k] = offsetMark{off: en.HW, idx: e.Index, time: at}
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
			if isRecovery(t) || isUnflushedLoss(t) {
				// The restored high watermark is capped at the log end.
				if ok && t.To < m.off {
					m.off = t.To
					hw[k] = m
				}
				continue
			}
			act(k, t.LeaderEpoch)
			if !ok {
				unjudged++
				continue
			}
			had := min(m.off, t.From)
			if t.To >= had {
				judged++
				continue
			}
			leader, clean, known := cleanLeader(states[t.TP()], t.LeaderEpoch, e.Time)
			if !known || !clean {
				unjudged++
				continue
			}
			judged++
			if in := quorum.ledBy(t.TP(), leader, t.LeaderEpoch); in != nil && in.inForceAt(e.Time) {
				// The new leader came back without what the quorum's page
				// caches held: the follower's committed records were on no
				// replica the controller could elect.
				who, evs := describeQuorumLoss(in, t0)
				r.knownAnomaly(in.name(), append([]int{m.idx, e.Index}, evs...),
					"%s, following broker %d at leader epoch %d, truncated %s from %d to %d (event %d, +%s, reason %q), below its high watermark %d (%s), after %s: %s.",
					nodeName(e.Node), leader, t.LeaderEpoch, t.TP(), t.From, t.To, e.Index, rel(e.Time, t0), t.Reason, had, m.why, in.how(), who)
				continue
			}
			if since, ok := lastActedBelow(roles[k], acted[k], t.LeaderEpoch); ok {
				held := func(in *unflushedLoss) bool { return m.time < quorum.firstExposed(t.TP(), in) }
				if in := quorum.ledBetween(t.TP(), t.LeaderEpoch, since.time, e.Time, held); in != nil {
					// The follower's log is from before that election
					// (it followed no leader since), and the leader it
					// follows now descends from the exposed one.
					who, evs := describeQuorumLoss(in, t0)
					r.knownAnomaly(in.name(), append([]int{m.idx, e.Index}, evs...),
						"%s, following broker %d at leader epoch %d, truncated %s from %d to %d (event %d, +%s, reason %q), below its high watermark %d (%s); it had followed no leader since leader epoch %d (+%s), and the leader it follows descends from broker %d's leadership at leader epoch %d, after %s: %s.",
						nodeName(e.Node), leader, t.LeaderEpoch, t.TP(), t.From, t.To, e.Index, rel(e.Time, t0), t.Reason, had, m.why, since.epoch, rel(since.time, t0), in.elected.node, in.elected.epoch, in.how(), who)
					continue
				}
			}
			if in, x := quorum.ledSinceCut(t.TP(), leader, t.LeaderEpoch, t.To, e.Time); in != nil && m.time < in.elected.time {
				// The follower held its high watermark from before the
				// exposed leader's election, and the leader it follows
				// now is that broker, leading without a break since,
				// with the log a crash cut at the offset it truncated to.
				who, evs := describeQuorumLoss(in, t0)
				r.knownAnomaly(in.name(), append([]int{m.idx, e.Index, x.crash.start.Index}, evs...),
					"%s, following broker %d at leader epoch %d, truncated %s from %d to %d (event %d, +%s, reason %q), below its high watermark %d (%s), which it held before broker %d's leadership at leader epoch %d; broker %d led without a break from then to leader epoch %d with the log its crash at +%s (event %d) had cut from %d to %d, after %s: %s.",
					nodeName(e.Node), leader, t.LeaderEpoch, t.TP(), t.From, t.To, e.Index, rel(e.Time, t0), t.Reason, had, m.why, in.elected.node, in.elected.epoch,
					leader, t.LeaderEpoch, rel(x.crash.start.Time, t0), x.crash.start.Index, x.crash.cuts[t.TP()].From, x.crash.cuts[t.TP()].To, in.how(), who)
				continue
			}
			r.violate([]int{m.idx, e.Index}, "%s, following broker %d at leader epoch %d (elected from the ISR), truncated %s from %d to %d (event %d, +%s, reason %q), below its high watermark %d (%s): every offset below that high watermark was committed and the new leader, an ISR member, holds it, so the follower threw away %d committed records (Kafka's ReplicaFetcherThread truncates to the leader's epoch end offset, never below the high watermark under a clean leader).",
				nodeName(e.Node), leader, t.LeaderEpoch, t.TP(), t.From, t.To, e.Index, rel(e.Time, t0), t.Reason, had, m.why, had-t.To)
		}
	}
	r.detail("truncations_judged", judged)
	r.detail("truncations_not_judged", unjudged)
	return r.result(fmt.Sprintf("no follower truncated below its high watermark under a leader elected from the ISR (%d truncations judged, %d without a known high watermark or clean leader).", judged, unjudged))
}

// roleMark is one role change of a replica: its leader epoch and time.
type roleMark struct {
	epoch int32
	time  int64
}

// lastActedBelow returns the latest of a replica's role changes at a
// leader epoch below epoch at which its log moved (acted): a role it never
// acted on left its log as it was, as when its leader was down the whole
// time (seed 43 at fault density 3: broker 1 became broker 3's follower at
// leader epoch 8, +71.75 s, after broker 3 had been killed at +70.68 s, and
// fetched nothing before broker 2 led at epoch 9). Without such a role it
// is the latest role change below epoch.
func lastActedBelow(ms []roleMark, acted map[int32]bool, epoch int32) (roleMark, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].epoch < epoch && acted[ms[i].epoch] {
			return ms[i], true
		}
	}
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].epoch < epoch {
			return ms[i], true
		}
	}
	return roleMark{}, false
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
	t0 := firstTime(h)
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
	for e := range eventsOf(h, history.KindNodeStart, history.KindProduceAck, history.KindProduceAppend, history.KindHWAdvance, history.KindHWCheckpoint, history.KindControlRequest, history.KindTruncation) {
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
			forgetProcess(cutSince, e.Node)
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
