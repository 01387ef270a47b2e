package faults

import (
	"context"
	"fmt"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/ctxsleep"
	"github.com/zkchaos/zkchaos/nemesis"
)

// StallZKSessionServerDoc is stall-zk-session-server's catalogue line.
const StallZKSessionServerDoc = "SIGSTOP the ZooKeeper server that holds the controller's session (odd picks: a partition leader's) in stalls shorter than the client's read timeout, for the hold: the session stays on it and its requests wait (1 s stops with 200 ms gaps, or quick 250 ms stops with 50 ms gaps that hold every round trip)"

// stallOps is what stall-zk-session-server does to a ZooKeeper server and
// how it learns which server serves a broker: the Nemesis, or a fake.
type stallOps interface {
	// sigstop and sigcont signal t's process without recording a fault
	// of their own: the stall is one window in the history, not one per
	// stop.
	sigstop(ctx context.Context, t Target) error
	sigcont(ctx context.Context, t Target) error
	held(t Target) bool
	claim(t Target) (release func())
	// sessions maps a broker's name to the ZooKeeper server its session
	// is connected to now (consSessions).
	sessions(ctx context.Context, nodes, zks []Target) map[string]string
}

type stallNemesis struct{ nemesisProcs }

func (o stallNemesis) sigstop(ctx context.Context, t Target) error {
	return nemesis.Pause(ctx, t.Container)
}
func (o stallNemesis) sigcont(ctx context.Context, t Target) error {
	return nemesis.Resume(ctx, t.Container)
}
func (o stallNemesis) sessions(ctx context.Context, nodes, zks []Target) map[string]string {
	return consSessions(ctx, nodes, zks)
}

// zkStall is stall-zk-session-server. A ZooKeeper server that stops
// answering for less than the client's read timeout (two thirds of the
// session timeout, in go-zookeeper as in ZooKeeper's Java client) keeps
// its clients: they neither reconnect elsewhere nor see a disconnect,
// their requests just wait. Kafka 2.6.3's controller then blocks in
// ZooKeeperClient.handleRequests, its event thread waiting on the
// responses, while its RequestSendThreads go on sending what was queued;
// a partition leader's ISR update (Partition.updateIsr under
// leaderIsrUpdateLock) waits the same way. Stopping the server for the
// whole hold would instead move the session to another server after the
// read timeout, which is a different fault; so the server is stopped in
// stalls of stall, with open between them, until the step heals. Every
// other pair of steps stutters quickly instead (a quarter of both): a long
// stop lets what queued through in one burst in the next gap, so an event
// that takes several round trips (the controller reading a notification,
// then the partition states it names) mostly fits in one gap, while quick
// stutters hold each of its round trips and stretch it over its stops.
type zkStall struct {
	world nemesis.World
	parts Partitions // nil: only the controller's server is stalled
	ops   stallOps
	rec   *nemesis.Recorder
	stall time.Duration
	open  time.Duration
}

// stallTiming returns the stall and the gap between two stalls for a
// session timeout: a third of the session, at most a second, which is
// below the client's read timeout (2/3 of the session) and below the
// ensemble's sync limit the harness sets (10 ticks of 200 ms), so neither
// the client nor the ZooKeeper leader gives up on the stalled server; the
// gap is long enough for it to answer what queued.
func stallTiming(session time.Duration) (stall, open time.Duration) {
	stall = min(session/3, time.Second)
	return max(stall, 50*time.Millisecond), 200 * time.Millisecond
}

// shape is a step's stall and gap: the long ones, or a quarter of each
// when pick/4 is odd (picks 4-7, 12-15, ...), so steps of either parity
// (controller or leader) get both.
func (f *zkStall) shape(pick int) (stall, open time.Duration) {
	if (pick/4)%2 == 1 {
		return f.stall / 4, f.open / 4
	}
	return f.stall, f.open
}

func newZKStall(n *nemesis.Nemesis, env Env) *zkStall {
	stall, open := stallTiming(env.Session)
	return &zkStall{world: n.World, parts: env.Partitions, ops: stallNemesis{nemesisProcs{n}}, rec: n.Rec, stall: stall, open: open}
}

