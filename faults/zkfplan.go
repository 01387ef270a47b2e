package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/zklayout"
)

// failover-on-lagging-zk's plan: who plays which part, resolved when the
// fault starts, and the watch for the state change under the successor.

// zkfPlan is who plays which part, resolved when the fault starts.
type zkfPlan struct {
	ctl     Target   // the controller, cut off
	succ    Target   // its successor, served by lagging
	others  []Target // the other survivors, kept out of the election
	leader  Target   // the ZooKeeper leader
	lagging Target   // the follower serving succ
	// watch: the partitions whose ISR shrink of ctl is the state change
	// under succ; empty when no survivor but succ leads one.
	watch []shrinkWatch
	// move, when set, is a survivor on the ZooKeeper leader that would
	// be a better successor than any on a follower.
	move Target
	// ctlLeads: the workload partitions the controller leads.
	ctlLeads []int32
}

// plan resolves the roles now; pick chooses the successor among
// the best candidates (survivors served by a follower), so a replayed step
// picks the same position among them.
func (f *zkFailover) plan(ctx context.Context, pick int) (zkfPlan, error) {
	k := FailoverOnLaggingZK
	var p zkfPlan
	nodes, zks := f.world.Nodes(), f.world.ZKServers()
	cid, err := f.world.Controller(ctx)
	if err != nil {
		return p, fmt.Errorf("%s: %w", k, err)
	}
	if p.ctl, err = byName(nodes, fmt.Sprintf("n%d", cid)); err != nil {
		return p, fmt.Errorf("%s: controller: %w", k, err)
	}
	lid, err := f.world.ZKLeader(ctx)
	if err != nil {
		return p, fmt.Errorf("%s: %w", k, err)
	}
	if p.leader, err = byName(zks, fmt.Sprintf("zk%d", lid)); err != nil {
		return p, fmt.Errorf("%s: ZooKeeper leader: %w", k, err)
	}
	served := f.ops.sessions(ctx, nodes, zks)
	// The state change under the successor is another survivor's ISR
	// shrink of the controller: a successor whose fellow survivors lead no
	// partition with the controller in its ISR (leadership piled on it by
	// earlier faults or a controlled shutdown) waits for a shrink that
	// never comes. Best is a shrinking leader whose own session is on
	// another server than the successor's: its write is answered without
	// waiting for the slowed server. Prefer the best candidates; with
	// none, any.
	var parts []shrinkWatch // partitions led by a survivor, the controller in their ISR
	topic, n := f.parts.WorkloadTopic()
	for q := range n {
		l, isr, err := f.parts.PartitionISR(ctx, topic, q)
		switch {
		case err != nil || l < 0:
		case l == cid:
			p.ctlLeads = append(p.ctlLeads, q)
		case slices.Contains(isr, cid):
			parts = append(parts, shrinkWatch{q, l})
		}
	}
	score := func(c Target) int {
		best := 0
		for _, q := range parts {
			if q.leader == nodeID(c) {
				continue
			}
			best = max(best, 1)
			if s, ok := served[fmt.Sprintf("n%d", q.leader)]; ok && s != served[c.Name] {
				best = 2
			}
		}
		return best
	}
	var cands, onLeader []Target
	top := 0
	for _, t := range without(nodes, p.ctl) {
		switch s, ok := served[t.Name]; {
		case ok && s != p.leader.Name:
			cands = append(cands, t)
			top = max(top, score(t))
		case ok && score(t) > 0:
			onLeader = append(onLeader, t)
		}
	}
	// A survivor that would leave a shrinking leader but is served by the
	// ZooKeeper leader (the leader's reads are never stale) is worth
	// moving when no candidate is as good: planSoon cuts it
	// from the leader until its session moves to a follower.
	if top == 0 && len(onLeader) > 0 {
		p.move = onLeader[pick%len(onLeader)]
	}
	if len(cands) == 0 {
		return p, fmt.Errorf("%s: no broker but the controller %s has its session on a ZooKeeper follower (leader %s, sessions %v)",
			k, p.ctl.Name, p.leader.Name, served)
	}
	var best []Target
	for _, c := range cands {
		if score(c) == top {
			best = append(best, c)
		}
	}
	p.succ = best[pick%len(best)]
	if p.lagging, err = byName(zks, served[p.succ.Name]); err != nil {
		return p, fmt.Errorf("%s: %w", k, err)
	}
	p.others = without(without(nodes, p.ctl), p.succ)
	for _, q := range parts {
		if q.leader != nodeID(p.succ) {
			p.watch = append(p.watch, q)
		}
	}
	return p, nil
}

