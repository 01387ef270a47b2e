package checkers

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/zkchaos/zkchaos/history"
)

// leaderObs is a partition state in a leader timeline: a version of the
// state znode, and when it was in ZooKeeper at the latest (see
// leaderTimelines).
type leaderObs struct {
	zkState
	at int64
}

// leaderTimelines returns, per partition, the state znode's versions in
// ZooKeeper order (see zkStates), each with when it was in ZooKeeper at the
// latest: its own log time, or earlier if a newer version (by zxid) was
// logged before it, since ZooKeeper had applied that one by then. A
// partition none of whose versions has a zxid has only history order, and
// its timeline takes the node-logged writes too, in history order among
// the watcher's observations: without them a partition whose state no
// watcher saw would have no timeline.
func leaderTimelines(h *history.History) map[history.TopicPartition][]leaderObs {
	states := partitionStates(h)
	out := make(map[history.TopicPartition][]leaderObs, len(states))
	for tp, s := range states {
		if s.byZxid() {
			obs := make([]leaderObs, len(s.ordered))
			for i, v := range s.ordered {
				obs[i] = leaderObs{v, v.time}
			}
			for i := len(obs) - 2; i >= 0; i-- {
				obs[i].at = min(obs[i].at, obs[i+1].at)
			}
			out[tp] = obs
			continue
		}
		obs := make([]leaderObs, 0, len(s.ordered)+len(s.unordered))
		for _, v := range s.ordered {
			obs = append(obs, leaderObs{v, v.time})
		}
		for _, v := range s.unordered {
			obs = append(obs, leaderObs{v, v.time})
		}
		slices.SortStableFunc(obs, func(a, b leaderObs) int { return cmp.Compare(a.idx, b.idx) })
		out[tp] = obs
	}
	return out
}

// stateAt returns the last observation at or before t (ok false if none).
func stateAt(obs []leaderObs, t int64) (leaderObs, bool) {
	var o leaderObs
	found := false
	for _, x := range obs {
		if x.at > t {
			break
		}
		o, found = x, true
	}
	return o, found
}

// servingObs is a change in whether a partition had a broker acting as the
// leader ZooKeeper names: online, or offline and why.
type servingObs struct {
	time   int64
	online bool
	idx    int
	why    string // when offline
}

// servingTimeline turns a partition's ZooKeeper states into when a broker
// acted as its leader: the state names a leader at epoch E and that broker's
// current process took the leader role for the partition at E (a
// role_change, after its latest node_start and not followed by a change
// away). useRoles false (a history with no role_change at all, e.g. without
// brokers' logs) judges by ZooKeeper alone.
//
// roles are the history's node_start and role_change events in history
// order (roleEvents), gathered once for every partition rather than by a
// pass over the whole history per partition.
func servingTimeline(roles []*history.Event, tp history.TopicPartition, states []leaderObs, useRoles bool) []servingObs {
	type point struct {
		time  int64
		state *leaderObs
		ev    *history.Event
	}
	pts := make([]point, 0, len(states))
	for i := range states {
		pts = append(pts, point{time: states[i].at, state: &states[i]})
	}
	if useRoles {
		for _, e := range roles {
			if e.Kind == history.KindNodeStart || e.Role.TP() == tp {
				pts = append(pts, point{time: e.Time, ev: e})
			}
		}
	}
	sort.SliceStable(pts, func(a, b int) bool { return pts[a].time < pts[b].time })
	acting := map[int32]int32{} // node → leader epoch its process leads at
	var cur *leaderObs
	var out []servingObs
	for _, p := range pts {
		idx := -1
		switch {
		case p.state != nil:
			cur, idx = p.state, p.state.idx
		case p.ev.Kind == history.KindNodeStart:
			delete(acting, p.ev.Node)
			idx = p.ev.Index
		case p.ev.Role.Role == history.RoleLeader:
			acting[p.ev.Node] = p.ev.Role.LeaderEpoch
			idx = p.ev.Index
		default:
			delete(acting, p.ev.Node)
			idx = p.ev.Index
		}
		if cur == nil {
			continue
		}
		o := servingObs{time: p.time, online: true, idx: idx}
		switch ep, ok := acting[cur.Leader]; {
		case cur.Leader < 0:
			o.online, o.why = false, fmt.Sprintf("ZooKeeper names no leader at event %d", cur.idx)
		case useRoles && (!ok || ep != cur.LeaderEpoch):
			o.online, o.why = false, fmt.Sprintf("ZooKeeper names broker %d leader at epoch %d at event %d, but no process of broker %d took that role", cur.Leader, cur.LeaderEpoch, cur.idx, cur.Leader)
		}
		if n := len(out); n > 0 && out[n-1].online == o.online && (o.online || out[n-1].why == o.why) {
			continue
		}
		out = append(out, o)
	}
	return out
}

// Window is a span of time in which a partition had no leader.
type Window struct {
	Start    int64 `json:"start_ns"`
	End      int64 `json:"end_ns,omitempty"` // 0: still open at the end of the history
	Duration int64 `json:"duration_ms"`
	Events   []int `json:"events"`
}

