package checkers

// The registered-election rule of Availability: a partition that could be
// elected gets a leader within a grace while a controller acts, judged
// through the whole run (findRegisteredElect), and the controller terms and
// fault windows it is judged against.

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/zklayout"
)

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
	deletion bool // its topic's deletion began (endIdx) and ended it
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
// it or ZooKeeper. States are ordered by zxid (leaderTimelines). A topic a
// controller has queued for deletion is owed nothing from then on
// (triggerOnlinePartitionStateChange leaves out the topics queued for
// deletion; a deletion window opens at the controller's started or
// ineligible, findDeletionWindows).
func findRegisteredElect(h *history.History, tl map[history.TopicPartition][]leaderObs, grace time.Duration) []registeredElect {
	if len(h.Events) == 0 {
		return nil
	}
	w := newElectWorld(h, grace)
	var out []registeredElect
	for _, tp := range sortedTPs(tl) {
		out = w.episodes(tp, tl[tp], out)
	}
	return out
}

// shutSpan is a broker in controlled shutdown: from the controller's
// accepting it until the broker's next process starts.
type shutSpan struct {
	node     int32
	from, to int64
}

// electWorld is what findRegisteredElect judges every partition against:
// who was alive, which controller acted and when a fault cut it off, who
// was shutting down, what the watcher had delivered, and the times at which
// any of that changed.
type electWorld struct {
	h       *history.History
	grace   time.Duration
	end     int64
	al      *aliveness
	spans   []ctlSpan
	windows []history.FaultWindow
	shuts   []shutSpan
	points  []int64 // every time the answer may change, besides the partition's own states
	seen    []zxidSeen
	// waits are, per node, the times one of its ZooKeeper writes was
	// outstanding (its start to its answer): a controller waiting on
	// ZooKeeper is not the one keeping a partition leaderless.
	waits map[int32][][2]int64
	// dw are the times topics were being deleted: a topic queued for
	// deletion is left out of every election
	// (PartitionStateMachine.triggerOnlinePartitionStateChange skips it).
	dw deletionWindows
}

func newElectWorld(h *history.History, grace time.Duration) *electWorld {
	w := &electWorld{h: h, grace: grace, end: h.Events[len(h.Events)-1].Time, al: newAliveness(h), spans: controllerSpans(h),
		waits: map[int32][][2]int64{}}
	w.windows, _ = history.FaultWindowsOf(h, true, true)
	w.dw = findDeletionWindows(h)
	for e := range eventsOf(h, history.KindControlledShutdown, history.KindNodeStart, history.KindZKWatch, history.KindBrokerRegistered, history.KindNodeStop, history.KindZKWrite) {
		switch e.Kind {
		case history.KindZKWrite:
			if z := e.ZKWrite; z.Start > 0 && z.Start < e.Time {
				w.waits[e.Node] = append(w.waits[e.Node], [2]int64{z.Start, e.Time})
				w.points = append(w.points, z.Start, e.Time)
			}
		case history.KindControlledShutdown:
			if e.Shutdown != nil && e.Shutdown.Verdict == history.VerdictAccepted {
				w.shuts = append(w.shuts, shutSpan{e.Shutdown.BrokerID, e.Time, w.end})
				w.points = append(w.points, e.Time)
			}
		case history.KindNodeStart:
			for k := range w.shuts {
				if w.shuts[k].node == e.Node && w.shuts[k].to == w.end && w.shuts[k].from <= e.Time {
					w.shuts[k].to = e.Time
				}
			}
			w.points = append(w.points, e.Time)
		case history.KindZKWatch:
			if e.Watch != nil && e.Watch.Path == zklayout.BrokerIDsPath {
				w.points = append(w.points, e.Time)
			}
		case history.KindBrokerRegistered, history.KindNodeStop:
			w.points = append(w.points, e.Time)
		}
	}
	for _, s := range w.spans {
		w.points = append(w.points, s.from, s.to)
	}
	for _, fw := range w.windows {
		w.points = append(w.points, fw.Start.Time, fw.End)
	}
	for _, ws := range w.dw {
		for _, dw := range ws {
			w.points = append(w.points, dw.from)
			if dw.to < math.MaxInt64 {
				w.points = append(w.points, dw.to)
			}
		}
	}
	// Registrations are the watcher's listings, in the watcher's timeline,
	// which lags ZooKeeper when its server does (a slowed link heals with a
	// backlog). A state a node logged writing is judged only once the
	// watcher has delivered something at least as new in ZooKeeper order,
	// so a listing the controller's own read had already overtaken (a
	// broker whose session expired before the write) does not count as a
	// registration the controller ignored.
	w.seen = watcherZxids(h)
	return w
}

// seenAt is when the watcher first delivered zxid z or a newer one.
func (w *electWorld) seenAt(z int64) (int64, bool) {
	i := sort.Search(len(w.seen), func(i int) bool { return w.seen[i].max >= z })
	if i == len(w.seen) {
		return 0, false
	}
	return w.seen[i].time, true
}

