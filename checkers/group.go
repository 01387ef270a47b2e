package checkers

// The consumer group coordinator's promise (see doc.go's table).

import (
	"fmt"
	"slices"

	"github.com/zkchaos/zkchaos/history"
)

// GroupGenerations checks the group coordinator's generation fence: a
// member acts for a group only in the group's current generation.
//
// Row: consumer groups | a coordinator accepts a SyncGroup, Heartbeat,
// OffsetCommit or TxnOffsetCommit only from a member of the group's
// current generation, and a generation, once a coordinator has handed it
// out, is never accepted again after a newer one exists anywhere |
// GroupCoordinator.handleSyncGroup, handleHeartbeat, handleCommitOffsets,
// handleTxnCommitOffsets (ILLEGAL_GENERATION,
// UNKNOWN_MEMBER_ID), the generation loaded from __consumer_offsets by
// GroupMetadataManager.loadGroupsForPartition | group_request (the
// generation carried, the group's when answered, the answer) | two
// findings: (1) a coordinator answered one of those requests without an
// error although the generation it carried was not the group's as that
// coordinator logged it; (2) a coordinator answered one without an error,
// carrying generation g, after some coordinator had answered the group at a
// generation above g: a deposed coordinator that still took the old
// generation's commits; when that coordinator had been deposed (another
// broker led the partition at a newer leader epoch) and never stored the
// generation, it is the known anomaly KnownDeposedCoordinatorGeneration; when
// crash-lose-unflushed took the group's records from its __consumer_offsets
// partition in between, a known anomaly of unflushed.go. A request that carried no generation (-1: an
// OffsetCommit of a consumer outside any group, as Kafka allows for an
// empty group, and a TxnOffsetCommit before v3) is not judged.
type GroupGenerations struct{}

// Name implements Checker.
func (GroupGenerations) Name() string { return "group-generation" }

// groupActs are the requests a member makes in a generation.
var groupActs = []string{history.GroupAPISync, history.GroupAPIHeartbeat, history.GroupAPIOffsetCommit, history.GroupAPITxnOffsetCommit}

// KnownDeposedCoordinatorGeneration: a coordinator answered a member at a
// generation below one a deposed coordinator had handed out. The deposed
// coordinator, still leading the group's __consumer_offsets partition at an
// older leader epoch by its own record after another broker had become its
// leader at a newer one, kept answering JoinGroup from memory and raised
// the generation there (GroupCoordinator.onCompleteJoin); it stores a
// generation only by the leader's SyncGroup, whose group write with acks=-1
// cannot complete on a leader its followers have left, so no SyncGroup of
// that generation succeeded there. The new coordinator loaded the older
// generation from the log (GroupMetadataManager.loadGroupsForPartition) and
// hands out the same numbers again.
const KnownDeposedCoordinatorGeneration = "deposed-coordinator-generation"

// newestGen is the highest generation a coordinator answered a group at,
// with what makes it a deposed coordinator's memory only: the coordinator's
// own last role change of the group's partition and the newer leadership
// of another broker (both nil when it was not deposed).
type newestGen struct {
	gen       int32
	ev        *history.Event
	own, succ *history.Event
}

// Check implements Checker.
func (c GroupGenerations) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	t0 := firstTime(h)
	newest := map[string]newestGen{} // group → the highest generation a coordinator answered it at
	roles := newCoordinatorRoles()
	stored := map[nodeGroup]int32{} // the highest generation a SyncGroup succeeded at on a broker
	quorum := newQuorumLosses(h)
	judged := 0
	for e := range eventsOf(h, history.KindGroupRequest, history.KindRoleChange, history.KindNodeStart) {
		if e.Kind != history.KindGroupRequest {
			roles.add(e)
			continue
		}
		g := e.Group
		if g.Group == "" {
			continue
		}
		if g.ErrorCode == 0 && g.API == history.GroupAPISync && g.Generation > stored[nodeGroup{e.Node, g.Group}] {
			stored[nodeGroup{e.Node, g.Group}] = g.Generation
		}
		if g.ErrorCode == 0 && slices.Contains(groupActs, g.API) && g.Generation >= 0 {
			judged++
			switch n, ok := newest[g.Group]; {
			case g.GroupGeneration >= 0 && g.Generation != g.GroupGeneration:
				r.violate([]int{e.Index}, "%s, coordinator of group %q, answered %s from member %q carrying generation %d without an error (event %d, +%s), although the group was at generation %d there: a coordinator answers a member of another generation ILLEGAL_GENERATION (GroupCoordinator.handle%s).",
					nodeName(e.Node), g.Group, g.API, g.Member, g.Generation, e.Index, rel(e.Time, t0), g.GroupGeneration, handlerOf(g.API))
			case ok && n.gen > g.Generation && n.succ != nil && stored[nodeGroup{n.ev.Node, g.Group}] < n.gen:
				r.knownAnomaly(KnownDeposedCoordinatorGeneration, []int{n.own.Index, n.succ.Index, n.ev.Index, e.Index},
					"%s answered %s of group %q from member %q at generation %d without an error (event %d, +%s), below generation %d that %s had handed out (%s, event %d, +%s) from memory: %s last led %s at leader epoch %d (role change event %d, +%s) while %s had led it at leader epoch %d since +%s (role change event %d), and no SyncGroup of generation %d succeeded on %s, so the generation was never written to the log.",
					nodeName(e.Node), g.API, g.Group, g.Member, g.Generation, e.Index, rel(e.Time, t0), n.gen, nodeName(n.ev.Node), n.ev.Group.API, n.ev.Index, rel(n.ev.Time, t0),
					nodeName(n.ev.Node), n.own.Role.TP(), n.own.Role.LeaderEpoch, n.own.Index, rel(n.own.Time, t0),
					nodeName(n.succ.Node), n.succ.Role.LeaderEpoch, rel(n.succ.Time, t0), n.succ.Index, n.gen, nodeName(n.ev.Node))
			case ok && n.gen > g.Generation && groupLost(r, quorum, t0, n.ev, e, fmt.Sprintf("%s answered %s of group %q from member %q carrying generation %d without an error (event %d, +%s), after %s had answered the group at generation %d (event %d, +%s)",
				nodeName(e.Node), g.API, g.Group, g.Member, g.Generation, e.Index, rel(e.Time, t0), nodeName(n.ev.Node), n.gen, n.ev.Index, rel(n.ev.Time, t0))):
			case ok && n.gen > g.Generation:
				r.violate([]int{n.ev.Index, e.Index}, "%s answered %s of group %q from member %q carrying generation %d without an error (event %d, +%s), after %s had answered the group at generation %d (event %d, +%s): a coordinator that lost the group's __consumer_offsets partition no longer takes the old generation's requests, and the new coordinator loads the newer generation from the log (GroupMetadataManager.loadGroupsForPartition).",
					nodeName(e.Node), g.API, g.Group, g.Member, g.Generation, e.Index, rel(e.Time, t0), nodeName(n.ev.Node), n.gen, n.ev.Index, rel(n.ev.Time, t0))
			}
		}
		if n, ok := newest[g.Group]; g.GroupGeneration >= 0 && (!ok || g.GroupGeneration > n.gen) {
			own, succ := roles.deposed(e.Node, g.Partition)
			newest[g.Group] = newestGen{g.GroupGeneration, e, own, succ}
		}
	}
	r.detail("group_requests_judged", judged)
	return r.result(fmt.Sprintf("every SyncGroup, Heartbeat, OffsetCommit and TxnOffsetCommit a coordinator accepted (%d) carried the group's generation there, and none an older generation than a coordinator had already answered the group at.", judged))
}

