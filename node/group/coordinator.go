package group

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Error codes the coordinator answers with.
var (
	errNone                      int16
	errUnknownServer             = kerr.UnknownServerError.Code
	errUnknownTopicOrPartition   = kerr.UnknownTopicOrPartition.Code
	errInvalidFetchSize          = kerr.InvalidFetchSize.Code
	errNotLeader                 = kerr.NotLeaderForPartition.Code
	errRequestTimedOut           = kerr.RequestTimedOut.Code
	errMessageTooLarge           = kerr.MessageTooLarge.Code
	errOffsetMetadataTooLarge    = kerr.OffsetMetadataTooLarge.Code
	errCoordinatorLoadInProgress = kerr.CoordinatorLoadInProgress.Code
	errCoordinatorNotAvailable   = kerr.CoordinatorNotAvailable.Code
	errNotCoordinator            = kerr.NotCoordinator.Code
	errRecordListTooLarge        = kerr.RecordListTooLarge.Code
	errNotEnoughReplicas         = kerr.NotEnoughReplicas.Code
	errNotEnoughReplicasAfter    = kerr.NotEnoughReplicasAfterAppend.Code
	errIllegalGeneration         = kerr.IllegalGeneration.Code
	errInconsistentGroupProtocol = kerr.InconsistentGroupProtocol.Code
	errInvalidGroupID            = kerr.InvalidGroupID.Code
	errUnknownMemberID           = kerr.UnknownMemberID.Code
	errInvalidSessionTimeout     = kerr.InvalidSessionTimeout.Code
	errRebalanceInProgress       = kerr.RebalanceInProgress.Code
	errInvalidCommitOffsetSize   = kerr.InvalidCommitOffsetSize.Code
	errInvalidRequest            = kerr.InvalidRequest.Code
	errKafkaStorage              = kerr.KafkaStorageError.Code
	errMemberIDRequired          = kerr.MemberIDRequired.Code
	errGroupMaxSizeReached       = kerr.GroupMaxSizeReached.Code
	errFencedInstanceID          = kerr.FencedInstanceID.Code
	errUnstableOffsetCommit      = kerr.UnstableOffsetCommit.Code
)

// NewMemberJoinTimeout is GroupCoordinator.NewMemberJoinTimeoutMs: how long a
// new member's parked JoinGroup may wait before the member is dropped.
const NewMemberJoinTimeout = 5 * time.Minute

// Config holds the broker settings the coordinator reads. Zero fields take
// Kafka 2.6.3's defaults (see withDefaults).
type Config struct {
	// NumPartitions is offsets.topic.num.partitions (50).
	NumPartitions int32
	// MinSessionTimeout, MaxSessionTimeout: group.min/max.session.timeout.ms
	// (6 s, 30 min).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms (3 s). Set
	// NoInitialRebalanceDelay for 0.
	InitialRebalanceDelay   time.Duration
	NoInitialRebalanceDelay bool
	// MaxGroupSize is group.max.size (0: Int.MaxValue).
	MaxGroupSize int
	// MaxMetadataSize is offset.metadata.max.bytes (4096).
	MaxMetadataSize int
	// CommitTimeout is offsets.commit.timeout.ms (5 s): an append not
	// committed by then answers REQUEST_TIMED_OUT.
	CommitTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.NumPartitions <= 0 {
		c.NumPartitions = 50
	}
	if c.MinSessionTimeout == 0 {
		c.MinSessionTimeout = 6 * time.Second
	}
	if c.MaxSessionTimeout == 0 {
		c.MaxSessionTimeout = 30 * time.Minute
	}
	if c.NoInitialRebalanceDelay {
		c.InitialRebalanceDelay = 0
	} else if c.InitialRebalanceDelay == 0 {
		c.InitialRebalanceDelay = 3 * time.Second
	}
	if c.MaxGroupSize <= 0 {
		c.MaxGroupSize = int(^uint32(0) >> 1)
	}
	if c.MaxMetadataSize <= 0 {
		c.MaxMetadataSize = 4096
	}
	if c.CommitTimeout <= 0 {
		c.CommitTimeout = 5 * time.Second
	}
	return c
}

// Log is the coordinator's view of the __consumer_offsets partitions this
// broker leads: ReplicaManager.appendRecords with acks=-1, split in its two
// halves.
type Log interface {
	// Append writes records as one batch to the local log of partition,
	// which this broker must lead, and returns the batch's base offset. It
	// is called with the coordinator's lock held, so it must not wait for
	// replication or call back into the coordinator. committed blocks until
	// the high watermark has passed the batch, or fails; a commit answers
	// only after it returns nil. Errors that are a *kerr.Error keep their
	// code (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS,
	// NOT_ENOUGH_REPLICAS_AFTER_APPEND, ...); committed's ctx carries
	// offsets.commit.timeout.ms, and its expiry answers REQUEST_TIMED_OUT.
	Append(partition int32, records []Record) (baseOffset int64, committed func(ctx context.Context) error, err error)
	// AppendTxn is Append for a TxnOffsetCommit: one transactional batch
	// of producer id pid at epoch (GroupMetadataManager.storeOffsets with
	// a producer id), which the leader fences like the producer's own
	// batches (an older epoch answers INVALID_PRODUCER_EPOCH).
	AppendTxn(partition int32, records []Record, pid int64, epoch int16) (baseOffset int64, committed func(ctx context.Context) error, err error)
}

// Coordinator is Kafka 2.6.3's GroupCoordinator together with the group
// cache of GroupMetadataManager. One mutex guards all groups (Kafka locks
// per group); appends run outside it.
type Coordinator struct {
	cfg     Config
	log     Log
	clock   Clock
	onEvent func(Event)
	newID   func() string

	mu       sync.Mutex
	active   bool
	groups   map[string]*groupMeta
	owned    map[int32]bool
	loading  map[int32]bool
	timers   map[timerKey]*timerSlot
	seq      uint64
	deferred []func()
	// producerGroups is openGroupsForProducer: by producer id, the groups
	// holding offsets pending in its transaction.
	producerGroups map[int64]map[string]bool

	ctx    context.Context
	cancel context.CancelFunc
}

