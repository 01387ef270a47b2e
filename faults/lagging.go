package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zkchaos/zkchaos/nemesis"
)

// The fault KillLaggingLeader opens the replication bugs' window: a
// partition's leader is cut off from its followers (every broker keeps
// ZooKeeper), so they stop fetching and the leader shrinks the ISR; once
// the ISR is the leader alone, the leader is killed (an ISR that does not
// shrink within the hold, replica.lag.time.max being longer, leaves the
// fault a partition). The failover then happens with the followers behind
// and out of the ISR: KAFKA-3861's offline partition, an unclean election's
// lost writes. If leadership moves while the cut holds, the fault follows
// it: the broker killed is the partition's leader at the moment its ISR is
// itself alone, and it stays down for the hold and past the failover.
// Once the controller has taken the death, the fault asks for a preferred
// replica election of the partitions the killed leader led whose preferred
// replica is another broker, as an operator running
// kafka-preferred-replica-election.sh to bring an offline partition back
// would: the preferred replica is live but out of the ISR, so a controller
// must refuse it (it would elect a replica lacking acknowledged records).
// The partition the fault cuts is, when there is one, a partition whose
// leader is not its preferred replica, so that request has a partition to
// refuse. Heal restores the links and starts the leader again.
//
// The fault is laggingLeader: it cuts and kills through the run's Nemesis
// (laggingOps; its claims and partition holds keep other faults and the
// control-plane workload off its leader and partition) and reads roles
// through Partitions.

// KillLaggingLeaderDoc describes the fault for the catalogue.
const KillLaggingLeaderDoc = "cut a partition leader from its followers until its ISR shrinks, then kill it"

// laggingLeader is kill-lagging-leader on one run.
type laggingLeader struct {
	world   nemesis.World
	ops     laggingOps
	rec     *nemesis.Recorder
	parts   Partitions
	elector PreferredElector // nil: no recovery election
	session time.Duration
}

// laggingOps is what kill-lagging-leader does through the run's Nemesis
// (nemesisProcs), or a fake in tests.
type laggingOps interface {
	kill(ctx context.Context, t Target) error
	start(ctx context.Context, t Target) error
	claim(t Target) (release func())
	// holdPartition keeps the control-plane workload from moving the
	// partition's leadership until release.
	holdPartition(topic string, p int32) (release func())
	partition(ctx context.Context, name string, a, b []Target) error
	healNet(ctx context.Context) error
	// netOutcome is the detail the stop events of the network faults
	// named name will carry.
	netOutcome(name, outcome string)
}

func newLaggingLeader(n *nemesis.Nemesis, env Env) *laggingLeader {
	return &laggingLeader{world: n.World, ops: nemesisProcs{n}, rec: n.Rec, parts: env.Partitions, elector: env.Elector, session: env.Session}
}

// inject cuts the leader of the partition pick chooses from its followers
// and watches in the background for its ISR to shrink to itself, then
// kills it; the heal returns once the killed leader has stayed down long
// enough for the failover.
func (f *laggingLeader) inject(ctx context.Context, pick int) (Heal, error) {
	k := KillLaggingLeader
	topic, parts := f.parts.WorkloadTopic()
	if parts < 1 {
		parts = 1
	}
	p := laggingPartition(pick, parts, partitionLeaders(ctx, f.parts, topic, parts), replicasOf(ctx, f.parts, topic))
	leader, _, err := f.parts.PartitionISR(ctx, topic, p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k, err)
	}
	if leader < 0 {
		return nil, fmt.Errorf("%s: %s-%d has no leader", k, topic, p)
	}
	nodes := f.world.Nodes()
	lt, err := byName(nodes, fmt.Sprintf("n%d", leader))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k, err)
	}
	followers := without(nodes, lt)
	if len(followers) == 0 {
		return nil, fmt.Errorf("%s: %s-%d has no follower", k, topic, p)
	}
	// The partition's leadership stays where it is while the fault waits
	// for the ISR: the control-plane workload leaves it alone.
	releasePart := f.ops.holdPartition(topic, p)
	if err := f.ops.partition(ctx, string(k), []Target{lt}, followers); err != nil {
		releasePart()
		return nil, err
	}
	// The leader is this fault's until heal: a random fault does not
	// bounce it back while it is kept down.
	r := &laggingRun{f: f, topic: topic, parts: parts, p: p, nodes: nodes, leader: leader, lt: lt,
		releases: []func(){releasePart, f.ops.claim(lt)}, cut: time.Now()}
	// The watch outlives a short hold (the ISR shrinks only after
	// replica.lag.time.max), up to laggingWithin after the cut.
	r.watcher = startBackground(ctx, r.watch)
	return r.heal, nil
}

