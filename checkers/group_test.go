package checkers

import (
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// groupReq is broker node's record of answering api for group g: the
// generation the request carried, the group's there, and the error code.
func groupReq(b *hb.Builder, node int32, api, member string, carried, groupGen int32, code int16) {
	b.Add(history.Event{Kind: history.KindGroupRequest, Node: node, Group: &history.GroupRequest{
		API: api, Group: "g", Member: member, Generation: carried, GroupGeneration: groupGen, ErrorCode: code}})
}

func TestGroupGenerations(t *testing.T) {
	commit, hbeat, sync, join := history.GroupAPIOffsetCommit, history.GroupAPIHeartbeat, history.GroupAPISync, history.GroupAPIJoin
	runPromiseCases(t, GroupGenerations{}, []promiseCase{
		{name: "members of the current generation, an old one fenced, a coordinator move", want: Valid, build: func(b *hb.Builder) {
			groupReq(b, 1, join, "", -1, 1, 0)
			groupReq(b, 1, sync, "m1", 1, 1, 0)
			groupReq(b, 1, commit, "m1", 1, 1, 0)
			groupReq(b, 1, join, "", -1, 2, 0)
			groupReq(b, 1, commit, "m1", 1, 2, history.ErrIllegalGeneration)
			groupReq(b, 1, hbeat, "m1", 1, 2, history.ErrIllegalGeneration)
			// The group's partition moves: broker 2 loads generation 2.
			b.Add(history.Event{Kind: history.KindGroupRequest, Node: 2, Group: &history.GroupRequest{API: history.GroupLoadPartition, Groups: []string{"g"}}})
			groupReq(b, 2, hbeat, "m2", 2, 2, 0)
			groupReq(b, 2, commit, "m2", 2, 2, 0)
			// A standalone commit carries no generation.
			groupReq(b, 2, commit, "", -1, 2, 0)
		}},
		{name: "a commit of another generation accepted", want: Invalid,
			explain: `broker 1, coordinator of group "g", answered OffsetCommit from member "m1" carrying generation 1 without an error (event 2`,
			build: func(b *hb.Builder) {
				groupReq(b, 1, sync, "m1", 1, 1, 0)
				groupReq(b, 1, join, "", -1, 2, 0)
				groupReq(b, 1, commit, "m1", 1, 2, 0)
			}},
		{name: "a deposed coordinator takes the old generation's heartbeat", want: Invalid,
			explain: `broker 1 answered Heartbeat of group "g" from member "m1" carrying generation 3 without an error (event 2`,
			build: func(b *hb.Builder) {
				groupReq(b, 1, sync, "m1", 3, 3, 0)
				groupReq(b, 2, sync, "m2", 4, 4, 0)
				groupReq(b, 1, hbeat, "m1", 3, 3, 0)
			}},
	})
}

// offsetsRole is broker node's record of its role for the group's
// __consumer_offsets partition 0 at leader epoch epoch.
func offsetsRole(b *hb.Builder, node int32, role string, leader, epoch int32) {
	b.Add(history.Event{Kind: history.KindRoleChange, Node: node, Role: &history.Role{
		Topic: history.GroupMetadataTopic, Partition: 0, Role: role, Leader: leader, LeaderEpoch: epoch}})
}

// A deposed coordinator raises the generation in memory (JoinGroup) but
// cannot store it; the new coordinator hands out the same numbers again.
func TestGroupGenerationsDeposedCoordinator(t *testing.T) {
	sync, join, commit := history.GroupAPISync, history.GroupAPIJoin, history.GroupAPIOffsetCommit
	// zombie: broker 2 leads at epoch 0; broker 1 takes over at epoch 3
	// before broker 2 hands out generations 3 and 4 from memory, its
	// SyncGroup of 3 timing out (REBALANCE_IN_PROGRESS). storedBy4 makes
	// broker 2's SyncGroup of 4 succeed; told makes broker 2 learn before.
	build := func(storedBy4, told bool) func(b *hb.Builder) {
		return func(b *hb.Builder) {
			offsetsRole(b, 2, history.RoleLeader, 2, 0)
			offsetsRole(b, 1, history.RoleFollower, 2, 0)
			groupReq(b, 2, sync, "m1", 2, 2, 0)
			offsetsRole(b, 1, history.RoleLeader, 1, 3)
			if told {
				offsetsRole(b, 2, history.RoleFollower, 1, 3)
			}
			groupReq(b, 2, join, "m2", -1, 3, 0)
			groupReq(b, 2, sync, "m2", 3, 3, history.ErrRebalanceInProgress)
			groupReq(b, 2, join, "m2", -1, 4, 0)
			if storedBy4 {
				groupReq(b, 2, sync, "m2", 4, 4, 0)
			}
			groupReq(b, 1, join, "m3", -1, 3, 0)
			groupReq(b, 1, sync, "m3", 3, 3, 0)
			groupReq(b, 1, commit, "m3", 3, 3, 0)
		}
	}
	for _, tc := range []struct {
		name    string
		build   func(b *hb.Builder)
		want    Verdict
		known   int
		explain string
	}{
		{name: "a deposed coordinator's generations from memory, reused by the new one", build: build(false, false), want: Valid, known: 2,
			explain: `broker 1 answered SyncGroup of group "g" from member "m3" at generation 3 without an error (event 8), below generation 4 that broker 2 had handed out (JoinGroup, event 6) from memory: broker 2 last led __consumer_offsets-0 at leader epoch 0 (role change event 0) while broker 1 had led it at leader epoch 3 since +0s (role change event 3), and no SyncGroup of generation 4 succeeded on broker 2`},
		{name: "the deposed coordinator's generation stored", build: build(true, false), want: Invalid,
			explain: `broker 1 answered SyncGroup of group "g" from member "m3" carrying generation 3 without an error (event 9), after broker 2 had answered the group at generation 4`},
		{name: "the coordinator had been told", build: build(false, true), want: Invalid,
			explain: `broker 1 answered SyncGroup of group "g" from member "m3" carrying generation 3 without an error`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := verdictOf(t, GroupGenerations{}, tc.build, tc.want)
			known, say := 0, r.Explanation
			for _, k := range r.Known {
				if k.Name == KnownDeposedCoordinatorGeneration {
					known, say = k.Count, k.Example
				}
			}
			if known != tc.known {
				t.Fatalf("%d %s, want %d: %+v", known, KnownDeposedCoordinatorGeneration, tc.known, r.Known)
			}
			if !strings.Contains(eventTimes.ReplaceAllString(say, ""), tc.explain) {
				t.Fatalf("explanation %q does not contain %q", say, tc.explain)
			}
		})
	}
}
