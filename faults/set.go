package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/ctxsleep"
	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/zklayout"
)

// Partitions reads the workload topic's partitions from ZooKeeper: the
// leader and follower roles a failpoint is armed on, the partition
// kill-lagging-leader cuts, the ISR shrink failover-on-lagging-zk waits
// for.
type Partitions interface {
	// WorkloadTopic names the topic whose partitions give the leader and
	// follower roles.
	WorkloadTopic() (topic string, partitions int32)
	// PartitionISR returns a partition's leader and ISR from its state znode.
	PartitionISR(ctx context.Context, topic string, partition int32) (leader int, isr []int, err error)
	// PartitionReplicas returns topic's replica assignment
	// (/brokers/topics/<topic>): each partition's replicas, the first its
	// preferred replica.
	PartitionReplicas(ctx context.Context, topic string) (map[int32][]int, error)
}

// Failpoints is the node program's failpoints as the harness reaches them:
// its admin port (arm, disarm), its data directory (arm for the next start)
// and its event log (did it reach the window).
type Failpoints interface {
	ArmFailpoint(ctx context.Context, node int, name, action string) error
	DisarmFailpoint(ctx context.Context, node int, name string) error
	// ArmAtStart arms a failpoint for node's next process start only
	// (node/failpoint.OnceFile in its data directory); the node must be
	// down.
	ArmAtStart(ctx context.Context, node int, name, action string) error
	// FailpointReached reports whether node's event log has the fault_start
	// of failpoint name at or after since.
	FailpointReached(ctx context.Context, node int, name string, since time.Time) (bool, error)
	// ReleaseFailpoint lets whatever holds in failpoint name on node go on
	// and leaves it armed for the firings its count has left.
	ReleaseFailpoint(ctx context.Context, node int, name string) error
	// StateWritesBefore returns the partition states node wrote to
	// ZooKeeper (as its event log has them) at or after since and before
	// its latest firing of failpoint name.
	StateWritesBefore(ctx context.Context, node int, name string, since time.Time) ([]history.PartitionState, error)
}

// Leaders reads which broker leads each partition now, by every topic's
// state znode: the failpoint fault asks it before its provocation stops a
// broker, to tell, when the controller then holds after a write, whether
// that write removed the broker from the ISR of a partition another broker
// leads (the write the leaders' shrink races) or did something else.
type Leaders interface {
	PartitionLeaders(ctx context.Context) (map[history.TopicPartition]int, error)
}

// PreferredElector asks the controller for a preferred replica election
// (/admin/preferred_replica_election) and waits until it took the request.
type PreferredElector interface {
	ElectPreferred(ctx context.Context, topic string, partitions []int32) error
}

// PartitionState is a partition's state znode as one ZooKeeper server has
// it (decoded by zklayout) with the zxid of the write that set it; Mzxid
// is 0 when that is unknown.
type PartitionState struct {
	zklayout.PartitionState
	Mzxid int64
}

// StateReader reads a partition's state through one given ZooKeeper
// server. failover-on-lagging-zk reads the shrink it waits for through the
// ZooKeeper leader: a read through the run's shared session (on any server,
// after Sync) comes back through the slowed follower a third of the time,
// and so only once that follower has applied the shrink, when the window
// is already closed.
type StateReader interface {
	PartitionStateVia(ctx context.Context, zk int, topic string, partition int32) (PartitionState, error)
}

// Resigner forces a controller election: it deletes /controller while it
// names broker id, as an operator's zkCli delete did; an error when it names
// another broker or none.
type Resigner interface {
	ResignController(ctx context.Context, id int) error
}

// BadVersionCounter counts a node's conditional ZooKeeper writes that
// failed with BADVERSION since a time (from the node's event log).
type BadVersionCounter interface {
	BadVersions(ctx context.Context, node int, since time.Time) (int, error)
}

