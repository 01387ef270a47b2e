package group

import (
	"bytes"
	"testing"
	"time"
)

func TestPartitionFor(t *testing.T) {
	for _, tc := range []struct {
		group string
		n     int32
		want  int32
	}{
		{"hello", 50, 99162322 % 50}, // "hello".hashCode() == 99162322
		// "polygenelubricants".hashCode() == Integer.MIN_VALUE: Utils.abs
		// masks it to 0 where Math.abs would stay negative.
		{"polygenelubricants", 50, 0},
		{"é", 50, 233 % 50},         // one UTF-16 unit, 0xE9
		{"\U0001F600", 50, 1772899}, // a surrogate pair: 0xD83D*31 + 0xDE00 == 1772899 (then % 50)
		{"", 50, 0},
	} {
		want := tc.want
		if tc.group == "\U0001F600" {
			want = 1772899 % 50
		}
		if got := PartitionFor(tc.group, tc.n); got != want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d", tc.group, tc.n, got, want)
		}
	}
}

func TestRecordBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want []byte
	}{
		{"offset key v1", OffsetCommitKey("g", TopicPartition{"t", 2}),
			[]byte{0, 1, 0, 1, 'g', 0, 1, 't', 0, 0, 0, 2}},
		{"group key v2", GroupMetadataKey("g"), []byte{0, 2, 0, 1, 'g'}},
		{"offset value v3", OffsetCommitValue(OffsetAndMetadata{Offset: 7, LeaderEpoch: -1, Metadata: "m", CommitTimestamp: 9, ExpireTimestamp: -1}),
			[]byte{0, 3, 0, 0, 0, 0, 0, 0, 0, 7, 0xff, 0xff, 0xff, 0xff, 0, 1, 'm', 0, 0, 0, 0, 0, 0, 0, 9}},
		{"offset value v1 (explicit expiry)", OffsetCommitValue(OffsetAndMetadata{Offset: 7, LeaderEpoch: 3, CommitTimestamp: 9, ExpireTimestamp: 10}),
			[]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 10}},
		{"empty group value v3", GroupMetadataValue(GroupRecord{ProtocolType: "consumer", Generation: 2, CurrentStateTimestamp: 5}),
			append(append([]byte{0, 3, 0, 8}, "consumer"...), 0, 0, 0, 2, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0)},
	} {
		if !bytes.Equal(tc.got, tc.want) {
			t.Errorf("%s:\n got % x\nwant % x", tc.name, tc.got, tc.want)
		}
	}
	inst := "i1"
	g := GroupRecord{ProtocolType: "consumer", Generation: 4, Protocol: strp("range"), Leader: strp("m1"), CurrentStateTimestamp: 11,
		Members: []MemberRecord{{MemberID: "m1", InstanceID: &inst, ClientID: "c", ClientHost: "/h", RebalanceTimeout: 3, SessionTimeout: 2, Subscription: []byte{1}, Assignment: []byte{2, 3}}}}
	back, err := ReadGroupValue(GroupMetadataValue(g))
	if err != nil || back.Generation != 4 || *back.Protocol != "range" || *back.Leader != "m1" || len(back.Members) != 1 ||
		*back.Members[0].InstanceID != "i1" || !bytes.Equal(back.Members[0].Assignment, []byte{2, 3}) {
		t.Fatalf("group value round trip: %+v, %v", back, err)
	}
	for _, bad := range [][]byte{nil, {0}, {0, 9}, {0, 3, 0, 8, 'c'}} {
		if _, err := ReadGroupValue(bad); err == nil {
			t.Errorf("ReadGroupValue(% x): no error", bad)
		}
		if _, err := ReadKey(bad); err == nil {
			t.Errorf("ReadKey(% x): no error", bad)
		}
	}
}

