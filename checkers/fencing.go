package checkers

import (
	"fmt"
	"sort"
	"strings"

	"github.com/zkchaos/zkchaos/history"
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
	type election struct {
		epoch int32
		time  int64
		zxid  int64
		idx   int
	}
	var elections []election
	type psObs struct {
		epoch   int32
		zxid    int64
		time    int64
		idx     int
		watcher bool
	}
	states := map[history.TopicPartition][]psObs{}
	var writes []*history.Event
	accepted := 0
	type nodeEpoch struct {
		node  int32
		epoch int32
	}
	ranAt := map[nodeEpoch]bool{} // node was elected controller at epoch

	for i := range h.Events {
		e := &h.Events[i]
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
		case history.KindControllerElected:
			elections = append(elections, election{e.Controller.Epoch, e.Time, e.Controller.Zxid, e.Index})
			ranAt[nodeEpoch{e.Node, e.Controller.Epoch}] = true
		case history.KindZKWatch:
			w := e.Watch
			if w.ControllerEpoch != nil && w.Path == "/controller_epoch" {
				elections = append(elections, election{*w.ControllerEpoch, e.Time, w.Mzxid, e.Index})
			}
			if w.State != nil {
				states[w.State.TP()] = append(states[w.State.TP()], psObs{w.State.ControllerEpoch, w.Mzxid, e.Time, e.Index, true})
			}
		case history.KindZKWrite:
			zw := e.ZKWrite
			if zw.Outcome != history.ZKOK {
				continue
			}
			writes = append(writes, e)
			if zw.State != nil {
				states[zw.State.TP()] = append(states[zw.State.TP()], psObs{zw.State.ControllerEpoch, zw.Zxid, e.Time, e.Index, false})
			}
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
		if zw.ControllerEpoch <= 0 || zw.Path == "/controller" || zw.Path == "/controller_epoch" ||
			!ranAt[nodeEpoch{w.Node, zw.ControllerEpoch}] {
			continue
		}
		for _, el := range elections {
			if el.epoch <= zw.ControllerEpoch {
				continue
			}
			after := false
			switch {
			case el.zxid > 0 && zw.Zxid > 0:
				after = zw.Zxid > el.zxid
			case zw.Start > 0:
				after = zw.Start > el.time
			}
			if after {
				r.violate([]int{el.idx, w.Index},
					"controller %d wrote %s at controller epoch %d (%s) after epoch %d had been elected (event %d): its write was not fenced.",
					w.Node, zw.Path, zw.ControllerEpoch, ev(w), el.epoch, el.idx)
				break
			}
		}
	}

	// Partition-state controller_epoch never decreases, in ZooKeeper order:
	// by zxid, over the observations that have one; if none has, over the
	// watcher's own observations in time order (one ZooKeeper session sees
	// updates in order). Node-logged writes without a zxid are not ordered
	// by time: a node paused between its write and its log line would make
	// an old write look late.
	for _, tp := range sortedTPs(states) {
		var withZxid, watched []psObs
		for _, o := range states[tp] {
			if o.zxid > 0 {
				withZxid = append(withZxid, o)
			} else if o.watcher {
				watched = append(watched, o)
			}
		}
		obs := watched
		if len(withZxid) > 0 {
			obs = withZxid
			sort.SliceStable(obs, func(a, b int) bool { return obs[a].zxid < obs[b].zxid })
		}
		if len(obs) == 0 {
			continue
		}
		maxO := obs[0]
		for _, o := range obs[1:] {
			if o.epoch < maxO.epoch {
				r.violate([]int{maxO.idx, o.idx},
					"partition %s state went back from controller_epoch %d (event %d) to %d (event %d).",
					tp, maxO.epoch, maxO.idx, o.epoch, o.idx)
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
// A request that carries no broker epoch is not a violation by itself (the
// switch alone does no harm): only reaching the wrong process is. Each
// explanation says what the process did with the request (role changes,
// truncations, checkpoint writes). In histories without MeantBrokerEpoch, a
// request is traced to the newest identical send, and counts as meant for a
// previous process only when that send came before the receiving process
// registered and an earlier process of that broker had registered (a send
// during a broker's first registration is never "for a previous process").
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
	// bySend pairs a receipt with the one attempt that carried its
	// correlation id (histories that log every attempt); byContent, for
	// older histories, remembers the newest send of each distinct request.
	bySend := map[string]int{}
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
	for i := range h.Events {
		e := &h.Events[i]
		switch e.Kind {
		case history.KindControlSent:
			if e.Control.Attempt > 0 {
				bySend[attemptKey(e.Node, e.Control.TargetBroker, e.Control)] = e.Index
			} else {
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
			if s, ok := bySend[attemptKey(cr.ControllerID, e.Node, cr)]; ok {
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
			if s, ok := lastShutdownSend[sd.BrokerID]; ok && known && s.epoch == sender && s.idx < l.idx && sd.CachedBrokerEpoch == sender {
				r.knownAnomaly(KnownQueuedShutdown, []int{e.Index, s.idx, l.idx},
					"controller %d acted on ControlledShutdown of %s (%s) that its previous process (broker epoch %d) sent at event %d, after the broker re-registered with czxid %d (event %d) but while its cache still held epoch %d: the request was queued ahead of that broker change, and KIP-380 checks the controller's cached epoch, so Kafka moves leadership off the new process too.",
					e.Node, nodeName(sd.BrokerID), ev(e), sender, s.idx, l.epoch, l.idx, sender)
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
	r.detail("accepted_control_requests", checked)
	r.detail("accepted_without_broker_epoch", unfenced)
	r.detail("accepted_controlled_shutdowns", shutdowns)
	r.detail("accepted_controlled_shutdowns_of_unknown_sender", unfencedShutdowns)
	ok := fmt.Sprintf("none of %d accepted control requests was acted on by a broker process other than the one it was meant for, and none of %d accepted controlled shutdowns came from a broker's previous process once the controller knew of its restart", checked, shutdowns)
	if unfenced > 0 {
		ok += fmt.Sprintf(" (%d of the requests carried no broker epoch)", unfenced)
	}
	return r.result(ok + ".")
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
