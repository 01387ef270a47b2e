package checkers

// The group coordinator's promise to a consumer group's commits: an
// OffsetCommit the coordinator acknowledged is what the group's
// OffsetFetch returns until a later commit replaces it.

import (
	"fmt"
	"math"

	"github.com/zkchaos/zkchaos/history"
)

// QueueCommit checks that an offset commit the group coordinator
// acknowledged lasts: every OffsetFetch of the group answered after the
// acknowledgement returns, for the partition, that commit's offset or the
// offset of a commit that may have replaced it, never an older one.
// A member's starting position comes from such an OffsetFetch
// (GroupCoordinator.handleFetchOffsets, at the member's assignment), so
// judging the coordinator's answer judges where the next member starts.
//
// Kafka 2.6.3 writes a commit to the group's __consumer_offsets partition
// with acks=-1 and answers only once min.insync.replicas hold it
// (GroupMetadataManager.storeOffsets), and puts it in the coordinator's
// cache only then; a new coordinator loads the group's offsets from that
// log (loadGroupsForPartition). A commit is acknowledged when the
// coordinator's OffsetCommit answer shows the partition without an error
// (its time: the write had completed) or the client's commit completed ok.
// A commit whose outcome is unknown (info) may have landed at any time
// after it was invoked; one that failed wrote nothing. A commit X may have
// replaced an acknowledged one unless an acknowledged commit Y ends it
// before the fetch: Y was invoked after X completed, or Y carried a newer
// generation than X (the coordinator takes X only while the group is at
// X's generation, ILLEGAL_GENERATION after). A fetch answering an offset
// below an acknowledged, not replaced commit that no possible commit
// carried is a finding, named with the group, partition, the commit
// (member, generation, offset, acknowledgement) and the fetch
// (coordinator, time, offset). It is a known anomaly when crash-lose-
// unflushed took the commit from every replica its __consumer_offsets
// partition could elect (unflushed.go) between the commit's invoke and
// the fetch, and KnownDeposedCoordinatorFetch when the answering
// coordinator had been deposed and did not acknowledge the commit itself.
type QueueCommit struct{}

// Name implements Checker.
func (QueueCommit) Name() string { return "queue-commit" }

// KnownDeposedCoordinatorFetch: a coordinator answered OffsetFetch with an
// offset older than one another coordinator had acknowledged, while a
// newer leader epoch of the group's __consumer_offsets partition had made
// that other broker its leader: the deposed coordinator, not yet told,
// answered from its own cache (GroupMetadataManager.getOffsets checks no
// leader epoch; an OffsetFetch carries none), which lacks the commits
// written through its successor.
const KnownDeposedCoordinatorFetch = "deposed-coordinator-offset-fetch"

// offsetCommit is one partition of a member's commit that may have taken
// effect.
type offsetCommit struct {
	group, member string
	gen           int32
	key           int32
	offset        int64
	// start is the commit's invoke time; end its completion's, MaxInt64
	// for an unknown outcome (it may land any time after start).
	start, end int64
	op         history.QueueOperation
	// acked: the coordinator acknowledged it, at ackAt; ack is the
	// coordinator's answer (nil: only the client's ok says so).
	acked bool
	ackAt int64
	ack   *history.Event
}

// commitKey names a coordinator's acknowledgement of one partition's
// offset, for a member at a generation.
type commitKey struct {
	group, member string
	gen           int32
	key           int32
	offset        int64
}

type groupKey struct {
	group string
	key   int32
}

// Check implements Checker.
func (c QueueCommit) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	m := queueModelOf(h)
	if len(m.ops) == 0 {
		return noQueue(r)
	}
	commits, judged, acked := offsetCommits(h, m)
	roles := newCoordinatorRoles()
	quorum := newQuorumLosses(h)
	fetches, checked := 0, 0
	for e := range eventsOf(h, history.KindGroupRequest, history.KindRoleChange, history.KindNodeStart) {
		if e.Kind != history.KindGroupRequest {
			roles.add(e)
			continue
		}
		g := e.Group
		if g.API != history.GroupAPIOffsetFetch || g.ErrorCode != 0 || g.Group == "" {
			continue
		}
		for _, o := range g.Offsets {
			if o.Topic != m.topic || o.ErrorCode != 0 {
				continue
			}
			fetches++
			cs := commits[groupKey{g.Group, o.Partition}]
			a, judge := staleFetch(cs, e.Time, o.Offset)
			if judge {
				checked++
			}
			if a != nil {
				c.judge(r, m, roles, quorum, e, o, a)
			}
		}
	}
	r.detail("commits_judged", judged)
	r.detail("commits_acknowledged", acked)
	r.detail("offset_fetches", fetches)
	r.detail("offset_fetches_checked", checked)
	return r.result(fmt.Sprintf("every OffsetFetch answered after an acknowledged commit (%d of %d partition answers, %d of %d commits acknowledged) returned that commit's offset or one a later commit may have written.", checked, fetches, acked, judged))
}