// Env is what a run offers its faults beyond the Nemesis's primitives and
// World. New checks it: Partitions, Failpoints and Session are what the
// composite faults cannot do without (a Set built without them has those
// faults missing, and says why); the rest is optional, and its doc says
// what a fault does without it.
type Env struct {
	Partitions Partitions
	Failpoints Failpoints
	// Session is the nodes' ZooKeeper session timeout: how long a role may
	// have no holder, how long a stopped node stays stopped.
	Session time.Duration
	// ReplicaLag is the nodes' replica.lag.time.max, by which
	// failover-on-lagging-zk times its slowing and its watch; 0 when
	// unknown (the link is slowed at once).
	ReplicaLag time.Duration
	// Elector, when set, lets kill-lagging-leader ask for the preferred
	// election an operator would make of the partitions its kill left
	// offline, and failover-on-lagging-zk move partitions off a controller
	// that leads them all; nil: neither asks.
	Elector PreferredElector
	// StateVia, when set, reads the ISR shrink failover-on-lagging-zk
	// waits for through the ZooKeeper leader, with its zxid; nil: through
	// Partitions, unchecked against the lagging server.
	StateVia StateReader
	// BadVersions, when set, says whether the controller is retrying a
	// failed conditional write, which random steps and
	// failover-on-lagging-zk leave alone; nil: never.
	BadVersions BadVersionCounter
	// Resigner, when set, lets the failpoint fault force a controller
	// election while the controller holds in its window
	// (ProvokeDeleteController); nil: a plan that needs it fails its step
	// with an error saying so.
	Resigner Resigner
	// Disks reaches a down node's data directory, which
	// crash-lose-unflushed cuts to what the node fsynced; a Set built
	// without it has that fault missing.
	Disks Disks
	// Leaders, when set, lets a pause after the controller's ZooKeeper
	// write hold the removal of a stopped broker from the ISRs rather than
	// the elections of the partitions it led; nil: the first write holds.
	Leaders Leaders
	// Topics deletes and creates topics through ZooKeeper; a Set built
	// without it has delete-recreate-topic missing.
	Topics Topics
}

// Set is one run's faults: every kind of the catalogue bound to the run's
// Nemesis and Env, with the composite faults' state (one
// failover-on-lagging-zk in progress at a time).
type Set struct {
	n           *nemesis.Nemesis
	badVersions BadVersionCounter
	failpoint   *failpointFault
	lagging     *laggingLeader
	zkFailover  *zkFailover
	unflushed   *unflushedCrash
	recreate    *topicRecreate
	stall       *zkStall
	// missing says, per composite kind env could not carry, what it
	// lacked; injecting one returns that.
	missing map[FaultKind]error
}

// New builds the faults of the run n acts on, with what env offers. A
// composite fault env cannot carry is missing from the Set (Missing says
// why, and a step of its kind fails with that); only a Nemesis without a
// World is an error.
func New(n *nemesis.Nemesis, env Env) (*Set, error) {
	if n == nil || n.World == nil {
		return nil, errors.New("faults: no nemesis or no world to act on")
	}
	s := &Set{n: n, badVersions: env.BadVersions, missing: map[FaultKind]error{}}
	var lacks []string
	if env.Partitions == nil {
		lacks = append(lacks, "partition roles (Env.Partitions)")
	}
	if env.Session <= 0 {
		lacks = append(lacks, fmt.Sprintf("session timeout (Env.Session is %s)", env.Session))
	}
	fpLacks := lacks
	if env.Failpoints == nil {
		fpLacks = append(slices.Clone(lacks), "failpoints (Env.Failpoints)")
	}
	miss := func(k FaultKind, lacks []string) bool {
		if len(lacks) == 0 {
			return false
		}
		s.missing[k] = fmt.Errorf("%s: the run has no %s", k, strings.Join(lacks, ", no "))
		return true
	}
	if !miss(FailpointFault, fpLacks) {
		s.failpoint = newFailpoint(n.World, env, n.Rec, nemesisProcs{n})
	}
	if !miss(KillLaggingLeader, lacks) {
		s.lagging = newLaggingLeader(n, env)
	}
	if !miss(FailoverOnLaggingZK, fpLacks) {
		s.zkFailover = newZKFailover(n.World, env, n.Rec, zkfNemesis{nemesisProcs{n}, env})
	}
	if env.Disks == nil {
		miss(CrashLoseUnflushed, []string{"node data directories (Env.Disks)"})
	} else {
		s.unflushed = &unflushedCrash{world: n.World, ops: nemesisProcs{n}, disks: env.Disks, rec: n.Rec}
	}
	if env.Topics == nil {
		miss(DeleteRecreateTopic, []string{"topic admin (Env.Topics)"})
	} else {
		s.recreate = &topicRecreate{topics: env.Topics, rec: n.Rec, within: recreateWithin}
	}
	if env.Session <= 0 {
		miss(StallZKSessionServer, []string{fmt.Sprintf("session timeout (Env.Session is %s)", env.Session)})
	} else {
		s.stall = newZKStall(n, env)
	}
	return s, nil
}

