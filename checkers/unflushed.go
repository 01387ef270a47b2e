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

// KnownLostUnflushedISR: acknowledged records lost after crash-lose-unflushed
// hit one broker that a controller then elected from an ISR made only of
// brokers that had lost them (the ISR had shrunk to the crashed broker, or
// its other members were down and left it at the election). A broker that
// crashes and restarts stays in the ISR until a controller handles the end
// of its ZooKeeper session (KafkaController.onBrokerFailure, whose
// OfflineReplica step removes it) or its leader shrinks the ISR after
// replica.lag.time.max.ms; a controller that never ran that step (paused,
// killed, or taking over after the broker had registered again) leaves it
// there, and offlinePartitionLeaderElection takes any live ISR member. The
// new leader's epoch cache starts after the lost records, so
// LeaderEpochFileCache.endOffsetFor answers its first epoch's start offset
// for every older epoch and followers truncate to it: the records are on no
// replica Kafka could elect, the documented cost of not fsyncing.
const KnownLostUnflushedISR = "lost-unflushed-isr"

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
	// cuts is what the fault cut from each partition's log: the
	// nemesis's truncation records (reason crash-lose-unflushed).
	cuts map[history.TopicPartition]*history.Truncation
}

// unflushedCrashes lists the history's crash-lose-unflushed faults in
// start order.
func unflushedCrashes(h *history.History) []unflushedCrash {
	var out []unflushedCrash
	open := map[string]int{} // source/id → index in out
	for e := range eventsOf(h, history.KindFaultStart, history.KindFaultStop, history.KindNodeStart, history.KindTruncation) {
		if e.Kind == history.KindTruncation {
			if !isUnflushedLoss(e.Truncation) {
				continue
			}
			for i := len(out) - 1; i >= 0; i-- {
				if c := &out[i]; c.node == e.Node && e.Time >= c.start.Time && e.Time < c.restart {
					if c.cuts == nil {
						c.cuts = map[history.TopicPartition]*history.Truncation{}
					}
					c.cuts[e.Truncation.TP()] = e.Truncation
					break
				}
			}
			continue
		}
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
// crash until a leader took the restarted broker into its ISR again
// (isr_change expand, logged after its restart): it had fetched back up to
// the high watermark. A controller's state that still lists it (it never
// noticed the crash, or a new controller never knew the old process) does
// not end it: nothing was fetched.
type unflushedExposure struct {
	crash  unflushedCrash
	until  int64
	rejoin int // the isr_change event, -1 if never
}

// unflushedPartition is what the judge needs of one partition: the
// exposures of the brokers that held it, its states in log order and its
// leaderships in log order.
type unflushedPartition struct {
	tp        history.TopicPartition
	exposures []unflushedExposure
	states    []zkState
	leaders   []unflushedLeader
	// appends is each broker process's first append at each leader epoch,
	// in log order: a leader acts on LeaderAndIsr before it logs the
	// request, and clients may write to it in between.
	appends []unflushedLeader
	// followed is each sign of a broker following the leader of an epoch,
	// in log order: its own truncation at that epoch (not a crash's cut
	// or start-up recovery), or that leader taking it into its ISR. Its
	// log then descends from that leader's.
	followed []unflushedLeader
}

// unflushedLeader is evidence that node led the partition at epoch from
// time: a state naming it leader, or its own role_change to leader (which
// the watcher may see later than the node acts, or not at all when the
// next write overtakes it).
type unflushedLeader struct {
	node, epoch int32
	time        int64
	idx         int
	isr         []int32 // the ISR it was elected with
}

// unflushedExposures lists, per partition, the crashes of brokers that
// held it (leader or in the ISR of the latest state logged before the
// crash; any broker when no state was logged before it) and how long each
// stayed exposed.
func unflushedExposures(h *history.History, crashes []unflushedCrash) map[history.TopicPartition]*unflushedPartition {
	out := map[history.TopicPartition]*unflushedPartition{}
	type join struct {
		node int32
		time int64
		idx  int
	}
	joins := map[history.TopicPartition][]join{}
	followed := map[history.TopicPartition][]unflushedLeader{}
	for e := range eventsOf(h, history.KindISRChange, history.KindTruncation) {
		if t := e.Truncation; t != nil {
			if !isUnflushedLoss(t) && !isRecovery(t) {
				followed[t.TP()] = append(followed[t.TP()], unflushedLeader{e.Node, t.LeaderEpoch, e.Time, e.Index, nil})
			}
			continue
		}
		c := e.ISR
		if c == nil || c.Action != history.ISRExpand || c.Outcome != history.ZKOK {
			continue
		}
		for _, n := range c.New {
			if !slices.Contains(c.Old, n) {
				joins[c.TP()] = append(joins[c.TP()], join{n, e.Time, e.Index})
				followed[c.TP()] = append(followed[c.TP()], unflushedLeader{n, c.LeaderEpoch, e.Time, e.Index, nil})
			}
		}
	}
	leaders := map[history.TopicPartition][]unflushedLeader{}
	for e := range eventsOf(h, history.KindRoleChange) {
		if r := e.Role; r != nil && r.Role == history.RoleLeader {
			leaders[r.TP()] = append(leaders[r.TP()], unflushedLeader{e.Node, r.LeaderEpoch, e.Time, e.Index, r.ISR})
		}
	}
	appends := map[history.TopicPartition][]unflushedLeader{}
	type firstAppend struct {
		tp          history.TopicPartition
		node, epoch int32
		process     int64
	}
	seen := map[firstAppend]bool{}
	started := map[int32]int64{}
	for e := range eventsOf(h, history.KindNodeStart, history.KindProduceAppend) {
		if e.Kind == history.KindNodeStart {
			started[e.Node] = e.Time
			continue
		}
		a := e.Append
		k := firstAppend{a.TP(), e.Node, a.LeaderEpoch, started[e.Node]}
		if !seen[k] {
			seen[k] = true
			appends[a.TP()] = append(appends[a.TP()], unflushedLeader{e.Node, a.LeaderEpoch, e.Time, e.Index, nil})
		}
	}
	all := partitionStates(h)
	tps := map[history.TopicPartition]bool{}
	for tp := range all {
		tps[tp] = true
	}
	for tp := range leaders {
		tps[tp] = true
	}
	for tp := range tps {
		zs := all[tp]
		states := slices.Concat(zs.ordered, zs.unordered)
		slices.SortStableFunc(states, func(a, b zkState) int { return cmp.Compare(a.time, b.time) })
		ls := leaders[tp]
		for _, s := range states {
			if s.Leader >= 0 {
				ls = append(ls, unflushedLeader{s.Leader, s.LeaderEpoch, s.time, s.idx, s.ISR})
			}
		}
		slices.SortStableFunc(ls, func(a, b unflushedLeader) int { return cmp.Compare(a.time, b.time) })
		p := &unflushedPartition{tp: tp, states: states, leaders: ls, appends: appends[tp], followed: followed[tp]}
		for _, c := range crashes {
			held := true
			for _, s := range states {
				if s.time < c.start.Time {
					held = s.Leader == c.node || slices.Contains(s.ISR, c.node)
				}
			}
			if !held {
				continue
			}
			ex := unflushedExposure{crash: c, until: math.MaxInt64, rejoin: -1}
			for _, j := range joins[tp] {
				if j.node == c.node && j.time >= c.restart {
					ex.until, ex.rejoin = j.time, j.idx
					break
				}
			}
			p.exposures = append(p.exposures, ex)
		}
		out[tp] = p
	}
	return out
}

// unflushedLoss is a quorum loss: the exposures in force at its instant
// and the state that named one of them leader while it was exposed. isr
// marks a loss with fewer than two brokers exposed at once, where every
// member of the ISR the leader was elected with was exposed.
type unflushedLoss struct {
	in      []unflushedExposure
	elected unflushedLeader
	isr     bool
	// leader marks a leader's loss: in is its one crash, prior its
	// leadership before it, elected the first sign of it leading at the
	// same epoch after its restart, cut what the crash cut.
	leader bool
	prior  unflushedLeader
	cut    *history.Truncation
	// ahead marks an exposed broker elected ahead of ISR members that kept
	// the records (kept), by the partition's assignment (replicas).
	ahead    bool
	kept     []int32
	replicas []int32
}

// name is the known anomaly the loss is.
func (l *unflushedLoss) name() string {
	if l.leader {
		return KnownLostUnflushedLeader
	}
	if l.ahead {
		return KnownLostUnflushedElected
	}
	if l.isr {
		return KnownLostUnflushedISR
	}
	return KnownLostUnflushedQuorum
}

// lostIt says, as a sentence about one record, how the replicas that held
// it lost it; when says when ("" or " in between").
func (l *unflushedLoss) lostIt(when string) string {
	if l.leader {
		return "Its leader lost its unflushed suffix and led again at the same leader epoch after its restart, and its followers truncated to its log end, keeping their own records below it (AbstractFetcherThread.fetchOffsetAndTruncate compares no epochs there)" + when
	}
	if l.ahead {
		return "Its new leader, elected from an ISR that still listed it after its crash, had lost it with its unflushed suffix, and the members that kept it followed and truncated to its log" + when
	}
	if l.isr {
		return "Every member of the ISR its new leader was elected with had lost it with its unflushed suffix" + when
	}
	return "The replicas that held it lost their unflushed suffix at once" + when
}

// how says what hit the partition's replicas.
func (l *unflushedLoss) how() string {
	if l.leader {
		return "its leader lost its unflushed suffix and led again at the same leader epoch after its restart"
	}
	if l.ahead {
		return "its new leader, elected from an ISR that still listed it after its crash, had lost its unflushed suffix"
	}
	if l.isr {
		return "every member of the ISR its new leader was elected with had lost its unflushed suffix"
	}
	return "a quorum of its replicas lost their unflushed suffix at once"
}

// exposedAt lists the exposures in force at t, one per broker, for
// leadership l (nil at a crash's instant): its own broker stays exposed
// across its re-elections, lacking what it lost.
func (p *unflushedPartition) exposedAt(t int64, l *unflushedLeader) []unflushedExposure {
	var in []unflushedExposure
	brokers := map[int32]bool{}
	epoch := int32(math.MaxInt32)
	if l != nil {
		epoch = l.epoch
	}
	for _, x := range p.exposures {
		// A broker crashed before t lacks what it lost while it has not
		// been taken back into an ISR.
		if x.crash.start.Time > t || t >= x.until || brokers[x.crash.node] {
			continue
		}
		if (l == nil || x.crash.node != l.node) && p.ledAfterRestart(x, epoch, t) {
			continue
		}
		if p.superseded(x, t) {
			continue
		}
		in = append(in, x)
		brokers[x.crash.node] = true
	}
	return in
}

// superseded reports whether x's broker, having led since its restart from
// x, crashed again by t: what it lacked from x it lacked at its own
// election after x (which the rules of that election judge), and what it
// wrote as leader since, the later crash took. The later crash is its
// exposure then.
func (p *unflushedPartition) superseded(x unflushedExposure, t int64) bool {
	for _, y := range p.exposures {
		if y.crash.node == x.crash.node && y.crash.start.Time > x.crash.start.Time && y.crash.start.Time <= t && t < y.until &&
			p.ledAfterRestart(x, math.MaxInt32, y.crash.start.Time) {
			return true
		}
	}
	return false
}

// exposureAfter returns broker m's exposure in force at leadership l's
// election by a crash after after, the earliest such, or nil. It looks past
// an older exposure of m still in force (exposedAt lists that one): a
// broker crashed again before it was taken back into an ISR lost, in the
// later crash, what it had written since the first, as leader.
func (p *unflushedPartition) exposureAfter(m int32, l unflushedLeader, after int64) *unflushedExposure {
	for i := range p.exposures {
		x := &p.exposures[i]
		if x.crash.node != m || x.crash.start.Time <= after || x.crash.start.Time > l.time || l.time >= x.until || p.superseded(*x, l.time) {
			continue
		}
		if m != l.node && p.ledAfterRestart(*x, l.epoch, l.time) {
			continue
		}
		return x
	}
	return nil
}

// ledAfterRestart reports whether x's broker led the partition after its
// restart from x and before t, at an epoch below epoch: whatever that
// leadership lost it lost then, from whatever ISR it was elected with (the
// rules of one exposed broker judge it), and what it wrote as leader it
// holds, so a later crash of another broker does not make a quorum of it,
// and it is no exposed member of a later ISR. Not being taken back into an
// ISR says nothing of a leader. A state naming the broker while it was
// down is no leading: a controller that has not yet seen its session end
// rewrites its leadership (removing another offline replica from the ISR,
// a leader epoch up), and the restarted process leads only once told.
func (p *unflushedPartition) ledAfterRestart(x unflushedExposure, epoch int32, t int64) bool {
	for _, ls := range [][]unflushedLeader{p.leaders, p.appends} {
		for _, o := range ls {
			if o.node == x.crash.node && o.epoch < epoch && o.time >= x.crash.restart && o.time < t {
				return true
			}
		}
	}
	return false
}

// firstSign reports whether l is the first sign of its broker leading at
// its leader epoch: only that one carries the ISR it was elected with. A
// later state at the same leader epoch is the leader's own ISR change (a
// shrink to itself, after its election from an ISR that kept the records,
// elects nobody).
// Signs before since (the broker's crash) are not looked at: a leadership
// at the same epoch before it is another rule's (leaderLoss), or a topic
// of the same name before it was deleted.
func (p *unflushedPartition) firstSign(l unflushedLeader, since int64) bool {
	i := slices.IndexFunc(p.leaders, func(o unflushedLeader) bool { return o.node == l.node && o.epoch == l.epoch && o.time >= since })
	return i < 0 || p.leaders[i].idx == l.idx
}

// isrLoss returns the loss of leadership l when every member of the ISR it
// was elected with was exposed at its election, by a crash after after:
// none of them held what they lost, so the controller could elect no
// replica that kept it. It returns nil otherwise.
func (p *unflushedPartition) isrLoss(l unflushedLeader, after int64) *unflushedLoss {
	if len(l.isr) == 0 || !slices.Contains(l.isr, l.node) {
		return nil
	}
	var in []unflushedExposure
	for _, m := range l.isr {
		x := p.exposureAfter(m, l, after)
		if x == nil {
			return nil
		}
		if m == l.node && !p.firstSign(l, x.crash.start.Time) {
			return nil
		}
		in = append(in, *x)
	}
	return &unflushedLoss{in: in, elected: l, isr: true}
}

// quorumLoss looks for what loses records written after invoked (when the
// record's produce began) to crash-lose-unflushed: at a crash after
// invoked, two or more brokers that held the partition exposed at once
// (crashed, then, or earlier and not yet taken back into an ISR), and one
// of them leading while exposed.
// The elected broker came back without the lost suffix, and every other
// replica follows it: KIP-101's epochs cut the suffix from them too, or
// find nothing to compare.
// With one broker exposed, the loss is Kafka's too (lost-unflushed-isr)
// when that broker led elected with an ISR of exposed brokers only, each
// crashed after invoked. With none of them elected (the controller chose
// a replica that kept the records), a loss stays a violation. It returns
// the first such loss, or nil.
//
// Failing both, the loss is Kafka's too (lost-unflushed-leader) when a
// crash after invoked cut the log of the partition's leader below offset
// (the record's offset, -1 if unknown) and the restarted broker led again
// at the same leader epoch with no election between (leaderLoss); and
// failing that too, lost-unflushed-elected when such a crash's broker was
// elected ahead of the ISR members that kept the records (electedLoss).
//
// Only elections before before count: a later loss of the same crashes
// does not hide an earlier one that explains what was seen before it.
func (p *unflushedPartition) quorumLoss(invoked, offset, before int64) *unflushedLoss {
	return p.quorumLossWhere(invoked, offset, before, nil)
}

// quorumLossWhere is quorumLoss returning the first loss that accept
// takes (any loss when accept is nil): a later loss of other crashes may
// be the one that explains what a checker saw when the first does not.
func (p *unflushedPartition) quorumLossWhere(invoked, offset, before int64, accept func(*unflushedLoss) bool) *unflushedLoss {
	ok := func(l *unflushedLoss) bool { return l != nil && (accept == nil || accept(l)) }
	// A quorum's loss first: it holds whatever ISR the leader got.
	for _, quorum := range []bool{true, false} {
		for _, at := range p.exposures {
			t := at.crash.start.Time
			if t <= invoked {
				continue
			}
			in := p.exposedAt(t, nil)
			if quorum != (len(in) >= 2) {
				continue
			}
			for _, l := range p.leaders {
				if l.time < t || l.time >= before {
					continue
				}
				for _, x := range in {
					if l.node != x.crash.node || l.time >= x.until || p.superseded(x, l.time) {
						continue
					}
					var loss *unflushedLoss
					if quorum {
						loss = &unflushedLoss{in: in, elected: l}
					} else {
						loss = p.isrLoss(l, invoked)
					}
					if ok(loss) {
						return loss
					}
				}
			}
		}
	}
	for _, x := range p.exposures {
		if x.crash.start.Time <= invoked {
			continue
		}
		if loss := p.leaderLoss(x, offset); ok(loss) && loss.elected.time < before {
			return loss
		}
	}
	for _, x := range p.exposures {
		if x.crash.start.Time <= invoked {
			continue
		}
		for _, l := range p.leaders {
			if l.node != x.crash.node || l.time < x.crash.start.Time || l.time >= x.until || l.time >= before {
				continue
			}
			if loss := p.electedLoss(l, invoked, offset); ok(loss) {
				return loss
			}
		}
	}
	return nil
}

// describeQuorumLoss names the brokers of a quorum loss, with the times
// of their crashes and of their return to an ISR, and the election of one
// of them while it was exposed.
func describeQuorumLoss(l *unflushedLoss, t0 int64) (string, []int) {
	if l.leader {
		return describeLeaderLoss(l, t0)
	}
	var parts []string
	var evs []int
	for _, x := range l.in {
		back := "never taken back into an ISR"
		if x.rejoin >= 0 {
			back = fmt.Sprintf("taken back into the ISR at +%s (event %d)", rel(x.until, t0), x.rejoin)
		}
		parts = append(parts, fmt.Sprintf("broker %d crashed at +%s (event %d: %s), %s",
			x.crash.node, rel(x.crash.start.Time, t0), x.crash.start.Index, x.crash.start.Fault.Detail, back))
		evs = append(evs, x.crash.start.Index)
	}
	evs = append(evs, l.elected.idx)
	isr := ""
	if l.isr {
		isr = fmt.Sprintf(" elected with ISR %v", l.elected.isr)
	}
	if l.ahead {
		isr = fmt.Sprintf(" elected with ISR %v, ahead of %v that kept it by the assignment %v", l.elected.isr, l.kept, l.replicas)
	}
	return fmt.Sprintf("%s; broker %d led at leader epoch %d%s (event %d, +%s) before it had fetched back what it lost",
		strings.Join(parts, "; "), l.elected.node, l.elected.epoch, isr, l.elected.idx, rel(l.elected.time, t0)), evs
}