// shrinkWatch is a partition of the workload topic led by a survivor other
// than the successor with the controller in its ISR: that leader shrinks
// the cut-off controller out of it.
type shrinkWatch struct {
	partition int32
	leader    int
}

// zkfSlowAhead is how long before the others' ISR shrinks are due the link
// to the successor's server is slowed (at once when replica.lag.time.max
// is this short or shorter, as in the power table's KAFKA-16667 row).
const zkfSlowAhead = 2 * time.Second

// zkfPlanWithin is how long the fault waits for a plan with a partition to
// watch (a broker restarting, say after an operator's controlled shutdown,
// has no session to place yet and leads nothing), as a multiple of the
// session timeout.
const zkfPlanWithin = 2

// zkfMaxMoves bounds the sessions one fault moves: the controller may
// change while the first moves (an operator's controlled shutdown), and the
// new one's successor be on the leader again.
const zkfMaxMoves = 2

// planSoon plans until the plan has a partition to watch or
// zkfPlanWithin session timeouts have passed, and returns the last plan.
// Up to zkfMaxMoves times, it moves the session of a survivor the plan
// wants moved off the ZooKeeper leader.
func (f *zkFailover) planSoon(ctx context.Context, pick int) (zkfPlan, error) {
	deadline := time.Now().Add(zkfPlanWithin * f.session)
	moves, elected := 0, false
	for {
		p, err := f.plan(ctx, pick)
		if err == nil && len(p.watch) == 0 && len(p.ctlLeads) > 0 && !elected {
			// The controller leads the partitions, so no survivor will
			// shrink it out of an ISR once it is cut off (the usual
			// state after a leader came back to partitions that waited
			// offline for it). An operator's preferred replica election
			// hands the partitions whose preferred replica is another
			// broker back to it; plan again once the controller took it.
			elected = true
			topic, _ := f.parts.WorkloadTopic()
			if f.ops.electPreferred(ctx, p.ctl, topic, p.ctlLeads) == nil {
				if d := time.Now().Add(f.session); d.After(deadline) {
					deadline = d
				}
				continue
			}
		}
		if p.move.Name != "" && moves < zkfMaxMoves {
			// Planned again whatever came of it: roles may have
			// changed meanwhile (a new controller wants another
			// survivor moved).
			moves++
			f.moveSession(ctx, p.move, p.leader, zkfPlanWithin*f.session)
			if d := time.Now().Add(f.session); d.After(deadline) {
				deadline = d
			}
			continue
		}
		if err == nil && len(p.watch) > 0 || time.Now().After(deadline) || !sleepUntil(ctx, time.Now().Add(200*time.Millisecond)) {
			return p, err
		}
	}
}

// moveSession cuts broker t from ZooKeeper server leader until t's session
// is served by another server, then heals the cut. The broker's client
// notices the dead connection within two thirds of its session timeout and
// goes on to the next server of its list, never the one it left, so the
// session moves without expiring.
func (f *zkFailover) moveSession(ctx context.Context, t, leader Target, within time.Duration) error {
	if err := f.ops.partition(ctx, "partition", []Target{t}, []Target{leader}); err != nil {
		return errors.Join(err, f.ops.healNet(context.WithoutCancel(ctx)))
	}
	deadline := time.Now().Add(within)
	var err error
	for {
		if s, ok := f.ops.sessions(ctx, f.world.Nodes(), f.world.ZKServers())[t.Name]; ok && s != leader.Name {
			break
		}
		if time.Now().After(deadline) || !sleepUntil(ctx, time.Now().Add(200*time.Millisecond)) {
			err = fmt.Errorf("%s's session still not on a follower %s after its cut from %s", t.Name, within, leader.Name)
			break
		}
	}
	return errors.Join(err, f.ops.healNet(context.WithoutCancel(ctx)))
}

