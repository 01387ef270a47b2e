package checkers

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/zkchaos/zkchaos/history"
)

// KnownLostUnflushedQuorum: acknowledged records lost after
// crash-lose-unflushed hit two or more replicas of their partition at once
// (a quorum with replication factor 3): Kafka does not fsync appends
// (Log.flush runs on roll and on close), so a record that had reached only
// page caches that all crashed is gone, and Kafka does not promise
// otherwise. A loss with at most one replica exposed at a time is a
// violation: replication must repair it.
const KnownLostUnflushedQuorum = "lost-unflushed-quorum"

// crashLoseUnflushed is the fault's name in the nemesis's events
// (schedule.CrashLoseUnflushed; checkers links no fault planning).
const crashLoseUnflushed = "crash-lose-unflushed"

// unflushedCrash is one crash-lose-unflushed of one broker: its fault_start
// and when it was started again: the broker's first node_start after the
// crash, else the fault's stop (MaxInt64 if neither). The restarted
// process can be back in the ISR before the nemesis logs the stop.
type unflushedCrash struct {
	node    int32
	start   *history.Event
	restart int64
}

// unflushedCrashes lists the history's crash-lose-unflushed faults in
// start order.
func unflushedCrashes(h *history.History) []unflushedCrash {
	var out []unflushedCrash
	open := map[string]int{} // source/id → index in out
	for e := range eventsOf(h, history.KindFaultStart, history.KindFaultStop, history.KindNodeStart) {
		if e.Kind == history.KindNodeStart {
			for i := range out {
				if c := &out[i]; c.node == e.Node && e.Time >= c.start.Time && e.Time < c.restart {
					c.restart = e.Time
				}
			}
			continue
		}
		f := e.Fault
		if f == nil || f.Name != crashLoseUnflushed {
			continue
		}
		key := e.Source + "/" + f.ID
		if e.Kind == history.KindFaultStart {
			var id int32
			if len(f.Targets) != 1 {
				continue
			}
			if _, err := fmt.Sscanf(f.Targets[0], "n%d", &id); err != nil {
				continue
			}
			open[key] = len(out)
			out = append(out, unflushedCrash{node: id, start: e, restart: math.MaxInt64})
			continue
		}
		if i, ok := open[key]; ok {
			out[i].restart = min(out[i].restart, e.Time)
			delete(open, key)
		}
	}
	return out
}

// unflushedExposure is a crash's exposure on one partition: from the
// crash until the partition's ISR lists the broker again in a state
// logged after its restart (it fetched back what it lost), or the end.
type unflushedExposure struct {
	crash  unflushedCrash
	until  int64
	rejoin int // the state event, -1 if never
}

// unflushedPartition is what the judge needs of one partition: the
// exposures of the brokers that held it and its states in log order.
type unflushedPartition struct {
	exposures []unflushedExposure
	states    []zkState
}

// unflushedExposures lists, per partition, the crashes of brokers that
// held it (leader or in the ISR of the latest state logged before the
// crash; any broker when no state was logged before it) and how long each
// stayed exposed.
func unflushedExposures(h *history.History, crashes []unflushedCrash) map[history.TopicPartition]*unflushedPartition {
	out := map[history.TopicPartition]*unflushedPartition{}
	for tp, zs := range partitionStates(h) {
		states := slices.Concat(zs.ordered, zs.unordered)
		slices.SortStableFunc(states, func(a, b zkState) int { return cmp.Compare(a.time, b.time) })
		p := &unflushedPartition{states: states}
		for _, c := range crashes {
			held := true
			ex := unflushedExposure{crash: c, until: math.MaxInt64, rejoin: -1}
			for _, s := range states {
				switch {
				case s.time < c.start.Time:
					held = s.Leader == c.node || slices.Contains(s.ISR, c.node)
				case s.time >= c.restart && slices.Contains(s.ISR, c.node) && ex.rejoin < 0:
					ex.until, ex.rejoin = s.time, s.idx
				}
			}
			if held {
				p.exposures = append(p.exposures, ex)
			}
		}
		out[tp] = p
	}
	return out
}

// isrBefore is the ISR of the latest state logged before t, and whether
// there was one.
func (p *unflushedPartition) isrBefore(t int64) ([]int32, bool) {
	i, _ := slices.BinarySearchFunc(p.states, t, func(s zkState, t int64) int { return cmp.Compare(s.time, t) })
	if i == 0 {
		return nil, false
	}
	return p.states[i-1].ISR, true
}

// quorumLoss looks for an instant, a crash after invoked (when the
// record's produce began), at which two or more brokers that held the
// partition were exposed at once (crashed after invoked, not yet back in
// the ISR) and every member of the ISR logged before that instant was one
// of them: no replica the controller could elect still held the record.
// It returns the exposures in force then, in crash order, or nil. With a
// member of that ISR not exposed, the loss stays a violation: Kafka elects
// that member, which has every acknowledged record.
func (p *unflushedPartition) quorumLoss(invoked int64) []unflushedExposure {
	for _, at := range p.exposures {
		t := at.crash.start.Time
		if t <= invoked {
			continue
		}
		var in []unflushedExposure
		brokers := map[int32]bool{}
		for _, x := range p.exposures {
			if x.crash.start.Time > invoked && x.crash.start.Time <= t && t < x.until && !brokers[x.crash.node] {
				in = append(in, x)
				brokers[x.crash.node] = true
			}
		}
		if len(in) < 2 {
			continue
		}
		isr, _ := p.isrBefore(t)
		if slices.ContainsFunc(isr, func(id int32) bool { return !brokers[id] }) {
			continue
		}
		return in
	}
	return nil
}

