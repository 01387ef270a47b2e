package checkers

import (
	"fmt"
	"sort"

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
			if o.inc != maxO.inc {
				maxO = o // a new incarnation of the topic starts again
				continue
			}
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