// groupLost reports whether crash-lose-unflushed explains a group seen at
// an older generation (event later) after a newer one (event earlier), as
// was says: a loss of the group's __consumer_offsets partition (later's)
// whose crashes all came after earlier and whose exposed leader was
// elected before later. The coordinator loads a group from that log
// (GroupMetadataManager.loadGroupsForPartition); the records of the newer
// generation were gone from every replica it could be elected from, so it
// loaded an older one, or none, and handed the numbers out again. If so
// it names the known anomaly.
func groupLost(r *report, quorum *quorumLosses, t0 int64, earlier, later *history.Event, was string) bool {
	tp := history.TP(history.GroupMetadataTopic, later.Group.Partition)
	loss := quorum.between(tp, earlier.Time, later.Time)
	if loss == nil {
		return false
	}
	who, evs := describeQuorumLoss(loss, t0)
	r.knownAnomaly(loss.name(), append([]int{earlier.Index, later.Index}, evs...), "%s: crash-lose-unflushed took the group's records from %s in between, so its coordinator loaded an older generation, or none, from the log (GroupMetadataManager.loadGroupsForPartition) and handed the numbers out again; %s (%s).",
		was, tp, loss.how(), who)
	return true
}

type nodeGroup struct {
	node  int32
	group string
}

// coordinatorRoles follows who leads each __consumer_offsets partition: each
// broker's own last role change (forgotten when its process starts again)
// and the newest leadership any broker took.
type coordinatorRoles struct {
	own    map[nodePartition]*history.Event
	newest map[int32]*history.Event
}

type nodePartition struct{ node, partition int32 }

func newCoordinatorRoles() *coordinatorRoles {
	return &coordinatorRoles{own: map[nodePartition]*history.Event{}, newest: map[int32]*history.Event{}}
}

func (c *coordinatorRoles) add(e *history.Event) {
	if e.Kind == history.KindNodeStart {
		for k := range c.own {
			if k.node == e.Node {
				delete(c.own, k)
			}
		}
		return
	}
	if e.Role == nil || e.Role.Topic != history.GroupMetadataTopic {
		return
	}
	c.own[nodePartition{e.Node, e.Role.Partition}] = e
	if n := c.newest[e.Role.Partition]; e.Role.Role == history.RoleLeader && (n == nil || e.Role.LeaderEpoch > n.Role.LeaderEpoch) {
		c.newest[e.Role.Partition] = e
	}
}

// deposed returns broker node's last leadership of partition p and another
// broker's newer one when node still led p by its own record; nils otherwise.
func (c *coordinatorRoles) deposed(node, p int32) (own, succ *history.Event) {
	own = c.own[nodePartition{node, p}]
	succ = c.newest[p]
	if own == nil || succ == nil || own.Role.Role != history.RoleLeader || succ.Node == node || succ.Role.LeaderEpoch <= own.Role.LeaderEpoch {
		return nil, nil
	}
	return own, succ
}

// handlerOf names GroupCoordinator's handler of a group API.
func handlerOf(api string) string {
	switch api {
	case history.GroupAPISync:
		return "SyncGroup"
	case history.GroupAPIHeartbeat:
		return "Heartbeat"
	case history.GroupAPITxnOffsetCommit:
		return "TxnCommitOffsets"
	}
	return "CommitOffsets"
}