// Options are the coordinator's collaborators.
type Options struct {
	Config Config
	Log    Log
	// Clock defaults to SystemClock.
	Clock Clock
	// OnEvent, if set, hears every request handled (see Event). It is
	// called with the coordinator's lock held: it must not block or call
	// back into the coordinator.
	OnEvent func(Event)
	// NewUUID, if set, replaces the random part of member ids (tests).
	NewUUID func() string
}

// New returns an active coordinator that owns no partition yet.
func New(o Options) *Coordinator {
	if o.Clock == nil {
		o.Clock = SystemClock{}
	}
	if o.NewUUID == nil {
		o.NewUUID = randomUUID
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Coordinator{
		cfg: o.Config.withDefaults(), log: o.Log, clock: o.Clock, onEvent: o.OnEvent, newID: o.NewUUID,
		active: true, groups: map[string]*groupMeta{}, owned: map[int32]bool{}, loading: map[int32]bool{},
		timers: map[timerKey]*timerSlot{}, producerGroups: map[int64]map[string]bool{}, ctx: ctx, cancel: cancel,
	}
}

// Close is GroupCoordinator.shutdown: later requests answer
// COORDINATOR_NOT_AVAILABLE, timers stop, and appends in flight see their
// context cancelled.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.active = false
	for k, s := range c.timers {
		s.t.Stop()
		delete(c.timers, k)
	}
	c.mu.Unlock()
	c.cancel()
}

// randomUUID formats a version-4 UUID as java.util.UUID.toString does.
func randomUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// PartitionFor is the __consumer_offsets partition of groupID.
func (c *Coordinator) PartitionFor(groupID string) int32 {
	return PartitionFor(groupID, c.cfg.NumPartitions)
}

func (c *Coordinator) nowMs() int64 { return c.clock.Now().UnixMilli() }

// run executes f under the lock, then the appends f queued, each outside the
// lock.
func (c *Coordinator) run(f func()) {
	c.mu.Lock()
	f()
	d := c.deferred
	c.deferred = nil
	c.mu.Unlock()
	for _, fn := range d {
		fn()
	}
}

// appendLater is the coordinator's ReplicaManager.appendRecords: the local
// append happens now, under the lock, so the log holds records in the order
// the coordinator decided them (Kafka appends under the group lock); the
// wait for the commit runs after the lock is released. done runs under the
// lock with the batch's base offset or the append's error code.
func (c *Coordinator) appendLater(partition int32, records []Record, prod *producer, done func(base int64, code int16)) {
	if c.log == nil {
		done(-1, errNotLeader)
		return
	}
	var base int64
	var committed func(context.Context) error
	var err error
	if prod != nil {
		base, committed, err = c.log.AppendTxn(partition, records, prod.id, prod.epoch)
	} else {
		base, committed, err = c.log.Append(partition, records)
	}
	if err != nil {
		done(-1, appendErrCode(c.ctx, err))
		return
	}
	c.deferred = append(c.deferred, func() {
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.CommitTimeout)
		code := errNone
		if committed != nil {
			code = appendErrCode(ctx, committed(ctx))
		}
		cancel()
		c.run(func() { done(base, code) })
	})
}

