package checkers

import (
	"math"
	"slices"

	"github.com/zkchaos/zkchaos/history"
)

// quorumLosses answers, for checkers other than durability, whether a
// quorum's crash-lose-unflushed explains what they see on a partition. It
// reads the crashes only when first asked.
type quorumLosses struct {
	h     *history.History
	t0    int64
	asked bool
	parts map[history.TopicPartition]*unflushedPartition
}

func newQuorumLosses(h *history.History) *quorumLosses { return &quorumLosses{h: h} }

// load reads the crashes and exposures once.
func (q *quorumLosses) load() {
	if q.asked {
		return
	}
	q.asked = true
	if len(q.h.Events) > 0 {
		q.t0 = q.h.Events[0].Time
		if crashes := unflushedCrashes(q.h); len(crashes) > 0 {
			q.parts = unflushedExposures(q.h, crashes)
		}
	}
}

// between returns a quorum loss of tp whose crashes all came after after
// and whose election came before before, or nil.
func (q *quorumLosses) between(tp history.TopicPartition, after, before int64) *unflushedLoss {
	q.load()
	p := q.parts[tp]
	if p == nil {
		return nil
	}
	return p.quorumLoss(after, -1, before)
}

// isUnflushedLoss reports whether t is the nemesis's record of
// crash-lose-unflushed cutting a down broker's log: not a decision of the
// broker, and like start-up recovery it caps what the next process has.
func isUnflushedLoss(t *history.Truncation) bool { return t.Reason == history.TruncationUnflushedLoss }

// any returns the exposures of a quorum loss of the partition named tp
// ("topic-partition") at any time, or nil.
func (q *quorumLosses) any(tp string) *unflushedLoss {
	for _, t := range sortedTPs(partitionStates(q.h)) {
		if t.String() == tp {
			return q.between(t, math.MinInt64, math.MaxInt64)
		}
	}
	return nil
}

// ledBy returns a quorum loss of tp in which node, exposed, led at leader
// epoch epoch, or nil: what a follower of that leadership truncated, or
// found different below the high watermark, the lost suffix explains.
func (q *quorumLosses) ledBy(tp history.TopicPartition, node, epoch int32) *unflushedLoss {
	q.load()
	p := q.parts[tp]
	if p == nil {
		return nil
	}
	// A quorum's loss first: it holds whatever ISR the leader got.
	for _, quorum := range []bool{true, false} {
		for _, at := range p.exposures {
			t := at.crash.start.Time
			in := p.exposedAt(t, nil)
			i := slices.IndexFunc(in, func(x unflushedExposure) bool { return x.crash.node == node })
			if i < 0 || quorum != (len(in) >= 2) {
				continue
			}
			for _, l := range p.leaders {
				if l.time < t || l.node != node || l.epoch != epoch || l.time >= in[i].until || p.superseded(in[i], l.time) {
					continue
				}
				if quorum {
					return &unflushedLoss{in: in, elected: l}
				}
				if loss := p.isrLoss(l, math.MinInt64); loss != nil {
					return loss
				}
			}
		}
	}
	for _, x := range p.exposures {
		if x.crash.node != node {
			continue
		}
		if loss := p.leaderLoss(x, -1); loss != nil && loss.elected.epoch == epoch {
			return loss
		}
	}
	for _, l := range p.leaders {
		if l.node != node || l.epoch != epoch {
			continue
		}
		if loss := p.electedLoss(l, math.MinInt64, -1); loss != nil {
			return loss
		}
	}
	return nil
}

// firstExposed returns when the earliest exposed election of the crash
// of loss's elected broker on tp took place: a broker elected again from
// an ISR of crashed brokers (a controller's ISR change, one leader epoch
// up) is exposed for the same records, and what a follower fetched
// between the two came from the exposed leader, not from before the loss.
// An earlier election of another broker whose crash the loss also lists
// (a quorum's) is not that: the loss's elected broker lost, in its own
// crash, what that other leadership had written since.
func (q *quorumLosses) firstExposed(tp history.TopicPartition, loss *unflushedLoss) int64 {
	q.load()
	first := loss.elected.time
	p := q.parts[tp]
	if p == nil {
		return first
	}
	electedCrash := func(l *unflushedLoss) *history.Event {
		for _, x := range l.in {
			if x.crash.node == l.elected.node {
				return x.crash.start
			}
		}
		return nil
	}
	mine := electedCrash(loss)
	shares := func(l *unflushedLoss) bool {
		c := electedCrash(l)
		return c != nil && c == mine
	}
	for _, l := range p.leaders {
		if other := q.ledBy(tp, l.node, l.epoch); other != nil && other.elected.time < first && shares(other) {
			first = other.elected.time
		}
	}
	return first
}

// ledBetween returns a loss of tp whose exposed leader was elected after
// since and no later than at, at a leader epoch below epoch, or nil: a
// replica that followed no leader since then still holds the log from
// before it, and when every leader after that election descends from the
// exposed one (descended), what it cuts from that log was lost there.
// It returns the first such loss that accept takes (any, when accept is
// nil): an earlier exposed election, of an older crash, may not be the one
// that took what the follower held.
func (q *quorumLosses) ledBetween(tp history.TopicPartition, epoch int32, since, at int64, accept func(*unflushedLoss) bool) *unflushedLoss {
	q.load()
	p := q.parts[tp]
	if p == nil {
		return nil
	}
	for _, l := range p.leaders {
		if l.epoch >= epoch || l.time <= since || l.time > at {
			continue
		}
		if loss := q.ledBy(tp, l.node, l.epoch); loss != nil && loss.elected.time > since && loss.elected.time <= at && p.descended(loss.elected, epoch, at) &&
			(accept == nil || accept(loss)) {
			return loss
		}
	}
	return nil
}

// descended reports whether every broker other than exposed's that led
// the partition after exposed's election, at an epoch above it up to
// epoch (the follower's own leader's, up to at), had followed a leader of
// an epoch from exposed's on since that election (a truncation of its own
// at that epoch, or that leader taking it into its ISR) before it led: it
// then led with a log descended from the exposed one's. A broker that
// never followed since kept the log from before, with the records the
// exposed leader lost, and whoever followed it got them back.
func (p *unflushedPartition) descended(exposed unflushedLeader, epoch int32, at int64) bool {
	for _, o := range p.leaders {
		if o.node == exposed.node || o.epoch <= exposed.epoch || o.epoch > epoch || o.time > at {
			continue
		}
		if !slices.ContainsFunc(p.followed, func(f unflushedLeader) bool {
			return f.node == o.node && f.epoch >= exposed.epoch && f.epoch < o.epoch && f.time >= exposed.time && f.time <= o.time
		}) {
			return false
		}
	}
	return true
}
