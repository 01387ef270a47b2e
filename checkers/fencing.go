package checkers

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/zklayout"
)

// ControllerFencing checks that stale controllers are fenced (KAFKA-532):
//   - per broker process, accepted control requests never go back in
//     controller epoch, and none is accepted below the epoch the broker
//     reported already knowing;
//   - no controller write lands in ZooKeeper after that controller's epoch
//     was superseded (a controller with a higher epoch had been elected);
//   - a partition state's controller_epoch never decreases.
type ControllerFencing struct{}

// Name implements Checker.
func (ControllerFencing) Name() string { return "controller-fencing" }

// Check implements Checker.
func (c ControllerFencing) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	type seen struct {
		epoch int32
		idx   int
	}
	maxAccepted := map[int32]seen{} // node → highest accepted epoch in this process
	elections, ranAt := controllerElections(h)
	var writes []*history.Event
	accepted := 0

	for e := range eventsOf(h, history.KindNodeStart, history.KindControlRequest, history.KindZKWrite) {
		switch e.Kind {
		case history.KindNodeStart:
			delete(maxAccepted, e.Node)
		case history.KindControlRequest:
			if !acceptedControl(e) {
				continue
			}
			accepted++
			cr := e.Control
			if prev, ok := maxAccepted[e.Node]; ok && cr.ControllerEpoch < prev.epoch {
				r.violate([]int{prev.idx, e.Index},
					"%s accepted %s (correlation id %d, %s) from controller %d epoch %d after accepting epoch %d (event %d).",
					nodeName(e.Node), cr.API, cr.CorrelationID, ev(e), cr.ControllerID, cr.ControllerEpoch, prev.epoch, prev.idx)
			} else if cr.ControllerEpoch < cr.KnownControllerEpoch {
				r.violate([]int{e.Index},
					"%s accepted %s (correlation id %d, %s) from controller %d epoch %d although it already knew epoch %d.",
					nodeName(e.Node), cr.API, cr.CorrelationID, ev(e), cr.ControllerID, cr.ControllerEpoch, cr.KnownControllerEpoch)
			}
			if prev, ok := maxAccepted[e.Node]; !ok || cr.ControllerEpoch > prev.epoch {
				maxAccepted[e.Node] = seen{cr.ControllerEpoch, e.Index}
			}
		case history.KindZKWrite:
			zw := e.ZKWrite
			if zw.Outcome != history.ZKOK {
				continue
			}
			writes = append(writes, e)
		}
	}

	// Writes after supersession. Elections are few: for each successful
	// controller write, find a higher epoch elected before it landed. With
	// zxids on both sides ZooKeeper's own order decides; otherwise only a
	// write issued after the election was logged counts (no false alarm
	// from a write that landed first and was logged late).
	sort.Slice(elections, func(a, b int) bool { return elections[a].time < elections[b].time })
	for _, w := range writes {
		zw := w.ZKWrite
		// Only writes of a controller, by the node that was elected at that
		// epoch (a leader's ISR write carries no controller epoch).
		if zw.ControllerEpoch <= 0 || zw.Path == zklayout.ControllerPath || zw.Path == zklayout.ControllerEpochPath ||
			!ranAt[nodeEpoch{w.Node, zw.ControllerEpoch}] {
			continue
		}
		if el, ok := supersededBy(elections, zw); ok {
			r.violate([]int{el.idx, w.Index},
				"controller %d wrote %s at controller epoch %d (%s) after epoch %d had been elected (event %d): its write was not fenced.",
				w.Node, zw.Path, zw.ControllerEpoch, ev(w), el.epoch, el.idx)
		}
	}

	// Partition-state controller_epoch never decreases, in ZooKeeper order
	// (see zkStates).
	states := partitionStates(h)
	for _, tp := range sortedTPs(states) {
		obs := states[tp].ordered
		if len(obs) == 0 {
			continue
		}
		maxO := obs[0]
		for _, o := range obs[1:] {
			if o.ControllerEpoch < maxO.ControllerEpoch {
				r.violate([]int{maxO.idx, o.idx},
					"partition %s state went back from controller_epoch %d (event %d) to %d (event %d).",
					tp, maxO.ControllerEpoch, maxO.idx, o.ControllerEpoch, o.idx)
			} else {
				maxO = o
			}
		}
	}
	r.detail("accepted_control_requests", accepted)
	r.detail("controller_writes", len(writes))
	r.detail("elections", len(elections))
	return r.result(fmt.Sprintf("%d accepted control requests, %d controller writes and %d partitions' states respect controller epochs.",
		accepted, len(writes), len(states)))
}

