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
// generation's commits. A request that carried no generation (-1: an
// OffsetCommit of a consumer outside any group, as Kafka allows for an
// empty group, and a TxnOffsetCommit before v3) is not judged.
type GroupGenerations struct{}

// Name implements Checker.
func (GroupGenerations) Name() string { return "group-generation" }

// groupActs are the requests a member makes in a generation.
var groupActs = []string{history.GroupAPISync, history.GroupAPIHeartbeat, history.GroupAPIOffsetCommit, history.GroupAPITxnOffsetCommit}

// Check implements Checker.
func (c GroupGenerations) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	t0 := firstTime(h)
	type seen struct {
		gen  int32
		idx  int
		node int32
	}
	newest := map[string]seen{} // group → the highest generation a coordinator answered it at
	judged := 0
	for e := range eventsOf(h, history.KindGroupRequest) {
		g := e.Group
		if g.Group == "" {
			continue
		}
		if g.ErrorCode == 0 && slices.Contains(groupActs, g.API) && g.Generation >= 0 {
			judged++
			switch n, ok := newest[g.Group]; {
			case g.GroupGeneration >= 0 && g.Generation != g.GroupGeneration:
				r.violate([]int{e.Index}, "%s, coordinator of group %q, answered %s from member %q carrying generation %d without an error (event %d, +%s), although the group was at generation %d there: a coordinator answers a member of another generation ILLEGAL_GENERATION (GroupCoordinator.handle%s).",
					nodeName(e.Node), g.Group, g.API, g.Member, g.Generation, e.Index, rel(e.Time, t0), g.GroupGeneration, handlerOf(g.API))
			case ok && n.gen > g.Generation:
				r.violate([]int{n.idx, e.Index}, "%s answered %s of group %q from member %q carrying generation %d without an error (event %d, +%s), after %s had answered the group at generation %d (event %d, +%s): a coordinator that lost the group's __consumer_offsets partition no longer takes the old generation's requests, and the new coordinator loads the newer generation from the log (GroupMetadataManager.loadGroupsForPartition).",
					nodeName(e.Node), g.API, g.Group, g.Member, g.Generation, e.Index, rel(e.Time, t0), nodeName(n.node), n.gen, n.idx, rel(h.Events[n.idx].Time, t0))
			}
		}
		if n, ok := newest[g.Group]; g.GroupGeneration >= 0 && (!ok || g.GroupGeneration > n.gen) {
			newest[g.Group] = seen{g.GroupGeneration, e.Index, e.Node}
		}
	}
	r.detail("group_requests_judged", judged)
	return r.result(fmt.Sprintf("every SyncGroup, Heartbeat, OffsetCommit and TxnOffsetCommit a coordinator accepted (%d) carried the group's generation there, and none an older generation than a coordinator had already answered the group at.", judged))
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