func TestJoinSyncHeartbeatCycle(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		h := newHarness(t, nil)
		h.loadAll()
		ids, gen := h.stableGroup("g", n)
		if gen != 1 {
			t.Fatalf("%d members: generation %d, want 1", n, gen)
		}
		g := h.group("g")
		if g.state != Stable || len(g.members) != n || deref(g.protocolName) != "range" {
			t.Fatalf("%d members: state %v, %d members, protocol %q", n, g.state, len(g.members), deref(g.protocolName))
		}
		for _, id := range ids {
			if !bytes.Equal(g.members[id].assignment, []byte("a-"+id)) {
				t.Fatalf("member %s assignment %q", id, g.members[id].assignment)
			}
			if code := h.heartbeat("g", id, gen); code != 0 {
				t.Fatalf("heartbeat of %s: %d", id, code)
			}
		}
		// The leader's assignment is persisted before Stable: one group
		// metadata record for generation 1 with every member.
		recs := h.log.records(h.c.PartitionFor("g"))
		last := recs[len(recs)-1]
		v, err := ReadGroupValue(last.Value)
		if err != nil || v.Generation != 1 || len(v.Members) != n {
			t.Fatalf("stored group: %+v, %v", v, err)
		}
	}
}

func TestLeaderGetsMembersFollowersDoNot(t *testing.T) {
	h := newHarness(t, nil)
	h.loadAll()
	a := h.joinNew("g", "a")
	b := h.joinNew("g", "b")
	h.clk.Advance(3 * time.Second)
	h.clk.Advance(3 * time.Second)
	ra, rb := a.get(t), b.get(t)
	if ra.LeaderID != ra.MemberID || len(ra.Members) != 2 || len(rb.Members) != 0 || rb.LeaderID != ra.MemberID {
		t.Fatalf("leader answer %+v, follower answer %+v", ra, rb)
	}
}

func TestOffsetCommitFencing(t *testing.T) {
	tp := TopicPartition{"t", 0}
	for _, tc := range []struct {
		name  string
		setup func(h *harness, ids []string, gen int32) (member string, commitGen int32)
		want  int16
	}{
		{"current generation", func(h *harness, ids []string, gen int32) (string, int32) { return ids[0], gen }, errNone},
		{"old generation", func(h *harness, ids []string, gen int32) (string, int32) { return ids[0], gen - 1 }, errIllegalGeneration},
		{"unknown member", func(h *harness, ids []string, gen int32) (string, int32) { return "nobody", gen }, errUnknownMemberID},
		{"simple commit to a group with members", func(h *harness, ids []string, gen int32) (string, int32) { return "", -1 }, errUnknownMemberID},
		{"during PreparingRebalance, current generation", func(h *harness, ids []string, gen int32) (string, int32) {
			h.join(JoinRequest{Group: "g", ClientID: "late"}) // a new member forces a rebalance
			return ids[0], gen
		}, errNone},
		{"during CompletingRebalance", func(h *harness, ids []string, gen int32) (string, int32) {
			j := h.join(JoinRequest{Group: "g", ClientID: "c0", MemberID: ids[0]})
			h.heartbeat("g", ids[0], gen)
			// The other member never rejoins: its session (10 s) expires,
			// which completes the join with the leader alone.
			h.clk.Advance(11 * time.Second)
			r := j.get(h.t)
			return ids[0], r.Generation
		}, errRebalanceInProgress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.loadAll()
			ids, gen := h.stableGroup("g", 2)
			member, cgen := tc.setup(h, ids, gen)
			got := h.commit("g", member, cgen, map[TopicPartition]int64{tp: 5})
			if got[tp] != tc.want {
				t.Fatalf("commit error %d, want %d", got[tp], tc.want)
			}
		})
	}
}

func TestSimpleCommitWithoutGroup(t *testing.T) {
	tp := TopicPartition{"t", 1}
	for _, tc := range []struct {
		gen  int32
		want int16
	}{{-1, errNone}, {0, errIllegalGeneration}, {3, errIllegalGeneration}} {
		h := newHarness(t, nil)
		h.loadAll()
		if got := h.commit("solo", "", tc.gen, map[TopicPartition]int64{tp: 9}); got[tp] != tc.want {
			t.Fatalf("generation %d: error %d, want %d", tc.gen, got[tp], tc.want)
		}
		_, f := h.fetch("solo", []TopicPartition{tp})
		want := int64(-1)
		if tc.want == errNone {
			want = 9
		}
		if f[0].Offset != want {
			t.Fatalf("generation %d: fetched %d, want %d", tc.gen, f[0].Offset, want)
		}
	}
}

