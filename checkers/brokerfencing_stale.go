package checkers

import (
	"fmt"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/zklayout"
)

// staleEpochGrace is how long an acting controller that runs with no fault
// on it may go on sending a broker the broker epoch of a registration the
// broker has replaced. Kafka sends the old epoch legitimately only until it
// has processed the BrokerChange that the new znode fired: requests queued
// by the events ahead of it, and retries of a request queued for the
// previous process, which stop when bounce detection replaces the
// broker's queue. Processing that backlog takes milliseconds once the
// controller runs and reaches ZooKeeper (the fault-on-the-controller
// excuse covers the time it cannot); the grace is a few hundred times
// that.
const staleEpochGrace = 3 * time.Second

// staleRun is one controller tenure's requests to one broker that carried a
// broker epoch older than the broker's newest registration.
type staleRun struct {
	ctrl        int32
	ctrlEpoch   int32
	broker      int32
	old, cur    int64
	curIdx      int // first event showing the newest registration
	curAt       int64
	first, last int // first and last stale send
	sends       int
	late        int   // first stale send past the grace, -1 if none
	fairFrom    int64 // when the late send's fault-free run began
	rejected    int   // stale sends the broker rejected with STALE_BROKER_EPOCH
	firstReject int   // the first such receipt, -1 if none
}

// staleBrokerEpochs checks the controller's side of KIP-380: once a
// broker's new registration (a newer czxid in /brokers/ids) exists, the
// acting controller notices it when it processes the BrokerChange (Kafka
// treats a newer czxid for a live id as a bounce) and from then on sends
// the new broker epoch. A controller that keeps sending the old epoch has
// every request rejected with STALE_BROKER_EPOCH, and the broker's new
// process is left out of the cluster: no LeaderAndIsr, StopReplica or
// UpdateMetadata from that controller ever takes effect on it.
//
// A run of stale sends is a violation when the broker rejected at least
// one of them (the harm, seen) and one was sent more than staleEpochGrace
// after the controller had every chance to see the registration: the
// registration existed, the controller was elected and not superseded,
// and no fault was on it (see faultOnController) from the later of those
// moments up to the send. The acting controller is the one with the
// highest epoch elected, whose process has neither resigned nor restarted
// since.
func staleBrokerEpochs(h *history.History, r *report) {
	windows, _ := history.FaultWindowsOf(h, true, true)
	type tenure struct {
		epoch int32
		since int64
	}
	tenures := map[int32]tenure{}
	var highest int32
	type reg struct {
		czxid int64
		at    int64
		idx   int
	}
	newest := map[int32]reg{}
	gone := map[int32]bool{} // the watcher's latest listing lacks the broker
	seen := func(id int32, czxid int64, e *history.Event) {
		if czxid > newest[id].czxid {
			newest[id] = reg{czxid, e.Time, e.Index}
		}
	}
	type runKey struct {
		ctrl, ctrlEpoch, broker int32
		old, cur                int64
	}
	runs := map[runKey]*staleRun{}
	var order []*staleRun
	bySend := map[string]*staleRun{} // attempt → its run, to pair a rejection
	// byEpoch finds a run for receipts that pair with no logged attempt
	// (histories without correlation ids per attempt).
	type epochKey struct {
		ctrl, ctrlEpoch, broker int32
		old                     int64
	}
	byEpoch := map[epochKey]*staleRun{}
	var rejections []*history.Event
	sends := 0
	// longest is the longest a stale send came after the controller's
	// fault-free run began: what the grace is measured against.
	var longest time.Duration
	for e := range eventsOf(h, history.KindControllerElected, history.KindControllerResigned, history.KindNodeStart, history.KindNodeStop, history.KindBrokerRegistered, history.KindZKWatch, history.KindControlSent, history.KindControlRequest) {
		switch e.Kind {
		case history.KindControllerElected:
			tenures[e.Node] = tenure{e.Controller.Epoch, e.Time}
			highest = max(highest, e.Controller.Epoch)
		case history.KindControllerResigned, history.KindNodeStart, history.KindNodeStop:
			delete(tenures, e.Node)
		case history.KindBrokerRegistered:
			id := e.Registration.BrokerID
			if id == 0 {
				id = e.Node
			}
			seen(id, e.Registration.BrokerEpoch, e)
			gone[id] = false
		case history.KindZKWatch:
			w := e.Watch
			switch {
			case w.Path == zklayout.ControllerEpochPath && w.ControllerEpoch != nil:
				highest = max(highest, *w.ControllerEpoch)
			case w.Path == zklayout.BrokerIDsPath && (w.Type == history.WatchChildren || w.Brokers != nil):
				for id := range newest {
					gone[id] = true
				}
				for _, b := range w.Brokers {
					seen(b.ID, b.Czxid, e)
					gone[b.ID] = false
				}
			}
		case history.KindControlSent:
			cr := e.Control
			b := cr.TargetBroker
			cur, ok := newest[b]
			// A request carrying no epoch is judged by what it reached
			// (the rule above), not here.
			if !ok || gone[b] || cr.BrokerEpoch <= 0 || cr.BrokerEpoch >= cur.czxid {
				continue
			}
			t, acting := tenures[e.Node]
			if !acting || t.epoch != cr.ControllerEpoch || t.epoch < highest {
				continue
			}
			sends++
			k := runKey{e.Node, t.epoch, b, cr.BrokerEpoch, cur.czxid}
			run := runs[k]
			if run == nil {
				run = &staleRun{ctrl: e.Node, ctrlEpoch: t.epoch, broker: b, old: cr.BrokerEpoch, cur: cur.czxid,
					curIdx: cur.idx, curAt: cur.at, first: e.Index, late: -1, firstReject: -1}
				runs[k] = run
				order = append(order, run)
			}
			run.last = e.Index
			run.sends++
			bySend[attemptKey(e.Node, b, cr)] = run
			byEpoch[epochKey{e.Node, t.epoch, b, cr.BrokerEpoch}] = run
			fair, faulted := fairSince(windows, e.Node, max(cur.at, t.since), e.Time)
			if faulted {
				continue
			}
			longest = max(longest, time.Duration(e.Time-fair))
			if run.late < 0 && e.Time-fair > int64(staleEpochGrace) {
				run.late, run.fairFrom = e.Index, fair
			}
		case history.KindControlRequest:
			cr := e.Control
			if cr.Verdict == history.VerdictRejected && cr.ErrorCode == history.ErrStaleBrokerEpoch {
				rejections = append(rejections, e)
			}
		}
	}
	// Rejections pair with their sends once every send is known: a
	// receipt can sort before its send when the controller's clock runs
	// ahead of the broker's.
	for _, e := range rejections {
		cr := e.Control
		run := bySend[attemptKey(cr.ControllerID, e.Node, cr)]
		if run == nil {
			run = byEpoch[epochKey{cr.ControllerID, cr.ControllerEpoch, e.Node, cr.BrokerEpoch}]
		}
		if run == nil {
			continue
		}
		run.rejected++
		if run.firstReject < 0 {
			run.firstReject = e.Index
		}
	}
	t0 := int64(0)
	if len(h.Events) > 0 {
		t0 = h.Events[0].Time
	}
	at := func(i int) string { return "+" + rel(h.Events[i].Time, t0).String() }
	for _, run := range order {
		if run.late < 0 || run.rejected == 0 {
			continue
		}
		evs := []int{run.curIdx, run.first, run.late, run.last, run.firstReject}
		r.violateAt(max(h.Events[run.late].Time, h.Events[run.firstReject].Time), evs,
			"controller %d (epoch %d) kept sending %s its previous broker epoch %d after the broker re-registered with broker epoch %d (event %d, %s): %d requests from event %d (%s) to event %d (%s) carried the old epoch and the broker rejected %d of them with STALE_BROKER_EPOCH (first at event %d, %s), although the controller had been running, in reach of ZooKeeper, since +%s and still sent the old epoch at event %d (%s), past the %s grace, so none of its instructions reached the broker's new process.",
			run.ctrl, run.ctrlEpoch, nodeName(run.broker), run.old, run.cur, run.curIdx, at(run.curIdx),
			run.sends, run.first, at(run.first), run.last, at(run.last), run.rejected, run.firstReject, at(run.firstReject),
			rel(run.fairFrom, t0), run.late, at(run.late), staleEpochGrace)
	}
	r.detail("stale_broker_epoch_sends", sends)
	r.detail("longest_unexcused_stale_broker_epoch", longest.String())
}

