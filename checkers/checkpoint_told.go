package checkers

// When hw-checkpoint owes a restarted process a LeaderAndIsr: Kafka 2.6.3's
// ReplicaManager.checkpointHighWatermarks writes only the partitions in
// allPartitions, which only a LeaderAndIsr fills, so a process that dies
// before the controller reached it writes a file without the partitions it
// was not yet told about. That is Kafka's behaviour, not a slip; the slip
// (KAFKA-7235, a controller that never tells a restarted broker) shows only
// once the controller had the time to tell it.

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/history"
)

// KnownCheckpointUntold: a restarted process's checkpoint left out a
// partition the broker hosted and the process ended before any LeaderAndIsr
// told it about it, while no controller had acted in its reach for the
// grace since it registered: Kafka 2.6.3's
// ReplicaManager.checkpointHighWatermarks writes only the partitions in
// allPartitions, and the next process starts that partition at its log
// start.
const KnownCheckpointUntold = "checkpoint-untold-partition"

// ctlShare is how long one controller term acted in a process's reach.
type ctlShare struct {
	span ctlSpan
	d    time.Duration
}

// asgMark is a replica set a controller's LeaderAndIsr carried for a
// partition, and when it was sent.
type asgMark struct {
	t        int64
	replicas []int32
}

// toldChance is the time a controller had to tell a process about one of
// its partitions: from its registration until it ended, the time a
// controller acted with no fault on it, on the broker or on ZooKeeper, no
// write of its own waiting for ZooKeeper's answer, the broker registered
// and the partition assigned to it.
type toldChance struct {
	reg    int   // the process's first broker_registered; -1: none
	to     int64 // when the process ended (or the history did)
	acting time.Duration
	over   int64      // when acting passed the grace; 0: it never did
	by     []ctlShare // the controller terms that acted, in time order, until over
	// owed: the partition was assigned to the broker at some time of the
	// process's life after it registered (the controller's latest
	// LeaderAndIsr naming replicas said so, or none had named any).
	owed bool
}

// chance measures the time controllers had to tell node's process, which
// registered at event reg (-1: never) and ended at time to, about tp.
func (s *hwcpState) chance(node int32, tp history.TopicPartition, reg int, to int64) toldChance {
	c := toldChance{reg: reg, to: to}
	if reg < 0 || len(s.h.Events) == 0 {
		return c
	}
	from := s.h.Events[reg].Time
	if from >= to {
		return c
	}
	if s.world == nil {
		s.world = newElectWorld(s.h, s.grace)
		s.points = slices.Clone(s.world.points)
		slices.Sort(s.points)
		s.points = slices.Compact(s.points)
	}
	w := s.world
	bounds := []int64{from}
	for i := sort.Search(len(s.points), func(i int) bool { return s.points[i] > from }); i < len(s.points) && s.points[i] < to; i++ {
		bounds = append(bounds, s.points[i])
	}
	for _, m := range s.asg[tp] {
		if from < m.t && m.t < to {
			bounds = append(bounds, m.t)
		}
	}
	slices.Sort(bounds)
	bounds = append(slices.Compact(bounds), to)
	for i := 0; i+1 < len(bounds); i++ {
		a, b := bounds[i], bounds[i+1]
		if !s.assignedTo(tp, node, a) {
			continue
		}
		c.owed = true
		if !w.al.alive(node, a) || w.brokerCut(node, a) {
			continue
		}
		ctl, ok, cut := w.actingAt(a)
		if !ok || cut {
			continue
		}
		d := time.Duration(b - a)
		if c.acting+d > s.grace {
			c.over = a + int64(s.grace-c.acting)
		}
		c.acting += d
		if n := len(c.by); n > 0 && c.by[n-1].span.elected == ctl.elected {
			c.by[n-1].d += d
		} else {
			c.by = append(c.by, ctlShare{span: ctl, d: d})
		}
		if c.over != 0 {
			break
		}
	}
	return c
}

// assignedTo says whether tp was assigned to node at t as the controller's
// latest LeaderAndIsr naming replicas before t said; with none, it was.
func (s *hwcpState) assignedTo(tp history.TopicPartition, node int32, t int64) bool {
	ms := s.asg[tp]
	i := sort.Search(len(ms), func(i int) bool { return ms[i].t > t }) - 1
	return i < 0 || slices.Contains(ms[i].replicas, node)
}

// brokerCut says whether a fault window in force at t keeps broker node
// from hearing a controller: one naming it (a kill, a pause, an isolation,
// a partition with it on one side), one it reported itself, or one on
// ZooKeeper.
func (w *electWorld) brokerCut(node int32, t int64) bool {
	for _, fw := range w.windows {
		if fw.Start.Time <= t && t < fw.End && cutsOff(fw, node) {
			return true
		}
	}
	return false
}

