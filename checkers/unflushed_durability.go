package checkers

import (
	"fmt"
	"math"
	"slices"

	"github.com/zkchaos/zkchaos/history"
)

// unflushedJudge excuses the durability checker's losses that a quorum's
// crash-lose-unflushed explains.
type unflushedJudge struct {
	h         *history.History
	t0        int64
	exposures map[history.TopicPartition]*unflushedPartition
	lost      []UnflushedLoss
	divergent int      // offsets read with two values that a quorum loss explains
	names     []string // the known anomalies named, in first-named order
	// ops are the history's operations; invoked, filled on first use, is
	// when each value's first produce to its partition was invoked.
	ops     []history.Operation
	invoked map[producerValue]int64
}

// named notes that the judge named known anomaly name.
func (u *unflushedJudge) named(name string) {
	if !slices.Contains(u.names, name) {
		u.names = append(u.names, name)
	}
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
func (d *durabilityJudge) unflushedQuorum(h *history.History, ops []history.Operation) *unflushedJudge {
	u := &unflushedJudge{h: h, ops: ops}
	if len(d.losses)+len(d.divergent) == 0 || len(h.Events) == 0 {
		return u
	}
	crashes := unflushedCrashes(h)
	if len(crashes) == 0 {
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
	loss := p.quorumLoss(u.h.Events[l.invoke].Time, lr.Offset, math.MaxInt64)
	if loss == nil {
		return false
	}
	who, evs := describeQuorumLoss(loss, u.t0)
	var brokers []int32
	for _, x := range loss.in {
		brokers = append(brokers, x.crash.node)
	}
	u.lost = append(u.lost, UnflushedLoss{Partition: lr.Partition, Offset: lr.Offset, Brokers: brokers, Crashes: evs})
	u.named(loss.name())
	r.knownAnomaly(loss.name(), append(slices.Clone(lr.Events), evs...), "%s %s: %s.", l.text, loss.lostIt(""), who)
	return true
}

// excusesDivergent reports whether an offset of tp seen with two values
// (text says how) follows a quorum's crash-lose-unflushed between the two
// sightings: the record first seen was lost with the unflushed suffixes,
// and the leader elected afterwards wrote another at its offset. It is the
// same known anomaly. The crash may also come before the first sighting
// and after the first value's produce was invoked, when the exposed broker
// led only after that sighting: a replica that kept the record served it
// in between.
func (u *unflushedJudge) excusesDivergent(r *report, tp history.TopicPartition, dv DivergentOffset, text string) bool {
	p := u.exposures[tp]
	if p == nil || len(dv.Events) != 2 {
		return false
	}
	firstValue := dv.Values[0]
	if dv.Events[1] < dv.Events[0] {
		firstValue = dv.Values[1]
	}
	first, second := &u.h.Events[min(dv.Events[0], dv.Events[1])], &u.h.Events[max(dv.Events[0], dv.Events[1])]
	loss := p.quorumLoss(first.Time, dv.Offset, second.Time)
	when := " in between"
	if written, ok := u.written(tp, firstValue); loss == nil && ok && written < first.Time {
		// The first value was written before it was first seen: a
		// replica that kept it may have served it after the crash that
		// cut it from the exposed broker, as long as that broker led only
		// after the sighting.
		loss = p.quorumLossWhere(written, dv.Offset, second.Time, func(l *unflushedLoss) bool { return l.elected.time > first.Time })
		when = fmt.Sprintf(" after %q was written (its produce invoked at +%s), and the exposed broker led after the first read", firstValue, rel(written, u.t0))
	}
	if loss == nil {
		return false
	}
	who, evs := describeQuorumLoss(loss, u.t0)
	u.divergent++
	u.named(loss.name())
	r.knownAnomaly(loss.name(), append(slices.Clone(dv.Events), evs...), "%s %s: %s.", text, loss.lostIt(when), who)
	return true
}

// written returns when the first produce of value to tp was invoked, if
// the history has one: no crash before it cut the record.
func (u *unflushedJudge) written(tp history.TopicPartition, value string) (int64, bool) {
	if u.invoked == nil {
		u.invoked = map[producerValue]int64{}
		for _, op := range u.ops {
			o := op.Op()
			if o.F != history.FProduce {
				continue
			}
			k := producerValue{o.TP(), o.Value}
			if t, ok := u.invoked[k]; !ok || op.Invoke.Time < t {
				u.invoked[k] = op.Invoke.Time
			}
		}
	}
	t, ok := u.invoked[producerValue{tp, value}]
	return t, ok
}
