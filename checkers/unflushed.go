package checkers

import (
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

// unflushedExposures lists, per partition, the crashes of brokers that
// held it (leader or in the ISR of the latest state logged before the
// crash; any broker when no state was logged before it) and how long each
// stayed exposed.
func unflushedExposures(h *history.History, crashes []unflushedCrash) map[history.TopicPartition][]unflushedExposure {
	out := map[history.TopicPartition][]unflushedExposure{}
	for tp, zs := range partitionStates(h) {
		states := slices.Concat(zs.ordered, zs.unordered)
		slices.SortStableFunc(states, func(a, b zkState) int { return int(min(max(a.time-b.time, -1), 1)) })
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
				out[tp] = append(out[tp], ex)
			}
		}
	}
	return out
}

// quorumLoss finds two exposures on distinct brokers of tp whose crashes
// came after invoked (the record's produce began) and whose exposures
// overlap: both replicas had lost their unflushed suffix at once. It
// returns the pair, earliest first, or nil.
func quorumLoss(exposures []unflushedExposure, invoked int64) []unflushedExposure {
	for i, a := range exposures {
		if a.crash.start.Time <= invoked {
			continue
		}
		for _, b := range exposures[i+1:] {
			if b.crash.start.Time <= invoked || b.crash.node == a.crash.node {
				continue
			}
			if max(a.crash.start.Time, b.crash.start.Time) < min(a.until, b.until) {
				return []unflushedExposure{a, b}
			}
		}
	}
	return nil
}

// describeQuorumLoss names the brokers of a quorum loss, with the times
// of their crashes and of their return to the ISR.
func describeQuorumLoss(pair []unflushedExposure, t0 int64) (string, []int) {
	var parts []string
	var evs []int
	for _, x := range pair {
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
	exposures map[history.TopicPartition][]unflushedExposure
	lost      []UnflushedLoss
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
	if len(d.losses) == 0 || len(h.Events) == 0 {
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
	pair := quorumLoss(u.exposures[l.tp], u.h.Events[l.invoke].Time)
	if pair == nil {
		return false
	}
	who, evs := describeQuorumLoss(pair, u.t0)
	u.lost = append(u.lost, UnflushedLoss{Partition: lr.Partition, Offset: lr.Offset,
		Brokers: []int32{pair[0].crash.node, pair[1].crash.node}, Crashes: evs})
	r.knownAnomaly(KnownLostUnflushedQuorum, append(slices.Clone(lr.Events), evs...),
		"%s The replicas that held it lost their unflushed suffix at once: %s.", l.text, who)
	return true
}