// PartitionAvailability is the availability summary of one partition.
type PartitionAvailability struct {
	Partition   string   `json:"partition"`
	Offline     []Window `json:"offline_windows,omitempty"`
	ProduceOK   int      `json:"produce_ok"`
	ProduceFail int      `json:"produce_fail"`
	ProduceInfo int      `json:"produce_info"`
	SuccessRate float64  `json:"produce_success_rate"`
}

// Availability reports, per partition, the windows without an acting leader
// and the produce success rate, and is invalid when a partition still has
// no acting leader Grace after every fault healed (or loses it after
// healing for longer than Grace). A partition has an acting leader when the
// broker its ZooKeeper state names has taken the leader role at that
// state's leader epoch (role_change) in its current process: a state whose
// leader never took the role serves no client. States are ordered by zxid.
// If faults never healed, or the history ends before Grace passed, a
// partition without an acting leader makes the verdict unknown.
//
// During the run, faults in force or not, a partition that could have a
// leader must get one (RegisteredElectGrace):
//
//	layer | promise | Kafka code | event-log evidence | checker rule
//	election | an offline partition gets a leader once a live ISR member registers | KafkaController.onBrokerStartup and onBrokerFailure → PartitionStateMachine.triggerOnlinePartitionStateChange → offlinePartitionLeaderElection (first live ISR member of the assignment; brokers in controlled shutdown excluded) | partition states in zxid order (leader, ISR), the watcher's /brokers/ids listings, controller_elected / controller_resigned / node_start of the controller, accepted controlled_shutdown, fault windows | a state naming no leader (or an unregistered one) while an ISR member is registered and not shutting down, a controller acts (elected, not resigned, its process alive) and no fault names it or a ZooKeeper server, is invalid once that lasted longer than RegisteredElectGrace
//
// A partition whose ISR has no registered member is not judged by it: that
// is KAFKA-3861's window (ElectGrace), documented Kafka behaviour. Nor is a
// partition of a topic a controller has queued for deletion
// (triggerOnlinePartitionStateChange leaves those topics out).
type Availability struct {
	Grace time.Duration
	// ElectGrace is how long a partition may stay without a leader after a
	// controller left it so while a registered broker held every
	// acknowledged record (KAFKA-3861, see electable.go); 0 turns that
	// judgement off.
	ElectGrace time.Duration
	// Strict makes that finding a violation; otherwise it is the known
	// anomaly KAFKA-3861 (Kafka's default without unclean election).
	Strict bool
	// RegisteredElectGrace is how long, at any time of the run, a partition
	// may stay without a leader while a registered ISR member could lead
	// it and an acting controller reaches ZooKeeper (findRegisteredElect);
	// 0 turns that judgement off.
	RegisteredElectGrace time.Duration
}

// Name implements Checker.
func (Availability) Name() string { return "availability" }