// Missing says which of the catalogue's faults the Set could not build,
// and what their run lacked; nil when every fault is there.
func (s *Set) Missing() error {
	var errs []error
	for _, k := range Catalogue {
		if err := s.missing[k]; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Inject starts the fault of kind k on the running cluster and returns
// what ends it. pick chooses among candidates (a random broker, one
// follower); the same pick in a replay chooses the same position.
func (s *Set) Inject(ctx context.Context, k FaultKind, pick int) (Heal, error) {
	f, ok := Lookup(k)
	if !ok {
		return nil, fmt.Errorf("unknown fault %q", k)
	}
	if err := s.missing[k]; err != nil {
		return nil, err
	}
	return f.inject(ctx, s, k, pick)
}

// RunSchedule executes sched on the run's Nemesis, each step through Apply.
func (s *Set) RunSchedule(ctx context.Context, sched Schedule) error {
	return s.n.RunSchedule(ctx, sched, s.Apply)
}

// Apply starts one step's fault and returns its heal; it is the runners'
// nemesis.Injector. A step that cannot be applied (no role holder, no
// candidate) is recorded as a fault that stopped at once with its error,
// so the history says what the schedule tried; the runners go on past it.
func (s *Set) Apply(ctx context.Context, st Step) (func(context.Context) error, error) {
	if !st.Opening {
		if heal, ok := s.leaveStuckAlone(ctx, st); ok {
			return heal, nil
		}
	}
	heal, err := s.apply(ctx, st)
	if err != nil && ctx.Err() == nil {
		detail := "not applied"
		if st.Opening {
			detail = "opening not applied"
		}
		id := s.n.Rec.Start(string(st.Kind), nil, detail)
		s.n.Rec.Stop(id, string(st.Kind), nil, err)
	}
	return heal, err
}

func (s *Set) apply(ctx context.Context, st Step) (Heal, error) {
	f, ok := Lookup(st.Kind)
	if !ok {
		return nil, fmt.Errorf("unknown fault %q", st.Kind)
	}
	topo := Topology{Nodes: len(s.n.World.Nodes()), ZKServers: len(s.n.World.ZKServers())}
	if err := f.Available(topo); err != nil {
		return nil, err
	}
	return s.Inject(ctx, st.Kind, st.Pick)
}

// stuckAskWithin bounds leaveStuckAlone's questions.
const stuckAskWithin = time.Second

// leaveStuckAlone records a random step as left alone, and says so, while
// the controller is retrying a conditional write that keeps failing with
// BADVERSION: a fault now (a kill, a pause past the session, a cut from
// ZooKeeper) would hand the role over and end the stuck state, and liveness,
// which judges only after every fault has healed, would never see it. A
// fixed controller re-reads after its first BADVERSION, so with every fix on
// this almost never holds and the schedule runs as drawn.
func (s *Set) leaveStuckAlone(ctx context.Context, st Step) (func(context.Context) error, bool) {
	if s.badVersions == nil {
		return nil, false
	}
	// The question must not hold the step up: with ZooKeeper cut off or
	// paused by a fault in force, the controller read waits; the step
	// then goes ahead as drawn.
	qctx, cancel := context.WithTimeout(ctx, stuckAskWithin)
	defer cancel()
	cid, err := s.n.World.Controller(qctx)
	if err != nil {
		return nil, false
	}
	bad, stuck := controllerStuck(qctx, s.badVersions, cid)
	if !stuck {
		return nil, false
	}
	targets := []string{fmt.Sprintf("n%d", cid)}
	id := s.n.Rec.Start(string(st.Kind), targets, "")
	s.n.Rec.StopDetail(id, string(st.Kind), targets, fmt.Sprintf("left alone: controller n%d is retrying a failed conditional write (%d BADVERSION in the last %s); the step would end that before liveness can judge it", cid, bad, zkfStuckWithin), nil)
	return func(context.Context) error { return nil }, true
}

// zkfStuckWithin and zkfStuckCount: a controller with this many BADVERSION
// failures this recently is retrying a stale zkVersion (the node retries
// every 500 ms; a fixed controller re-reads after the first).
const (
	zkfStuckWithin = 3 * time.Second
	zkfStuckCount  = 3
)

// controllerStuck says whether controller cid is retrying a failed
// conditional write now, and how often it failed within zkfStuckWithin;
// never without a counter.
func controllerStuck(ctx context.Context, bv BadVersionCounter, cid int) (int, bool) {
	if bv == nil {
		return 0, false
	}
	n, err := bv.BadVersions(ctx, cid, time.Now().Add(-zkfStuckWithin))
	return n, err == nil && n >= zkfStuckCount
}

// sleepUntil waits until t or until ctx ends, and says whether ctx is
// still live.
func sleepUntil(ctx context.Context, t time.Time) bool {
	return ctxsleep.For(ctx, time.Until(t))
}

// background is a fault's goroutine that outlives the step's hold: it
// runs detached from the step's context, and the fault's heal joins it.
type background struct {
	stop context.CancelFunc
	done chan struct{}
}

func startBackground(ctx context.Context, run func(context.Context)) *background {
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	b := &background{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		run(bctx)
	}()
	return b
}

// join lets the goroutine finish on its own, or stops it when ctx ends,
// and returns once it has returned.
func (b *background) join(ctx context.Context) {
	select {
	case <-b.done:
	case <-ctx.Done():
	}
	b.stop()
	<-b.done
}