// waitStaleShrink polls the watched partitions through the ZooKeeper
// leader until one's leader has shrunk the cut-off controller out of its
// ISR, or within has passed. It says which, and whether the lagging server
// had not applied that write yet (by its `srvr` zxid against the state's
// mzxid): then the successor, released now, reads the state from before
// it. A shrink the lagging server has already applied is no window: the
// watch goes on with the other partitions. Without a read through the
// leader it falls back to the run's own reads, unchecked.
func (f *zkFailover) waitStaleShrink(ctx context.Context, p zkfPlan, watch []shrinkWatch, topic string, dead int, within time.Duration) (what string, stale bool, mzxid int64) {
	watch = slices.Clone(watch)
	var missed []string
	deadline := time.Now().Add(within)
	for len(watch) > 0 {
		for i := 0; i < len(watch); i++ {
			s := watch[i]
			st, err := f.ops.stateAt(ctx, p.leader, topic, s.partition)
			if err != nil {
				l, isr, ierr := f.parts.PartitionISR(ctx, topic, s.partition)
				if ierr != nil {
					continue
				}
				st = PartitionState{PartitionState: zklayout.PartitionState{Leader: l, ISR: isr}}
			}
			if st.Leader != s.leader || slices.Contains(st.ISR, dead) {
				continue
			}
			what := fmt.Sprintf("n%d shrank %s-%d to %v", st.Leader, topic, s.partition, st.ISR)
			if st.Mzxid == 0 {
				return what, true, 0
			}
			applied, err := f.ops.appliedZxid(ctx, p.lagging)
			if err != nil {
				return fmt.Sprintf("%s at zxid %#x (%s's zxid unknown: %v)", what, st.Mzxid, p.lagging.Name, err), true, st.Mzxid
			}
			what = fmt.Sprintf("%s at zxid %#x, %s at %#x", what, st.Mzxid, p.lagging.Name, applied)
			if applied < st.Mzxid {
				return what, true, st.Mzxid
			}
			missed = append(missed, what)
			watch = slices.Delete(watch, i, i+1)
			i--
		}
		if len(watch) == 0 || time.Now().After(deadline) || !sleepUntil(ctx, time.Now().Add(50*time.Millisecond)) {
			break
		}
	}
	return strings.Join(missed, "; "), false, 0
}

// watchNow lists the partitions of topic that a broker other than the
// controller and the successor leads with the controller in its ISR, read
// through ZooKeeper server zk (the leader); nil when none or unreadable.
func watchNow(ctx context.Context, ops zkfOps, zk Target, topic string, parts int32, ctl, succ int) []shrinkWatch {
	var out []shrinkWatch
	for q := range parts {
		st, err := ops.stateAt(ctx, zk, topic, q)
		if err == nil && st.Leader >= 0 && st.Leader != ctl && st.Leader != succ && slices.Contains(st.ISR, ctl) {
			out = append(out, shrinkWatch{q, st.Leader})
		}
	}
	return out
}

// appliedAfter polls zk until it has applied zxid, up to within, and says
// how long after since that was.
func appliedAfter(ctx context.Context, ops zkfOps, zk Target, zxid int64, since time.Time, within time.Duration) string {
	deadline := since.Add(within)
	for {
		if z, err := ops.appliedZxid(ctx, zk); err == nil && z >= zxid {
			return fmt.Sprintf("%s applied it %s after the leader had it", zk.Name, time.Since(since).Round(10*time.Millisecond))
		}
		if time.Now().After(deadline) || !sleepUntil(ctx, time.Now().Add(20*time.Millisecond)) {
			return fmt.Sprintf("%s had not applied it %s after the leader had it", zk.Name, within)
		}
	}
}
