package dataplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/broker"
	"github.com/zkchaos/zkchaos/node/storage"
	"github.com/zkchaos/zkchaos/node/zkdata"
	"github.com/zkchaos/zkchaos/node/zkutil"
)

// remote is the leader's view of one follower (Kafka's Replica).
type remote struct {
	leo                int64 // -1: unknown since we became leader
	lastCaughtUp       time.Time
	lastFetchTime      time.Time
	lastFetchLeaderLEO int64
}

// partition is one hosted partition (Kafka's Partition).
type partition struct {
	m   *Manager
	tp  history.TopicPartition
	log *storage.Log

	mu sync.Mutex
	// inMemory: the partition received a LeaderAndIsr in this process, i.e.
	// it is in Kafka's in-memory partition map (KAFKA-7235).
	inMemory        bool
	role            string
	leader          int32
	leaderEpoch     int32
	leaderAddr      string
	isr             []int32
	replicas        []int32
	zkVersion       int32
	controllerEpoch int32
	hw              int64
	epochStart      int64 // LEO when this replica became leader
	followers       map[int32]*remote
	changed         chan struct{} // closed and replaced when LEO, HW or role change
	fetcher         *fetcher
	// leaderGen counts the times this replica stopped leading; a pending
	// acks=all produce is only completed within one leadership.
	leaderGen uint64
	// producers is the idempotent producer state of the log (producers.go);
	// txns the decided transactions (txnstate.go).
	producers producerStates
	txns      partitionTxns
	// guards are the verifications in progress by producer id
	// (txnverify.go).
	guards map[int64]*verificationGuard
}

func newPartition(m *Manager, tp history.TopicPartition, l *storage.Log) *partition {
	return &partition{m: m, tp: tp, log: l, leader: -1, leaderEpoch: -1, hw: l.LogStartOffset(), changed: make(chan struct{}), producers: producerStates{}}
}

// notifyLocked wakes every waiter (long-polling fetches, acks=all produces).
func (p *partition) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// initLocked puts the partition into the in-memory map: its high watermark
// comes from the checkpoint file as it is now, or the log start offset if
// the file does not have it (Partition.createLogIfNotExists).
func (p *partition) initLocked() {
	if p.inMemory {
		return
	}
	p.inMemory = true
	hw := p.m.checkpointedHW(p.tp)
	start, leo := p.log.LogStartOffset(), p.log.LogEndOffset()
	if hw < start {
		hw = start
	}
	if hw > leo {
		hw = leo
	}
	p.hw = hw
	p.m.log.Printf("%s: high watermark %d at creation (log [%d, %d))", p.tp, hw, start, leo)
}

func (p *partition) applyStateLocked(bp broker.Partition) {
	p.leader, p.leaderEpoch, p.leaderAddr = bp.Leader, bp.LeaderEpoch, bp.LeaderAddr
	p.isr, p.replicas = slices.Clone(bp.ISR), slices.Clone(bp.Replicas)
	p.zkVersion, p.controllerEpoch = bp.ZkVersion, bp.ControllerEpoch
}

func (p *partition) makeLeader(bp broker.Partition) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.initLocked()
	if w, err := p.log.AssignEpoch(bp.LeaderEpoch); err != nil {
		return fmt.Errorf("%s: assign leader epoch %d: %w", p.tp, bp.LeaderEpoch, err)
	} else if w != "" {
		p.m.log.Printf("%s: %s", p.tp, w)
	}
	newLeader := p.role != history.RoleLeader
	p.applyStateLocked(bp)
	p.role = history.RoleLeader
	p.epochStart = p.log.LogEndOffset()
	now := time.Now()
	old := p.followers
	p.followers = map[int32]*remote{}
	for _, r := range p.replicas {
		if r == p.m.cfg.BrokerID {
			continue
		}
		// Partition.makeLeader → Replica.resetLastCaughtUpTime: ISR
		// members count as caught up now, others not at all; a new
		// leader does not know the followers' LEOs until they fetch,
		// one that already led keeps what it learnt.
		st := &remote{leo: -1, lastFetchLeaderLEO: p.epochStart, lastFetchTime: now}
		if o := old[r]; o != nil && !newLeader {
			st.leo = o.leo
		}
		if newLeader {
			st.lastFetchLeaderLEO, st.lastFetchTime = -1, time.Time{}
		}
		if slices.Contains(p.isr, r) {
			st.lastCaughtUp = now
		}
		p.followers[r] = st
	}
	p.maybeIncrementHWLocked()
	p.notifyLocked()
	return nil
}