// controllersActed names the controller terms of by with their shares:
// "controller 1 (epoch 2, elected at event 5, +1s) acted in its reach for
// 300ms", "controllers 1 (…) for 300ms and 3 (…) for 800ms acted in its
// reach".
func controllersActed(h *history.History, by []ctlShare, t0 int64) string {
	name := func(c ctlShare) string {
		return fmt.Sprintf("%d (epoch %d, elected at %s)", c.span.node, c.span.epoch, at(&h.Events[c.span.elected], t0))
	}
	if len(by) == 1 {
		return fmt.Sprintf("controller %s acted in its reach for %s", name(by[0]), by[0].d.Round(time.Millisecond))
	}
	var parts []string
	for _, c := range by {
		parts = append(parts, fmt.Sprintf("%s for %s", name(c), c.d.Round(time.Millisecond)))
	}
	return "controllers " + andList(parts) + " acted in its reach"
}

// untoldOmission explains write e, which left out partitions (names:
// "chaos-2 (HW 0, written by event 115)") its process had not been told
// about, when that process ended (at event end; -1: the history's end)
// without being told of them, with the chance the controllers had to tell
// it: a violation when they acted in its reach for longer than the grace,
// Kafka's behaviour otherwise. refusals are the LeaderAndIsr requests
// naming them that the process refused.
func (s *hwcpState) untoldOmission(e *history.Event, o omission, tps []history.TopicPartition, names []string, end int, c toldChance, refusals []int) string {
	t0 := s.t0
	var b strings.Builder
	fmt.Fprintf(&b, "%s's checkpoint write (%s)", nodeName(e.Node), at(e, t0))
	if o.restart >= 0 {
		fmt.Fprintf(&b, " by the process started at %s", atParen(&s.h.Events[o.restart], t0))
	}
	it, its, each := "it", "that high watermark is", "the partition"
	if len(names) > 1 {
		it, its, each = "them", "those high watermarks are", "each partition"
	}
	fmt.Fprintf(&b, " left out %s, which the broker hosted, and that process was never told about %s by a LeaderAndIsr ", andList(names), it)
	if end >= 0 {
		fmt.Fprintf(&b, "before the next one started at %s", atParen(&s.h.Events[end], t0))
	} else {
		fmt.Fprintf(&b, "before the history ended (+%s)", rel(c.to, t0))
	}
	refused := ""
	if len(refusals) > 0 {
		set := map[history.TopicPartition]bool{}
		for _, tp := range tps {
			set[tp] = true
		}
		var rs []string
		for _, i := range refusals {
			rs = append(rs, refusalOf(&s.h.Events[i], set, t0))
		}
		refused = ", and the process refused " + andList(rs)
	}
	if c.over != 0 {
		fmt.Fprintf(&b, ", although it registered at %s and from then %s (no fault on either of them or on ZooKeeper, no write of the controller's waiting for ZooKeeper's answer, the broker registered), longer than the %s grace (over at +%s)%s: Kafka's controller sends a registered broker a LeaderAndIsr for every replica it hosts (KafkaController.onBrokerStartup), so %s lost (a process starting from the file starts %s at its log start).",
			atParen(&s.h.Events[c.reg], t0), controllersActed(s.h, c.by, t0), s.grace, rel(c.over, t0), refused, its, each)
		return b.String()
	}
	switch {
	case c.reg < 0:
		b.WriteString(", and it never registered")
	case len(c.by) == 0:
		fmt.Fprintf(&b, ", and from its registration at %s until it ended (+%s) no controller acted in its reach (each was cut off by a fault on it, on the broker or on ZooKeeper, waiting for ZooKeeper's answer, or none acted)", atParen(&s.h.Events[c.reg], t0), rel(c.to, t0))
	default:
		fmt.Fprintf(&b, ", and from its registration at %s until it ended (+%s) %s, %s in all, within the %s grace", atParen(&s.h.Events[c.reg], t0), rel(c.to, t0), controllersActed(s.h, c.by, t0), c.acting.Round(time.Millisecond), s.grace)
	}
	b.WriteString(refused)
	fmt.Fprintf(&b, ": Kafka 2.6.3's ReplicaManager.checkpointHighWatermarks writes only the partitions in allPartitions, which only a LeaderAndIsr fills, so a process the controller had no time to reach writes a file without %s, and the next process starts %s at its log start.", it, each)
	return b.String()
}

// atParen names event e with its time in parentheses: "event 7 (+2.1s)".
func atParen(e *history.Event, t0 int64) string {
	return fmt.Sprintf("event %d (+%s)", e.Index, rel(e.Time, t0))
}

// refusalOf describes LeaderAndIsr e a process refused, whole or for one of
// tps: "the LeaderAndIsr of controller 1 (epoch 2) at event 9 (+1s) with
// error 77".
func refusalOf(e *history.Event, tps map[history.TopicPartition]bool, t0 int64) string {
	c := e.Control
	code := c.ErrorCode
	if c.Verdict == history.VerdictAccepted {
		for _, p := range c.Partitions {
			if tps[p.TP()] && p.ErrorCode != history.ErrNone {
				code = p.ErrorCode
				break
			}
		}
	}
	return fmt.Sprintf("the LeaderAndIsr of controller %d (epoch %d) at %s with error %d", c.ControllerID, c.ControllerEpoch, atParen(e, t0), code)
}
