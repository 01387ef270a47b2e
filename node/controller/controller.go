// Package controller owns the controller half of a node, modelled on
// ZooKeeper-mode Kafka's KafkaController: election by the 2.1+ Multi
// (ephemeral /controller + conditional /controller_epoch increment), the
// single-threaded event loop, the controller context (live brokers with their
// czxid epochs, assignments, partition states with cached zkVersions), the
// partition and replica state machines (new → online, offline election with
// a policy, controlled shutdown, preferred election), broker-change handling
// with bounce detection, ISR-change notifications, and per-broker send
// queues.
//
// Every controller write is fenced: Multi[CheckVersion(/controller_epoch, V),
// op]; BADVERSION on the check means another controller exists and this one
// resigns. The bug switches (config.Bug*) restore the historical behaviours.
//
// It must not touch the broker's own state (broker/) except through control
// requests on the wire, exactly as in Kafka where the controller talks to its
// own broker over the network.
package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/eventlog"
	"github.com/zkchaos/zkchaos/node/failpoint"
	"github.com/zkchaos/zkchaos/node/zkdata"
	"github.com/zkchaos/zkchaos/node/zkutil"
)

// Config is what the controller needs from the node's configuration.
type Config struct {
	BrokerID      int32
	Bugs          config.Bugs
	OfflinePolicy string
	// MinInsync is min.insync.replicas; query-leo excuses the dead members
	// of an ISR smaller than this from answering.
	MinInsync     int
	SocketTimeout time.Duration // one controller-to-broker request
	RetryBackoff  time.Duration
	// LEOQuery asks a replica for its log end offset (query-leo policy).
	// nil: every query fails, so query-leo never elects. ListOffsetsLEO is
	// the wire implementation.
	LEOQuery func(ctx context.Context, b ReplicaEndpoint, tp history.TopicPartition) (int64, error)
	// SyncBeforeRead (--proposals=zk-sync-before-read, off by default as
	// Kafka 2.6.3 has no such sync): partition-state reads are preceded by
	// a ZooKeeper Sync, so a controller's server is not behind the leader
	// when it reads. KAFKA-16667 on overrides it.
	SyncBeforeRead bool
	// OnNewSession runs on the event loop when the ZooKeeper session was
	// replaced, before re-election: the broker re-registers there, as
	// Kafka's RegisterBrokerAndReelect event does.
	OnNewSession func(ctx context.Context)
}

// ReplicaEndpoint is the endpoint handed to LEOQuery.
type ReplicaEndpoint struct {
	ID   int32
	Host string
	Port int32
}

// zkConn is the part of a ZooKeeper connection the controller uses:
// *zk.Conn, or an in-memory tree in tests.
type zkConn interface {
	zkutil.PathConn
	Get(path string) ([]byte, *zk.Stat, error)
	Children(path string) ([]string, *zk.Stat, error)
	ChildrenW(path string) ([]string, *zk.Stat, <-chan zk.Event, error)
	ExistsW(path string) (bool, *zk.Stat, <-chan zk.Event, error)
	Multi(ops ...any) ([]zk.MultiResponse, error)
	Set(path string, data []byte, version int32) (*zk.Stat, error)
	Sync(path string) (string, error)
}

// zkDo issues one controller request as KafkaZkClient does: re-issued
// after every connection loss until the session is back, abandoned (an
// error wrapping zk.ErrSessionExpired) if the session expired first. With
// KAFKA-532 on, it retries across sessions as the 0.8 controller's ZkClient
// did, so a resumed zombie goes on with its work on its new session.
func zkDo[T any](ctx context.Context, c *Controller, fn func(conn zkConn) (T, error)) (T, int, error) {
	return zkutil.UntilConnected(ctx, c.zk, c.cfg.Bugs.On(config.BugKafka532), func(conn zkConn, _ int) (T, error) { return fn(conn) })
}

// errControllerMoved is returned by a fenced write whose epoch check failed.
var errControllerMoved = errors.New("controller moved")

type partState struct {
	st  zkdata.PartitionState
	ver int32 // cached zkVersion of the state znode
}

// cctx is the ControllerContext: valid only while active, owned by the event
// loop.
type cctx struct {
	live         map[int32]brokerInfo
	shuttingDown map[int32]bool
	assign       map[history.TopicPartition][]int32
	state        map[history.TopicPartition]*partState
	topics       map[string]bool
	// offline holds the partitions in PartitionStateMachine's
	// OfflinePartition state: marked when their leader is not online at a
	// broker failure or at failover, cleared when a write gives them a
	// live leader. triggerOnlinePartitionStateChange elects these (and the
	// new ones, which have no state yet).
	offline map[history.TopicPartition]bool
	// del is the topic deletions under way (deletion.go).
	del deletions
	// reassigning is partitionsBeingReassigned with each one's
	// reassignment (reassign.go); reassignWatched holds those whose state
	// znode has a watch outstanding.
	reassigning     map[history.TopicPartition]*reassignment
	reassignWatched map[history.TopicPartition]bool
}