func (p *partition) makeFollower(bp broker.Partition) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.initLocked()
	p.applyStateLocked(bp)
	if p.role == history.RoleLeader {
		p.leaderGen++
	}
	p.role = history.RoleFollower
	p.followers = nil
	p.notifyLocked()
}

// setHWLocked moves the high watermark and records it.
func (p *partition) setHWLocked(hw int64) {
	if hw == p.hw {
		return
	}
	old := p.hw
	p.hw = hw
	leo, lso := p.log.LogEndOffset(), p.lsoLocked()
	p.m.log.Emit(history.Event{Kind: history.KindHWAdvance, HW: &history.HWAdvance{
		Topic: p.tp.Topic, Partition: p.tp.Partition, Old: old, New: hw, LeaderEpoch: p.leaderEpoch, LEO: &leo, LSO: &lso}})
}

// maybeIncrementHWLocked is Partition.maybeIncrementLeaderHW (2.6.3): the
// HW is the smallest LEO among the leader and every follower that is in the
// ISR or was caught up within replica.lag.time.max.ms; it only moves
// forward, and a counted follower whose LEO is unknown holds it. Counting
// caught-up followers outside the ISR keeps the HW at what a follower about
// to join has.
func (p *partition) maybeIncrementHWLocked() bool {
	if p.role != history.RoleLeader || p.m.cfg.HWNeedsMinISR && len(p.isr) < p.m.cfg.MinISR {
		return false
	}
	now := time.Now()
	hw := p.log.LogEndOffset()
	// Kafka iterates the remote replicas of the assignment; an ISR member
	// outside it (which the controller never writes) counts for nothing.
	for _, id := range p.replicas {
		r := p.followers[id]
		if r == nil {
			continue
		}
		caughtUp := !r.lastCaughtUp.IsZero() && now.Sub(r.lastCaughtUp) <= p.m.cfg.LagTime
		if caughtUp || slices.Contains(p.isr, id) {
			hw = min(hw, r.leo)
		}
	}
	if hw > p.hw {
		p.setHWLocked(hw)
		p.notifyLocked()
		return true
	}
	return false
}