// BrokerFencing checks broker epochs (KAFKA-7235, KIP-380) by consequence:
// a violation is a control request acted on (accepted) by a broker process
// other than the one it was meant for, and a ControlledShutdown acted on
// that a broker's previous process sent (known from the epoch it carried,
// or, when it carried none, from the broker's own record of its send). The
// process a request was meant for is the broker epoch the controller
// logged with its send (Control.MeantBrokerEpoch, recorded even when the
// KAFKA-7235 switch keeps it off the wire), else the epoch the request
// carried; the process that acted is the receiving process's registration.
// A receipt pairs with the send attempt of the same controller, correlation
// id and target broker (and content) found anywhere in the history, not
// only earlier: the controller's and the broker's clocks differ, and a
// receipt logged a fraction of a millisecond before its send by those
// clocks is still that send's receipt.
// A request that carries no broker epoch is not a violation by itself (the
// switch alone does no harm): only reaching the wrong process is. Each
// explanation says what the process did with the request (role changes,
// truncations, checkpoint writes). In histories without MeantBrokerEpoch, a
// request is traced to the newest identical send, and counts as meant for a
// previous process only when that send came before the receiving process
// registered and an earlier process of that broker had registered (a send
// during a broker's first registration is never "for a previous process").
//
// It also checks the controller's side of KIP-380 (staleBrokerEpochs): an
// acting controller that could see a broker's new registration keeps
// sending the previous process's broker epoch past staleEpochGrace, and
// the new process rejects those requests, so it never learns its
// partitions from that controller.
type BrokerFencing struct{}

// Name implements Checker.
func (BrokerFencing) Name() string { return "broker-fencing" }

// procReg is a broker process's registration: its czxid and event.
type procReg struct {
	epoch int64
	idx   int
}