func newContext() *cctx {
	return &cctx{live: map[int32]brokerInfo{}, shuttingDown: map[int32]bool{},
		assign: map[history.TopicPartition][]int32{}, state: map[history.TopicPartition]*partState{}, topics: map[string]bool{},
		offline: map[history.TopicPartition]bool{}, del: newDeletions(),
		reassigning: map[history.TopicPartition]*reassignment{}, reassignWatched: map[history.TopicPartition]bool{}}
}

// markOffline moves every partition whose leader is not online (dead,
// shutting down, or -1) to the Offline state, as
// KafkaController.onReplicasBecomeOffline and
// PartitionStateMachine.initializePartitionState do with isReplicaOnline;
// a topic queued for deletion is left out, as both leave it out.
func (x *cctx) markOffline() {
	for tp, ps := range x.state {
		if ps != nil && !x.isLive(ps.st.Leader) && !x.queuedTP(tp) {
			x.offline[tp] = true
		}
	}
}

func (x *cctx) isLive(id int32) bool { _, ok := x.live[id]; return ok && !x.shuttingDown[id] }

func (x *cctx) sortedTPs() []history.TopicPartition {
	out := make([]history.TopicPartition, 0, len(x.assign))
	for tp := range x.assign {
		out = append(out, tp)
	}
	sortTPs(out)
	return out
}

func sortTPs(tps []history.TopicPartition) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
}

// Controller runs the election and, while elected, the controller logic.
type Controller struct {
	cfg Config
	zk  zkConn
	log *eventlog.Log
	fp  *failpoint.Registry

	events *queue[event]
	stop   chan struct{}
	done   chan struct{}

	// Owned by the event loop.
	active         bool
	epoch          int32
	epochZkVersion int32
	sessionID      int64 // session the current run (or election attempt) used
	gen            int   // bumped on every failover and resignation; stale watches compare it
	ctx            *cctx
	chans          *channelManager
	// newChans makes a failover's channel manager (newChannelManager;
	// tests replace it).
	newChans func(*Controller) *channelManager

	statusMu sync.Mutex
	status   Status

	// A /controller watch is outstanding for session cwSession, so
	// repeated elections do not stack duplicate watches.
	cwMu      sync.Mutex
	cwPending bool
	cwSession int64
}

// Status is a snapshot for the admin endpoint and tests.
type Status struct {
	Active         bool                     `json:"active"`
	ControllerID   int32                    `json:"controller_id"` // last known active controller, -1 if none
	Epoch          int32                    `json:"epoch"`
	EpochZkVersion int32                    `json:"epoch_zk_version"`
	LiveBrokers    map[int32]int64          `json:"live_brokers,omitempty"` // id → broker epoch
	Partitions     []history.PartitionState `json:"partitions,omitempty"`
	Bounces        int                      `json:"bounces_detected"`
	QueuedEvents   int                      `json:"queued_events"`
}

type event interface{ name() string }

type (
	evElect            struct{ reason string }
	evControllerChange struct{}
	evBrokerChange     struct{ gen int }
	evTopicChange      struct{ gen int }
	evISRChange        struct{ gen int }
	evPreferred        struct{ gen int }
	evReassign         struct{ gen int }
	evTopicDeletion    struct{ gen int }
	// evDeletionResponse is TopicDeletionStopReplicaResponseReceived: a
	// broker's answer to a StopReplica that deleted partitions, sent by
	// the send queues of controller generation gen.
	evDeletionResponse struct {
		gen          int
		broker       int32
		requestError int16
		partitions   []deletionAnswer
	}
	evNewSession struct{ id int64 }
	// evExpire is KafkaController's Expire; processed is closed once the
	// controller has resigned.
	evExpire   struct{ processed chan struct{} }
	evShutdown struct {
		id    int32
		epoch int64
		corr  int32
		reply chan *kmsg.ControlledShutdownResponse
	}
)

func (evElect) name() string            { return "Startup/Reelect" }
func (evControllerChange) name() string { return "ControllerChange" }
func (evBrokerChange) name() string     { return "BrokerChange" }
func (evTopicChange) name() string      { return "TopicChange" }
func (evISRChange) name() string        { return "IsrChangeNotification" }
func (evPreferred) name() string        { return "PreferredReplicaLeaderElection" }
func (evReassign) name() string         { return "PartitionReassignment" }
func (evTopicDeletion) name() string    { return "TopicDeletion" }
func (evDeletionResponse) name() string { return "TopicDeletionStopReplicaResponseReceived" }
func (evNewSession) name() string       { return "RegisterBrokerAndReelect" }
func (evExpire) name() string           { return "Expire" }
func (evShutdown) name() string         { return "ControlledShutdown" }

// generation is the controller generation a watch-driven event was armed
// in; process drops it if the controller failed over or resigned since.
type generation interface{ generation() int }