func TestHeartbeatAndSyncErrors(t *testing.T) {
	h := newHarness(t, nil)
	h.loadAll()
	ids, gen := h.stableGroup("g", 2)
	for _, tc := range []struct {
		member string
		gen    int32
		want   int16
	}{
		{ids[1], gen, errNone},
		{ids[1], gen + 1, errIllegalGeneration},
		{"x", gen, errUnknownMemberID},
	} {
		if got := h.heartbeat("g", tc.member, tc.gen); got != tc.want {
			t.Errorf("heartbeat(%s, %d) = %d, want %d", tc.member, tc.gen, got, tc.want)
		}
		if got := h.sync(SyncRequest{Group: "g", MemberID: tc.member, Generation: tc.gen}).get(t).Err; got != tc.want {
			t.Errorf("sync(%s, %d) = %d, want %d", tc.member, tc.gen, got, tc.want)
		}
	}
	// The leader's JoinGroup in Stable starts a rebalance: heartbeats of
	// the current generation now answer REBALANCE_IN_PROGRESS.
	h.join(JoinRequest{Group: "g", ClientID: "c0", MemberID: ids[0]})
	if got := h.heartbeat("g", ids[1], gen); got != errRebalanceInProgress {
		t.Fatalf("heartbeat during rebalance = %d", got)
	}
	if got := h.sync(SyncRequest{Group: "g", MemberID: ids[1], Generation: gen}).get(t).Err; got != errRebalanceInProgress {
		t.Fatalf("sync during rebalance = %d", got)
	}
}

func TestSessionExpiryRemovesMemberAndRebalances(t *testing.T) {
	h := newHarness(t, nil)
	h.loadAll()
	ids, gen := h.stableGroup("g", 2)
	// ids[0] heartbeats every 3 s, ids[1] never does: after its 10 s
	// session it is removed and the group prepares a rebalance.
	for i := 0; i < 3; i++ {
		h.clk.Advance(3 * time.Second)
		if code := h.heartbeat("g", ids[0], gen); code != 0 {
			t.Fatalf("heartbeat %d: %d", i, code)
		}
	}
	h.clk.Advance(2 * time.Second)
	g := h.group("g")
	if g.has(ids[1]) || g.state != PreparingRebalance {
		t.Fatalf("after expiry: has %s %v, state %v", ids[1], g.has(ids[1]), g.state)
	}
	if code := h.heartbeat("g", ids[0], gen); code != errRebalanceInProgress {
		t.Fatalf("survivor heartbeat = %d, want REBALANCE_IN_PROGRESS", code)
	}
	r := h.join(JoinRequest{Group: "g", ClientID: "c0", MemberID: ids[0]}).get(t)
	if r.Err != 0 || r.Generation != gen+1 || r.LeaderID != ids[0] || len(r.Members) != 1 {
		t.Fatalf("rejoin: %+v", r)
	}
	if code := h.heartbeat("g", ids[1], gen); code != errUnknownMemberID {
		t.Fatalf("expired member heartbeat = %d", code)
	}
}

func TestPendingMemberExpires(t *testing.T) {
	h := newHarness(t, nil)
	h.loadAll()
	ids, _ := h.stableGroup("g", 1)
	r := h.join(JoinRequest{Group: "g", ClientID: "new", RequireKnownMemberID: true}).get(t)
	if r.Err != errMemberIDRequired {
		t.Fatalf("first join: %d", r.Err)
	}
	// The leader rejoins; the rebalance waits for the pending member
	// until its session timeout drops it.
	j := h.join(JoinRequest{Group: "g", ClientID: "c0", MemberID: ids[0]})
	if j.done {
		t.Fatalf("join completed with a member pending")
	}
	h.clk.Advance(10 * time.Second)
	if got := j.get(t); got.Err != 0 || got.Generation != 2 {
		t.Fatalf("join after pending expiry: %+v", got)
	}
}

func TestLeaveGroup(t *testing.T) {
	h := newHarness(t, nil)
	h.loadAll()
	ids, _ := h.stableGroup("g", 2)
	var r LeaveResult
	h.c.run(func() { r = h.c.handleLeaveGroup("g", []LeaveMember{{MemberID: ids[1]}, {MemberID: "ghost"}}) })
	if r.Err != 0 || r.Members[0].Err != 0 || r.Members[1].Err != errUnknownMemberID {
		t.Fatalf("leave: %+v", r)
	}
	if g := h.group("g"); g.has(ids[1]) || g.state != PreparingRebalance {
		t.Fatalf("after leave: state %v", g.state)
	}
}

