package faults

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/zkchaos/zkchaos/history"
)

// The failpoint fault's provocations that take more than one step: the
// forced election, a broker's controlled shutdown then restart, and the
// hold that outlasts the leaders' ISR shrink (fpplan.go names them, and
// failpoint.go's provoke picks one).

// deleteController bounces other and, once the armed controller (id)
// holds in its window, forces an election and lets the held controller go
// while its successor is still held right after winning: the successor has
// bumped /controller_epoch and written nothing else yet, so the held
// controller's fresh read finds every partition state written under its
// own epoch (Kafka 2.6.3 aborts a change to a state a newer controller
// wrote) and its write meets ZooKeeper's version check on
// /controller_epoch. The successor goes on once the held controller has
// had a second to write. A window not reached in time deletes nothing.
func (r *fpRun) deleteController(ctx context.Context, target, other Target, id int, since time.Time) error {
	if r.f.resign == nil {
		return fmt.Errorf("%s: %s needs a forced controller election, and the run offers none (Env.Resigner)", FailpointFault, ProvokeDeleteController)
	}
	if err := r.f.pr.bounce(ctx, other); err != nil {
		return err
	}
	if !waitReached(ctx, r.f.fps, id, r.name, since, reachWithin(r.f.session)) {
		return nil
	}
	// Every other broker holds right after it wins the election (they are
	// this fault's: claim); one whose admin port does not answer (the
	// bounced one restarting, one another fault stopped) is left alone.
	var held []int
	for _, t := range without(r.f.world.Nodes(), target) {
		n := nodeID(t)
		if r.f.fps.ArmFailpoint(ctx, n, history.FailpointControllerAfterElected, "1*"+FPPause) == nil {
			held = append(held, n)
		}
	}
	defer func() {
		for _, n := range held {
			_ = disarmSoon(context.WithoutCancel(ctx), r.f.fps, n, history.FailpointControllerAfterElected, 2*time.Second)
		}
	}()
	if err := r.f.resign.ResignController(ctx, id); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * r.f.session)
	for time.Now().Before(deadline) {
		if c, err := r.f.world.Controller(ctx); err == nil && c >= 0 && c != id {
			break
		}
		if !sleepUntil(ctx, time.Now().Add(20*time.Millisecond)) {
			return nil
		}
	}
	// Let the held controller go now, not at heal: its successor's
	// failover would rewrite the states it is about to change.
	if err := r.f.fps.DisarmFailpoint(ctx, id, r.name); err != nil {
		return err
	}
	sleepUntil(ctx, time.Now().Add(time.Second))
	return nil
}

// shutdownRestart SIGTERMs other and, once the armed controller (id)
// holds in its window, kills other and starts it again.
func (r *fpRun) shutdownRestart(ctx context.Context, other Target, id int, since time.Time) error {
	pr := r.f.pr
	r.holdRemoval(ctx, other)
	if err := pr.terminate(ctx, other); err != nil {
		return err
	}
	if waitReached(ctx, r.f.fps, id, r.name, since, reachWithin(r.f.session)) {
		// The broker waits for the held controller's answer: kill it and
		// start it again. Its new process registers once the old session
		// has expired (a session timeout after the kill, give or take
		// ZooKeeper's tick); the hold lasts twice that, so the controller's
		// requests meet the new process, registered, not a broker that is
		// gone (the controller would drop them on seeing it gone).
		killed := time.Now()
		err := pr.bounce(ctx, other)
		r.mu.Lock()
		r.holdUntil = killed.Add(2 * r.f.session)
		r.mu.Unlock()
		r.holdPastShrink(killed)
		return err
	}
	// The window was not reached: the broker finishes its controlled
	// shutdown and exits; start it again, as an operator's restart would.
	return restartAfterExit(ctx, pr, other)
}