// victim is the broker whose ZooKeeper server the step stalls, and its
// role in words: the controller for even picks, the leader of the
// workload partition pick/2 chooses for odd ones.
func (f *zkStall) victim(ctx context.Context, pick int) (Target, string, error) {
	k := StallZKSessionServer
	if pick%2 == 0 || f.parts == nil {
		c, err := controller(ctx, f.world, k)
		return c, "the controller", err
	}
	topic, n := f.parts.WorkloadTopic()
	if n <= 0 {
		return Target{}, "", fmt.Errorf("%s: topic %s has no partitions", k, topic)
	}
	q := int32(pick/2) % n
	leader, _, err := f.parts.PartitionISR(ctx, topic, q)
	if err != nil {
		return Target{}, "", fmt.Errorf("%s: %w", k, err)
	}
	if leader < 0 {
		return Target{}, "", fmt.Errorf("%s: %s-%d has no leader", k, topic, q)
	}
	t, err := byName(f.world.Nodes(), fmt.Sprintf("n%d", leader))
	return t, fmt.Sprintf("the leader of %s-%d", topic, q), err
}

func (f *zkStall) inject(ctx context.Context, pick int) (Heal, error) {
	k := StallZKSessionServer
	b, role, err := f.victim(ctx, pick)
	if err != nil {
		return nil, err
	}
	zks := f.world.ZKServers()
	name, ok := f.ops.sessions(ctx, f.world.Nodes(), zks)[b.Name]
	if !ok {
		return nil, fmt.Errorf("%s: no ZooKeeper server lists %s's connection", k, b.Name)
	}
	z, err := byName(zks, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k, err)
	}
	if f.ops.held(z) {
		return nil, fmt.Errorf("%s: %s, the server of %s, is held by another fault", k, z.Name, b.Name)
	}
	release := f.ops.claim(z)
	what := "a follower"
	if id, err := f.world.ZKLeader(ctx); err == nil && fmt.Sprintf("zk%d", id) == z.Name {
		what = "the ZooKeeper leader"
	}
	targets := []string{z.Name, b.Name}
	stall, open := f.shape(pick)
	detail := fmt.Sprintf("%s (%s) holds the session of %s, %s: SIGSTOP for %s, SIGCONT for %s, repeated until the heal",
		z.Name, what, b.Name, role, stall, open)
	id := f.rec.StartFault(history.Fault{Name: string(k), Targets: targets, Detail: detail})
	lctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	var stalls int
	var loopErr error
	go func() {
		defer close(done)
		stalls, loopErr = f.stutter(lctx, z, stall, open)
	}()
	return func(ctx context.Context) error {
		stop()
		<-done
		err := f.ops.sigcont(ctx, z)
		if err == nil {
			err = loopErr
		}
		release()
		f.rec.StopFault(history.Fault{ID: id, Name: string(k), Targets: targets,
			Detail: fmt.Sprintf("%d stalls of %s on %s ended", stalls, stall, z.Name)}, err)
		return err
	}, nil
}

// stutter stops and continues z until ctx ends, and returns how many stalls
// it made; the caller continues z at the end, whatever state ctx found.
func (f *zkStall) stutter(ctx context.Context, z Target, stall, open time.Duration) (int, error) {
	for n := 0; ; n++ {
		if ctx.Err() != nil {
			return n, nil
		}
		// The stop is sent uncancelled: the engine delivers a kill
		// request whose client gave up on it, possibly after the heal's
		// SIGCONT, which would leave the server stopped for the rest of
		// the run. A step started after its own heal time is healed at
		// once, in the middle of this first stop.
		if err := f.ops.sigstop(context.WithoutCancel(ctx), z); err != nil {
			return n, fmt.Errorf("stop %s: %w", z.Name, err)
		}
		stalled := ctxsleep.For(ctx, stall)
		if err := f.ops.sigcont(context.WithoutCancel(ctx), z); err != nil {
			return n + 1, fmt.Errorf("continue %s: %w", z.Name, err)
		}
		if !stalled || !ctxsleep.For(ctx, open) {
			return n + 1, nil
		}
	}
}