// fairSince returns when controller node ctrl's latest fault-free run up to
// t began, no earlier than from, and whether a fault was on it at t.
func fairSince(windows []history.FaultWindow, ctrl int32, from, t int64) (int64, bool) {
	fair := from
	for i := range windows {
		w := &windows[i]
		if w.Start.Time > t || !faultOnController(w, ctrl) {
			continue
		}
		if w.End >= t {
			return fair, true
		}
		fair = max(fair, w.End)
	}
	return fair, false
}

// faultOnController says whether fault w could keep controller node ctrl
// from learning of a broker change: a failpoint the node reported itself,
// a fault on ZooKeeper alone (a paused, cut off or slowed server delays
// every session's watches), or a fault naming the node (paused, killed,
// bounced, cut off or slowed) unless it only cuts or slows links between
// brokers: a controller cut from the other brokers but not from ZooKeeper
// still sees every registration.
func faultOnController(w *history.FaultWindow, ctrl int32) bool {
	if w.Start.Node == ctrl {
		return true
	}
	f := w.Start.Fault
	if f == nil {
		return false
	}
	name := fmt.Sprintf("n%d", ctrl)
	var named, zk, nodes, link bool
	for _, t := range f.Targets {
		switch {
		case t == "|" || t == "->":
			link = true
		case strings.HasPrefix(t, "zk"):
			zk = true
		default:
			nodes = true
			named = named || t == name
		}
	}
	return (zk && !nodes) || (named && (zk || !link))
}