// holdPastShrink makes a pause at controller-after-zk-write last until the
// leaders of the partitions the provoked broker follows have shrunk it out
// of their ISRs, a broker that stopped fetching at stopped: past
// replica.lag.time.max and the half of it the shrink check waits between
// runs (Partition.maybeShrinkIsr), and half a second. The held controller
// has written its own ISR change for that broker, at a new zkVersion the
// leaders have not been told (its LeaderAndIsr waits with it), so each
// leader's shrink is a write at the zkVersion it holds, which ZooKeeper
// refuses: the input of the leaders' ISR-write fence (Kafka 2.6.3's
// Partition.updateIsr, "cached zkVersion not equal to that in zookeeper").
// Released before that, the leaders learn the new version first and
// nothing is refused.
func (r *fpRun) holdPastShrink(stopped time.Time) {
	if !shrinkHold(r.plan, r.f.replicaLag) {
		return
	}
	until := stopped.Add(r.f.replicaLag + r.f.replicaLag/2 + 500*time.Millisecond)
	r.mu.Lock()
	if until.After(r.holdUntil) {
		r.holdUntil = until
	}
	r.mu.Unlock()
}

// restartAfterExit waits (30 s at most) for t's process to exit, then
// starts it again.
func restartAfterExit(ctx context.Context, pr procs, t Target) error {
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := pr.waitExited(tctx, t)
	cancel()
	if err == nil {
		err = pr.start(ctx, t)
	}
	return err
}

// shrinkHold says whether plan's pause is held past the leaders' shrink
// (holdPastShrink): a pause after the controller's ZooKeeper write, with
// the nodes' replica.lag.time.max known.
func shrinkHold(plan FPPlan, replicaLag time.Duration) bool {
	return plan.Window.Name == history.FailpointControllerAfterZKWrite && plan.Action == FPPause && replicaLag > 0
}

// shrinkHoldFirings is how often a pause held past the leaders' shrink
// fires at most: the firings before the removal it waits for are let go.
const shrinkHoldFirings = 4

// removalWait is what a pause held past the leaders' shrink waits for:
// broker's removal from the ISR of a partition it does not lead, and the
// leaders as they were before the provocation stopped it.
type removalWait struct {
	broker  int
	leaders map[history.TopicPartition]int
}

// heldAtRemoval says whether node's latest firing of window followed a
// write that took w.broker out of the ISR of a partition whose leader
// stayed in office: a leader that will shrink it at the zkVersion it was
// told last. An unreadable log counts as held there.
func (w *removalWait) heldAtRemoval(ctx context.Context, fps Failpoints, node int, window string, since time.Time) bool {
	states, err := fps.StateWritesBefore(ctx, node, window, since)
	if err != nil {
		return true
	}
	for _, st := range states {
		prior, known := w.leaders[st.TP()]
		if known && prior != w.broker && int(st.Leader) == prior && !slices.Contains(st.ISR, int32(w.broker)) {
			return true
		}
	}
	return false
}

// holdRemoval runs before the provocation stops other. The controller
// answers a broker's failure (or controlled shutdown) with the elections
// of the partitions it led first and only then removes it from the ISRs
// it follows in (Kafka 2.6.3's onReplicasBecomeOffline and
// doControlledShutdown, one write batch each, each reaching the window);
// an operator's topic creation may reach the window before either. Held
// at the elections, no leader holds a stale zkVersion: the new leaders
// have not been told and the old one is down. Held at the removal, each
// leader still in office shrinks other at the version it was told last,
// which ZooKeeper refuses. So the firings before the removal are let go.
// Without Env.Leaders the first firing holds.
func (r *fpRun) holdRemoval(ctx context.Context, other Target) {
	if !shrinkHold(r.plan, r.f.replicaLag) || r.f.leaders == nil || other.Name == "" {
		return
	}
	leaders, err := r.f.leaders.PartitionLeaders(ctx)
	if err != nil {
		return
	}
	r.mu.Lock()
	r.removal = &removalWait{broker: nodeID(other), leaders: leaders}
	r.mu.Unlock()
}