// Check implements Checker.
func (c BrokerFencing) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	current := map[int32]procReg{}    // node → registration of the current process
	past := map[int32]map[int64]int{} // node → every czxid it ever registered → event
	latest := map[int32]procReg{}     // broker → newest registration known anywhere
	remember := func(id int32, epoch int64, idx int) {
		if past[id] == nil {
			past[id] = map[int64]int{}
		}
		if _, ok := past[id][epoch]; !ok {
			past[id][epoch] = idx
		}
		if epoch > latest[id].epoch {
			latest[id] = procReg{epoch, idx}
		}
	}
	// bySend pairs a receipt with the attempt that carried its correlation
	// id (histories that log every attempt). It is built over the whole
	// history before judging: the controller's clock and the broker's are
	// different clocks, and a receipt logged by one a fraction of a
	// millisecond before the other logged the send sorts first in the
	// merged history. byContent, for older histories, remembers the newest
	// send of each distinct request as the walk reaches it.
	bySend := attemptSends(h)
	byContent := map[string]int{}
	started := map[int32]int{} // node → its latest node_start
	// procRegs are the czxids the current process of each node registered:
	// a process re-registers (new czxid) after losing its session, and a
	// request meant for any of its registrations was meant for it.
	procRegs := map[int32]map[int64]bool{}
	ownReg := func(node int32, epoch int64) {
		if procRegs[node] == nil {
			procRegs[node] = map[int64]bool{}
		}
		procRegs[node][epoch] = true
	}
	// otherProcess says whether broker epoch meant belongs to a process of
	// node other than the current one: not one of its registrations, and
	// older than all of them (czxids grow, so a newer one is a
	// registration of this process not logged yet).
	otherProcess := func(node int32, meant int64) bool {
		regs := procRegs[node]
		if len(regs) == 0 || regs[meant] {
			return false
		}
		for r := range regs {
			if meant > r {
				return false
			}
		}
		return true
	}
	checked, shutdowns, unfenced, unfencedShutdowns := 0, 0, 0, 0
	lastShutdownSend := map[int32]procReg{} // broker → its latest own record of sending ControlledShutdown
	// (broker, process epoch) → that process's latest record of sending
	// ControlledShutdown: the queued request a controller acts on may be
	// an earlier process's while the new process has already sent its own.
	type proc struct {
		broker int32
		epoch  int64
	}
	shutdownSentBy := map[proc]int{}
	for e := range eventsOf(h, history.KindControlSent, history.KindNodeStart, history.KindBrokerRegistered, history.KindZKWatch, history.KindControlRequest, history.KindControlledShutdown) {
		switch e.Kind {
		case history.KindControlSent:
			if e.Control.Attempt == 0 {
				byContent[sentKey(e.Node, e.Control.TargetBroker, e.Control)] = e.Index
			}
		case history.KindNodeStart:
			delete(current, e.Node)
			delete(procRegs, e.Node)
			started[e.Node] = e.Index
		case history.KindBrokerRegistered:
			id := e.Registration.BrokerID
			if id == 0 {
				id = e.Node
			}
			current[id] = procReg{e.Registration.BrokerEpoch, e.Index}
			remember(id, e.Registration.BrokerEpoch, e.Index)
			ownReg(id, e.Registration.BrokerEpoch)
		case history.KindZKWatch:
			for _, b := range e.Watch.Brokers {
				remember(b.ID, b.Czxid, e.Index)
			}
		case history.KindControlRequest:
			if !acceptedControl(e) {
				continue
			}
			checked++
			cr := e.Control
			if cr.BrokerEpoch == -1 {
				unfenced++
			}
			cur, registered := current[e.Node]
			recv := cur.epoch
			if cr.OwnBrokerEpoch > 0 {
				ownReg(e.Node, cr.OwnBrokerEpoch)
				if !registered {
					recv = cr.OwnBrokerEpoch
				}
			}
			// Which process was the request meant for?
			meant, sentIdx := int64(0), -1
			if s := pairSend(bySend[attemptKey(cr.ControllerID, e.Node, cr)], e.Index); s >= 0 {
				sentIdx = s
				meant = h.Events[s].Control.MeantBrokerEpoch
			}
			if meant == 0 && cr.BrokerEpoch != -1 {
				meant = cr.BrokerEpoch
			}
			switch {
			case meant > 0 && recv > 0 && otherProcess(e.Node, meant):
				did := consequences(h, e)
				evs := []int{e.Index}
				if sentIdx >= 0 {
					evs = append(evs, sentIdx)
				}
				if registered {
					evs = append(evs, cur.idx)
				}
				whose := fmt.Sprintf("a process with broker epoch %d", meant)
				if old, ok := past[e.Node][meant]; ok && old < started[e.Node] {
					whose = fmt.Sprintf("its previous process (broker epoch %d, registered at event %d)", meant, old)
					evs = append(evs, old)
				}
				how := "carrying no broker epoch"
				if cr.BrokerEpoch != -1 {
					how = fmt.Sprintf("carrying stale broker epoch %d", cr.BrokerEpoch)
				}
				via := ""
				if sentIdx >= 0 {
					via = fmt.Sprintf(", sent at event %d", sentIdx)
				}
				regAt := ""
				if registered {
					regAt = fmt.Sprintf(" registered at event %d", cur.idx)
				}
				r.violate(append(evs, did.events...),
					"%s (the process with broker epoch %d%s) accepted %s (correlation id %d, %s) %s that controller %d meant for %s%s, and %s.",
					nodeName(e.Node), recv, regAt, cr.API, cr.CorrelationID, ev(e), how, cr.ControllerID, whose, via, did.text)
			case meant == 0 && sentIdx < 0:
				// An older history: trace the request to the newest
				// identical send.
				s, ok := byContent[sentKey(cr.ControllerID, e.Node, cr)]
				if !ok || !registered || s > cur.idx {
					break
				}
				prev := previousRegistration(past[e.Node], cur, s)
				if prev < 0 {
					break // the broker's first process: nothing earlier to confuse it with
				}
				did := consequences(h, e)
				r.violate(append([]int{s, prev, cur.idx, e.Index}, did.events...),
					"%s accepted %s (%s) that controller %d queued for its previous process (event %d, registered at event %d, before this process registered at event %d): with no broker epoch in the request it could not tell, and %s.",
					nodeName(e.Node), cr.API, ev(e), cr.ControllerID, s, prev, cur.idx, did.text)
			case !registered && meant > 0:
				// The broker can learn its czxid (the create's reply) and
				// act on a request before its broker_registered line is
				// written, while the watcher already saw the znode: only an
				// epoch registered before this process started is stale.
				if old, ok := past[e.Node][meant]; ok && old < started[e.Node] {
					did := consequences(h, e)
					r.violate(append([]int{old, e.Index}, did.events...),
						"%s accepted %s (correlation id %d, %s) meant for broker epoch %d of an earlier process (registered at event %d) before registering itself, and %s.",
						nodeName(e.Node), cr.API, cr.CorrelationID, ev(e), meant, old, did.text)
				}
			}
		case history.KindControlledShutdown:
			sd := e.Shutdown
			if sd.Verdict == history.VerdictSent {
				if sd.MeantBrokerEpoch > 0 {
					lastShutdownSend[sd.BrokerID] = procReg{sd.MeantBrokerEpoch, e.Index}
					shutdownSentBy[proc{sd.BrokerID, sd.MeantBrokerEpoch}] = e.Index
				}
				continue
			}
			if sd.Verdict != history.VerdictAccepted {
				continue
			}
			shutdowns++
			// Which process asked: the epoch the request carried, else the
			// broker's own record of its latest send. Unknown (no epoch and
			// no record) proves nothing.
			sender, senderAt := sd.BrokerEpoch, -1
			if sender <= 0 {
				s, ok := lastShutdownSend[sd.BrokerID]
				if !ok {
					unfencedShutdowns++
					continue
				}
				sender, senderAt = s.epoch, s.idx
			}
			l, known := latest[sd.BrokerID]
			stale := otherProcess(sd.BrokerID, sender)
			if len(procRegs[sd.BrokerID]) == 0 {
				stale = known && sender < l.epoch
			}
			if !stale {
				continue
			}
			// The previous process sent it before the new one registered
			// (its own record says so), and the controller's cache still
			// held the sender's epoch when it acted: the request was
			// queued ahead of the broker change, and KIP-380 checks the
			// cache. A request with no such record proves no order, and
			// a controller that missed the restart (KAFKA-7235's other
			// half) also keeps the old epoch: both stay violations.
			if sentAt, ok := shutdownSentBy[proc{sd.BrokerID, sender}]; ok && known && sentAt < l.idx && sd.CachedBrokerEpoch == sender {
				r.knownAnomaly(KnownQueuedShutdown, []int{e.Index, sentAt, l.idx},
					"controller %d acted on ControlledShutdown of %s (%s) that its previous process (broker epoch %d) sent at event %d, after the broker re-registered with czxid %d (event %d) but while its cache still held epoch %d: the request was queued ahead of that broker change, and KIP-380 checks the controller's cached epoch, so Kafka moves leadership off the new process too.",
					e.Node, nodeName(sd.BrokerID), ev(e), sender, sentAt, l.epoch, l.idx, sender)
				continue
			}
			evs := []int{e.Index}
			sentBy := fmt.Sprintf("carrying broker epoch %d", sd.BrokerEpoch)
			if senderAt >= 0 {
				evs = append(evs, senderAt)
				sentBy = fmt.Sprintf("that its previous process (broker epoch %d) sent at event %d, carrying no broker epoch", sender, senderAt)
			}
			if known {
				evs = append(evs, l.idx)
			}
			r.violate(evs,
				"controller %d acted on ControlledShutdown of %s (%s) %s, after the broker re-registered with czxid %d (event %d): it moved leadership off a process that had not asked to shut down.",
				e.Node, nodeName(sd.BrokerID), ev(e), sentBy, l.epoch, l.idx)
		}
	}
	staleBrokerEpochs(h, r)
	r.detail("accepted_control_requests", checked)
	r.detail("accepted_without_broker_epoch", unfenced)
	r.detail("accepted_controlled_shutdowns", shutdowns)
	r.detail("accepted_controlled_shutdowns_of_unknown_sender", unfencedShutdowns)
	ok := fmt.Sprintf("none of %d accepted control requests was acted on by a broker process other than the one it was meant for", checked)
	if unfenced > 0 {
		ok += fmt.Sprintf(" (%d of the requests carried no broker epoch)", unfenced)
	}
	ok += fmt.Sprintf(", none of %d accepted controlled shutdowns came from a broker's previous process once the controller knew of its restart, and no acting controller went on sending a re-registered broker its previous broker epoch past the %s grace.", shutdowns, staleEpochGrace)
	return r.result(ok)
}

