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
	tps := make([]history.TopicPartition, 0, len(states))
	for tp := range states {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(a, b int) bool { return tps[a].String() < tps[b].String() })
	for _, tp := range tps {
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

// BrokerFencing checks broker epochs (KAFKA-7235, KIP-380): every accepted
// control request carries the receiving process's current broker epoch (the
// czxid of its live registration), and the controller never acts on a
// ControlledShutdown carrying an older broker epoch.
type BrokerFencing struct{}

// Name implements Checker.
func (BrokerFencing) Name() string { return "broker-fencing" }

// Check implements Checker.
func (c BrokerFencing) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	type reg struct {
		epoch int64
		idx   int
	}
	current := map[int32]reg{}        // node → registration of the current process
	past := map[int32]map[int64]int{} // node → every czxid it ever registered → event
	latest := map[int32]reg{}         // broker → newest registration known anywhere
	remember := func(id int32, epoch int64, idx int) {
		if past[id] == nil {
			past[id] = map[int64]int{}
		}
		if _, ok := past[id][epoch]; !ok {
			past[id][epoch] = idx
		}
		if epoch > latest[id].epoch {
			latest[id] = reg{epoch, idx}
		}
	}
	// sent remembers the newest control_sent of each distinct request, so a
	// request received without a broker epoch can be traced to when the
	// controller queued it. Correlation ids cannot pair them: a request
	// retried on a new connection gets a new one.
	sent := map[string]int{}
	// unfenced are accepted requests without a broker epoch that were not
	// traced to an earlier incarnation; they are reported after the traced
	// ones, which say more.
	var unfenced []*history.Event
	started := map[int32]int{} // node → its latest node_start
	checked, shutdowns := 0, 0
	for i := range h.Events {
		e := &h.Events[i]
		switch e.Kind {
		case history.KindControlSent:
			sent[sentKey(e.Node, e.Control.TargetBroker, e.Control)] = e.Index
		case history.KindNodeStart:
			delete(current, e.Node)
			started[e.Node] = e.Index
		case history.KindBrokerRegistered:
			id := e.Registration.BrokerID
			if id == 0 {
				id = e.Node
			}
			current[id] = reg{e.Registration.BrokerEpoch, e.Index}
			remember(id, e.Registration.BrokerEpoch, e.Index)
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
			cur, registered := current[e.Node]
			switch {
			case cr.BrokerEpoch == -1:
				if s, ok := sent[sentKey(cr.ControllerID, e.Node, cr)]; ok && registered && s < cur.idx {
					r.violate([]int{s, cur.idx, e.Index},
						"%s accepted %s (%s) that controller %d queued for its previous process (event %d, before this process registered at event %d): with no broker epoch in the request it could not tell.",
						nodeName(e.Node), cr.API, ev(e), cr.ControllerID, s, cur.idx)
					continue
				}
				unfenced = append(unfenced, e)
			case registered && cr.BrokerEpoch < cur.epoch:
				evs := []int{cur.idx, e.Index}
				from := ""
				if old, ok := past[e.Node][cr.BrokerEpoch]; ok {
					evs = []int{old, cur.idx, e.Index}
					from = fmt.Sprintf(" (the registration of event %d)", old)
				}
				r.violate(evs,
					"%s accepted %s (correlation id %d, %s) from controller %d with stale broker epoch %d%s while its live registration has czxid %d (event %d).",
					nodeName(e.Node), cr.API, cr.CorrelationID, ev(e), cr.ControllerID, cr.BrokerEpoch, from, cur.epoch, cur.idx)
			case !registered:
				// The broker can learn its czxid (the create's reply) and
				// act on a request before its broker_registered line is
				// written, while the watcher already saw the znode: only an
				// epoch registered before this process started is stale.
				if old, ok := past[e.Node][cr.BrokerEpoch]; ok && old < started[e.Node] {
					r.violate([]int{old, e.Index},
						"%s accepted %s (correlation id %d, %s) carrying broker epoch %d of an earlier process (registered at event %d) before registering itself.",
						nodeName(e.Node), cr.API, cr.CorrelationID, ev(e), cr.BrokerEpoch, old)
				} else if cr.OwnBrokerEpoch > 0 && cr.BrokerEpoch < cr.OwnBrokerEpoch {
					r.violate([]int{e.Index},
						"%s accepted %s (correlation id %d, %s) with broker epoch %d below its own broker epoch %d.",
						nodeName(e.Node), cr.API, cr.CorrelationID, ev(e), cr.BrokerEpoch, cr.OwnBrokerEpoch)
				}
			}
		case history.KindControlledShutdown:
			sd := e.Shutdown
			if sd.Verdict != history.VerdictAccepted {
				continue
			}
			shutdowns++
			if l, ok := latest[sd.BrokerID]; ok && sd.BrokerEpoch < l.epoch {
				r.violate([]int{l.idx, e.Index},
					"controller %d acted on ControlledShutdown of %s (%s) carrying broker epoch %d although the broker had re-registered with czxid %d (event %d).",
					e.Node, nodeName(sd.BrokerID), ev(e), sd.BrokerEpoch, l.epoch, l.idx)
			} else if sd.BrokerEpoch < sd.CachedBrokerEpoch {
				r.violate([]int{e.Index},
					"controller %d acted on ControlledShutdown of %s (%s) carrying broker epoch %d below its cached epoch %d.",
					e.Node, nodeName(sd.BrokerID), ev(e), sd.BrokerEpoch, sd.CachedBrokerEpoch)
			}
		}
	}
	for _, e := range unfenced {
		r.violate([]int{e.Index},
			"%s accepted %s (correlation id %d, %s) from controller %d carrying no broker epoch (-1), so a request meant for an earlier process could not be told apart.",
			nodeName(e.Node), e.Control.API, e.Control.CorrelationID, ev(e), e.Control.ControllerID)
	}
	r.detail("accepted_control_requests", checked)
	r.detail("accepted_controlled_shutdowns", shutdowns)
	return r.result(fmt.Sprintf("%d accepted control requests and %d controlled shutdowns carried current broker epochs.", checked, shutdowns))
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