func (e evBrokerChange) generation() int     { return e.gen }
func (e evTopicChange) generation() int      { return e.gen }
func (e evISRChange) generation() int        { return e.gen }
func (e evPreferred) generation() int        { return e.gen }
func (e evReassign) generation() int         { return e.gen }
func (e evTopicDeletion) generation() int    { return e.gen }
func (e evDeletionResponse) generation() int { return e.gen }

// New returns a controller; Run starts it.
func New(cfg Config, sess *zkutil.Session, log *eventlog.Log, fp *failpoint.Registry) *Controller {
	if cfg.SocketTimeout == 0 {
		cfg.SocketTimeout = 5 * time.Second
	}
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = 200 * time.Millisecond
	}
	c := &Controller{cfg: cfg, zk: sess.Conn, log: log, fp: fp, events: newQueue[event](),
		stop: make(chan struct{}), done: make(chan struct{}), epoch: 0, newChans: newChannelManager}
	c.status.ControllerID = -1
	return c
}

// Status returns the last published snapshot.
func (c *Controller) Status() Status {
	c.statusMu.Lock()
	defer c.statusMu.Unlock()
	s := c.status
	s.QueuedEvents = c.events.len()
	return s
}

// NewSession tells the controller the ZooKeeper session changed (expiry and
// re-establishment): watches and ephemerals of the old one are gone. It is
// StateChangeHandler.afterInitializingSession (RegisterBrokerAndReelect).
func (c *Controller) NewSession(id int64) { c.events.push(evNewSession{id}) }

// SessionExpired is KafkaController's
// StateChangeHandler.beforeInitializingSession, called when the client
// finds its session expired and before it makes a new one: the queued
// events are dropped (ControllerEventManager.clearAndPut(Expire)), a
// dropped ControlledShutdown is answered STALE_CONTROLLER_EPOCH (its
// preempt's ControllerMovedException), and
// the call returns once the Expire event has resigned the controller, or
// the controller stopped. The caller holds the new session back meanwhile,
// as ZooKeeperClient.reinitialize waits for the handler: so the controller
// never acts on the new session under its old epoch, and the event running
// now ends at its next ZooKeeper request (zkutil.UntilConnected).
//
// With KAFKA-532 on it does nothing: the 0.8 controller learned of an
// expiry only in handleNewSession, after the new session existed, and
// went on with its queued work meanwhile (NewSession still resigns then).
func (c *Controller) SessionExpired() {
	if c.cfg.Bugs.On(config.BugKafka532) {
		return
	}
	processed := make(chan struct{})
	epoch := c.Status().Epoch
	for _, ev := range c.events.clearAndPut(evExpire{processed: processed}) {
		if sd, ok := ev.(evShutdown); ok {
			c.preemptShutdown(sd, epoch)
		}
	}
	select {
	case <-processed:
	case <-c.done:
	case <-c.stop:
	}
}

// Run elects and serves until ctx ends; then it resigns (deleting nothing:
// closing the session removes /controller).
func (c *Controller) Run(ctx context.Context) {
	defer close(c.done)
	c.events.push(evElect{reason: "startup"})
	for {
		ev, ok := c.events.pop()
		if !ok {
			select {
			case <-ctx.Done():
				if c.active {
					c.resign("shutdown")
				}
				return
			case <-c.events.wake:
				continue
			}
		}
		if ctx.Err() != nil {
			if c.active {
				c.resign("shutdown")
			}
			return
		}
		c.process(ctx, ev)
		c.publish()
	}
}

// Done is closed when Run returned.
func (c *Controller) Done() <-chan struct{} { return c.done }

func (c *Controller) process(ctx context.Context, ev event) {
	if g, ok := ev.(generation); ok && g.generation() != c.gen {
		return
	}
	var err error
	switch e := ev.(type) {
	case evElect:
		c.elect(ctx, e.reason)
	case evExpire:
		// processExpire: resign whether or not this broker was the
		// controller; the new session's RegisterBrokerAndReelect
		// (evNewSession) registers and elects again.
		c.resign("session expired")
		c.setKnownController(-1)
		close(e.processed)
	case evNewSession:
		// RegisterBrokerAndReelect: our ephemerals died with the old
		// session, so the broker registers again (new czxid) and the
		// controller, if it was one, is not any more.
		if c.cfg.OnNewSession != nil {
			c.cfg.OnNewSession(ctx)
		}
		if c.active && c.sessionID != e.id {
			c.resign("session expired")
		}
		if !c.active {
			c.elect(ctx, "new zookeeper session")
		}
	case evControllerChange:
		// ControllerChange and Reelect: resign if /controller is no
		// longer ours, elect if it is gone.
		id, _ := c.readController(ctx)
		if c.active && id != c.cfg.BrokerID {
			c.resign("controller moved (/controller changed)")
		}
		if !c.active {
			c.elect(ctx, "/controller changed")
		}
	case evBrokerChange:
		err = c.onBrokerChange(ctx)
	case evTopicChange:
		err = c.onTopicChange(ctx)
	case evISRChange:
		err = c.onISRChange(ctx)
	case evPreferred:
		err = c.onPreferredElection(ctx)
	case evReassign:
		err = c.onReassignment(ctx)
	case evReassignISR:
		err = c.onReassignISR(ctx, e.tp)
	case evTopicDeletion:
		err = c.onTopicDeletion(ctx)
	case evDeletionResponse:
		err = c.onDeletionResponse(ctx, e)
	case evShutdown:
		resp := c.onControlledShutdown(ctx, e)
		e.reply <- resp
	}
	if errors.Is(err, errControllerMoved) {
		c.resign("controller moved (epoch zkVersion check failed)")
		c.elect(ctx, "after controller moved")
	} else if err != nil {
		c.log.Printf("controller: %s failed: %v", ev.name(), err)
	}
}