// updateFollowerLocked records a replica fetch at fetchOffset
// (Partition.updateFollowerFetchState → Replica.updateFetchState), may
// expand the ISR and then moves the HW.
func (p *partition) updateFollowerLocked(id int32, fetchOffset int64, now time.Time) {
	r := p.followers[id]
	if r == nil {
		return
	}
	leo := p.log.LogEndOffset()
	// lastCaughtUp is the latest time the follower had everything the
	// leader had: now if this fetch reaches our LEO, else the previous
	// fetch's time if this one reaches the LEO we had then.
	if fetchOffset >= leo {
		r.lastCaughtUp = later(r.lastCaughtUp, now)
	} else if r.lastFetchLeaderLEO >= 0 && fetchOffset >= r.lastFetchLeaderLEO {
		r.lastCaughtUp = later(r.lastCaughtUp, r.lastFetchTime)
	}
	r.lastFetchLeaderLEO, r.lastFetchTime = leo, now
	r.leo = fetchOffset
	// Partition.maybeExpandIsr: a follower at or past the HW (and past the
	// start of our epoch) rejoins. The write is made here, holding p.mu
	// (Kafka holds leaderIsrUpdateLock for writing through the ZooKeeper
	// write): nothing is appended and the HW does not move until the ISR
	// ZooKeeper names is the one the HW counts.
	if !slices.Contains(p.isr, id) && r.leo >= p.hw && r.leo >= p.epochStart {
		newISR := append(slices.Clone(p.isr), id)
		slices.Sort(newISR)
		// The event carries the fetch offset as the request did, not
		// r.leo: what the follower had is the fact to judge the decision
		// by, whatever our bookkeeping made of it.
		p.writeISRLocked(history.ISRExpand, newISR, &history.ISRJoin{Follower: id, FetchOffset: fetchOffset, HW: p.hw})
	}
	p.maybeIncrementHWLocked()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// maybeShrinkISR is Partition.maybeShrinkIsr: it drops the followers
// getOutOfSyncReplicas names, writing the new ISR while holding p.mu.
func (p *partition) maybeShrinkISR(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role != history.RoleLeader {
		return
	}
	leo := p.log.LogEndOffset()
	var keep []int32
	var out []int32
	for _, id := range p.isr {
		r := p.followers[id]
		// Partition.isFollowerOutOfSync: a follower whose LEO is the
		// leader's is in sync however long ago it fetched (nothing was
		// appended it could lag behind); otherwise it must have been
		// caught up within the lag time.
		if id != p.m.cfg.BrokerID && r != nil && r.leo != leo && now.Sub(r.lastCaughtUp) > p.m.cfg.LagTime {
			out = append(out, id)
			continue
		}
		keep = append(keep, id)
	}
	if len(out) == 0 {
		return
	}
	p.m.log.Printf("%s: shrinking ISR %v to %v (HW %d, LEO %d): %v not caught up for %s", p.tp, p.isr, keep, p.hw, leo, out, p.m.cfg.LagTime)
	p.writeISRLocked(history.ISRShrink, keep, nil)
	p.maybeIncrementHWLocked()
}

// errSessionExpired is the failure of an ISR write whose connection was
// lost and whose session had expired by the time the client reconnected.
var errSessionExpired = fmt.Errorf("zookeeper session expired while the write waited for a connection: %w", zk.ErrSessionExpired)

// setUntilConnected runs set as KafkaZkClient.conditionalUpdatePath does
// through retryRequestsUntilConnected: a CONNECTIONLOSS answer waits until
// the client is connected again (ZooKeeperClient.waitUntilConnected, without
// limit) and sends the request again, in the same session. A session that
// expired meanwhile fails the write: SESSIONEXPIRED is not resent, and
// waitUntilConnected throws once it sees the expired session (go-zookeeper
// opens the next session itself, so the expiry shows as a new session id).
// ctx ends it (the broker stopping) with an unknown outcome. Sending a
// conditional set twice in one session is safe: if the first one landed,
// the second meets BADVERSION and writeISR's read of the znode finds its own
// state there.
func setUntilConnected(ctx context.Context, store isrStore, set func() (*zk.Stat, error)) (*zk.Stat, error) {
	return untilConnected(ctx, store, set)
}

// untilConnected is retryRequestsUntilConnected for one request of the
// leader's (setUntilConnected says how).
func untilConnected[T any](ctx context.Context, store isrStore, call func() (T, error)) (T, error) {
	sid := store.sessionID()
	if sid == 0 {
		// Between an expiry and the next session: the request goes to the
		// next session once there is one.
		if err := store.waitSession(ctx); err != nil {
			var zero T
			return zero, fmt.Errorf("%w: %w", zkutil.ErrTimeout, err)
		}
		sid = store.sessionID()
	}
	for {
		v, err := call()
		switch {
		case err == nil || ctx.Err() != nil:
			return v, err
		case errors.Is(err, zk.ErrSessionExpired):
			return v, err
		case !zkutil.Retriable(err):
			return v, err
		}
		// A short pause first: go-zookeeper may still report the old
		// connection as up for a moment, and the resend must not spin.
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(50 * time.Millisecond):
		}
		if werr := store.waitSession(ctx); werr != nil {
			return v, err
		}
		if now := store.sessionID(); now != sid {
			var zero T
			return zero, errSessionExpired
		}
	}
}

