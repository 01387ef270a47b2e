package checkers

import (
	"fmt"
	"math"
	"slices"

	"github.com/zkchaos/zkchaos/history"
)

// KnownLostUnflushedLeader: acknowledged records lost after
// crash-lose-unflushed cut the log of a partition's leader below them, and
// the restarted broker led the partition again at the same leader epoch,
// with no election between: no controller handled the end of its
// ZooKeeper session (the crashed broker was the controller, or the
// controller was held), and a controller that took over after the broker
// had registered again sent it, like every online replica, the leader and
// epoch ZooKeeper held (KafkaController.onControllerFailover →
// ReplicaStateMachine.startup → addLeaderAndIsrRequestForBrokers). The new
// process's Partition starts at leader epoch -1, so ReplicaManager
// accepts the epoch it led before (requestLeaderEpoch > currentLeaderEpoch)
// and makeLeader leads with the cut log. Its followers, already at that
// epoch, ignore the request, fetch past its log end, get
// OFFSET_OUT_OF_RANGE and truncate to it
// (AbstractFetcherThread.fetchOffsetAndTruncate): the records are gone
// from every replica, and the offsets are written again. KIP-380's broker
// epochs let a controller see a bounce only across the broker's own
// registrations it watched.
const KnownLostUnflushedLeader = "lost-unflushed-leader"

// leaderLoss returns the loss of crash x when it hit the partition's
// leader: the latest leadership before the crash is x's broker at epoch
// E, the crash cut that broker's log (below offset, when offset is known,
// and not below its cut's end), and after its restart that broker led at E
// again (a state, its role change, its own append), before it was taken
// back into an ISR. Any other leader, or an older epoch, in between is an
// election, which the other rules judge; a later epoch of the same broker
// logged first is not (the process acted on E before it). It returns nil
// otherwise.
func (p *unflushedPartition) leaderLoss(x unflushedExposure, offset int64) *unflushedLoss {
	c := x.crash
	cut := c.cuts[p.tp]
	if cut == nil || cut.To >= cut.From || (offset >= 0 && (offset < cut.To || offset >= cut.From)) {
		return nil
	}
	var prior *unflushedLeader
	for i := range p.leaders {
		if p.leaders[i].time < c.start.Time {
			prior = &p.leaders[i]
		}
	}
	if prior == nil || prior.node != c.node {
		return nil
	}
	var again *unflushedLeader
	for _, ls := range [][]unflushedLeader{p.leaders, p.appends} {
		for i := range ls {
			l := &ls[i]
			if l.node == c.node && l.epoch == prior.epoch && l.time >= c.restart && l.time < x.until && (again == nil || l.time < again.time) {
				again = l
				break
			}
		}
	}
	if again == nil {
		return nil
	}
	for _, ls := range [][]unflushedLeader{p.leaders, p.appends} {
		for _, l := range ls {
			// The broker's own later epoch may be logged first (a new
			// controller's write of the next epoch before the broker
			// logs the role change it had acted on: the process takes no
			// older epoch after a newer one).
			if l.time >= c.start.Time && l.time <= again.time && (l.node != c.node || l.epoch < prior.epoch) {
				return nil // an election since the crash
			}
		}
	}
	return &unflushedLoss{in: []unflushedExposure{x}, elected: *again, leader: true, prior: *prior, cut: cut}
}

// describeLeaderLoss names the leader of a leader's loss, its epoch, its
// crash with what it cut, and its leadership at that epoch after its
// restart.
func describeLeaderLoss(l *unflushedLoss, t0 int64) (string, []int) {
	x := l.in[0]
	return fmt.Sprintf("broker %d led %s at leader epoch %d (event %d, +%s) when it crashed at +%s (event %d: %s), its log cut from offset %d to %d; started again at +%s, it led at the same leader epoch %d (event %d, +%s) with no election between, and its followers truncated to its log",
		x.crash.node, l.cut.TP(), l.prior.epoch, l.prior.idx, rel(l.prior.time, t0), rel(x.crash.start.Time, t0), x.crash.start.Index, x.crash.start.Fault.Detail,
		l.cut.From, l.cut.To, rel(x.crash.restart, t0), l.elected.epoch, l.elected.idx, rel(l.elected.time, t0)), []int{x.crash.start.Index, l.prior.idx, l.elected.idx}
}

// cutBelow reports whether loss l's crash of node, after time after, cut
// node's log of tp at or below offset (and not above the log's end then):
// the broker lost the record there, and the producer state that record
// had made (Log.loadProducerState rebuilds it from what is left).
func (l *unflushedLoss) cutBelow(tp history.TopicPartition, node int32, after, offset int64) *unflushedExposure {
	for i, x := range l.in {
		if x.crash.node != node || x.crash.start.Time <= after {
			continue
		}
		if cut := x.crash.cuts[tp]; cut != nil && cut.To <= offset && offset < cut.From {
			return &l.in[i]
		}
	}
	return nil
}

// cutBy returns a crash of one of loss l's brokers after time after and
// no later than l's election that cut tp's log at offset, or nil: the log
// that held it is gone from that broker. It looks past the exposure l
// lists for a broker (the oldest one in force, which a leader, never taken
// back into an ISR, keeps) to every crash of it.
func (q *quorumLosses) cutBy(l *unflushedLoss, tp history.TopicPartition, after, offset int64) *unflushedExposure {
	p := q.parts[tp]
	if p == nil {
		return nil
	}
	for i := range p.exposures {
		x := &p.exposures[i]
		t := x.crash.start.Time
		if t <= after || t > l.elected.time || !slices.ContainsFunc(l.in, func(y unflushedExposure) bool { return y.crash.node == x.crash.node }) {
			continue
		}
		if cut := x.crash.cuts[tp]; cut != nil && cut.To <= offset && offset < cut.From {
			return x
		}
	}
	return nil
}

