package checkers

import (
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
