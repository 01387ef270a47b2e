package group

import "sort"

// Event reports one request the coordinator answered, for the node's event
// log. Fields that do not apply to the API stay zero / -1.
type Event struct {
	// API is the request's name: "FindCoordinator", "JoinGroup",
	// "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit",
	// "OffsetFetch", "DescribeGroups" (one event per group), "ListGroups"
	// (Group ""), "TxnOffsetCommit", and, for what is not a request,
	// "TxnOffsetCompletion" (a marker applied to a group's pending
	// offsets), "LoadPartition" and "UnloadPartition" (Group "",
	// Partition set, Groups listing the groups loaded or unloaded).
	API     string
	Version int16
	Group   string
	// Partition is the group's __consumer_offsets partition.
	Partition int32
	// Member and InstanceID are what the request carried ("" / nil when
	// absent); AssignedMember is the member id a JoinGroup answer gave.
	Member         string
	InstanceID     *string
	AssignedMember string
	// GenerationCarried is the generation in the request (-1: none, as in
	// JoinGroup); GenerationCurrent is the group's when answered (-1: the
	// coordinator has no such group).
	GenerationCarried int32
	GenerationCurrent int32
	// State is the group's state when answered ("" if unknown); Leader its
	// leader member id.
	State  string
	Leader string
	// Error is the answer's error code; for per-member and per-partition
	// answers, the first non-zero one (the details are in Members/Offsets).
	Error   int16
	Members []LeaveMemberResult
	Offsets []EventOffset
	// Coordinator is the broker a FindCoordinator answer named (-1: none).
	Coordinator int32
	Groups      []string
	// TransactionalID, ProducerID and ProducerEpoch are a
	// TxnOffsetCommit's; ProducerID and Commit a TxnOffsetCompletion's
	// (the marker's producer and decision).
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Commit          bool
	// Checked is, on an OffsetCommit, Heartbeat or SyncGroup that reached
	// the member and generation check, what the group held then (nil:
	// answered before the check). Taken before the handler runs, under
	// the same lock, so it is what the check compared with even when the
	// answer comes later (a commit's write, a follower's SyncGroup).
	Checked *MemberCheck
}

// MemberCheck is the group's generation (-1: no such group) and whether
// the request's member id was a member, when the coordinator checked them.
type MemberCheck struct {
	Generation int32
	Member     bool
}

// memberCheck is what the member and generation check of handleHeartbeat,
// handleSyncGroup (a) or handleCommitOffsets (apiCommit) will compare the
// request with, or nil when the handler answers before reaching it. It
// follows their order of checks: group status, no such group (a Heartbeat
// or SyncGroup answers UNKNOWN_MEMBER_ID, a commit with a generation
// ILLEGAL_GENERATION, one without creates the group), a dead group, a
// fenced static member, then (commits only) no generation on an empty
// group. Called with the lock held, before the handler.
func (c *Coordinator) memberCheck(a api, groupID, memberID string, instanceID *string, generation int32) *MemberCheck {
	if c.validateGroupStatus(groupID, a) != errNone {
		return nil
	}
	g := c.groups[groupID]
	switch {
	case g == nil && a == apiCommit && generation < 0:
		return nil
	case g == nil:
		return &MemberCheck{Generation: -1}
	case g.is(Dead), g.isStaticMemberFenced(memberID, instanceID):
		return nil
	case a == apiCommit && generation < 0 && g.is(Empty):
		return nil
	}
	return &MemberCheck{Generation: g.generation, Member: g.has(memberID)}
}

// EventOffset is one partition of an OffsetCommit or OffsetFetch.
type EventOffset struct {
	Topic     string
	Partition int32
	Offset    int64
	Error     int16
}

// emit fills the group's current facts into ev and hands it to the hook;
// called with the lock held.
func (c *Coordinator) emit(ev Event) {
	if c.onEvent == nil {
		return
	}
	ev.Partition = c.PartitionFor(ev.Group)
	ev.GenerationCurrent = -1
	if ev.API != "FindCoordinator" {
		ev.Coordinator = -1
	}
	if g := c.groups[ev.Group]; g != nil {
		ev.GenerationCurrent = g.generation
		ev.State = g.state.String()
		ev.Leader = g.leaderOrEmpty()
	}
	if ev.Error == 0 {
		for _, m := range ev.Members {
			if m.Err != 0 {
				ev.Error = m.Err
				break
			}
		}
		for _, o := range ev.Offsets {
			if o.Error != 0 {
				ev.Error = o.Error
				break
			}
		}
	}
	c.onEvent(ev)
}

// emitPartition reports a load or unload of a __consumer_offsets partition;
// called with the lock held.
func (c *Coordinator) emitPartition(api string, p int32, groups []string, code int16) {
	if c.onEvent == nil {
		return
	}
	sort.Strings(groups)
	c.onEvent(Event{API: api, Partition: p, GenerationCarried: -1, GenerationCurrent: -1, Coordinator: -1, Error: code, Groups: groups})
}