// offsetCommits lists, per group and partition, the queue workload's
// commits that may have taken effect, each marked acknowledged by the
// client's ok or by its coordinator's answer without an error while the
// client waited; judged counts them and acked the acknowledged ones.
func offsetCommits(h *history.History, m *queueModel) (out map[groupKey][]*offsetCommit, judged, acked int) {
	answers := map[commitKey][]*history.Event{}
	for e := range eventsOf(h, history.KindGroupRequest) {
		g := e.Group
		if g.API != history.GroupAPIOffsetCommit || g.Group == "" {
			continue
		}
		for _, o := range g.Offsets {
			if o.Topic == m.topic && o.ErrorCode == 0 {
				k := commitKey{g.Group, g.Member, g.Generation, o.Partition, o.Offset}
				answers[k] = append(answers[k], e)
			}
		}
	}
	out = map[groupKey][]*offsetCommit{}
	for i := range m.ops {
		op := m.ops[i]
		q := op.Op()
		a := q.Assignment
		if q.F != history.QueueCommit || a == nil || op.Outcome() == history.OpFail {
			continue
		}
		for _, o := range q.Offsets {
			cm := &offsetCommit{group: a.Group, member: a.Member, gen: a.Generation, key: o.Key, offset: o.Offset,
				start: op.Invoke.Time, end: math.MaxInt64, op: op, ackAt: math.MaxInt64}
			waited := int64(math.MaxInt64) // the end of the client's wait
			if op.Complete != nil {
				waited = op.Complete.Time
				if op.Outcome() == history.OpOK {
					cm.end, cm.acked, cm.ackAt = waited, true, waited
				}
			}
			for _, e := range answers[commitKey{a.Group, a.Member, a.Generation, o.Key, o.Offset}] {
				if e.Time >= cm.start && e.Time <= waited && e.Time < cm.ackAt {
					cm.acked, cm.ackAt, cm.ack = true, e.Time, e
				}
			}
			judged++
			if cm.acked {
				acked++
			}
			k := groupKey{a.Group, o.Key}
			out[k] = append(out[k], cm)
		}
	}
	return out, judged, acked
}

// staleFetch judges an OffsetFetch answer of offset at time t against a
// partition's commits cs. judge says whether some commit was acknowledged
// before t; the commit returned (nil: none) is the acknowledged commit,
// not replaced by t, whose offset the answer is below although no commit
// that may have been the group's last by t carried it.
func staleFetch(cs []*offsetCommit, t, offset int64) (stale *offsetCommit, judge bool) {
	// An acknowledged commit Y ends every commit X that completed before
	// Y was invoked, and every one of an older generation than Y's: the
	// latest such start and the newest such generation decide.
	latest, newest := int64(math.MinInt64), int32(-1)
	for _, y := range cs {
		if y.acked && y.ackAt < t {
			judge = true
			latest = max(latest, y.start)
			newest = max(newest, y.gen)
		}
	}
	if !judge {
		return nil, false
	}
	replaced := func(x *offsetCommit) bool { return x.end < latest || (x.gen >= 0 && x.gen < newest) }
	for _, x := range cs {
		if x.start < t && !replaced(x) && x.offset == offset {
			return nil, true
		}
	}
	for _, a := range cs {
		if a.acked && a.ackAt < t && !replaced(a) && a.offset > offset && (stale == nil || a.ackAt > stale.ackAt) {
			stale = a
		}
	}
	return stale, true
}

// judge names a fetch e (partition answer o) below acknowledged commit a:
// a known anomaly when crash-lose-unflushed or a deposed coordinator
// explains it, else a violation.
func (QueueCommit) judge(r *report, m *queueModel, roles *coordinatorRoles, quorum *quorumLosses, e *history.Event, o history.GroupOffset, a *offsetCommit) {
	g := e.Group
	tp := m.tp(o.Partition)
	ackedBy, ackEv := "the client's ok", a.op.Complete
	if a.ack != nil {
		ackedBy, ackEv = nodeName(a.ack.Node)+"'s answer", a.ack
	}
	returned := fmt.Sprintf("offset %d", o.Offset)
	if o.Offset < 0 {
		returned = "no offset"
	}
	was := fmt.Sprintf("%s, coordinator of group %q, answered OffsetFetch of %s with %s (event %d, %s), below offset %d that member %q committed in generation %d (%s, invoked at event %d, %s; acknowledged by %s, event %d, %s), and no commit that may have replaced it carried that offset",
		nodeName(e.Node), g.Group, tp, returned, e.Index, m.when(e), a.offset, a.member, a.gen, who(a.op.Invoke), a.op.Invoke.Index, m.when(a.op.Invoke), ackedBy, ackEv.Index, m.when(ackEv))
	events := []int{ackEv.Index, e.Index}
	co := history.TP(history.GroupMetadataTopic, g.Partition)
	// The commit was appended some time after it was invoked: a loss whose
	// crashes all came after that may have cut it.
	if loss := quorum.between(co, a.start, e.Time); loss != nil {
		brokers, evs := describeQuorumLoss(loss, m.t0)
		r.knownAnomaly(loss.name(), append(events, evs...), "%s: crash-lose-unflushed took the commit from %s in between, so the coordinator loaded the group's offsets without it (GroupMetadataManager.loadGroupsForPartition); %s (%s).",
			was, co, loss.how(), brokers)
		return
	}
	if own, succ := roles.deposed(e.Node, g.Partition); own != nil && (a.ack == nil || a.ack.Node != e.Node) {
		r.knownAnomaly(KnownDeposedCoordinatorFetch, append(events, own.Index, succ.Index), "%s: %s last led %s at leader epoch %d (role change event %d, %s) while %s had led it at leader epoch %d since %s (role change event %d), so it answered from its own cache, which lacks the commits written through its successor (an OffsetFetch carries no leader epoch to fence it).",
			was, nodeName(e.Node), co, own.Role.LeaderEpoch, own.Index, m.when(own), nodeName(succ.Node), succ.Role.LeaderEpoch, m.when(succ), succ.Index)
		return
	}
	r.violate(events, "lost commit: %s: an acknowledged OffsetCommit is in %s on min.insync.replicas replicas (GroupMetadataManager.storeOffsets, acks=-1), and the coordinator answers from the offsets it stored or loaded from there.", was, co)
}
