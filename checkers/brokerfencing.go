package checkers

import (
	"fmt"
	"strings"

	"github.com/zkchaos/zkchaos/history"
)

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
	w := newBrokerFencingWalk(h, &report{name: c.Name()})
	for e := range eventsOf(h, history.KindControlSent, history.KindNodeStart, history.KindBrokerRegistered, history.KindZKWatch, history.KindControlRequest, history.KindControlledShutdown) {
		switch e.Kind {
		case history.KindControlSent:
			if e.Control.Attempt == 0 {
				w.byContent[sentKey(e.Node, e.Control.TargetBroker, e.Control)] = e.Index
			}
		case history.KindNodeStart:
			delete(w.current, e.Node)
			delete(w.procRegs, e.Node)
			w.started[e.Node] = e.Index
		case history.KindBrokerRegistered:
			id := e.Registration.BrokerID
			if id == 0 {
				id = e.Node
			}
			w.current[id] = procReg{e.Registration.BrokerEpoch, e.Index}
			w.remember(id, e.Registration.BrokerEpoch, e.Index)
			w.ownReg(id, e.Registration.BrokerEpoch)
		case history.KindZKWatch:
			for _, b := range e.Watch.Brokers {
				w.remember(b.ID, b.Czxid, e.Index)
			}
		case history.KindControlRequest:
			if acceptedControl(e) {
				w.controlRequest(e)
			}
		case history.KindControlledShutdown:
			w.controlledShutdown(e)
		}
	}
	r := w.r
	staleBrokerEpochs(h, r)
	r.detail("accepted_control_requests", w.checked)
	r.detail("accepted_without_broker_epoch", w.unfenced)
	r.detail("accepted_controlled_shutdowns", w.shutdowns)
	r.detail("accepted_controlled_shutdowns_of_unknown_sender", w.unfencedShutdowns)
	ok := fmt.Sprintf("none of %d accepted control requests was acted on by a broker process other than the one it was meant for", w.checked)
	if w.unfenced > 0 {
		ok += fmt.Sprintf(" (%d of the requests carried no broker epoch)", w.unfenced)
	}
	ok += fmt.Sprintf(", none of %d accepted controlled shutdowns came from a broker's previous process once the controller knew of its restart, and no acting controller went on sending a re-registered broker its previous broker epoch past the %s grace.", w.shutdowns, staleEpochGrace)
	return r.result(ok)
}

// brokerFencingWalk is what BrokerFencing knows at a point of its walk
// through a history.
type brokerFencingWalk struct {
	h *history.History
	r *report

	current map[int32]procReg       // node → registration of the current process
	past    map[int32]map[int64]int // node → every czxid it ever registered → event
	latest  map[int32]procReg       // broker → newest registration known anywhere
	started map[int32]int           // node → its latest node_start
	// procRegs are the czxids the current process of each node registered:
	// a process re-registers (new czxid) after losing its session, and a
	// request meant for any of its registrations was meant for it.
	procRegs map[int32]map[int64]bool

	// bySend pairs a receipt with the attempt that carried its correlation
	// id (histories that log every attempt). It is built over the whole
	// history before judging: the controller's clock and the broker's are
	// different clocks, and a receipt logged by one a fraction of a
	// millisecond before the other logged the send sorts first in the
	// merged history. byContent, for older histories, remembers the newest
	// send of each distinct request as the walk reaches it.
	bySend    map[string][]int
	byContent map[string]int

	lastShutdownSend map[int32]procReg // broker → its latest own record of sending ControlledShutdown
	// shutdownSentBy is, per broker process, that process's latest record
	// of sending ControlledShutdown: the queued request a controller acts
	// on may be an earlier process's while the new process has already
	// sent its own.
	shutdownSentBy map[brokerProc]int

	checked, shutdowns, unfenced, unfencedShutdowns int
}

// brokerProc is one process of a broker, by the broker epoch it registered.
type brokerProc struct {
	broker int32
	epoch  int64
}