func (w *electWorld) shuttingDown(b int32, t int64) bool {
	for _, s := range w.shuts {
		if s.node == b && s.from <= t && t < s.to {
			return true
		}
	}
	return false
}

// actingAt returns the controller acting at t, and whether it is cut off
// then: a fault cuts it off from acting or from ZooKeeper, or it is waiting
// for ZooKeeper to answer one of its writes (a server catching up after a
// slowed link healed answers late; that time is ZooKeeper's, as it would
// be Kafka's).
func (w *electWorld) actingAt(t int64) (cur ctlSpan, found, cut bool) {
	for _, s := range w.spans {
		if s.from <= t && t < s.to {
			cur, found = s, true
		}
	}
	if !found {
		return cur, false, false
	}
	for _, iv := range w.waits[cur.node] {
		if iv[0] <= t && t < iv[1] {
			return cur, true, true
		}
	}
	for _, fw := range w.windows {
		if fw.Start.Time <= t && t < fw.End && cutsOff(fw, cur.node) {
			return cur, true, true
		}
	}
	return cur, true, false
}

// needsElection reports whether state st wants an election at t and which
// registered ISR members could win it.
func (w *electWorld) needsElection(st leaderObs, t int64) (bool, []int32) {
	need := st.Leader < 0 || !w.al.alive(st.Leader, t)
	if !need {
		return false, nil
	}
	var elig []int32
	for _, b := range st.ISR {
		if b != st.Leader && w.al.alive(b, t) && !w.shuttingDown(b, t) {
			elig = append(elig, b)
		}
	}
	if !st.watcher && st.zxid > 0 && len(w.seen) > 0 {
		if at, ok := w.seenAt(st.zxid); !ok || t < at {
			need = false
		}
	}
	return need, elig
}

// episodes appends to out partition tp's episodes that went over the grace.
// An episode runs while the partition could be elected by one controller's
// term; the time a fault cut that controller off does not count, and a new
// term starts a new episode (its failover elects afresh).
func (w *electWorld) episodes(tp history.TopicPartition, obs []leaderObs, out []registeredElect) []registeredElect {
	pts := slices.Clone(w.points)
	for _, o := range obs {
		pts = append(pts, o.at)
		if !o.watcher && o.zxid > 0 && len(w.seen) > 0 {
			if at, ok := w.seenAt(o.zxid); ok {
				pts = append(pts, at)
			}
		}
	}
	slices.Sort(pts)
	pts = slices.Compact(pts)
	var open *registeredElect
	counting := false
	var last int64
	// count adds the time up to t to the open episode's acting time.
	count := func(t int64) {
		if open == nil || !counting {
			return
		}
		if open.acting += time.Duration(t - last); open.acting > w.grace && open.over == 0 {
			open.over = t - int64(open.acting-w.grace)
		}
	}
	closeAt := func(t int64, idx int, openEnds bool) {
		if open.over != 0 {
			open.to, open.endIdx, open.openEnds = t, idx, openEnds
			out = append(out, *open)
		}
		open = nil
	}
	k := -1
	for _, t := range pts {
		if t > w.end {
			break
		}
		count(t)
		last = t
		for k+1 < len(obs) && obs[k+1].at <= t {
			k++
		}
		if k < 0 {
			continue
		}
		st := obs[k]
		need, elig := w.needsElection(st, t)
		ctl, ok, cut := w.actingAt(t)
		// A new controller queues a deletion it finds at failover
		// (TopicDeletionManager.init) tens of milliseconds after the old
		// leader's registration went: the episode ends there, and is owed a
		// leader only if the grace ran out before.
		dwin, deleting := w.dw.windowAt(tp.Topic, t)
		cond := need && len(elig) > 0 && ok && !deleting
		if open != nil && deleting {
			open.deletion = true
			closeAt(t, dwin.started, false)
		}
		if open != nil && (!cond || ctl.elected != open.ctl.elected) {
			closeAt(t, eventAt(w.h, t), false)
		}
		if cond && open == nil && !cut {
			open = &registeredElect{tp: tp, from: t, state: st.idx, elig: elig, ctl: ctl, endIdx: -1}
		}
		counting = open != nil && !cut
	}
	if open != nil {
		count(w.end)
		closeAt(w.end, -1, true)
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
	t0 := firstTime(h)
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
	if f.deletion {
		ended = fmt.Sprintf("until its topic's deletion began (%s)", at(&h.Events[f.endIdx], t0))
	}
	return fmt.Sprintf("partition %s's state (%s) named %s from +%s while %s registered and in its ISR, %s, and controller %d (epoch %d, elected at %s) acted with no fault on it or on ZooKeeper, and no write of its own waiting for ZooKeeper's answer, for %s of that time, longer than the %s grace: Kafka's controller elects a live ISR member as soon as it registers (KafkaController.onBrokerStartup → PartitionStateMachine.triggerOnlinePartitionStateChange).",
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