// previousRegistration returns the event of a registration of the same
// broker with another czxid logged before event before (-1 if none): proof
// that an earlier process existed when a request was queued.
func previousRegistration(regs map[int64]int, cur procReg, before int) int {
	best := -1
	for czxid, idx := range regs {
		if czxid != cur.epoch && idx < before && idx > best {
			best = idx
		}
	}
	return best
}

// effect is what a broker process did with a control request it accepted.
type effect struct {
	text   string
	events []int
}

// maxEffects caps the actions an explanation lists.
const maxEffects = 4

// consequences lists what the process that accepted control request e did
// next with it: role changes and truncations of the request's partitions
// and (for LeaderAndIsr and StopReplica) the first HW checkpoint it wrote,
// up to its next accepted control request (later actions answer that one)
// or its restart.
func consequences(h *history.History, e *history.Event) effect {
	tps := map[history.TopicPartition]bool{}
	for _, p := range e.Control.Partitions {
		tps[p.TP()] = true
	}
	var parts []string
	var evs []int
	// UpdateMetadata changes no replica: a checkpoint written after it is
	// the periodic one, not its consequence.
	checkpoint := e.Control.API == history.APIUpdateMetadata
	for i := e.Index + 1; i < len(h.Events) && len(parts) < maxEffects; i++ {
		x := &h.Events[i]
		if x.Node != e.Node {
			continue
		}
		if x.Kind == history.KindNodeStart || (x.Kind == history.KindControlRequest && acceptedControl(x)) {
			break
		}
		switch {
		case x.Kind == history.KindRoleChange && tps[x.Role.TP()]:
			what := "became " + x.Role.Role
			if x.Role.Role == history.RoleStopped {
				what = "stopped its replica"
			}
			parts = append(parts, fmt.Sprintf("%s of %s at leader epoch %d (event %d)", what, x.Role.TP(), x.Role.LeaderEpoch, x.Index))
			evs = append(evs, x.Index)
		case x.Kind == history.KindTruncation && tps[x.Truncation.TP()]:
			parts = append(parts, fmt.Sprintf("truncated %s from %d to %d (event %d)", x.Truncation.TP(), x.Truncation.From, x.Truncation.To, x.Index))
			evs = append(evs, x.Index)
		case x.Kind == history.KindHWCheckpoint && !checkpoint:
			checkpoint = true
			parts = append(parts, fmt.Sprintf("wrote its HW checkpoint with %d entries (event %d)", len(x.Checkpoint.Entries), x.Index))
			evs = append(evs, x.Index)
		}
	}
	if len(parts) == 0 {
		return effect{text: "applied it (no role change, truncation or checkpoint write of its partitions followed)"}
	}
	return effect{text: "acted on it: " + strings.Join(parts, "; "), events: evs}
}