// describeQuorumLoss names the brokers of a quorum loss, with the times
// of their crashes and of their return to the ISR.
func describeQuorumLoss(in []unflushedExposure, t0 int64) (string, []int) {
	var parts []string
	var evs []int
	for _, x := range in {
		back := "never back in the ISR"
		if x.rejoin >= 0 {
			back = fmt.Sprintf("back in the ISR at +%s (event %d)", rel(x.until, t0), x.rejoin)
		}
		parts = append(parts, fmt.Sprintf("broker %d crashed at +%s (event %d: %s), %s",
			x.crash.node, rel(x.crash.start.Time, t0), x.crash.start.Index, x.crash.start.Fault.Detail, back))
		evs = append(evs, x.crash.start.Index)
	}
	return strings.Join(parts, "; "), evs
}

// unflushedJudge excuses the durability checker's losses that a quorum's
// crash-lose-unflushed explains.
type unflushedJudge struct {
	h         *history.History
	t0        int64
	exposures map[history.TopicPartition]*unflushedPartition
	lost      []UnflushedLoss
	divergent int // offsets read with two values that a quorum loss explains
}

// UnflushedLoss is an acknowledged record lost to a quorum's
// crash-lose-unflushed, as results.json lists it.
type UnflushedLoss struct {
	Partition string  `json:"partition"`
	Offset    int64   `json:"offset"`
	Brokers   []int32 `json:"brokers"`
	Crashes   []int   `json:"crash_events"`
}

// unflushedQuorum prepares the judge; with no crash-lose-unflushed in the
// history (or no loss) it excuses nothing and costs nothing.
func (d *durabilityJudge) unflushedQuorum(h *history.History) *unflushedJudge {
	u := &unflushedJudge{h: h}
	if len(d.losses)+len(d.divergent) == 0 || len(h.Events) == 0 {
		return u
	}
	crashes := unflushedCrashes(h)
	if len(crashes) < 2 {
		return u
	}
	u.t0 = h.Events[0].Time
	u.exposures = unflushedExposures(h, crashes)
	return u
}

// excuses reports whether loss l (lr in the listing) follows a quorum's
// crash-lose-unflushed, and if so counts it as the known anomaly.
func (u *unflushedJudge) excuses(r *report, l durabilityLoss, lr LostRecord) bool {
	if u.exposures == nil || l.invoke < 0 || l.invoke >= len(u.h.Events) {
		return false
	}
	p := u.exposures[l.tp]
	if p == nil {
		return false
	}
	in := p.quorumLoss(u.h.Events[l.invoke].Time)
	if in == nil {
		return false
	}
	who, evs := describeQuorumLoss(in, u.t0)
	var brokers []int32
	for _, x := range in {
		brokers = append(brokers, x.crash.node)
	}
	u.lost = append(u.lost, UnflushedLoss{Partition: lr.Partition, Offset: lr.Offset, Brokers: brokers, Crashes: evs})
	r.knownAnomaly(KnownLostUnflushedQuorum, append(slices.Clone(lr.Events), evs...),
		"%s Every replica the controller could elect had lost its unflushed suffix: %s.", l.text, who)
	return true
}

// excusesDivergent reports whether an offset of tp seen with two values
// (text says how) follows a quorum's crash-lose-unflushed between the two
// sightings: the record first seen was lost with the unflushed suffixes,
// and the leader elected afterwards wrote another at its offset. It is the
// same known anomaly.
func (u *unflushedJudge) excusesDivergent(r *report, tp history.TopicPartition, dv DivergentOffset, text string) bool {
	p := u.exposures[tp]
	if p == nil || len(dv.Events) != 2 {
		return false
	}
	first, second := &u.h.Events[min(dv.Events[0], dv.Events[1])], &u.h.Events[max(dv.Events[0], dv.Events[1])]
	in := p.quorumLoss(first.Time)
	if in == nil || in[len(in)-1].crash.start.Time >= second.Time {
		return false
	}
	who, evs := describeQuorumLoss(in, u.t0)
	u.divergent++
	r.knownAnomaly(KnownLostUnflushedQuorum, append(slices.Clone(dv.Events), evs...),
		"%s Every replica the controller could elect had lost its unflushed suffix in between: %s.", text, who)
	return true
}

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

// between returns the exposures of a quorum loss of tp whose crashes all
// came after after and whose instant (the last of them) came before
// before, or nil.
func (q *quorumLosses) between(tp history.TopicPartition, after, before int64) []unflushedExposure {
	if !q.asked {
		q.asked = true
		if len(q.h.Events) > 0 {
			q.t0 = q.h.Events[0].Time
			if crashes := unflushedCrashes(q.h); len(crashes) >= 2 {
				q.parts = unflushedExposures(q.h, crashes)
			}
		}
	}
	p := q.parts[tp]
	if p == nil {
		return nil
	}
	in := p.quorumLoss(after)
	if in == nil || in[len(in)-1].crash.start.Time >= before {
		return nil
	}
	return in
}

// isUnflushedLoss reports whether t is the nemesis's record of
// crash-lose-unflushed cutting a down broker's log: not a decision of the
// broker, and like start-up recovery it caps what the next process has.
func isUnflushedLoss(t *history.Truncation) bool { return t.Reason == history.TruncationUnflushedLoss }

// any returns the exposures of a quorum loss of the partition named tp
// ("topic-partition") at any time, or nil.
func (q *quorumLosses) any(tp string) []unflushedExposure {
	for _, t := range sortedTPs(partitionStates(q.h)) {
		if t.String() == tp {
			return q.between(t, math.MinInt64, math.MaxInt64)
		}
	}
	return nil
}