func (c *Controller) publish() {
	s := Status{Active: c.active, Epoch: c.epoch, EpochZkVersion: c.epochZkVersion}
	c.statusMu.Lock()
	s.ControllerID = c.status.ControllerID
	s.Bounces = c.status.Bounces
	c.statusMu.Unlock()
	if c.active {
		s.ControllerID = c.cfg.BrokerID
		s.LiveBrokers = map[int32]int64{}
		for id, b := range c.ctx.live {
			s.LiveBrokers[id] = b.Epoch
		}
		for _, tp := range c.ctx.sortedTPs() {
			if ps := c.ctx.state[tp]; ps != nil {
				s.Partitions = append(s.Partitions, history.PartitionState{Topic: tp.Topic, Partition: tp.Partition,
					Leader: ps.st.Leader, LeaderEpoch: ps.st.LeaderEpoch, ControllerEpoch: ps.st.ControllerEpoch,
					ISR: ps.st.ISR, Replicas: c.ctx.assign[tp]})
			}
		}
	}
	c.statusMu.Lock()
	c.status = s
	c.statusMu.Unlock()
}

func (c *Controller) setKnownController(id int32) {
	c.statusMu.Lock()
	c.status.ControllerID = id
	c.statusMu.Unlock()
}

// ---- election ---------------------------------------------------------