// appendErrCode turns an append error into the code ReplicaManager would
// have put in the PartitionResponse.
func appendErrCode(ctx context.Context, err error) int16 {
	if err == nil {
		return errNone
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() == context.DeadlineExceeded {
		return errRequestTimedOut
	}
	return errUnknownServer
}

// --- timers: Kafka's heartbeat and join purgatories -----------------------

type timerKey struct {
	join          bool
	group, member string
}

type timerSlot struct {
	seq uint64
	t   Timer
}

// schedule replaces the timer under k; fn runs under the lock unless the
// slot was replaced or cancelled meanwhile.
func (c *Coordinator) schedule(k timerKey, d time.Duration, fn func()) {
	c.cancelTimer(k)
	c.seq++
	seq := c.seq
	s := &timerSlot{seq: seq}
	c.timers[k] = s
	s.t = c.clock.AfterFunc(d, func() {
		c.run(func() {
			if cur, ok := c.timers[k]; !ok || cur.seq != seq {
				return
			}
			delete(c.timers, k)
			fn()
		})
	})
}

func (c *Coordinator) cancelTimer(k timerKey) {
	if s, ok := c.timers[k]; ok {
		s.t.Stop()
		delete(c.timers, k)
	}
}

func hbKey(g *groupMeta, memberID string) timerKey { return timerKey{group: g.id, member: memberID} }
func joinKey(g *groupMeta) timerKey                { return timerKey{join: true, group: g.id} }

// --- group status ---------------------------------------------------------

type api int8

const (
	apiJoin api = iota
	apiSync
	apiHeartbeat
	apiLeave
	apiCommit
	apiFetch
	apiDescribe
	apiTxnCommit
)

// validateGroupStatus is GroupCoordinator.validateGroupStatus.
func (c *Coordinator) validateGroupStatus(groupID string, a api) int16 {
	emptyOK := a == apiCommit || a == apiFetch || a == apiDescribe
	p := c.PartitionFor(groupID)
	switch {
	case groupID == "" && !emptyOK:
		return errInvalidGroupID
	case !c.active:
		return errCoordinatorNotAvailable
	case c.loading[p]:
		return errCoordinatorLoadInProgress
	case !c.owned[p]:
		return errNotCoordinator
	}
	return errNone
}

func (c *Coordinator) acceptJoiningMember(g *groupMeta, memberID string) bool {
	switch g.state {
	case Empty, Dead:
		return true
	case PreparingRebalance:
		m, ok := g.members[memberID]
		return (ok && m.awaitingJoin()) || g.numAwaiting < c.cfg.MaxGroupSize
	default:
		return g.has(memberID) || len(g.members) < c.cfg.MaxGroupSize
	}
}

// --- JoinGroup ------------------------------------------------------------

// JoinRequest is a JoinGroup request as GroupCoordinator.handleJoinGroup
// takes it.
type JoinRequest struct {
	Group      string
	MemberID   string
	InstanceID *string
	// RequireKnownMemberID: JoinGroup v4+ without an instance id.
	RequireKnownMemberID bool
	ClientID, ClientHost string
	RebalanceTimeoutMs   int32
	SessionTimeoutMs     int32
	ProtocolType         string
	Protocols            []Protocol
}

// JoinMember is one member the leader's JoinGroup response lists.
type JoinMember struct {
	MemberID   string
	InstanceID *string
	Metadata   []byte
}

// JoinResult is JoinGroupResult.
type JoinResult struct {
	Members      []JoinMember
	MemberID     string
	Generation   int32
	ProtocolType *string
	ProtocolName *string
	LeaderID     string
	Err          int16
}

func joinErr(memberID string, code int16) JoinResult {
	return JoinResult{MemberID: memberID, Generation: -1, Err: code}
}

// handleJoinGroup is GroupCoordinator.handleJoinGroup; cb runs exactly once,
// under the lock, possibly much later (the request is parked until the
// rebalance completes).
func (c *Coordinator) handleJoinGroup(r JoinRequest, cb func(JoinResult)) {
	if code := c.validateGroupStatus(r.Group, apiJoin); code != errNone {
		cb(joinErr(r.MemberID, code))
		return
	}
	if time.Duration(r.SessionTimeoutMs)*time.Millisecond < c.cfg.MinSessionTimeout ||
		time.Duration(r.SessionTimeoutMs)*time.Millisecond > c.cfg.MaxSessionTimeout {
		cb(joinErr(r.MemberID, errInvalidSessionTimeout))
		return
	}
	unknown := r.MemberID == ""
	g := c.groups[r.Group]
	if g == nil {
		if !unknown {
			cb(joinErr(r.MemberID, errUnknownMemberID))
			return
		}
		g = newGroup(r.Group, Empty, c.nowMs())
		c.groups[r.Group] = g
	}
	switch {
	case !c.acceptJoiningMember(g, r.MemberID):
		if m, ok := g.members[r.MemberID]; ok {
			g.remove(r.MemberID)
			g.removeStatic(m)
		}
		if r.InstanceID != nil {
			delete(g.static, *r.InstanceID)
		}
		cb(joinErr("", errGroupMaxSizeReached))
	case unknown:
		c.doUnknownJoinGroup(g, r, cb)
	default:
		c.doJoinGroup(g, r, cb)
	}
	if g.is(PreparingRebalance) {
		c.checkJoin(g)
	}
}

func (c *Coordinator) doUnknownJoinGroup(g *groupMeta, r JoinRequest, cb func(JoinResult)) {
	switch {
	case g.is(Dead):
		cb(joinErr("", errCoordinatorNotAvailable))
	case !g.supportsProtocols(r.ProtocolType, r.Protocols):
		cb(joinErr("", errInconsistentGroupProtocol))
	default:
		prefix := r.ClientID
		if r.InstanceID != nil {
			prefix = *r.InstanceID
		}
		newID := prefix + "-" + c.newID()
		switch {
		case g.hasStatic(r.InstanceID):
			c.updateStaticMemberAndRebalance(g, newID, r, cb)
		case r.RequireKnownMemberID:
			g.pending[newID] = true
			c.schedule(hbKey(g, newID), time.Duration(r.SessionTimeoutMs)*time.Millisecond, func() {
				c.onExpireHeartbeat(g, newID, true)
			})
			cb(joinErr(newID, errMemberIDRequired))
		default:
			c.addMemberAndRebalance(g, newID, r, cb)
		}
	}
}

func (c *Coordinator) doJoinGroup(g *groupMeta, r JoinRequest, cb func(JoinResult)) {
	switch {
	case g.is(Dead):
		cb(joinErr(r.MemberID, errCoordinatorNotAvailable))
		return
	case !g.supportsProtocols(r.ProtocolType, r.Protocols):
		cb(joinErr(r.MemberID, errInconsistentGroupProtocol))
		return
	case g.isPending(r.MemberID):
		if r.InstanceID != nil {
			// Kafka throws IllegalStateException: a static member is never
			// pending. The request is refused instead of crashing.
			cb(joinErr(r.MemberID, errUnknownServer))
			return
		}
		c.addMemberAndRebalance(g, r.MemberID, r, cb)
		return
	case g.isStaticMemberFenced(r.MemberID, r.InstanceID):
		cb(joinErr(r.MemberID, errFencedInstanceID))
		return
	case !g.has(r.MemberID) || (r.InstanceID != nil && !g.hasStatic(r.InstanceID)):
		cb(joinErr(r.MemberID, errUnknownMemberID))
		return
	}
	m := g.members[r.MemberID]
	current := func(members []JoinMember) JoinResult {
		return JoinResult{Members: members, MemberID: m.id, Generation: g.generation,
			ProtocolType: g.protocolType, ProtocolName: g.protocolName, LeaderID: g.leaderOrEmpty()}
	}
	switch g.state {
	case PreparingRebalance:
		c.updateMemberAndRebalance(g, m, r.Protocols, cb)
	case CompletingRebalance:
		if m.matches(r.Protocols) {
			// The member missed the JoinGroup response: answer it again.
			var members []JoinMember
			if g.isLeader(m.id) {
				members = g.currentMemberMetadata()
			}
			cb(current(members))
		} else {
			c.updateMemberAndRebalance(g, m, r.Protocols, cb)
		}
	case Stable:
		if g.isLeader(m.id) || !m.matches(r.Protocols) {
			// A leader's JoinGroup forces a rebalance so it can react to
			// metadata changes that leave its subscription unchanged.
			c.updateMemberAndRebalance(g, m, r.Protocols, cb)
		} else {
			cb(current(nil))
		}
	default: // Empty, Dead
		cb(joinErr(r.MemberID, errUnknownMemberID))
	}
}

func (c *Coordinator) addMemberAndRebalance(g *groupMeta, memberID string, r JoinRequest, cb func(JoinResult)) {
	m := &member{id: memberID, instanceID: r.InstanceID, isStatic: r.InstanceID != nil,
		clientID: r.ClientID, clientHost: r.ClientHost, rebalanceTimeout: r.RebalanceTimeoutMs,
		sessionTimeout: r.SessionTimeoutMs, protocolType: r.ProtocolType, protocols: r.Protocols, isNew: true}
	if g.is(PreparingRebalance) && g.generation == 0 {
		g.newMemberAdded = true
	}
	g.add(m, cb)
	// A new member cannot heartbeat before its JoinGroup answers, so its
	// parked join is bounded by NewMemberJoinTimeout instead.
	c.completeAndScheduleNextExpiration(g, m, NewMemberJoinTimeout)
	if m.isStatic {
		g.addStatic(r.InstanceID, memberID)
	} else {
		delete(g.pending, memberID)
	}
	c.maybePrepareRebalance(g)
}

func (c *Coordinator) updateStaticMemberAndRebalance(g *groupMeta, newID string, r JoinRequest, cb func(JoinResult)) {
	oldID := g.static[*r.InstanceID]
	currentLeader := g.leaderOrEmpty()
	m := g.replaceGroupInstance(oldID, newID, r.InstanceID)
	c.completeAndScheduleNextHeartbeatExpiration(g, m)
	oldProtocols := m.protocols
	g.updateMember(m, r.Protocols, cb)
	switch g.state {
	case Stable:
		if p := g.selectProtocol(); g.protocolName != nil && *g.protocolName == p {
			// The selected protocol is unchanged: persist the new member id
			// without a rebalance.
			assignment := map[string][]byte{}
			for _, x := range g.memberList() {
				assignment[x.id] = x.assignment
			}
			c.storeGroup(g, assignment, func(code int16) {
				if code != errNone {
					g.updateMember(m, oldProtocols, nil)
					old := g.replaceGroupInstance(newID, oldID, r.InstanceID)
					c.completeAndScheduleNextHeartbeatExpiration(g, old)
					cb(JoinResult{MemberID: "", Generation: g.generation, ProtocolType: g.protocolType,
						ProtocolName: g.protocolName, LeaderID: currentLeader, Err: code})
					return
				}
				// The old leader id is returned so that a leader's new
				// member id does not make it run a trivial assignment a
				// Stable group would not broadcast.
				g.maybeInvokeJoin(m, JoinResult{MemberID: newID, Generation: g.generation,
					ProtocolType: g.protocolType, ProtocolName: g.protocolName, LeaderID: currentLeader})
			})
		} else {
			c.maybePrepareRebalance(g)
		}
	case CompletingRebalance:
		c.prepareRebalance(g)
	}
}

func (c *Coordinator) updateMemberAndRebalance(g *groupMeta, m *member, ps []Protocol, cb func(JoinResult)) {
	g.updateMember(m, ps, cb)
	c.maybePrepareRebalance(g)
}

func (c *Coordinator) maybePrepareRebalance(g *groupMeta) {
	if g.canRebalance() {
		c.prepareRebalance(g)
	}
}

// joinOp is a DelayedJoin, or an InitialDelayedJoin when initial.
type joinOp struct {
	initial                      bool
	configured, delay, remaining time.Duration
}

// prepareRebalance is GroupCoordinator.prepareRebalance.
func (c *Coordinator) prepareRebalance(g *groupMeta) {
	if g.is(CompletingRebalance) {
		c.resetAndPropagateAssignmentError(g, errRebalanceInProgress)
	}
	var op *joinOp
	if g.is(Empty) {
		d := c.cfg.InitialRebalanceDelay
		rem := time.Duration(g.rebalanceTimeoutMs())*time.Millisecond - d
		if rem < 0 {
			rem = 0
		}
		op = &joinOp{initial: true, configured: d, delay: d, remaining: rem}
	} else {
		op = &joinOp{delay: time.Duration(g.rebalanceTimeoutMs()) * time.Millisecond}
	}
	g.transition(PreparingRebalance, c.nowMs())
	c.watchJoin(g, op)
}

// watchJoin is joinPurgatory.tryCompleteElseWatch.
func (c *Coordinator) watchJoin(g *groupMeta, op *joinOp) {
	if !op.initial && g.hasAllMembersJoined() {
		c.onCompleteJoin(g)
		return
	}
	g.join = op
	c.schedule(joinKey(g), op.delay, func() { c.onJoinExpired(g, op) })
}

// checkJoin is joinPurgatory.checkAndComplete(GroupKey).
func (c *Coordinator) checkJoin(g *groupMeta) {
	op := g.join
	if op == nil || op.initial || !g.hasAllMembersJoined() {
		return
	}
	g.join = nil
	c.cancelTimer(joinKey(g))
	c.onCompleteJoin(g)
}

func (c *Coordinator) onJoinExpired(g *groupMeta, op *joinOp) {
	if g.join != op {
		return
	}
	g.join = nil
	if op.initial && g.newMemberAdded && op.remaining != 0 {
		// InitialDelayedJoin.onComplete: members keep arriving, so wait
		// another delay, up to the rebalance timeout.
		g.newMemberAdded = false
		d := min(op.configured, op.remaining)
		c.watchJoin(g, &joinOp{initial: true, configured: op.configured, delay: d, remaining: max(op.remaining-op.delay, 0)})
		return
	}
	c.onCompleteJoin(g)
}

// onCompleteJoin is GroupCoordinator.onCompleteJoin.
func (c *Coordinator) onCompleteJoin(g *groupMeta) {
	for _, m := range g.memberList() {
		if !m.awaitingJoin() && !m.isStatic {
			c.removeHeartbeatForLeavingMember(g, m)
			g.remove(m.id)
			g.removeStatic(m)
		}
	}
	if g.is(Dead) {
		return
	}
	if !g.maybeElectNewJoinedLeader() && len(g.members) > 0 {
		// Nobody rejoined: wait another rebalance timeout for session
		// expiry to clear the group.
		c.watchJoin(g, &joinOp{delay: time.Duration(g.rebalanceTimeoutMs()) * time.Millisecond})
		return
	}
	g.initNextGeneration(c.nowMs())
	if g.is(Empty) {
		// A failed write is only logged by Kafka: the previous generation
		// stays in the log, which is safe with no members.
		c.storeGroup(g, map[string][]byte{}, func(int16) {})
		return
	}
	for _, m := range g.memberList() {
		var members []JoinMember
		if g.isLeader(m.id) {
			members = g.currentMemberMetadata()
		}
		g.maybeInvokeJoin(m, JoinResult{Members: members, MemberID: m.id, Generation: g.generation,
			ProtocolType: g.protocolType, ProtocolName: g.protocolName, LeaderID: g.leaderOrEmpty()})
		c.completeAndScheduleNextHeartbeatExpiration(g, m)
		m.isNew = false
	}
}

// --- heartbeats -----------------------------------------------------------

func (c *Coordinator) completeAndScheduleNextHeartbeatExpiration(g *groupMeta, m *member) {
	c.completeAndScheduleNextExpiration(g, m, time.Duration(m.sessionTimeout)*time.Millisecond)
}

func (c *Coordinator) completeAndScheduleNextExpiration(g *groupMeta, m *member, d time.Duration) {
	m.heartbeatSatisfied = false
	id := m.id
	c.schedule(hbKey(g, id), d, func() { c.onExpireHeartbeat(g, id, false) })
}

func (c *Coordinator) removeHeartbeatForLeavingMember(g *groupMeta, m *member) {
	m.isLeaving = true
	c.cancelTimer(hbKey(g, m.id))
}

// onExpireHeartbeat is GroupCoordinator.onExpireHeartbeat.
func (c *Coordinator) onExpireHeartbeat(g *groupMeta, memberID string, pending bool) {
	switch {
	case g.is(Dead):
	case pending:
		if !g.has(memberID) {
			c.removePendingMemberAndUpdateGroup(g, memberID)
		}
	default:
		if m, ok := g.members[memberID]; ok && !m.hasSatisfiedHeartbeat() {
			c.removeMemberAndUpdateGroup(g, m)
		}
	}
}

func (c *Coordinator) removeMemberAndUpdateGroup(g *groupMeta, m *member) {
	// A new member may expire with its JoinGroup parked: answer it so the
	// client retries.
	g.maybeInvokeJoin(m, joinErr("", errUnknownMemberID))
	g.remove(m.id)
	g.removeStatic(m)
	switch g.state {
	case Stable, CompletingRebalance:
		c.maybePrepareRebalance(g)
	case PreparingRebalance:
		c.checkJoin(g)
	}
}

func (c *Coordinator) removePendingMemberAndUpdateGroup(g *groupMeta, memberID string) {
	delete(g.pending, memberID)
	if g.is(PreparingRebalance) {
		c.checkJoin(g)
	}
}

// --- SyncGroup ------------------------------------------------------------

// SyncRequest is a SyncGroup request.
type SyncRequest struct {
	Group        string
	Generation   int32
	MemberID     string
	InstanceID   *string
	ProtocolType *string
	ProtocolName *string
	Assignments  map[string][]byte
}

// SyncResult is SyncGroupResult.
type SyncResult struct {
	ProtocolType *string
	ProtocolName *string
	Assignment   []byte
	Err          int16
}

// handleSyncGroup is GroupCoordinator.handleSyncGroup.
func (c *Coordinator) handleSyncGroup(r SyncRequest, cb func(SyncResult)) {
	switch code := c.validateGroupStatus(r.Group, apiSync); code {
	case errNone:
	case errCoordinatorLoadInProgress:
		// The rebalance's state is lost with the load: make the member
		// rejoin without rediscovering the coordinator.
		cb(SyncResult{Err: errRebalanceInProgress})
		return
	default:
		cb(SyncResult{Err: code})
		return
	}
	g := c.groups[r.Group]
	switch {
	case g == nil:
		cb(SyncResult{Err: errUnknownMemberID})
	case g.is(Dead):
		cb(SyncResult{Err: errCoordinatorNotAvailable})
	case g.isStaticMemberFenced(r.MemberID, r.InstanceID):
		cb(SyncResult{Err: errFencedInstanceID})
	case !g.has(r.MemberID):
		cb(SyncResult{Err: errUnknownMemberID})
	case r.Generation != g.generation:
		cb(SyncResult{Err: errIllegalGeneration})
	case r.ProtocolType != nil && (g.protocolType == nil || *g.protocolType != *r.ProtocolType):
		cb(SyncResult{Err: errInconsistentGroupProtocol})
	case r.ProtocolName != nil && (g.protocolName == nil || *g.protocolName != *r.ProtocolName):
		cb(SyncResult{Err: errInconsistentGroupProtocol})
	default:
		c.doSyncGroup(g, r, cb)
	}
}

func (c *Coordinator) doSyncGroup(g *groupMeta, r SyncRequest, cb func(SyncResult)) {
	m := g.members[r.MemberID]
	switch g.state {
	case Empty:
		cb(SyncResult{Err: errUnknownMemberID})
	case PreparingRebalance:
		cb(SyncResult{Err: errRebalanceInProgress})
	case CompletingRebalance:
		m.syncCB = cb
		if !g.isLeader(m.id) {
			return
		}
		assignment := map[string][]byte{}
		for id, a := range r.Assignments {
			assignment[id] = a
		}
		for _, id := range g.order {
			if _, ok := assignment[id]; !ok {
				assignment[id] = []byte{}
			}
		}
		gen := r.Generation
		c.storeGroup(g, assignment, func(code int16) {
			// Another member may have joined while the write was in
			// flight: only the same generation, still completing, moves on.
			if !g.is(CompletingRebalance) || gen != g.generation {
				return
			}
			if code != errNone {
				c.resetAndPropagateAssignmentError(g, code)
				c.maybePrepareRebalance(g)
				return
			}
			for _, x := range g.memberList() {
				x.assignment = assignment[x.id]
			}
			c.propagateAssignment(g, errNone)
			g.transition(Stable, c.nowMs())
		})
	case Stable:
		cb(SyncResult{ProtocolType: g.protocolType, ProtocolName: g.protocolName, Assignment: m.assignment})
		c.completeAndScheduleNextHeartbeatExpiration(g, m)
	default:
		cb(SyncResult{Err: errCoordinatorNotAvailable})
	}
}

func (c *Coordinator) resetAndPropagateAssignmentError(g *groupMeta, code int16) {
	for _, m := range g.memberList() {
		m.assignment = []byte{}
	}
	c.propagateAssignment(g, code)
}

func (c *Coordinator) propagateAssignment(g *groupMeta, code int16) {
	for _, m := range g.memberList() {
		r := SyncResult{Assignment: m.assignment, Err: code}
		if code == errNone {
			r.ProtocolType, r.ProtocolName = g.protocolType, g.protocolName
		}
		if g.maybeInvokeSync(m, r) {
			// Expirations seen while the member awaited its assignment were
			// ignored; start its session afresh.
			c.completeAndScheduleNextHeartbeatExpiration(g, m)
		}
	}
}

// --- Heartbeat ------------------------------------------------------------

// HeartbeatRequest is a Heartbeat request.
type HeartbeatRequest struct {
	Group      string
	MemberID   string
	InstanceID *string
	Generation int32
}

// handleHeartbeat is GroupCoordinator.handleHeartbeat.
func (c *Coordinator) handleHeartbeat(r HeartbeatRequest) int16 {
	switch code := c.validateGroupStatus(r.Group, apiHeartbeat); code {
	case errNone:
	case errCoordinatorLoadInProgress:
		return errNone // answered blindly while loading
	default:
		return code
	}
	g := c.groups[r.Group]
	switch {
	case g == nil:
		return errUnknownMemberID
	case g.is(Dead):
		return errCoordinatorNotAvailable
	case g.isStaticMemberFenced(r.MemberID, r.InstanceID):
		return errFencedInstanceID
	case !g.has(r.MemberID):
		return errUnknownMemberID
	case r.Generation != g.generation:
		return errIllegalGeneration
	}
	m := g.members[r.MemberID]
	switch g.state {
	case Empty:
		return errUnknownMemberID
	case CompletingRebalance, Stable:
		c.completeAndScheduleNextHeartbeatExpiration(g, m)
		return errNone
	case PreparingRebalance:
		c.completeAndScheduleNextHeartbeatExpiration(g, m)
		return errRebalanceInProgress
	}
	return errCoordinatorNotAvailable
}

// --- LeaveGroup -----------------------------------------------------------

// LeaveMember identifies one member leaving (LeaveGroup v3 batches them).
type LeaveMember struct {
	MemberID   string
	InstanceID *string
}

// LeaveMemberResult is one member's answer.
type LeaveMemberResult struct {
	MemberID   string
	InstanceID *string
	Err        int16
}

// LeaveResult is LeaveGroupResult.
type LeaveResult struct {
	Err     int16
	Members []LeaveMemberResult
}

// handleLeaveGroup is GroupCoordinator.handleLeaveGroup.
func (c *Coordinator) handleLeaveGroup(groupID string, leaving []LeaveMember) LeaveResult {
	if code := c.validateGroupStatus(groupID, apiLeave); code != errNone {
		return LeaveResult{Err: code}
	}
	res := func(l LeaveMember, code int16) LeaveMemberResult {
		return LeaveMemberResult{MemberID: l.MemberID, InstanceID: l.InstanceID, Err: code}
	}
	g := c.groups[groupID]
	if g == nil {
		out := LeaveResult{}
		for _, l := range leaving {
			out.Members = append(out.Members, res(l, errUnknownMemberID))
		}
		return out
	}
	if g.is(Dead) {
		return LeaveResult{Err: errCoordinatorNotAvailable}
	}
	out := LeaveResult{}
	for _, l := range leaving {
		switch {
		case l.MemberID != "" && g.isStaticMemberFenced(l.MemberID, l.InstanceID):
			out.Members = append(out.Members, res(l, errFencedInstanceID))
		case g.isPending(l.MemberID):
			if l.InstanceID != nil {
				out.Members = append(out.Members, res(l, errUnknownServer))
				continue
			}
			c.removePendingMemberAndUpdateGroup(g, l.MemberID)
			out.Members = append(out.Members, res(l, errNone))
		case !g.has(l.MemberID) && !g.hasStatic(l.InstanceID):
			out.Members = append(out.Members, res(l, errUnknownMemberID))
		default:
			id := l.MemberID
			if g.hasStatic(l.InstanceID) {
				id = g.static[*l.InstanceID]
			}
			m := g.members[id]
			c.removeHeartbeatForLeavingMember(g, m)
			c.removeMemberAndUpdateGroup(g, m)
			out.Members = append(out.Members, res(l, errNone))
		}
	}
	return out
}

// --- OffsetCommit / OffsetFetch ------------------------------------------

// CommitRequest is an OffsetCommit request after KafkaApis has resolved
// timestamps and dropped unknown partitions.
type CommitRequest struct {
	Group      string
	MemberID   string
	InstanceID *string
	Generation int32
	Offsets    map[TopicPartition]OffsetAndMetadata
}

// handleCommitOffsets is GroupCoordinator.handleCommitOffsets.
func (c *Coordinator) handleCommitOffsets(r CommitRequest, cb func(map[TopicPartition]int16)) {
	all := answerAll(r.Offsets, cb)
	if code := c.validateGroupStatus(r.Group, apiCommit); code != errNone {
		all(code)
		return
	}
	g := c.groups[r.Group]
	if g == nil {
		if r.Generation >= 0 {
			// A generation for a group this coordinator does not know: an
			// old generation's commit.
			all(errIllegalGeneration)
			return
		}
		// The group uses Kafka only to store offsets.
		g = newGroup(r.Group, Empty, c.nowMs())
		c.groups[r.Group] = g
	}
	switch {
	case g.is(Dead):
		all(errCoordinatorNotAvailable)
	case g.isStaticMemberFenced(r.MemberID, r.InstanceID):
		all(errFencedInstanceID)
	case r.Generation < 0 && g.is(Empty):
		c.storeOffsets(g, r.Offsets, cb)
	case !g.has(r.MemberID):
		all(errUnknownMemberID)
	case r.Generation != g.generation:
		all(errIllegalGeneration)
	case g.is(Stable) || g.is(PreparingRebalance):
		// Commits stay open while preparing a rebalance: the heartbeat
		// tells the member about the rebalance.
		c.completeAndScheduleNextHeartbeatExpiration(g, g.members[r.MemberID])
		c.storeOffsets(g, r.Offsets, cb)
	case g.is(CompletingRebalance):
		all(errRebalanceInProgress)
	default:
		all(errUnknownServer)
	}
}

// answerAll returns the answer an offset commit gets when it is refused
// as a whole: one error code for every partition it carried, as Kafka's
// handleCommitOffsets and handleTxnCommitOffsets answer a group-level
// refusal.
func answerAll(offsets map[TopicPartition]OffsetAndMetadata, cb func(map[TopicPartition]int16)) func(code int16) {
	return func(code int16) {
		out := make(map[TopicPartition]int16, len(offsets))
		for tp := range offsets {
			out[tp] = code
		}
		cb(out)
	}
}

// metadataFits is validateOffsetMetadataLength (Java String.length counts
// UTF-16 units).
func (c *Coordinator) metadataFits(s string) bool {
	return len(s) <= c.cfg.MaxMetadataSize || len(utf16.Encode([]rune(s))) <= c.cfg.MaxMetadataSize
}

// sortedTPs lists the map's partitions in Compare order; an empty map
// gives an empty slice, not nil, as every caller has always been given.
func sortedTPs[V any](m map[TopicPartition]V) []TopicPartition {
	out := slices.AppendSeq(make([]TopicPartition, 0, len(m)), maps.Keys(m))
	slices.SortFunc(out, TopicPartition.Compare)
	return out
}

// storeOffsets is GroupMetadataManager.storeOffsets for a consumer's
// OffsetCommit.
func (c *Coordinator) storeOffsets(g *groupMeta, offsets map[TopicPartition]OffsetAndMetadata, cb func(map[TopicPartition]int16)) {
	c.storeOffsetsAs(g, offsets, nil, cb)
}

// storeOffsetsAs is GroupMetadataManager.storeOffsets; prod, for a
// TxnOffsetCommit, makes the batch the producer's transactional batch and
// the offsets pending in its transaction rather than the group's.
func (c *Coordinator) storeOffsetsAs(g *groupMeta, offsets map[TopicPartition]OffsetAndMetadata, prod *producer, cb func(map[TopicPartition]int16)) {
	filtered := map[TopicPartition]OffsetAndMetadata{}
	for tp, om := range offsets {
		if c.metadataFits(om.Metadata) {
			filtered[tp] = om
		}
	}
	final := func(code int16) {
		out := map[TopicPartition]int16{}
		for tp, om := range offsets {
			if c.metadataFits(om.Metadata) {
				out[tp] = code
			} else {
				out[tp] = errOffsetMetadataTooLarge
			}
		}
		cb(out)
	}
	if len(filtered) == 0 {
		final(errOffsetMetadataTooLarge)
		return
	}
	p := c.PartitionFor(g.id)
	if !c.owned[p] {
		final(errNotCoordinator)
		return
	}
	now := c.nowMs()
	var recs []Record
	for _, tp := range sortedTPs(filtered) {
		recs = append(recs, Record{Key: OffsetCommitKey(g.id, tp), Value: OffsetCommitValue(filtered[tp]), Timestamp: now})
	}
	if prod != nil {
		c.addProducerGroup(prod.id, g.id)
		g.prepareTxnOffsetCommit(prod.id, offsets)
	} else {
		for tp, om := range offsets {
			g.pendingCommits[tp] = om
		}
	}
	c.appendLater(p, recs, prod, func(base int64, code int16) {
		if code == errNone {
			if !g.is(Dead) {
				for tp, om := range filtered {
					if prod != nil {
						g.onTxnOffsetCommitAppend(prod.id, tp, commitRecord{batchOffset: base, om: om})
					} else {
						g.onOffsetCommitAppend(tp, commitRecord{batchOffset: base, om: om})
					}
				}
			}
			final(errNone)
			return
		}
		if !g.is(Dead) {
			if prod != nil {
				// As in 2.6.3, the producer's group is forgotten only when
				// it had nothing pending before this commit's offsets are
				// dropped.
				if _, ok := g.pendingTxn[prod.id]; !ok {
					c.removeProducerGroup(prod.id, g.id)
				}
			}
			for tp, om := range filtered {
				if prod != nil {
					g.failPendingTxnOffsetCommit(prod.id, tp)
				} else {
					g.failPendingOffsetWrite(tp, om)
				}
			}
		}
		switch code {
		case errUnknownTopicOrPartition, errNotEnoughReplicas, errNotEnoughReplicasAfter:
			code = errCoordinatorNotAvailable
		case errNotLeader, errKafkaStorage:
			code = errNotCoordinator
		case errMessageTooLarge, errRecordListTooLarge, errInvalidFetchSize:
			code = errInvalidCommitOffsetSize
		}
		final(code)
	})
}

// storeGroup is GroupMetadataManager.storeGroup.
func (c *Coordinator) storeGroup(g *groupMeta, assignment map[string][]byte, cb func(int16)) {
	p := c.PartitionFor(g.id)
	if !c.owned[p] {
		cb(errNotCoordinator)
		return
	}
	rec := GroupRecord{ProtocolType: deref(g.protocolType), Generation: g.generation,
		Protocol: g.protocolName, Leader: g.leader, CurrentStateTimestamp: g.stateTimestamp}
	for _, m := range g.memberList() {
		md, _ := m.metadata(deref(g.protocolName))
		a := assignment[m.id]
		if a == nil {
			a = []byte{}
		}
		rec.Members = append(rec.Members, MemberRecord{MemberID: m.id, InstanceID: m.instanceID,
			ClientID: m.clientID, ClientHost: m.clientHost, RebalanceTimeout: m.rebalanceTimeout,
			SessionTimeout: m.sessionTimeout, Subscription: md, Assignment: a})
	}
	recs := []Record{{Key: GroupMetadataKey(g.id), Value: GroupMetadataValue(rec), Timestamp: c.nowMs()}}
	c.appendLater(p, recs, nil, func(_ int64, code int16) {
		switch code {
		case errUnknownTopicOrPartition, errNotEnoughReplicas, errNotEnoughReplicasAfter:
			code = errCoordinatorNotAvailable
		case errNotLeader, errKafkaStorage:
			code = errNotCoordinator
		case errRequestTimedOut:
			code = errRebalanceInProgress
		case errMessageTooLarge, errRecordListTooLarge, errInvalidFetchSize:
			code = errUnknownServer
		}
		cb(code)
	})
}

// FetchedOffset is one partition's committed offset (-1 when none).
type FetchedOffset struct {
	TP          TopicPartition
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	Err         int16
}

// handleFetchOffsets is GroupCoordinator.handleFetchOffsets; tps nil means
// every partition the group has an offset for.
func (c *Coordinator) handleFetchOffsets(groupID string, requireStable bool, tps []TopicPartition) (int16, []FetchedOffset) {
	if code := c.validateGroupStatus(groupID, apiFetch); code != errNone {
		return code, nil
	}
	none := func(tp TopicPartition) FetchedOffset {
		return FetchedOffset{TP: tp, Offset: -1, LeaderEpoch: -1}
	}
	var out []FetchedOffset
	g := c.groups[groupID]
	if g == nil || g.is(Dead) {
		for _, tp := range tps {
			out = append(out, none(tp))
		}
		return errNone, out
	}
	if tps == nil {
		tps = sortedTPs(g.offsets)
	}
	for _, tp := range tps {
		pending := g.hasPendingOffsetCommits(tp)
		cr, ok := g.offsets[tp]
		switch {
		case requireStable && pending:
			f := none(tp)
			f.Err = errUnstableOffsetCommit
			out = append(out, f)
		case !ok:
			out = append(out, none(tp))
		default:
			out = append(out, FetchedOffset{TP: tp, Offset: cr.om.Offset, LeaderEpoch: cr.om.LeaderEpoch, Metadata: cr.om.Metadata})
		}
	}
	return errNone, out
}

// --- DescribeGroups / ListGroups -----------------------------------------

// MemberSummary is one member as DescribeGroups shows it.
type MemberSummary struct {
	MemberID, ClientID, ClientHost string
	InstanceID                     *string
	Metadata, Assignment           []byte
}

// GroupSummary is GroupMetadata.summary.
type GroupSummary struct {
	State, ProtocolType, Protocol string
	Members                       []MemberSummary
}

// handleDescribeGroup is GroupCoordinator.handleDescribeGroup.
func (c *Coordinator) handleDescribeGroup(groupID string) (int16, GroupSummary) {
	if code := c.validateGroupStatus(groupID, apiDescribe); code != errNone {
		return code, GroupSummary{}
	}
	g := c.groups[groupID]
	if g == nil {
		return errNone, GroupSummary{State: Dead.String()}
	}
	s := GroupSummary{State: g.state.String(), ProtocolType: deref(g.protocolType)}
	stable := g.is(Stable)
	if stable {
		s.Protocol = deref(g.protocolName)
	}
	for _, m := range g.memberList() {
		ms := MemberSummary{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			Metadata: []byte{}, Assignment: []byte{}}
		if stable {
			ms.Metadata, _ = m.metadata(s.Protocol)
			ms.Assignment = m.assignment
		}
		s.Members = append(s.Members, ms)
	}
	return errNone, s
}

// GroupOverview is one group as ListGroups shows it.
type GroupOverview struct {
	GroupID, ProtocolType, State string
}

// handleListGroups is GroupCoordinator.handleListGroups.
func (c *Coordinator) handleListGroups(states []string) (int16, []GroupOverview) {
	if !c.active {
		return errCoordinatorNotAvailable, nil
	}
	code := errNone
	if len(c.loading) > 0 {
		code = errCoordinatorLoadInProgress
	}
	want := map[string]bool{}
	for _, s := range states {
		want[s] = true
	}
	ids := make([]string, 0, len(c.groups))
	for id := range c.groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var out []GroupOverview
	for _, id := range ids {
		g := c.groups[id]
		if len(want) > 0 && !want[g.state.String()] {
			continue
		}
		out = append(out, GroupOverview{GroupID: id, ProtocolType: deref(g.protocolType), State: g.state.String()})
	}
	return code, out
}
