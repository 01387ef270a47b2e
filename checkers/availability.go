package checkers

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/zklayout"
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
// is KAFKA-3861's window (ElectGrace), documented Kafka behaviour.
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
				// Offline for longer than Grace after healing?
				if hi.healed && o.time-max(open.Start, hi.at) > int64(c.Grace) && o.time > deadline {
					r.violateAt(max(open.Start, hi.at)+int64(c.Grace), []int{offendIdx, o.idx},
						"partition %s had no acting leader from event %d until event %d (%s), %s after every fault healed (grace %s).",
						tp, offendIdx, o.idx, why, time.Duration(o.time-max(open.Start, hi.at)).Round(time.Millisecond), c.Grace)
				}
				closeAt(o.time, o.idx)
			}
		}
		if open != nil {
			since := max(open.Start, hi.at)
			switch {
			case !hi.healed:
				r.cannotDecide("partition %s has no acting leader since event %d (%s), but fault event %d was never stopped, so it is unclear whether it would recover.", tp, offendIdx, why, hi.openIdx)
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

// ctlSpan is a time in which one broker's process was the acting
// controller: from its controller_elected until it resigned, its process
// ended (node_start, node_stop, a kill or bounce fault naming it), or a
// newer epoch was elected elsewhere.
type ctlSpan struct {
	node     int32
	epoch    int32
	from, to int64
	elected  int // its controller_elected event
}

// controllerSpans returns the acting controllers of h in time order.
func controllerSpans(h *history.History) []ctlSpan {
	var out []ctlSpan
	open := -1 // index in out of the span still open
	end := func(t int64) {
		if open >= 0 {
			out[open].to = t
			open = -1
		}
	}
	for e := range eventsOf(h, history.KindControllerElected, history.KindControllerResigned, history.KindNodeStart, history.KindNodeStop, history.KindFaultStart) {
		switch e.Kind {
		case history.KindControllerElected:
			if e.Controller == nil {
				continue
			}
			end(e.Time)
			out = append(out, ctlSpan{node: e.Node, epoch: e.Controller.Epoch, from: e.Time, to: -1, elected: e.Index})
			open = len(out) - 1
		case history.KindControllerResigned, history.KindNodeStart, history.KindNodeStop:
			if open >= 0 && out[open].node == e.Node {
				end(e.Time)
			}
		case history.KindFaultStart:
			if open < 0 || e.Fault == nil || !killsProcess(e.Fault.Name) {
				continue
			}
			for _, t := range e.Fault.Targets {
				if id, ok := brokerTarget(t); ok && id == out[open].node {
					end(e.Time)
					break
				}
			}
		}
	}
	if open >= 0 && len(h.Events) > 0 {
		out[open].to = h.Events[len(h.Events)-1].Time + 1 // still acting at the last event
	}
	return out
}

// cutsOff says whether fault window w may keep broker node's controller
// from acting or from ZooKeeper: a fault naming the broker (pause, kill,
// isolation, a partition, a failpoint it holds at), one it reported
// itself, one on a ZooKeeper server, or one that names no target.
func cutsOff(w history.FaultWindow, node int32) bool {
	f := w.Start.Fault
	if f == nil || len(f.Targets) == 0 || w.Start.Source == fmt.Sprintf("n%d", node) {
		return true
	}
	for _, t := range f.Targets {
		if t == "->" || t == "|" {
			continue
		}
		id, ok := brokerTarget(t)
		if !ok || id == node {
			return true // a ZooKeeper server, or the controller itself
		}
	}
	return false
}

// registeredElect is one in-run finding: a partition left without a leader
// while it could have had one.
type registeredElect struct {
	tp       history.TopicPartition
	from, to int64
	state    int     // the state without a leader
	elig     []int32 // registered ISR members when it began
	ctl      ctlSpan
	endIdx   int // what ended it; -1 if the history ended first
	openEnds bool
	// acting is the time within from..to that the controller acted with
	// no fault on it or on ZooKeeper; over is when that passed the grace
	// (0: it never did).
	acting time.Duration
	over   int64
}

// findRegisteredElect judges, during the whole run, the rule Kafka's
// controller keeps on every broker change (KafkaController.onBrokerStartup
// and onBrokerFailure, both ending in
// PartitionStateMachine.triggerOnlinePartitionStateChange, whose offline
// election takes the first live ISR member of the assignment): a partition
// whose ZooKeeper state names no leader, or a leader no longer registered,
// gets a leader within grace once an ISR member is registered (and not in
// controlled shutdown), as long as a controller acts and no fault touches
// it or ZooKeeper. States are ordered by zxid (leaderTimelines).
func findRegisteredElect(h *history.History, tl map[history.TopicPartition][]leaderObs, grace time.Duration) []registeredElect {
	if len(h.Events) == 0 {
		return nil
	}
	end := h.Events[len(h.Events)-1].Time
	al := newAliveness(h)
	spans := controllerSpans(h)
	windows, _ := history.FaultWindowsOf(h, true, true)
	// Brokers in controlled shutdown: from the controller's accepting it
	// until the broker's next process starts.
	type shut struct {
		node     int32
		from, to int64
	}
	var shuts []shut
	var points []int64
	for e := range eventsOf(h, history.KindControlledShutdown, history.KindNodeStart, history.KindZKWatch, history.KindBrokerRegistered, history.KindNodeStop) {
		switch e.Kind {
		case history.KindControlledShutdown:
			if e.Shutdown != nil && e.Shutdown.Verdict == history.VerdictAccepted {
				shuts = append(shuts, shut{e.Shutdown.BrokerID, e.Time, end})
				points = append(points, e.Time)
			}
		case history.KindNodeStart:
			for k := range shuts {
				if shuts[k].node == e.Node && shuts[k].to == end && shuts[k].from <= e.Time {
					shuts[k].to = e.Time
				}
			}
			points = append(points, e.Time)
		case history.KindZKWatch:
			if e.Watch != nil && e.Watch.Path == zklayout.BrokerIDsPath {
				points = append(points, e.Time)
			}
		case history.KindBrokerRegistered, history.KindNodeStop:
			points = append(points, e.Time)
		}
	}
	for _, s := range spans {
		points = append(points, s.from, s.to)
	}
	for _, w := range windows {
		points = append(points, w.Start.Time, w.End)
	}
	// Registrations are the watcher's listings, in the watcher's timeline,
	// which lags ZooKeeper when its server does (a slowed link heals with a
	// backlog). A state a node logged writing is judged only once the
	// watcher has delivered something at least as new in ZooKeeper order,
	// so a listing the controller's own read had already overtaken (a
	// broker whose session expired before the write) does not count as a
	// registration the controller ignored.
	seen := watcherZxids(h)
	seenAt := func(z int64) (int64, bool) {
		i := sort.Search(len(seen), func(i int) bool { return seen[i].max >= z })
		if i == len(seen) {
			return 0, false
		}
		return seen[i].time, true
	}
	shuttingDown := func(b int32, t int64) bool {
		for _, s := range shuts {
			if s.node == b && s.from <= t && t < s.to {
				return true
			}
		}
		return false
	}
	// actingAt returns the controller acting at t, and whether a fault
	// cuts it off then.
	actingAt := func(t int64) (cur ctlSpan, found, cut bool) {
		for _, s := range spans {
			if s.from <= t && t < s.to {
				cur, found = s, true
			}
		}
		if !found {
			return cur, false, false
		}
		for _, w := range windows {
			if w.Start.Time <= t && t < w.End && cutsOff(w, cur.node) {
				return cur, true, true
			}
		}
		return cur, true, false
	}
	var out []registeredElect
	for _, tp := range sortedTPs(tl) {
		obs := tl[tp]
		pts := slices.Clone(points)
		for _, o := range obs {
			pts = append(pts, o.at)
			if !o.watcher && o.zxid > 0 && len(seen) > 0 {
				if at, ok := seenAt(o.zxid); ok {
					pts = append(pts, at)
				}
			}
		}
		slices.Sort(pts)
		pts = slices.Compact(pts)
		// An episode runs while the partition could be elected by one
		// controller's term; the time a fault cut that controller off
		// does not count, and a new term starts a new episode (its
		// failover elects afresh).
		var open *registeredElect
		counting := false
		var last int64
		closeAt := func(t int64, idx int, openEnds bool) {
			if open.over != 0 {
				open.to, open.endIdx, open.openEnds = t, idx, openEnds
				out = append(out, *open)
			}
			open = nil
		}
		k := -1
		for _, t := range pts {
			if t > end {
				break
			}
			if open != nil && counting {
				if open.acting += time.Duration(t - last); open.acting > grace && open.over == 0 {
					open.over = t - int64(open.acting-grace)
				}
			}
			last = t
			for k+1 < len(obs) && obs[k+1].at <= t {
				k++
			}
			if k < 0 {
				continue
			}
			st := obs[k]
			need := st.Leader < 0 || !al.alive(st.Leader, t)
			var elig []int32
			if need {
				for _, b := range st.ISR {
					if b != st.Leader && al.alive(b, t) && !shuttingDown(b, t) {
						elig = append(elig, b)
					}
				}
			}
			if need && !st.watcher && st.zxid > 0 && len(seen) > 0 {
				if at, ok := seenAt(st.zxid); !ok || t < at {
					need = false
				}
			}
			ctl, ok, cut := actingAt(t)
			cond := need && len(elig) > 0 && ok
			if open != nil && (!cond || ctl.elected != open.ctl.elected) {
				closeAt(t, eventAt(h, t), false)
			}
			if cond && open == nil && !cut {
				open = &registeredElect{tp: tp, from: t, state: st.idx, elig: elig, ctl: ctl, endIdx: -1}
			}
			counting = open != nil && !cut
		}
		if open != nil {
			if counting {
				if open.acting += time.Duration(end - last); open.acting > grace && open.over == 0 {
					open.over = end - int64(open.acting-grace)
				}
			}
			closeAt(end, -1, true)
		}
	}
	return out
}

// eventAt returns the index of the first event at time t (-1 if none).
func eventAt(h *history.History, t int64) int {
	i := sort.Search(len(h.Events), func(i int) bool { return h.Events[i].Time >= t })
	if i < len(h.Events) && h.Events[i].Time == t {
		return i
	}
	return -1
}

// explain says what happened, with the partition, brokers, epochs and times.
func (f registeredElect) explain(h *history.History, grace time.Duration) string {
	t0 := h.Events[0].Time
	st := &h.Events[f.state]
	el := &h.Events[f.ctl.elected]
	leader := "no leader"
	if s := stateOf(st); s != nil && s.Leader >= 0 {
		leader = fmt.Sprintf("leader %d, which was no longer registered", s.Leader)
	}
	ended := fmt.Sprintf("until +%s", rel(f.to, t0))
	if f.endIdx >= 0 {
		ended = fmt.Sprintf("until %s", at(&h.Events[f.endIdx], t0))
	}
	if f.openEnds {
		ended = fmt.Sprintf("and still when the history ended (+%s)", rel(f.to, t0))
	}
	return fmt.Sprintf("partition %s's state (%s) named %s from +%s while %s registered and in its ISR, %s, and controller %d (epoch %d, elected at %s) acted with no fault on it or on ZooKeeper for %s of that time, longer than the %s grace: Kafka's controller elects a live ISR member as soon as it registers (KafkaController.onBrokerStartup → PartitionStateMachine.triggerOnlinePartitionStateChange).",
		f.tp, at(st, t0), leader, rel(f.from, t0), brokersWere(f.elig), ended, f.ctl.node, f.ctl.epoch, at(el, t0),
		f.acting.Round(10*time.Millisecond), grace)
}

// stateOf returns the partition state an event carries (a watcher
// observation or a node's write).
func stateOf(e *history.Event) *history.PartitionState {
	switch {
	case e.Watch != nil && e.Watch.State != nil:
		return e.Watch.State
	case e.ZKWrite != nil && e.ZKWrite.State != nil:
		return e.ZKWrite.State
	}
	return nil
}

// zxidSeen is how far in ZooKeeper order the watcher had delivered by a
// time: the largest zxid any of its events carried so far.
type zxidSeen struct {
	time, max int64
}

// watcherZxids is the watcher's progress through ZooKeeper order: for each
// of its events that carries a zxid (a state's mzxid, a znode's czxid, a
// listed broker's czxid), when it came and the largest zxid seen by then.
func watcherZxids(h *history.History) []zxidSeen {
	var out []zxidSeen
	var hi int64
	for e := range eventsOf(h, history.KindZKWatch) {
		w := e.Watch
		z := max(w.Mzxid, w.Czxid)
		for _, b := range w.Brokers {
			z = max(z, b.Czxid)
		}
		if z > hi {
			hi = z
			out = append(out, zxidSeen{e.Time, hi})
		}
	}
	return out
}