func (c *Controller) readController(ctx context.Context) (int32, error) {
	data, _, err := zkDo(ctx, c, func(conn zkConn) ([]byte, error) {
		d, _, err := conn.Get(zkdata.ControllerPath)
		return d, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return -1, nil
	}
	if err != nil {
		return -1, err
	}
	id, err := zkdata.DecodeController(data)
	if err != nil {
		c.log.Printf("malformed %s: %v", zkdata.ControllerPath, err)
	}
	return id, err
}

// watchController sets an exists-watch on /controller (ControllerChangeHandler).
func (c *Controller) watchController(ctx context.Context) {
	sid := c.zk.SessionID()
	c.cwMu.Lock()
	if c.cwPending && c.cwSession == sid {
		c.cwMu.Unlock()
		return
	}
	c.cwPending, c.cwSession = true, sid
	c.cwMu.Unlock()
	unset := func() {
		c.cwMu.Lock()
		if c.cwSession == sid {
			c.cwPending = false
		}
		c.cwMu.Unlock()
	}
	_, _, ch, err := c.existsW(ctx, zkdata.ControllerPath)
	if err != nil {
		unset()
		c.log.Printf("watch %s: %v (will retry on the next session event)", zkdata.ControllerPath, err)
		return
	}
	go func() {
		select {
		case ev := <-ch:
			unset()
			if ev.Type != zk.EventNotWatching {
				c.events.push(evControllerChange{})
			}
		case <-c.stop:
		}
	}()
}

func (c *Controller) existsW(ctx context.Context, path string) (bool, *zk.Stat, <-chan zk.Event, error) {
	type r struct {
		ok bool
		st *zk.Stat
		ch <-chan zk.Event
	}
	v, _, err := zkDo(ctx, c, func(conn zkConn) (r, error) {
		ok, st, ch, err := conn.ExistsW(path)
		return r{ok, st, ch}, err
	})
	return v.ok, v.st, v.ch, err
}

// waitWatch turns a one-shot watch into an event. A watch that ends because
// the session ended (EventNotWatching) is dropped: the new session's
// re-election re-registers every watch.
func (c *Controller) waitWatch(ch <-chan zk.Event, mk func() event) {
	if ch == nil {
		return
	}
	go func() {
		select {
		case ev := <-ch:
			if ev.Type == zk.EventNotWatching {
				return
			}
			c.events.push(mk())
		case <-c.stop:
		}
	}()
}

// elect runs KafkaController.elect: if no controller exists, try the 2.1+
// Multi; either way leave a watch on /controller.
func (c *Controller) elect(ctx context.Context, reason string) {
	c.sessionID = c.zk.SessionID()
	defer c.watchController(ctx)
	if err := c.fp.Eval(ctx, failpoint.ControllerBeforeElect); err != nil {
		// An injected error is an election attempt that failed before
		// reading /controller; the watch set below brings the next one.
		c.log.Printf("elect (%s): %v", reason, err)
		return
	}
	id, err := c.readController(ctx)
	if err != nil && !errors.Is(err, zk.ErrNoNode) && id == -1 {
		c.log.Printf("elect (%s): read %s: %v", reason, zkdata.ControllerPath, err)
		return
	}
	if id != -1 {
		c.setKnownController(id)
		return
	}
	epoch, ver, zxid, err := c.registerAndIncrementEpoch(ctx)
	if err != nil {
		c.log.Printf("elect (%s): lost or failed: %v", reason, err)
		if id, err := c.readController(ctx); err == nil {
			c.setKnownController(id)
		}
		return
	}
	c.active, c.epoch, c.epochZkVersion = true, epoch, ver
	c.setKnownController(c.cfg.BrokerID)
	c.log.Emit(history.Event{Kind: history.KindControllerElected, Controller: &history.ControllerRun{Epoch: epoch, EpochZkVersion: ver, Zxid: zxid, Reason: reason}})
	if err := c.fp.Eval(ctx, failpoint.ControllerAfterElected); err != nil {
		// Nothing here can fail: an injected error only delays, like a
		// pause, and the failover goes on.
		c.log.Printf("elected: %v", err)
	}
	if err := c.onControllerFailover(ctx); err != nil {
		if errors.Is(err, errControllerMoved) {
			c.resign("controller moved during failover")
			return
		}
		// KafkaController.elect: any other error from onControllerFailover
		// triggers a controller move, so no controller stays active with a
		// half-loaded context.
		c.log.Printf("failover: %v; triggering a controller move", err)
		c.triggerControllerMove(ctx, "failover failed")
	}
}

// triggerControllerMove is KafkaController.triggerControllerMove: resign,
// then delete /controller under the epoch fence
// (KafkaZkClient.deleteController), so that the /controller watches elect
// again. A failed fence means another controller was already elected.
func (c *Controller) triggerControllerMove(ctx context.Context, reason string) {
	if !c.active {
		return
	}
	epoch, ver := c.epoch, c.epochZkVersion
	c.resign(reason)
	start := time.Now()
	_, err := c.fenced(ctx, &zk.DeleteRequest{Path: zkdata.ControllerPath, Version: -1})
	c.logWrite(start, zkdata.ControllerPath, "delete", !c.cfg.Bugs.On(config.BugKafka532), -1, "", nil, err, epoch, ver)
	switch {
	case err == nil, errors.Is(err, zk.ErrNoNode):
	case errors.Is(err, errControllerMoved):
		c.log.Printf("controller has already moved when trying to trigger controller movement")
	default:
		c.log.Printf("trigger controller move: delete %s: %v", zkdata.ControllerPath, err)
	}
}

// registerAndIncrementEpoch is KafkaZkClient.registerControllerAndIncrementControllerEpoch.
// It returns the new epoch, its zkVersion and the mzxid of /controller_epoch
// (0 if unknown), which orders the election among ZooKeeper writes.
func (c *Controller) registerAndIncrementEpoch(ctx context.Context) (int32, int32, int64, error) {
	epoch, ver, err := c.readEpoch(ctx)
	if errors.Is(err, zk.ErrNoNode) {
		// First controller ever: create /controller_epoch = 0.
		start := time.Now()
		_, _, cerr := zkDo(ctx, c, func(conn zkConn) (string, error) {
			return conn.Create(zkdata.ControllerEpochPath, zkdata.EncodeControllerEpoch(0), 0, zk.WorldACL(zk.PermAll))
		})
		c.logWrite(start, zkdata.ControllerEpochPath, "create", false, -1, "0", nil, cerr, 0, 0)
		if cerr != nil && !errors.Is(cerr, zk.ErrNodeExists) {
			return 0, 0, 0, fmt.Errorf("create %s: %w", zkdata.ControllerEpochPath, cerr)
		}
		epoch, ver, err = c.readEpoch(ctx)
	}
	if err != nil {
		return 0, 0, 0, err
	}
	newEpoch := epoch + 1
	ctrlData := zkdata.EncodeController(c.cfg.BrokerID, time.Now())
	if c.cfg.Bugs.On(config.BugKafka532) {
		// Pre-fix: separate, unguarded steps.
		start := time.Now()
		_, _, err := zkDo(ctx, c, func(conn zkConn) (string, error) {
			return conn.Create(zkdata.ControllerPath, ctrlData, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		})
		c.logWrite(start, zkdata.ControllerPath, "create", false, -1, string(ctrlData), nil, err, newEpoch, -1)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("create %s: %w", zkdata.ControllerPath, err)
		}
		start = time.Now()
		st, _, err := zkDo(ctx, c, func(conn zkConn) (*zk.Stat, error) {
			return conn.Set(zkdata.ControllerEpochPath, zkdata.EncodeControllerEpoch(newEpoch), -1)
		})
		c.logWrite(start, zkdata.ControllerEpochPath, "set", false, -1, fmt.Sprint(newEpoch), st, err, newEpoch, -1)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("set %s: %w", zkdata.ControllerEpochPath, err)
		}
		return newEpoch, st.Version, st.Mzxid, nil
	}
	start := time.Now()
	res, _, err := zkDo(ctx, c, func(conn zkConn) ([]zk.MultiResponse, error) {
		return conn.Multi(
			&zk.CreateRequest{Path: zkdata.ControllerPath, Data: ctrlData, Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagEphemeral},
			&zk.SetDataRequest{Path: zkdata.ControllerEpochPath, Data: zkdata.EncodeControllerEpoch(newEpoch), Version: ver},
		)
	})
	_, ferr := zkutil.MultiFailure(res, err)
	var st *zk.Stat
	if ferr == nil && len(res) == 2 {
		st = res[1].Stat
	}
	c.logWrite(start, zkdata.ControllerEpochPath, "multi", true, ver, fmt.Sprint(newEpoch), st, ferr, newEpoch, ver)
	if ferr == nil && st != nil {
		return newEpoch, st.Version, st.Mzxid, nil
	}
	if errors.Is(ferr, zk.ErrNodeExists) || errors.Is(ferr, zk.ErrBadVersion) || zkutil.Retriable(ferr) || errors.Is(ferr, zkutil.ErrTimeout) {
		// A retried Multi may have succeeded the first time: we won only
		// if /controller names us and the epoch is the one we wrote.
		id, _ := c.readController(ctx)
		e2, v2, err2 := c.readEpoch(ctx)
		if err2 == nil && id == c.cfg.BrokerID && e2 == newEpoch {
			return newEpoch, v2, 0, nil
		}
		return 0, 0, 0, fmt.Errorf("controller election: %w (now /controller=%d, epoch %d)", ferr, id, e2)
	}
	return 0, 0, 0, fmt.Errorf("controller election: %w", ferr)
}