// Check implements Checker.
func (c Availability) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	hi := heal(h)
	deadline := hi.at + int64(c.Grace)
	tl := leaderTimelines(h)

	stats := map[history.TopicPartition]*PartitionAvailability{}
	get := func(tp history.TopicPartition) *PartitionAvailability {
		s := stats[tp]
		if s == nil {
			s = &PartitionAvailability{Partition: tp.String()}
			stats[tp] = s
		}
		return s
	}
	ops := operations(h)
	for _, op := range ops {
		if op.Op().F != history.FProduce {
			continue
		}
		s := get(op.Op().TP())
		switch op.Outcome() {
		case history.OpOK:
			s.ProduceOK++
		case history.OpFail:
			s.ProduceFail++
		default:
			s.ProduceInfo++
		}
	}
	roles, useRoles := roleEvents(h)
	dw := findDeletionWindows(h)
	serving := map[history.TopicPartition][]servingObs{}
	for _, tp := range sortedTPs(tl) {
		s := get(tp)
		serving[tp] = servingTimeline(roles, tp, tl[tp], useRoles)
		var open *Window
		var why string
		closeAt := func(t int64, idx int) {
			open.End = t
			open.Duration = (t - open.Start) / int64(time.Millisecond)
			open.Events = append(open.Events, idx)
			if len(s.Offline) < 100 {
				s.Offline = append(s.Offline, *open)
			}
			open = nil
		}
		var offendIdx int
		for _, o := range serving[tp] {
			switch {
			case !o.online && open == nil:
				open = &Window{Start: o.time, Events: []int{o.idx}}
				offendIdx, why = o.idx, o.why
			case o.online && open != nil:
				// Offline for longer than Grace after healing? Not while
				// its topic was being deleted: no leader is owed then.
				if hi.healed && o.time-max(open.Start, hi.at) > int64(c.Grace) && o.time > deadline && !dw.during(tp.Topic, open.Start) {
					r.violateAt(max(open.Start, hi.at)+int64(c.Grace), []int{offendIdx, o.idx},
						"partition %s had no acting leader from event %d until event %d (%s), %s after every fault healed (grace %s).",
						tp, offendIdx, o.idx, why, time.Duration(o.time-max(open.Start, hi.at)).Round(time.Millisecond), c.Grace)
				}
				closeAt(o.time, o.idx)
			}
		}
		if open != nil {
			since := max(open.Start, hi.at)
			delFrom, deleted := dw.startAt(tp.Topic, hi.end)
			switch {
			case dw.during(tp.Topic, open.Start):
				// Deleted, or being deleted, when the history ends.
			case deleted && delFrom >= open.Start:
				// Gone, or going, when the history ends, but offline
				// before its deletion began: only that time was owed
				// a leader.
				if hi.healed && delFrom-max(open.Start, hi.at) > int64(c.Grace) {
					r.violateAt(max(open.Start, hi.at)+int64(c.Grace), []int{offendIdx}, "partition %s had no acting leader from event %d (%s) until its topic's deletion began, %s after every fault healed (grace %s).",
						tp, offendIdx, why, time.Duration(delFrom-max(open.Start, hi.at)).Round(time.Millisecond), c.Grace)
				}
			case !hi.healed:
				r.cannotDecide("partition %s has no acting leader since event %d (%s), but %s, so it is unclear whether it would recover.", tp, offendIdx, why, hi.inForce)
			case hi.end-since > int64(c.Grace):
				evs := []int{offendIdx}
				healed := "there were no faults"
				if hi.lastStop >= 0 {
					evs = append(evs, hi.lastStop)
					healed = fmt.Sprintf("last fault stopped at event %d", hi.lastStop)
				}
				r.violateAt(since+int64(c.Grace), evs, "partition %s has had no acting leader since event %d (%s) and was still offline %s after every fault healed (%s; grace %s).",
					tp, offendIdx, why, time.Duration(hi.end-since).Round(time.Millisecond), healed, c.Grace)
			default:
				r.cannotDecide("partition %s has no acting leader since event %d (%s) and the history ends before the %s grace after healing ran out (%s after healing).",
					tp, offendIdx, why, c.Grace, time.Duration(hi.end-hi.at).Round(time.Millisecond))
			}
			open.Duration = (hi.end - open.Start) / int64(time.Millisecond)
			if len(s.Offline) < 100 {
				s.Offline = append(s.Offline, *open)
			}
		}
	}
	if c.ElectGrace > 0 && useRoles {
		for _, f := range findElectableOffline(h, ops, tl, serving, c.ElectGrace) {
			if dw.during(f.tp.Topic, h.Events[f.write].Time) {
				continue
			}
			evs := []int{f.write, f.ack}
			if f.onlineAt >= 0 {
				evs = append(evs, f.onlineAt)
			}
			if c.Strict {
				r.violateAt(h.Events[f.write].Time+int64(c.ElectGrace), evs, "%s", f.explain(h))
			} else {
				r.knownAnomaly(KnownKafka3861, evs, "%s", f.explain(h))
			}
		}
	}
	if g := c.RegisteredElectGrace; g > 0 {
		// Deletion windows are judged inside findRegisteredElect: an
		// episode ends where its topic's deletion begins.
		for _, f := range findRegisteredElect(h, tl, g) {
			evs := []int{f.state, f.ctl.elected}
			if f.endIdx >= 0 {
				evs = append(evs, f.endIdx)
			}
			r.violateAt(f.over, dedupe(evs), "%s", f.explain(h, g))
		}
	}
	list := make([]PartitionAvailability, 0, len(stats))
	for _, tp := range sortedTPs(stats) {
		s := stats[tp]
		if n := s.ProduceOK + s.ProduceFail + s.ProduceInfo; n > 0 {
			s.SuccessRate = float64(s.ProduceOK) / float64(n)
		}
		list = append(list, *s)
	}
	r.detail("partitions", capList(list))
	r.detail("faults", hi.faults)
	leader := "a leader in ZooKeeper (the history has no role changes to check it against)"
	if useRoles {
		leader = "an acting leader (the broker ZooKeeper names, in the role at its leader epoch)"
	}
	during := ""
	if c.RegisteredElectGrace > 0 {
		during = fmt.Sprintf(", and none stayed without a leader for more than %s while a registered ISR member could lead it and an acting controller reached ZooKeeper", c.RegisteredElectGrace)
	}
	return r.result(fmt.Sprintf("every one of %d partitions had %s within %s of every fault healing%s.", len(tl), leader, c.Grace, during))
}

// roleEvents returns h's node_start and role_change events in history
// order, and whether there is any role_change.
func roleEvents(h *history.History) (evs []*history.Event, anyRole bool) {
	for e := range eventsOf(h, history.KindRoleChange, history.KindNodeStart) {
		switch e.Kind {
		case history.KindRoleChange:
			anyRole = true
			evs = append(evs, e)
		case history.KindNodeStart:
			evs = append(evs, e)
		}
	}
	return evs, anyRole
}