// attemptSends indexes every logged send attempt (control_sent with an
// Attempt) of h by attemptKey, each key's sends in history order.
func attemptSends(h *history.History) map[string][]int {
	out := map[string][]int{}
	for e := range eventsOf(h, history.KindControlSent) {
		if e.Kind == history.KindControlSent && e.Control.Attempt > 0 {
			k := attemptKey(e.Node, e.Control.TargetBroker, e.Control)
			out[k] = append(out[k], e.Index)
		}
	}
	return out
}

// pairSend picks, from the sends of one attempt key (in history order),
// the one a receipt at event recv answers: the latest logged before it,
// else (the sender's clock ahead of the receiver's) the first after it;
// -1 when there is none.
func pairSend(sends []int, recv int) int {
	best := -1
	for _, s := range sends {
		if s < recv || best < 0 {
			best = s
		}
		if s > recv {
			break
		}
	}
	return best
}

// attemptKey identifies one send attempt: the controller, the target, the
// correlation id it went out with, and what the request says.
func attemptKey(controller, target int32, c *history.Control) string {
	return fmt.Sprintf("%d#%s", c.CorrelationID, sentKey(controller, target, c))
}

// sentKey identifies a control request by what it says, for pairing a
// broker's receipt with the controller's send: the controller, its epoch, the
// target, the API and every partition's leader and leader epoch.
func sentKey(controller, target int32, c *history.Control) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d|%d|%d|%s", controller, c.ControllerEpoch, target, c.API)
	for _, p := range c.Partitions {
		fmt.Fprintf(&b, "|%s-%d:%d@%d", p.Topic, p.Partition, p.Leader, p.LeaderEpoch)
	}
	return b.String()
}

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