func (c *Controller) readEpoch(ctx context.Context) (int32, int32, error) {
	type r struct {
		d  []byte
		st *zk.Stat
	}
	v, _, err := zkDo(ctx, c, func(conn zkConn) (r, error) {
		d, st, err := conn.Get(zkdata.ControllerEpochPath)
		return r{d, st}, err
	})
	if err != nil {
		return 0, 0, err
	}
	e, err := zkdata.DecodeControllerEpoch(v.d)
	if err != nil {
		return 0, 0, err
	}
	return e, v.st.Version, nil
}

// resign is onControllerResignation.
func (c *Controller) resign(reason string) {
	if !c.active {
		return
	}
	c.active = false
	c.gen++
	if c.chans != nil {
		c.chans.shutdown()
		c.chans = nil
	}
	c.ctx = nil
	c.log.Emit(history.Event{Kind: history.KindControllerResigned, Controller: &history.ControllerRun{Epoch: c.epoch, EpochZkVersion: c.epochZkVersion, Reason: reason}})
	c.setKnownController(-1)
}

// ---- fenced writes ------------------------------------------------------

func (c *Controller) logWrite(start time.Time, path, op string, conditional bool, expected int32, data string, st *zk.Stat, err error, epoch, epochVer int32) {
	w := history.ZKWrite{Start: start.UnixNano(), Path: path, Op: op, Conditional: conditional,
		ControllerEpoch: epoch, EpochZkVersion: epochVer, ExpectedVersion: expected,
		Outcome: zkutil.Outcome(err), Data: data}
	if st != nil {
		w.NewVersion, w.Zxid = st.Version, st.Mzxid
	}
	if err != nil {
		w.Error = err.Error()
	}
	c.log.ZKWrite(w)
}

// fenced runs op guarded by CheckVersion(/controller_epoch) (or unguarded
// with KAFKA-532). It returns the op's result, errControllerMoved when the
// check failed, or the op's own error.
func (c *Controller) fenced(ctx context.Context, op any) (zk.MultiResponse, error) {
	if c.cfg.Bugs.On(config.BugKafka532) {
		res, _, err := zkDo(ctx, c, func(conn zkConn) ([]zk.MultiResponse, error) {
			return conn.Multi(op)
		})
		_, ferr := zkutil.MultiFailure(res, err)
		if ferr != nil || len(res) != 1 {
			if ferr == nil {
				ferr = errors.New("empty multi response")
			}
			return zk.MultiResponse{}, ferr
		}
		return res[0], nil
	}
	res, _, err := zkDo(ctx, c, func(conn zkConn) ([]zk.MultiResponse, error) {
		return conn.Multi(&zk.CheckVersionRequest{Path: zkdata.ControllerEpochPath, Version: c.epochZkVersion}, op)
	})
	i, ferr := zkutil.MultiFailure(res, err)
	switch {
	case ferr == nil && len(res) == 2:
		return res[1], nil
	case ferr == nil:
		return zk.MultiResponse{}, errors.New("short multi response")
	case i == 0 && (errors.Is(ferr, zk.ErrBadVersion) || errors.Is(ferr, zk.ErrNoNode)):
		return zk.MultiResponse{}, fmt.Errorf("%w: %w", errControllerMoved, ferr)
	default:
		return zk.MultiResponse{}, ferr
	}
}