func TestStaticMemberFencing(t *testing.T) {
	h := newHarness(t, nil)
	h.loadAll()
	inst := "i-1"
	j := h.join(JoinRequest{Group: "g", ClientID: "c", InstanceID: &inst})
	h.clk.Advance(3 * time.Second)
	first := j.get(t)
	if first.Err != 0 {
		t.Fatalf("static join: %+v", first)
	}
	h.sync(SyncRequest{Group: "g", MemberID: first.MemberID, Generation: first.Generation, InstanceID: &inst,
		Assignments: map[string][]byte{first.MemberID: {1}}})
	// A second process with the same instance id takes over the member;
	// the old member id is fenced.
	second := h.join(JoinRequest{Group: "g", ClientID: "c", InstanceID: &inst}).get(t)
	if second.Err != 0 || second.MemberID == first.MemberID {
		t.Fatalf("replacement join: %+v", second)
	}
	var code int16
	h.c.run(func() {
		code = h.c.handleHeartbeat(HeartbeatRequest{Group: "g", MemberID: first.MemberID, InstanceID: &inst, Generation: first.Generation})
	})
	if code != errFencedInstanceID {
		t.Fatalf("old member heartbeat = %d, want FENCED_INSTANCE_ID", code)
	}
}

func TestJoinValidation(t *testing.T) {
	h := newHarness(t, nil)
	h.loadAll()
	h.stableGroup("g", 1)
	for _, tc := range []struct {
		name string
		r    JoinRequest
		want int16
	}{
		{"empty group id", JoinRequest{Group: "", ClientID: "x"}, errInvalidGroupID},
		{"session too short", JoinRequest{Group: "g", ClientID: "x", SessionTimeoutMs: 1000}, errInvalidSessionTimeout},
		{"unknown member of unknown group", JoinRequest{Group: "other", MemberID: "m", ClientID: "x"}, errUnknownMemberID},
		{"other protocol type", JoinRequest{Group: "g", ClientID: "x", ProtocolType: "connect"}, errInconsistentGroupProtocol},
		{"no common protocol", JoinRequest{Group: "g", ClientID: "x", Protocols: []Protocol{{Name: "sticky"}}}, errInconsistentGroupProtocol},
	} {
		if got := h.join(tc.r).get(t).Err; got != tc.want {
			t.Errorf("%s: error %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestLoadAfterFailover(t *testing.T) {
	log := newMemLog()
	h1 := newHarness(t, log)
	h1.loadAll()
	ids, gen := h1.stableGroup("g", 2)
	tp0, tp1 := TopicPartition{"t", 0}, TopicPartition{"t", 1}
	h1.commit("g", ids[0], gen, map[TopicPartition]int64{tp0: 10, tp1: 20})
	h1.commit("g", ids[1], gen, map[TopicPartition]int64{tp1: 21})
	h1.commit("simple", "", -1, map[TopicPartition]int64{tp0: 3})

	// Another broker becomes leader of the partitions and replays them.
	h2 := newHarness(t, log)
	p := h2.c.PartitionFor("g")
	h2.c.BeginLoad(p)
	if code, _ := h2.fetch("g", []TopicPartition{tp0}); code != errCoordinatorLoadInProgress {
		t.Fatalf("fetch while loading = %d", code)
	}
	if code := h2.heartbeat("g", ids[0], gen); code != errNone {
		t.Fatalf("heartbeat while loading = %d, want NONE (answered blindly)", code)
	}
	if r := h2.sync(SyncRequest{Group: "g", MemberID: ids[0], Generation: gen}).get(t); r.Err != errRebalanceInProgress {
		t.Fatalf("sync while loading = %d", r.Err)
	}
	if err := h2.c.FinishLoad(p, log.records(p)); err != nil {
		t.Fatal(err)
	}
	h2.loadAll()
	g := h2.group("g")
	if g.generation != gen || g.state != Stable || len(g.members) != 2 || g.leaderOrEmpty() != ids[0] {
		t.Fatalf("loaded group: generation %d state %v members %d leader %s", g.generation, g.state, len(g.members), g.leaderOrEmpty())
	}
	_, f := h2.fetch("g", []TopicPartition{tp0, tp1})
	if f[0].Offset != 10 || f[1].Offset != 21 {
		t.Fatalf("loaded offsets: %+v", f)
	}
	if _, f := h2.fetch("simple", []TopicPartition{tp0}); f[0].Offset != 3 {
		t.Fatalf("simple group offsets: %+v", f)
	}
	if got := h2.commit("g", ids[1], gen, map[TopicPartition]int64{tp0: 11}); got[tp0] != errNone {
		t.Fatalf("commit after failover = %d", got[tp0])
	}
	if got := h2.commit("g", ids[1], gen-1, map[TopicPartition]int64{tp0: 12}); got[tp0] != errIllegalGeneration {
		t.Fatalf("old-generation commit after failover = %d", got[tp0])
	}
	if code := h2.heartbeat("g", ids[0], gen); code != errNone {
		t.Fatalf("heartbeat after failover = %d", code)
	}
	var loads []Event
	for _, e := range h2.events {
		if e.API == "LoadPartition" && e.Partition == p {
			loads = append(loads, e)
		}
	}
	if len(loads) == 0 || len(loads[0].Groups) == 0 || loads[0].Groups[0] != "g" {
		t.Fatalf("load events %+v", loads)
	}
}

// In 2.6.3, readGroupMessageValue wraps a v3 member's null
// group_instance_id in Some(...), so dynamic members read back after a
// coordinator move count as static: a rebalance does not drop those that
// fail to rejoin.
func TestLoadedDynamicMembersCountAsStatic(t *testing.T) {
	log := newMemLog()
	h1 := newHarness(t, log)
	h1.loadAll()
	ids, gen := h1.stableGroup("g", 2)
	h2 := newHarness(t, log)
	h2.loadAll()
	// ids[0] (the leader) rejoins and keeps heartbeating; ids[1] does not
	// rejoin but keeps heartbeating, so no session expiry removes it.
	j := h2.join(JoinRequest{Group: "g", ClientID: "c0", MemberID: ids[0]})
	for i := 0; i < 11; i++ {
		h2.clk.Advance(3 * time.Second)
		h2.heartbeat("g", ids[1], gen)
	}
	r := j.get(t)
	if r.Err != 0 || r.Generation != gen+1 {
		t.Fatalf("rejoin: %+v", r)
	}
	if len(r.Members) != 2 || !h2.group("g").has(ids[1]) {
		t.Fatalf("the member that did not rejoin was dropped: members %+v", r.Members)
	}
}

func TestUnload(t *testing.T) {
	h := newHarness(t, nil)
	h.loadAll()
	ids, gen := h.stableGroup("g", 2)
	parked := h.join(JoinRequest{Group: "g", ClientID: "c0", MemberID: ids[0]})
	h.c.Unload(h.c.PartitionFor("g"))
	if r := parked.get(t); r.Err != errNotCoordinator {
		t.Fatalf("parked join after unload: %d", r.Err)
	}
	tp := TopicPartition{"t", 0}
	if got := h.commit("g", ids[0], gen, map[TopicPartition]int64{tp: 1}); got[tp] != errNotCoordinator {
		t.Fatalf("commit after unload = %d", got[tp])
	}
	if code := h.heartbeat("g", ids[1], gen); code != errNotCoordinator {
		t.Fatalf("heartbeat after unload = %d", code)
	}
	if code, _ := h.fetch("g", []TopicPartition{tp}); code != errNotCoordinator {
		t.Fatalf("fetch after unload = %d", code)
	}
	// Unloading during a load wins: the later FinishLoad installs nothing.
	p := h.c.PartitionFor("g")
	h.c.BeginLoad(p)
	h.c.Unload(p)
	if err := h.c.FinishLoad(p, h.log.records(p)); err != nil {
		t.Fatal(err)
	}
	if code := h.heartbeat("g", ids[1], gen); code != errNotCoordinator {
		t.Fatalf("heartbeat after unload during load = %d", code)
	}
}

func TestAppendFailureMapsErrors(t *testing.T) {
	tp := TopicPartition{"t", 0}
	for _, tc := range []struct {
		err      error
		atCommit bool // fails waiting for the commit, not in the local append
		want     int16
	}{
		{kerrNotLeader, false, errNotCoordinator},
		{kerrNotEnoughReplicas, false, errCoordinatorNotAvailable},
		{kerrMessageTooLarge, false, errInvalidCommitOffsetSize},
		{kerrNotEnoughReplicasAfter, true, errCoordinatorNotAvailable},
		{kerrNotLeader, true, errNotCoordinator},
		{kerrTimeout, true, errRequestTimedOut},
	} {
		h := newHarness(t, nil)
		h.loadAll()
		ids, gen := h.stableGroup("g", 1)
		if tc.atCommit {
			h.log.failCommit = tc.err
		} else {
			h.log.failNext = tc.err
		}
		if got := h.commit("g", ids[0], gen, map[TopicPartition]int64{tp: 4}); got[tp] != tc.want {
			t.Errorf("%v: commit error %d, want %d", tc.err, got[tp], tc.want)
		}
		if _, f := h.fetch("g", []TopicPartition{tp}); f[0].Offset != -1 {
			t.Errorf("%v: failed commit visible: %+v", tc.err, f)
		}
	}
}

func TestSyncStoreFailureRestartsRebalance(t *testing.T) {
	h := newHarness(t, nil)
	h.loadAll()
	j := h.joinNew("g", "a")
	h.clk.Advance(3 * time.Second)
	r := j.get(t)
	h.log.failCommit = kerrTimeout
	s := h.sync(SyncRequest{Group: "g", MemberID: r.MemberID, Generation: r.Generation, Assignments: map[string][]byte{r.MemberID: {1}}})
	// storeGroup maps REQUEST_TIMED_OUT to REBALANCE_IN_PROGRESS.
	if got := s.get(t); got.Err != errRebalanceInProgress {
		t.Fatalf("sync after failed store = %d", got.Err)
	}
	if g := h.group("g"); g.state != PreparingRebalance {
		t.Fatalf("state %v", g.state)
	}
}

func TestEvents(t *testing.T) {
	h := newHarness(t, nil)
	h.loadAll()
	hd := &Handlers{C: h.c}
	ids, gen := h.stableGroup("g", 1)
	h.join(JoinRequest{Group: "g", ClientID: "c0", MemberID: ids[0]}) // generation gen+1 completes at once
	req := newOffsetCommit("g", ids[0], gen, "t", 0, 5)
	if _, err := hd.OffsetCommit(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	ev := h.events[len(h.events)-1]
	if ev.API != "OffsetCommit" || ev.GenerationCarried != gen || ev.GenerationCurrent != gen+1 ||
		ev.Error != errIllegalGeneration || ev.Member != ids[0] || ev.Partition != h.c.PartitionFor("g") ||
		len(ev.Offsets) != 1 || ev.Offsets[0].Offset != 5 {
		t.Fatalf("event %+v", ev)
	}
}

// A commit waiting for replication holds no lock: the group's heartbeats
// and other commits are answered meanwhile, and the commit answers only
// once its records are committed.
func TestCommitWaitDoesNotStallGroup(t *testing.T) {
	h := newHarness(t, nil)
	h.loadAll()
	ids, gen := h.stableGroup("g", 2)
	h.log.mu.Lock()
	h.log.block = make(chan struct{})
	h.log.mu.Unlock()
	tp := TopicPartition{"t", 0}
	answered := make(chan map[TopicPartition]int16, 1)
	go func() { answered <- h.commit("g", ids[0], gen, map[TopicPartition]int64{tp: 8}) }()
	// The records are in the log before the commit answers.
	deadline := time.Now().Add(5 * time.Second)
	for len(h.log.records(h.c.PartitionFor("g"))) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("commit never appended")
		}
		time.Sleep(time.Millisecond)
	}
	if code := h.heartbeat("g", ids[1], gen); code != errNone {
		t.Fatalf("heartbeat during a commit's wait = %d", code)
	}
	var f []FetchedOffset
	h.c.run(func() { _, f = h.c.handleFetchOffsets("g", true, []TopicPartition{tp}) })
	if f[0].Err != errUnstableOffsetCommit {
		t.Fatalf("require_stable fetch during the wait: %+v", f)
	}
	select {
	case got := <-answered:
		t.Fatalf("commit answered before it was committed: %v", got)
	default:
	}
	close(h.log.block)
	if got := <-answered; got[tp] != errNone {
		t.Fatalf("commit = %d", got[tp])
	}
	if _, f := h.fetch("g", []TopicPartition{tp}); f[0].Offset != 8 {
		t.Fatalf("fetch after commit: %+v", f)
	}
}
