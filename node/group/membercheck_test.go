package group

import "testing"

// The event's Checked must say what the handler's own check decided: a
// request Checked calls stale is the one the handler refuses with
// ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID, and a request refused so was
// checked.
func TestMemberCheckMirrorsTheHandlers(t *testing.T) {
	h := newHarness(t, nil)
	h.loadAll()
	ids, gen := h.stableGroup("g", 2)
	tp := TopicPartition{"t", 0}
	cases := []struct {
		name             string
		a                api
		group, member    string
		generation       int32
		wantChecked      bool
		wantRefusedStale bool
	}{
		{"heartbeat at the current generation", apiHeartbeat, "g", ids[1], gen, true, false},
		{"heartbeat at an older generation", apiHeartbeat, "g", ids[1], gen - 1, true, true},
		{"heartbeat from an unknown member", apiHeartbeat, "g", "gone", gen, true, true},
		{"heartbeat to a group the coordinator lacks", apiHeartbeat, "other", "m", 3, true, true},
		{"commit at the current generation", apiCommit, "g", ids[0], gen, true, false},
		{"commit at an older generation", apiCommit, "g", ids[0], gen - 1, true, true},
		{"commit with a generation to a group the coordinator lacks", apiCommit, "other", "m", 3, true, true},
		{"commit without generation to a group the coordinator lacks", apiCommit, "simple", "", -1, false, false},
		{"sync at an older generation", apiSync, "g", ids[0], gen - 1, true, true},
		{"sync at the current generation", apiSync, "g", ids[0], gen, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var checked *MemberCheck
			var code int16
			h.c.run(func() {
				checked = h.c.memberCheck(tc.a, tc.group, tc.member, nil, tc.generation)
				switch tc.a {
				case apiHeartbeat:
					code = h.c.handleHeartbeat(HeartbeatRequest{Group: tc.group, MemberID: tc.member, Generation: tc.generation})
				case apiSync:
					h.c.handleSyncGroup(SyncRequest{Group: tc.group, MemberID: tc.member, Generation: tc.generation}, func(r SyncResult) { code = r.Err })
				case apiCommit:
					h.c.handleCommitOffsets(CommitRequest{Group: tc.group, MemberID: tc.member, Generation: tc.generation,
						Offsets: map[TopicPartition]OffsetAndMetadata{tp: {Offset: 1, LeaderEpoch: -1, ExpireTimestamp: -1}}},
						func(m map[TopicPartition]int16) { code = m[tp] })
				}
			})
			if (checked != nil) != tc.wantChecked {
				t.Fatalf("checked %+v, want checked %v", checked, tc.wantChecked)
			}
			stale := checked != nil && (!checked.Member || checked.Generation != tc.generation)
			refused := code == errIllegalGeneration || code == errUnknownMemberID
			if stale != tc.wantRefusedStale || refused != tc.wantRefusedStale {
				t.Errorf("checked %+v (stale %v), answer %d (refused %v); want both %v", checked, stale, code, refused, tc.wantRefusedStale)
			}
		})
	}
}