// writeState writes one partition state conditionally on its cached
// zkVersion (or unconditionally with KAFKA-532), logging the write.
func (c *Controller) writeState(ctx context.Context, tp history.TopicPartition, st zkdata.PartitionState, expected int32, attempt int) (int32, error) {
	path := zkdata.PartitionStatePath(tp.Topic, tp.Partition)
	data := zkdata.EncodePartitionState(st)
	if c.cfg.Bugs.On(config.BugKafka532) {
		expected = -1
	}
	start := time.Now()
	res, err := c.fenced(ctx, &zk.SetDataRequest{Path: path, Data: data, Version: expected})
	hs := toHistoryState(tp, st, c.ctx.assign[tp])
	w := history.ZKWrite{Start: start.UnixNano(), Path: path, Op: "set", Conditional: !c.cfg.Bugs.On(config.BugKafka532),
		ControllerEpoch: c.epoch, EpochZkVersion: c.epochZkVersion, ExpectedVersion: expected,
		Outcome: zkutil.Outcome(err), State: &hs, Attempt: attempt}
	if errors.Is(err, errControllerMoved) {
		w.Outcome = history.ZKBadVersion
	}
	if err != nil {
		w.Error = err.Error()
	} else if res.Stat != nil {
		w.NewVersion, w.Zxid = res.Stat.Version, res.Stat.Mzxid
	}
	c.log.ZKWrite(w)
	if err != nil {
		return 0, err
	}
	if res.Stat == nil {
		return 0, errors.New("set without stat")
	}
	return res.Stat.Version, nil
}

func toHistoryState(tp history.TopicPartition, st zkdata.PartitionState, replicas []int32) history.PartitionState {
	return history.PartitionState{Topic: tp.Topic, Partition: tp.Partition, Leader: st.Leader, LeaderEpoch: st.LeaderEpoch,
		ControllerEpoch: st.ControllerEpoch, ISR: slices.Clone(st.ISR), Replicas: slices.Clone(replicas)}
}

// readState reads a partition state znode as
// KafkaZkClient.getTopicPartitionStatesRaw does: served by the session's
// server, which may be behind the ZooKeeper leader. With SyncBeforeRead (and
// KAFKA-16667 off) a Sync first brings that server up to date.
func (c *Controller) readState(ctx context.Context, tp history.TopicPartition) (*partState, error) {
	path := zkdata.PartitionStatePath(tp.Topic, tp.Partition)
	if c.cfg.SyncBeforeRead && !c.cfg.Bugs.On(config.BugKafka16667) {
		if _, _, err := zkDo(ctx, c, func(conn zkConn) (string, error) {
			return conn.Sync(path)
		}); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return nil, fmt.Errorf("sync %s: %w", path, err)
		}
	}
	d, zst, err := c.get(ctx, path)
	if err != nil {
		return nil, err
	}
	st, err := zkdata.DecodePartitionState(tp.Topic, tp.Partition, d)
	if err != nil {
		return nil, err
	}
	return &partState{st: st, ver: zst.Version}, nil
}

// decide computes a partition's new state from its current one; ok=false
// means no change.
type decide func(cur zkdata.PartitionState) (next zkdata.PartitionState, ok bool)

// updateStates writes the decisions for tps, as
// PartitionStateMachine/ReplicaStateMachine do through updateLeaderAndIsr.
// It returns the partitions whose new state is in ZooKeeper. A failed epoch
// check aborts everything with errControllerMoved.
//
// Each round decides on a fresh read of the state znode and writes at the
// zkVersion read, as PartitionStateMachine.doElectLeaderForPartitions
// (getTopicPartitionStatesRaw) and ReplicaStateMachine.doRemoveReplicasFromIsr
// (getTopicPartitionStatesFromZk) do: a leader's ISR change is in
// ZooKeeper before its notice reaches the controller, and a decision the
// cache would call unneeded may be needed. BADVERSION sends the partition
// round again, without limit (electLeaderForPartitions); a re-issued write
// whose first attempt landed meets BADVERSION too, and the next round
// decides again on what it wrote (one more leader epoch), as Kafka does.
// The bug switches keep the cached decision: KAFKA-16667's mechanism is the
// cached zkVersion, and KAFKA-532's zombie acts on what it cached.
func (c *Controller) updateStates(ctx context.Context, tps []history.TopicPartition, fn decide) ([]history.TopicPartition, error) {
	if c.cfg.Bugs.On(config.BugKafka532) || c.cfg.Bugs.On(config.BugKafka16667) {
		return c.updateCachedStates(ctx, tps, fn)
	}
	var done []history.TopicPartition
	for _, tp := range tps {
		ps := c.ctx.state[tp]
		if ps == nil {
			continue
		}
		for attempt := 1; ; attempt++ {
			if ctx.Err() != nil {
				return done, ctx.Err()
			}
			// doElectLeaderForPartitions: a failed read fails the
			// partition's election without a retry.
			read, err := c.refreshState(ctx, tp, ps, "read state of %s: %v")
			if err != nil {
				return done, err
			}
			if !read {
				break
			}
			if ps.st.ControllerEpoch > c.epoch {
				// The path was already written by a newer controller;
				// this one is a zombie for that partition.
				c.log.Printf("aborted state change of %s: written by controller epoch %d > ours %d", tp, ps.st.ControllerEpoch, c.epoch)
				break
			}
			next, ok := fn(ps.st)
			if !ok {
				break
			}
			next.ControllerEpoch = c.epoch
			written, badVersion, err := c.tryWriteState(ctx, tp, ps, next, attempt)
			if err != nil {
				return done, err
			}
			if written {
				done = append(done, tp)
			}
			if !badVersion {
				break
			}
		}
	}
	return done, nil
}

