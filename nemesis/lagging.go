package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// KillLaggingLeader is the fault of the replication bugs' window: a
// partition's leader is cut off from its followers (every broker keeps
// ZooKeeper), so they stop fetching and the leader shrinks the ISR; once
// the ISR is the leader alone, the leader is killed (an ISR that does not
// shrink within the hold, replica.lag.time.max being longer, leaves the
// fault a partition). The failover then happens with the followers behind
// and out of the ISR: KAFKA-3861's offline partition, an unclean election's
// lost writes. If leadership moves while the cut holds, the fault follows
// it: the broker killed is the partition's leader at the moment its ISR is
// itself alone, and it stays down for the hold and past the failover.
// Heal restores the links and starts the leader again.
const KillLaggingLeader FaultKind = "kill-lagging-leader"

// KillLaggingLeaderDoc describes the fault for the catalogue.
const KillLaggingLeaderDoc = "cut a partition leader from its followers until its ISR shrinks, then kill it"

// killLaggingLeader needs the partition roles of a FailpointWorld.
func killLaggingLeader(ctx context.Context, n *Nemesis, k FaultKind, pick int) (Heal, error) {
	fw, ok := n.World.(FailpointWorld)
	if !ok {
		return nil, fmt.Errorf("%s: the run's world has no partition roles (no FailpointWorld)", k)
	}
	topic, parts := fw.WorkloadTopic()
	if parts < 1 {
		parts = 1
	}
	p := int32(pick) % parts
	leader, _, err := fw.PartitionISR(ctx, topic, p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k, err)
	}
	if leader < 0 {
		return nil, fmt.Errorf("%s: %s-%d has no leader", k, topic, p)
	}
	nodes := n.World.Nodes()
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
	releasePart := n.holdPartition(topic, p)
	if err := n.PartitionTargets(ctx, string(k), []Target{lt}, followers); err != nil {
		releasePart()
		return nil, err
	}
	// The leader is this fault's until heal: a random fault does not
	// bounce it back while it is kept down.
	releases := []func(){releasePart, n.claim(lt)}
	release := func() {
		for _, r := range releases {
			r()
		}
	}
	// Kill the leader once its ISR is itself alone: the followers lag.
	// The watch outlives a short hold (the ISR shrinks only after
	// replica.lag.time.max), up to laggingWithin after the cut.
	cut := time.Now()
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var (
		mu       sync.Mutex
		killedAt time.Time
		kerr     error
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			l, now, err := fw.PartitionISR(kctx, topic, p)
			if err == nil && l >= 0 && l != leader {
				// Leadership moved while the cut held (a preferred
				// election, a reassignment, a controlled shutdown):
				// follow it, cutting the new leader from the others too,
				// so the broker killed is the partition's leader when its
				// followers lag.
				if nt, berr := byName(nodes, fmt.Sprintf("n%d", l)); berr == nil &&
					n.PartitionTargets(kctx, string(k), []Target{nt}, without(nodes, nt)) == nil {
					mu.Lock()
					leader, lt = l, nt
					releases = append(releases, n.claim(nt))
					mu.Unlock()
				}
			}
			if err == nil && l == leader && slices.Equal(now, []int{leader}) {
				break
			}
			if time.Since(cut) > laggingWithin(fw) {
				return
			}
			select {
			case <-kctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
		mu.Lock()
		victim := lt
		mu.Unlock()
		err := n.KillTarget(kctx, victim)
		mu.Lock()
		if err == nil {
			killedAt = time.Now()
		}
		kerr = err
		mu.Unlock()
	}()
	return func(ctx context.Context) error {
		joinWatch(ctx, done, cancel)
		defer release()
		mu.Lock()
		k, ke, victim := killedAt, kerr, lt
		mu.Unlock()
		if !k.IsZero() {
			// The leader stays away like a machine being replaced: past
			// its session's expiry, the controller's decision and an
			// election grace, so a partition left offline while a
			// follower holds every acknowledged record is seen as such.
			sleepUntil(ctx, k.Add(keepDown(fw)))
		}
		errs := []error{n.HealNet(ctx)}
		if !k.IsZero() {
			errs = append(errs, n.StartTarget(ctx, victim))
		} else if ke != nil && !errors.Is(ke, context.Canceled) {
			errs = append(errs, ke)
		}
		return errors.Join(errs...)
	}, nil
}

// laggingWithin is how long after the cut the ISR may still shrink to the
// leader alone: replica.lag.time.max (10 s by default, 2 s in chaos power's
// KAFKA-3861 row) and the leader's next ISR check, with a session's margin
// for the write through ZooKeeper. The fault cannot read the nodes' lag
// setting, so it allows for the default.
func laggingWithin(fw FailpointWorld) time.Duration { return 12*time.Second + fw.SessionTimeout() }

// keepDown is how long kill-lagging-leader keeps the killed leader away: its
// session expires, the controller decides, and an election grace (5 s by
// default) passes.
func keepDown(fw FailpointWorld) time.Duration { return 2*fw.SessionTimeout() + 6*time.Second }