// laggingRun is one kill-lagging-leader in force.
type laggingRun struct {
	f       *laggingLeader
	topic   string
	parts   int32
	p       int32 // the partition cut
	nodes   []Target
	cut     time.Time
	watcher *background

	mu       sync.Mutex
	leader   int    // the partition's leader, followed while the cut holds
	lt       Target // its target
	releases []func()
	killedAt time.Time
	kerr     error
}

// watch kills the leader once its ISR is itself alone: the followers lag.
// If leadership moves while the cut holds (a preferred election, a
// reassignment, a controlled shutdown), it follows it, cutting the new
// leader from the others too, so the broker killed is the partition's
// leader when its followers lag.
func (r *laggingRun) watch(ctx context.Context) {
	k := string(KillLaggingLeader)
	// lastISR is the ISR last read, for the outcome of a watch that gives
	// up.
	var lastISR []int
	for {
		l, now, err := r.f.parts.PartitionISR(ctx, r.topic, r.p)
		r.mu.Lock()
		leader := r.leader
		r.mu.Unlock()
		if err == nil && l >= 0 && l != leader {
			if nt, berr := byName(r.nodes, fmt.Sprintf("n%d", l)); berr == nil &&
				r.f.ops.partition(ctx, k, []Target{nt}, without(r.nodes, nt)) == nil {
				r.mu.Lock()
				r.leader, r.lt = l, nt
				r.releases = append(r.releases, r.f.ops.claim(nt))
				leader = l
				r.mu.Unlock()
			}
		}
		if err == nil {
			lastISR = now
		}
		if err == nil && l == leader && slices.Equal(now, []int{leader}) {
			break
		}
		if time.Since(r.cut) > laggingWithin(r.f.session) {
			r.f.ops.netOutcome(k, fmt.Sprintf("not killed: the ISR of %s-%d was still %v %s after its leader n%d was cut off from the other brokers",
				r.topic, r.p, lastISR, time.Since(r.cut).Round(time.Millisecond), leader))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
	r.kill(ctx)
}

// kill kills the leader, its ISR itself alone, and asks for the recovery
// election once the controller has taken the death.
func (r *laggingRun) kill(ctx context.Context) {
	r.mu.Lock()
	victim, vid := r.lt, r.leader
	r.mu.Unlock()
	err := r.f.ops.kill(ctx, victim)
	r.mu.Lock()
	if err == nil {
		r.killedAt = time.Now()
		r.f.ops.netOutcome(string(KillLaggingLeader), fmt.Sprintf("killed leader n%d of %s-%d %s after the cut, its ISR [%d] alone",
			vid, r.topic, r.p, r.killedAt.Sub(r.cut).Round(time.Millisecond), vid))
	}
	r.kerr = err
	r.mu.Unlock()
	if err == nil {
		r.f.recoverPreferred(ctx, r.topic, r.parts, r.p, vid)
	}
}

// heal waits for the watch, keeps a killed leader down past the failover,
// then restores the links and starts it again.
func (r *laggingRun) heal(ctx context.Context) error {
	r.watcher.join(ctx)
	r.mu.Lock()
	killed, ke, victim, releases := r.killedAt, r.kerr, r.lt, r.releases
	r.mu.Unlock()
	defer func() {
		for _, rel := range releases {
			rel()
		}
	}()
	if !killed.IsZero() {
		// The leader stays away like a machine being replaced: past its
		// session's expiry, the controller's decision and an election
		// grace, so a partition left offline while a follower holds every
		// acknowledged record is seen as such.
		sleepUntil(ctx, killed.Add(keepDown(r.f.session)))
	}
	errs := []error{r.f.ops.healNet(ctx)}
	if !killed.IsZero() {
		errs = append(errs, r.f.ops.start(ctx, victim))
	} else if ke != nil && !errors.Is(ke, context.Canceled) {
		errs = append(errs, ke)
	}
	return errors.Join(errs...)
}

// laggingWithin is how long after the cut the ISR may still shrink to the
// leader alone: replica.lag.time.max (10 s by default, 2 s in chaos power's
// KAFKA-3861 row) and the leader's next ISR check, with a session's margin
// for the write through ZooKeeper. The fault cannot read the nodes' lag
// setting, so it allows for the default.
func laggingWithin(session time.Duration) time.Duration { return 12*time.Second + session }

// keepDown is how long kill-lagging-leader keeps the killed leader away: its
// session expires, the controller decides, and an election grace (5 s by
// default) passes.
func keepDown(session time.Duration) time.Duration { return 2*session + 6*time.Second }

// partitionLeaders reads the leader of each of topic's parts partitions;
// a partition whose state cannot be read is left out.
func partitionLeaders(ctx context.Context, fw Partitions, topic string, parts int32) map[int32]int {
	out := map[int32]int{}
	for q := range parts {
		if l, _, err := fw.PartitionISR(ctx, topic, q); err == nil {
			out[q] = l
		}
	}
	return out
}

// replicasOf reads topic's assignment; nil when it cannot be read (the
// fault then chooses as it did before it read assignments).
func replicasOf(ctx context.Context, fw Partitions, topic string) map[int32][]int {
	a, err := fw.PartitionReplicas(ctx, topic)
	if err != nil {
		return nil
	}
	return a
}

// laggingPartition chooses the partition whose leader the fault cuts off:
// among the partitions led by a broker other than their preferred replica
// (after a failover or a reassignment), the pick-th, so the preferred
// election the fault asks for once the leader is dead has a live preferred
// replica outside the ISR to refuse; when every leader is its partition's
// preferred replica, partition pick mod parts. The same pick on the same
// roles chooses the same partition.
func laggingPartition(pick int, parts int32, leaders map[int32]int, assign map[int32][]int) int32 {
	var cands []int32
	for q := range parts {
		l, ok := leaders[q]
		if as := assign[q]; ok && l >= 0 && len(as) > 0 && as[0] != l {
			cands = append(cands, q)
		}
	}
	if len(cands) > 0 {
		return cands[pick%len(cands)]
	}
	return int32(pick % int(parts))
}

// offlineWithin bounds the wait for the controller to take the killed
// leader's death: its session expires, then the controller writes the
// partition's new state within offlineGrace.
func offlineWithin(session time.Duration) time.Duration { return session + offlineGrace }

const offlineGrace = 5 * time.Second

// preferredElection is the fault record of the recovery election.
const preferredElection = "preferred-election"

// recoverPreferred asks, once the controller has taken the death of
// broker dead (partition p no longer names it leader, or offlineWithin
// passed), for a preferred replica election of the partitions dead led
// when it was killed whose preferred replica is another broker and not
// their leader now: an operator bringing offline partitions back. The
// request and what the controller made of it are recorded as a
// preferred-election fault. It returns the partitions asked for.
func (f *laggingLeader) recoverPreferred(ctx context.Context, topic string, parts, p int32, dead int) []int32 {
	if f.elector == nil {
		return nil
	}
	w := f.parts
	var led []int32
	for q, l := range partitionLeaders(ctx, w, topic, parts) {
		if l == dead {
			led = append(led, q)
		}
	}
	slices.Sort(led)
	if len(led) == 0 {
		return nil
	}
	deadline := time.Now().Add(offlineWithin(f.session))
	for {
		if l, _, err := w.PartitionISR(ctx, topic, p); err == nil && l != dead {
			break
		}
		if time.Now().After(deadline) || !sleepUntil(ctx, time.Now().Add(100*time.Millisecond)) {
			break
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	assign, err := w.PartitionReplicas(ctx, topic)
	if err != nil {
		return nil
	}
	var (
		asked []int32
		was   []string
	)
	for _, q := range led {
		as := assign[q]
		if len(as) == 0 || as[0] == dead {
			continue
		}
		l, isr, err := w.PartitionISR(ctx, topic, q)
		if err != nil || l == as[0] {
			continue
		}
		asked = append(asked, q)
		was = append(was, fmt.Sprintf("%s-%d (preferred replica n%d; leader %d, ISR %v)", topic, q, as[0], l, isr))
	}
	if len(asked) == 0 {
		return nil
	}
	detail := fmt.Sprintf("n%d, the leader kill-lagging-leader killed, stays down: asked for a preferred replica election of %s, as an operator bringing them back would",
		dead, strings.Join(was, ", "))
	targets := []string{fmt.Sprintf("n%d", dead)}
	id := f.rec.Start(preferredElection, targets, detail)
	err = f.elector.ElectPreferred(ctx, topic, asked)
	var now []string
	for _, q := range asked {
		if l, isr, rerr := w.PartitionISR(ctx, topic, q); rerr == nil {
			now = append(now, fmt.Sprintf("%s-%d leader %d, ISR %v", topic, q, l, isr))
		}
	}
	f.rec.StopDetail(id, preferredElection, targets, "after the request: "+strings.Join(now, "; "), err)
	return asked
}