func newBrokerFencingWalk(h *history.History, r *report) *brokerFencingWalk {
	return &brokerFencingWalk{
		h: h, r: r,
		current:          map[int32]procReg{},
		past:             map[int32]map[int64]int{},
		latest:           map[int32]procReg{},
		started:          map[int32]int{},
		procRegs:         map[int32]map[int64]bool{},
		bySend:           attemptSends(h),
		byContent:        map[string]int{},
		lastShutdownSend: map[int32]procReg{},
		shutdownSentBy:   map[brokerProc]int{},
	}
}

// remember records that broker id registered epoch, seen at event idx.
func (w *brokerFencingWalk) remember(id int32, epoch int64, idx int) {
	if w.past[id] == nil {
		w.past[id] = map[int64]int{}
	}
	if _, ok := w.past[id][epoch]; !ok {
		w.past[id][epoch] = idx
	}
	if epoch > w.latest[id].epoch {
		w.latest[id] = procReg{epoch, idx}
	}
}

// ownReg records that node's current process registered epoch.
func (w *brokerFencingWalk) ownReg(node int32, epoch int64) {
	if w.procRegs[node] == nil {
		w.procRegs[node] = map[int64]bool{}
	}
	w.procRegs[node][epoch] = true
}

// otherProcess says whether broker epoch meant belongs to a process of
// node other than the current one: not one of its registrations, and
// older than all of them (czxids grow, so a newer one is a registration
// of this process not logged yet).
func (w *brokerFencingWalk) otherProcess(node int32, meant int64) bool {
	regs := w.procRegs[node]
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

// controlRequest judges accepted control request e by the process it was
// meant for.
func (w *brokerFencingWalk) controlRequest(e *history.Event) {
	w.checked++
	cr := e.Control
	if cr.BrokerEpoch == -1 {
		w.unfenced++
	}
	cur, registered := w.current[e.Node]
	recv := cur.epoch
	if cr.OwnBrokerEpoch > 0 {
		w.ownReg(e.Node, cr.OwnBrokerEpoch)
		if !registered {
			recv = cr.OwnBrokerEpoch
		}
	}
	// Which process was the request meant for?
	meant, sentIdx := int64(0), -1
	if s := pairSend(w.bySend[attemptKey(cr.ControllerID, e.Node, cr)], e.Index); s >= 0 {
		sentIdx = s
		meant = w.h.Events[s].Control.MeantBrokerEpoch
	}
	if meant == 0 && cr.BrokerEpoch != -1 {
		meant = cr.BrokerEpoch
	}
	switch {
	case meant > 0 && recv > 0 && w.otherProcess(e.Node, meant):
		did := consequences(w.h, e)
		evs := []int{e.Index}
		if sentIdx >= 0 {
			evs = append(evs, sentIdx)
		}
		if registered {
			evs = append(evs, cur.idx)
		}
		whose := fmt.Sprintf("a process with broker epoch %d", meant)
		if old, ok := w.past[e.Node][meant]; ok && old < w.started[e.Node] {
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
		w.r.violate(append(evs, did.events...),
			"%s (the process with broker epoch %d%s) accepted %s (correlation id %d, %s) %s that controller %d meant for %s%s, and %s.",
			nodeName(e.Node), recv, regAt, cr.API, cr.CorrelationID, ev(e), how, cr.ControllerID, whose, via, did.text)
	case meant == 0 && sentIdx < 0:
		// An older history: trace the request to the newest
		// identical send.
		s, ok := w.byContent[sentKey(cr.ControllerID, e.Node, cr)]
		if !ok || !registered || s > cur.idx {
			break
		}
		prev := previousRegistration(w.past[e.Node], cur, s)
		if prev < 0 {
			break // the broker's first process: nothing earlier to confuse it with
		}
		did := consequences(w.h, e)
		w.r.violate(append([]int{s, prev, cur.idx, e.Index}, did.events...),
			"%s accepted %s (%s) that controller %d queued for its previous process (event %d, registered at event %d, before this process registered at event %d): with no broker epoch in the request it could not tell, and %s.",
			nodeName(e.Node), cr.API, ev(e), cr.ControllerID, s, prev, cur.idx, did.text)
	case !registered && meant > 0:
		// The broker can learn its czxid (the create's reply) and
		// act on a request before its broker_registered line is
		// written, while the watcher already saw the znode: only an
		// epoch registered before this process started is stale.
		if old, ok := w.past[e.Node][meant]; ok && old < w.started[e.Node] {
			did := consequences(w.h, e)
			w.r.violate(append([]int{old, e.Index}, did.events...),
				"%s accepted %s (correlation id %d, %s) meant for broker epoch %d of an earlier process (registered at event %d) before registering itself, and %s.",
				nodeName(e.Node), cr.API, cr.CorrelationID, ev(e), meant, old, did.text)
		}
	}
}

// controlledShutdown records a broker's ControlledShutdown send, or judges
// one a controller acted on by the process that sent it.
func (w *brokerFencingWalk) controlledShutdown(e *history.Event) {
	sd := e.Shutdown
	if sd.Verdict == history.VerdictSent {
		if sd.MeantBrokerEpoch > 0 {
			w.lastShutdownSend[sd.BrokerID] = procReg{sd.MeantBrokerEpoch, e.Index}
			w.shutdownSentBy[brokerProc{sd.BrokerID, sd.MeantBrokerEpoch}] = e.Index
		}
		return
	}
	if sd.Verdict != history.VerdictAccepted {
		return
	}
	w.shutdowns++
	// Which process asked: the epoch the request carried, else the
	// broker's own record of its latest send. Unknown (no epoch and
	// no record) proves nothing.
	sender, senderAt := sd.BrokerEpoch, -1
	if sender <= 0 {
		s, ok := w.lastShutdownSend[sd.BrokerID]
		if !ok {
			w.unfencedShutdowns++
			return
		}
		sender, senderAt = s.epoch, s.idx
	}
	l, known := w.latest[sd.BrokerID]
	stale := w.otherProcess(sd.BrokerID, sender)
	if len(w.procRegs[sd.BrokerID]) == 0 {
		stale = known && sender < l.epoch
	}
	if !stale {
		return
	}
	// The previous process sent it before the new one registered
	// (its own record says so), and the controller's cache still
	// held the sender's epoch when it acted: the request was
	// queued ahead of the broker change, and KIP-380 checks the
	// cache. A request with no such record proves no order, and
	// a controller that missed the restart (KAFKA-7235's other
	// half) also keeps the old epoch: both stay violations.
	if sentAt, ok := w.shutdownSentBy[brokerProc{sd.BrokerID, sender}]; ok && known && sentAt < l.idx && sd.CachedBrokerEpoch == sender {
		w.r.knownAnomaly(KnownQueuedShutdown, []int{e.Index, sentAt, l.idx},
			"controller %d acted on ControlledShutdown of %s (%s) that its previous process (broker epoch %d) sent at event %d, after the broker re-registered with czxid %d (event %d) but while its cache still held epoch %d: the request was queued ahead of that broker change, and KIP-380 checks the controller's cached epoch, so Kafka moves leadership off the new process too.",
			e.Node, nodeName(sd.BrokerID), ev(e), sender, sentAt, l.epoch, l.idx, sender)
		return
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
	w.r.violate(evs,
		"controller %d acted on ControlledShutdown of %s (%s) %s, after the broker re-registered with czxid %d (event %d): it moved leadership off a process that had not asked to shut down.",
		e.Node, nodeName(sd.BrokerID), ev(e), sentBy, l.epoch, l.idx)
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
		// UpdateMetadata's partitions change only the metadata cache.
		if e.Control.API != history.APIUpdateMetadata {
			tps[p.TP()] = true
		}
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