// cutBetween returns a quorum loss of tp whose crashes came after after
// and whose election came before before, with a crash of one of its
// brokers that cut tp's log at offset (as cutBy), or nils. It looks past
// the first loss in that span: a crash that holds no cut of offset (a
// broker that had already lost it, crashed again) may make a loss of its
// own before the crash of the broker that kept the offset makes the one
// that took it.
func (q *quorumLosses) cutBetween(tp history.TopicPartition, after, before, offset int64) (*unflushedLoss, *unflushedExposure) {
	q.load()
	p := q.parts[tp]
	if p == nil {
		return nil, nil
	}
	var x *unflushedExposure
	loss := p.quorumLossWhere(after, -1, before, func(l *unflushedLoss) bool {
		x = q.cutBy(l, tp, after, offset)
		return x != nil
	})
	if loss == nil {
		return nil, nil
	}
	return loss, x
}

// ledAfterCut returns a loss in which broker node led tp at leader epoch
// epoch after a crash of it that cut its log at offset (and that crash's
// exposure), or nils: the crash took the offset from node's log, and node
// led at epoch before it had fetched back what it lost, as its leader's
// loss (leaderLoss), or with a quorum of the replicas exposed at once, or
// elected from an ISR of exposed brokers only (isrLoss).
func (q *quorumLosses) ledAfterCut(tp history.TopicPartition, node, epoch int32, offset int64) (*unflushedLoss, *unflushedExposure) {
	q.load()
	p := q.parts[tp]
	if p == nil {
		return nil, nil
	}
	for i := range p.exposures {
		x := &p.exposures[i]
		cut := x.crash.cuts[tp]
		if x.crash.node != node || cut == nil || offset < cut.To || offset >= cut.From {
			continue
		}
		if loss := p.leaderLoss(*x, offset); loss != nil && loss.elected.epoch == epoch {
			return loss, x
		}
		for _, l := range p.leaders {
			if l.node != node || l.epoch != epoch || l.time < x.crash.start.Time || l.time >= x.until {
				continue
			}
			if in := p.exposedAt(l.time, &l); len(in) >= 2 {
				return &unflushedLoss{in: in, elected: l}, x
			}
			if loss := p.isrLoss(l, math.MinInt64); loss != nil {
				return loss, x
			}
		}
	}
	return nil, nil
}

// leaderAt is the leadership of tp with the highest leader epoch among
// those that began at or before t.
func (q *quorumLosses) leaderAt(tp history.TopicPartition, t int64) (unflushedLeader, bool) {
	q.load()
	p := q.parts[tp]
	if p == nil {
		return unflushedLeader{}, false
	}
	var best unflushedLeader
	ok := false
	for _, l := range p.leaders {
		if l.time <= t && (!ok || l.epoch > best.epoch) {
			best, ok = l, true
		}
	}
	return best, ok
}

// ledSinceCut returns a loss in which broker node, after a crash of it
// that cut its log of tp at offset, led tp at some leader epoch no later
// than at, from which it led without a break up to leader epoch epoch
// (no other broker led tp at an epoch in between), and that crash's
// exposure; or nils. The loss is one ledBy finds for that leadership,
// with a crash of node among its exposures that cut offset. The log node leads with at epoch is
// then the cut one with what it appended since, whatever elections kept it
// leader in between (an ISR change by the controller bumps the epoch too):
// no replica it could have fetched the lost records back from led.
func (q *quorumLosses) ledSinceCut(tp history.TopicPartition, node, epoch int32, offset, at int64) (*unflushedLoss, *unflushedExposure) {
	q.load()
	p := q.parts[tp]
	if p == nil {
		return nil, nil
	}
	// The lowest epoch of node's unbroken run up to epoch: the highest epoch
	// at most epoch that another broker led at, plus one.
	from := int32(math.MinInt32)
	for _, ls := range [][]unflushedLeader{p.leaders, p.appends} {
		for _, l := range ls {
			if l.node != node && l.epoch <= epoch && l.time <= at {
				from = max(from, l.epoch+1)
			}
		}
	}
	tried := map[int32]bool{}
	for _, l := range p.leaders {
		if l.node != node || l.epoch < from || l.epoch > epoch || l.time > at || tried[l.epoch] {
			continue
		}
		tried[l.epoch] = true
		if loss := q.ledBy(tp, node, l.epoch); loss != nil && loss.elected.time <= at {
			if x := loss.cutBelow(tp, node, math.MinInt64, offset); x != nil {
				return loss, x
			}
		}
	}
	return nil, nil
}

// inForceAt reports whether loss l's leadership was in force at time at,
// for what a follower of it saw then: its election is logged by then, or
// the elected broker, one of the loss's crashed brokers, had been started
// again by then. A leader acts on its LeaderAndIsr before it logs the role
// change, so its follower, already at the epoch, may fetch from it and
// truncate first: that truncation names the broker and the epoch, and
// after the restart no process of that broker holds the lost records.
// The loss's crashes must all have happened by then: a crash after at
// (another broker's, making a quorum of a leadership that began before
// it) took nothing that was seen at at.
func (l *unflushedLoss) inForceAt(at int64) bool {
	if l.elected.time <= at {
		return true
	}
	restarted := false
	for _, x := range l.in {
		if x.crash.start.Time > at {
			return false
		}
		if x.crash.node == l.elected.node && x.crash.restart <= at {
			restarted = true
		}
	}
	return restarted
}