// electionMark is one controller election as the history shows it: a
// node's controller_elected, or the watcher's /controller_epoch holding a
// new epoch.
type electionMark struct {
	epoch int32
	time  int64
	zxid  int64
	idx   int
}

// nodeEpoch is a node elected controller at an epoch.
type nodeEpoch struct {
	node  int32
	epoch int32
}

// controllerElections returns every election of h in history order, and
// at which epochs each node was elected (a write at an epoch is a
// controller's only if its node was elected at it).
func controllerElections(h *history.History) ([]electionMark, map[nodeEpoch]bool) {
	var els []electionMark
	ranAt := map[nodeEpoch]bool{}
	for e := range eventsOf(h, history.KindControllerElected, history.KindZKWatch) {
		switch e.Kind {
		case history.KindControllerElected:
			els = append(els, electionMark{e.Controller.Epoch, e.Time, e.Controller.Zxid, e.Index})
			ranAt[nodeEpoch{e.Node, e.Controller.Epoch}] = true
		case history.KindZKWatch:
			if w := e.Watch; w.ControllerEpoch != nil && w.Path == zklayout.ControllerEpochPath {
				els = append(els, electionMark{*w.ControllerEpoch, e.Time, w.Mzxid, e.Index})
			}
		}
	}
	return els, ranAt
}

// supersededBy returns the first of els with a higher epoch than w's that
// was elected before w landed. With zxids on both sides ZooKeeper's own
// order decides; otherwise only a write issued after the election was
// logged counts (no false alarm from a write that landed first and was
// logged late).
func supersededBy(els []electionMark, w *history.ZKWrite) (electionMark, bool) {
	for _, el := range els {
		if el.epoch <= w.ControllerEpoch {
			continue
		}
		switch {
		case el.zxid > 0 && w.Zxid > 0:
			if w.Zxid > el.zxid {
				return el, true
			}
		case w.Start > 0:
			if w.Start > el.time {
				return el, true
			}
		}
	}
	return electionMark{}, false
}