// updateCachedStates is updateStates as the bug switches have it: the
// first decision is made on the cached state at the cached zkVersion.
// With KAFKA-16667 a BADVERSION retries that version forever; otherwise
// (KAFKA-532, whose writes are unconditional) a BADVERSION re-reads and
// decides again.
func (c *Controller) updateCachedStates(ctx context.Context, tps []history.TopicPartition, fn decide) ([]history.TopicPartition, error) {
	var done []history.TopicPartition
	for _, tp := range tps {
		ps := c.ctx.state[tp]
		if ps == nil {
			continue
		}
		if !c.cfg.Bugs.On(config.BugKafka532) && ps.st.ControllerEpoch > c.epoch {
			c.log.Printf("aborted state change of %s: written by controller epoch %d > ours %d", tp, ps.st.ControllerEpoch, c.epoch)
			continue
		}
		next, ok := fn(ps.st)
		if !ok {
			continue
		}
		next.ControllerEpoch = c.epoch
		for attempt := 1; ; attempt++ {
			written, badVersion, err := c.tryWriteState(ctx, tp, ps, next, attempt)
			if err != nil {
				return done, err
			}
			if written {
				done = append(done, tp)
			}
			if !badVersion {
				break
			}
			if c.cfg.Bugs.On(config.BugKafka16667) {
				// The bug: trust the cached zkVersion and retry forever.
				select {
				case <-ctx.Done():
					return done, ctx.Err()
				case <-c.stop:
					return done, errors.New("stopping")
				case <-time.After(500 * time.Millisecond):
				}
				continue
			}
			read, rerr := c.refreshState(ctx, tp, ps, "re-read %s after BADVERSION: %v")
			if rerr != nil {
				return done, rerr
			}
			if !read {
				break
			}
			if stateEqual(ps.st, next) {
				// A write re-issued after a lost connection whose first
				// attempt landed: ZooKeeper holds our decision.
				done = append(done, tp)
				break
			}
			if next, ok = fn(ps.st); !ok {
				break
			}
			next.ControllerEpoch = c.epoch
			if ctx.Err() != nil {
				return done, ctx.Err()
			}
		}
	}
	return done, nil
}

// refreshState reads tp's state into ps for the state-change loops. An
// expired session is returned: it abandons the whole event, as
// ZooKeeperClientExpiredException does in Kafka. Any other failure is
// logged with logFormat (the partition and the error) and gives the
// partition up: read is false.
func (c *Controller) refreshState(ctx context.Context, tp history.TopicPartition, ps *partState, logFormat string) (read bool, err error) {
	fresh, err := c.readState(ctx, tp)
	if errors.Is(err, zk.ErrSessionExpired) {
		return false, err
	}
	if err != nil {
		c.log.Printf(logFormat, tp, err)
		return false, nil
	}
	*ps = *fresh
	return true, nil
}

// tryWriteState is one attempt of the state-change loops' write of next
// over ps: written (ps takes it), BADVERSION (the loop decides what to
// retry), an error that abandons the whole event (the controller moved,
// the session expired), or any other failure, which gives the partition
// up, logged.
func (c *Controller) tryWriteState(ctx context.Context, tp history.TopicPartition, ps *partState, next zkdata.PartitionState, attempt int) (written, badVersion bool, err error) {
	ver, err := c.writeState(ctx, tp, next, ps.ver, attempt)
	switch {
	case err == nil:
		ps.st, ps.ver = next, ver
		return true, false, nil
	case errors.Is(err, errControllerMoved) || errors.Is(err, zk.ErrSessionExpired):
		return false, false, err
	case !errors.Is(err, zk.ErrBadVersion):
		c.log.Printf("write state %s: %v", tp, err)
		return false, false, nil
	}
	return false, true, nil
}

func stateEqual(a, b zkdata.PartitionState) bool {
	return a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch && a.ControllerEpoch == b.ControllerEpoch && slices.Equal(a.ISR, b.ISR)
}
