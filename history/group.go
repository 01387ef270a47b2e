package history

// GroupMetadataTopic is Kafka's internal topic of committed offsets and
// group metadata, which the group coordinator writes.
const GroupMetadataTopic = "__consumer_offsets"

// Group coordinator requests and partition moves (GroupRequest.API).
const (
	GroupAPIFindCoordinator = "FindCoordinator"
	GroupAPIJoin            = "JoinGroup"
	GroupAPISync            = "SyncGroup"
	GroupAPIHeartbeat       = "Heartbeat"
	GroupAPILeave           = "LeaveGroup"
	GroupAPIOffsetCommit    = "OffsetCommit"
	GroupAPIOffsetFetch     = "OffsetFetch"
	GroupAPIDescribe        = "DescribeGroups"
	GroupAPIList            = "ListGroups"
	// GroupAPITxnOffsetCommit is a producer's TxnOffsetCommit: offsets
	// pending in its transaction until the marker decides them.
	GroupAPITxnOffsetCommit = "TxnOffsetCommit"
	// GroupAPITxnCompletion is not a request: a transaction marker
	// committed to the group's __consumer_offsets partition made the
	// producer's pending offsets the group's (Commit) or dropped them.
	GroupAPITxnCompletion = "TxnOffsetCompletion"
	// GroupLoadPartition and GroupUnloadPartition are not requests: the
	// coordinator loaded the groups of a __consumer_offsets partition it
	// now leads (GroupCoordinator.onElection), or dropped them when it
	// stopped leading it (onResignation).
	GroupLoadPartition   = "LoadPartition"
	GroupUnloadPartition = "UnloadPartition"
)

// Group coordinator error codes the checkers care about.
const (
	ErrIllegalGeneration   int16 = 22
	ErrUnknownMemberID     int16 = 25
	ErrRebalanceInProgress int16 = 27
	ErrNotCoordinator      int16 = 16
	ErrFencedInstanceID    int16 = 82
)

// GroupRequest is one request a broker's group coordinator answered (kind
// group_request): who asked (group, member, the generation it carried) and
// what the coordinator held and answered (the group's generation, state and
// leader then, the error code, per-partition offsets, the coordinator a
// FindCoordinator named). A load or unload of a __consumer_offsets partition
// (API GroupLoadPartition / GroupUnloadPartition) has Group "" and lists the
// groups moved.
type GroupRequest struct {
	_ struct{}

	API        string `json:"api"`
	APIVersion int16  `json:"api_version,omitempty"`
	Group      string `json:"group,omitempty"`
	// Partition is the group's __consumer_offsets partition.
	Partition int32 `json:"partition"`
	// Member and InstanceID are what the request carried (a JoinGroup's
	// Member is "" for a new member); AssignedMember is the member id a
	// JoinGroup answer gave.
	Member         string `json:"member,omitempty"`
	InstanceID     string `json:"instance_id,omitempty"`
	AssignedMember string `json:"assigned_member,omitempty"`
	// Generation is the generation the request carried (-1: none, as in
	// JoinGroup); GroupGeneration is the group's when answered (-1: the
	// coordinator has no such group).
	Generation      int32  `json:"generation"`
	GroupGeneration int32  `json:"group_generation"`
	State           string `json:"state,omitempty"`
	Leader          string `json:"leader,omitempty"`
	// ErrorCode is the answer's error code; for per-member and
	// per-partition answers the first non-zero one (the rest are in
	// Members and Offsets).
	ErrorCode int16         `json:"error_code,omitempty"`
	Offsets   []GroupOffset `json:"offsets,omitempty"`
	Members   []GroupMember `json:"members,omitempty"`
	// Coordinator is the broker a FindCoordinator answer named (-1: none);
	// 0 on every other API.
	Coordinator int32    `json:"coordinator,omitempty"`
	Groups      []string `json:"groups,omitempty"`
	// TransactionalID, ProducerID and ProducerEpoch are a
	// TxnOffsetCommit's; ProducerID and Commit a TxnOffsetCompletion's
	// (absent on other APIs).
	TransactionalID string `json:"transactional_id,omitempty"`
	ProducerID      *int64 `json:"producer_id,omitempty"`
	ProducerEpoch   *int16 `json:"producer_epoch,omitempty"`
	Commit          bool   `json:"commit,omitempty"`
	// Checked is, on an OffsetCommit, Heartbeat or SyncGroup that reached
	// the coordinator's member and generation check
	// (GroupCoordinator.handleCommitOffsets, handleHeartbeat,
	// handleSyncGroup: unknown member, then generationId !=
	// group.generationId), what the coordinator held when it checked.
	// Absent when the request was answered before the check (not the
	// coordinator, loading, a dead group, a fenced static member, a
	// commit without generation to an empty group) and from older writers.
	Checked *GroupCheck `json:"checked,omitempty"`
}

// GroupCheck is what a group coordinator held when it checked a request's
// member id and generation: the group's generation (-1: it had no such
// group) and whether the member id was one of its members.
type GroupCheck struct {
	_ struct{}

	Generation int32 `json:"generation"`
	Member     bool  `json:"member"`
}

// Stale reports whether a request carrying generation from member would
// fail the check c records: the member is not the group's, or the
// generation is not the group's (Kafka compares with !=: a generation
// newer than a coordinator's, which loaded an older group record, is
// refused as well).
func (c *GroupCheck) Stale(generation int32) bool {
	return !c.Member || generation != c.Generation
}

// GroupOffset is one partition of an OffsetCommit (the offset committed) or
// OffsetFetch (the offset returned, -1: none) with its error code.
type GroupOffset struct {
	_ struct{}

	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	ErrorCode int16  `json:"error_code,omitempty"`
}

// GroupMember is one member of a LeaveGroup with its own answer.
type GroupMember struct {
	_ struct{}

	MemberID   string `json:"member_id"`
	InstanceID string `json:"instance_id,omitempty"`
	ErrorCode  int16  `json:"error_code,omitempty"`
}

// Fenced reports an answer that refused the request for its generation or
// membership: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID.
func (g *GroupRequest) Fenced() bool {
	switch g.ErrorCode {
	case ErrIllegalGeneration, ErrUnknownMemberID, ErrFencedInstanceID:
		return true
	}
	return false
}