// writeISRLocked is Partition.expandIsr/shrinkIsr → ZkPartitionStateStore
// (pre-2.7): a conditional write of the state znode at our cached zkVersion,
// made while holding p.mu as Kafka holds leaderIsrUpdateLock for writing;
// a successful write records the change for the next ISR change
// notification (isrnotify.go). join, for an expand, is what the leader saw
// of the joining follower when it decided.
func (p *partition) writeISRLocked(action string, newISR []int32, join *history.ISRJoin) {
	store := p.m.isrStore()
	if store == nil || p.m.ctx.Err() != nil {
		return
	}
	old := slices.Clone(p.isr)
	epoch, ctrlEpoch, ver := p.leaderEpoch, p.controllerEpoch, p.zkVersion
	ctx := p.m.ctx
	path := zkdata.PartitionStatePath(p.tp.Topic, p.tp.Partition)
	state := zkdata.PartitionState{Leader: p.m.cfg.BrokerID, LeaderEpoch: epoch, ControllerEpoch: ctrlEpoch, ISR: newISR}
	data := zkdata.EncodePartitionState(state)
	start := time.Now()
	// KafkaZkClient.conditionalUpdatePath goes through
	// retryRequestUntilConnected: a write that lost its connection is sent
	// again once the client has reconnected in the same session, however
	// long that takes, and fails if the session expired meanwhile (the
	// partition is locked all along, as Kafka holds leaderIsrUpdateLock).
	// A leader paused or cut off past its session thus keeps its ISR, and
	// its next shrink or expand is a new write, at the zkVersion it cached,
	// which a controller that moved the partition has fenced: BADVERSION.
	st, err := setUntilConnected(ctx, store, func() (*zk.Stat, error) {
		return store.set(ctx, path, data, ver)
	})
	ps := &history.PartitionState{Topic: p.tp.Topic, Partition: p.tp.Partition, Leader: p.m.cfg.BrokerID,
		LeaderEpoch: epoch, ControllerEpoch: ctrlEpoch, ISR: newISR}
	zw := history.ZKWrite{Start: start.UnixNano(), Path: path, Op: "set", ExpectedVersion: ver,
		Outcome: zkutil.Outcome(err), Data: string(data), State: ps}
	newVer := int32(-1)
	if err == nil {
		zw.NewVersion, zw.Zxid = st.Version, st.Mzxid
		newVer = st.Version
	} else {
		zw.Error = err.Error()
	}
	p.m.log.ZKWrite(zw)
	if errors.Is(err, zk.ErrBadVersion) {
		// ReplicationUtils.checkLeaderAndIsrZkData: if ZooKeeper already
		// holds exactly what we wanted (our earlier write whose answer was
		// lost), take its version; otherwise wait for the controller's
		// LeaderAndIsr. Its read (KafkaZkClient.getDataAndStat) is retried
		// until connected too, with no time limit: given up early, it
		// would leave the old ISR in memory while ZooKeeper holds the new.
		type got struct {
			d  []byte
			st *zk.Stat
		}
		g, gerr := untilConnected(ctx, store, func() (got, error) {
			d, st, err := store.get(ctx, path)
			return got{d, st}, err
		})
		d, st := g.d, g.st
		if gerr == nil && st != nil {
			if cur, derr := zkdata.DecodePartitionState(p.tp.Topic, p.tp.Partition, d); derr == nil &&
				cur.Leader == p.m.cfg.BrokerID && cur.LeaderEpoch == epoch && slices.Equal(cur.ISR, newISR) {
				newVer, err = st.Version, nil
			}
		}
		if err != nil {
			p.m.log.Printf("%s: cached zkVersion %d not equal to that in zookeeper, skip updating ISR", p.tp, ver)
		}
	}
	if err == nil {
		// ZkPartitionStateStore.updateIsr → ReplicaManager.recordIsrChange,
		// before the partition takes the new ISR: the controller hears of
		// it from the propagation task (isrnotify.go). Recorded before the
		// isr_change line, so any notification that task starts after that
		// line (or an earlier one after the write's answer) names it.
		p.m.recordISRChange(p.tp)
	}
	ic := history.ISRChange{Topic: p.tp.Topic, Partition: p.tp.Partition, Action: action, Old: old, New: newISR,
		LeaderEpoch: epoch, ZkVersion: newVer, Outcome: zkutil.Outcome(err), Join: join}
	p.m.log.Emit(history.Event{Kind: history.KindISRChange, ISR: &ic})
	if err != nil {
		return
	}
	// Partition.maybeUpdateIsrAndVersion.
	p.isr, p.zkVersion = slices.Clone(newISR), newVer
	p.notifyLocked()
}

func (p *partition) startFetcher(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := newFetcher(ctx, p, p.leader, p.leaderEpoch, p.leaderAddr)
	p.fetcher = f
	p.m.wg.Add(1)
	go func() {
		defer p.m.wg.Done()
		f.run()
	}()
}

// stopFetcher stops the partition's fetcher and waits for it, so that it
// appends nothing after a role change. Caller must not hold p.mu.
func (p *partition) stopFetcher() {
	p.mu.Lock()
	f := p.fetcher
	p.fetcher = nil
	p.mu.Unlock()
	if f != nil {
		f.stop()
	}
}
