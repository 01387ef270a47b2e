package checkers

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/history"
)

// HWCheckpoint checks the replication-offset-checkpoint (KAFKA-7235) as
// Kafka 2.6.3 promises it. ReplicaManager.checkpointHighWatermarks writes the
// partitions in the process's in-memory partition map, those an accepted
// LeaderAndIsr has told it about; a process's first LeaderAndIsr (the
// controller's onBrokerStartup) covers every partition the broker
// replicates, so from its first write on a process holds them all. So:
//
//   - a write must not drop a partition its process holds in memory (told by
//     an accepted LeaderAndIsr, or written by an earlier write, since the
//     process started);
//   - a write may omit a partition its process has not yet been told about,
//     but that process must then be told about it before it ends (a restart,
//     or the end of the history) if a controller had the time to tell it:
//     one acted in its reach (no fault on the controller, the broker or
//     ZooKeeper, no write of the controller's waiting for ZooKeeper, the
//     broker registered, the partition assigned to it) for longer than
//     TellGrace after the process registered and before it ended (a
//     node_stop, or a fault that killed it). Otherwise the file has lost that high watermark, and the
//     next process starts the partition from its log start offset. A
//     process that ended before a controller had that time is Kafka's
//     behaviour (checkpointHighWatermarks writes allPartitions only), the
//     known anomaly KnownCheckpointUntold (checkpoint_told.go);
//   - no write moves a partition's high watermark below the last one the
//     broker wrote for it, across restarts and across writes that omitted
//     it (a partition re-entering memory after an omission takes the file's
//     value, which then is its log start).
//
// A partition is excused when the broker accepted a StopReplica for it (or
// stopped it) in between, when the later write lists the hosted partitions
// and it is not among them, or (for going backwards) when the broker
// truncated it below the old high watermark in between.
//
// It also checks that the checkpoint never runs ahead of the high watermark
// (ReplicaManager.checkpointHighWatermarks writes each partition's
// highWatermark): an entry a broker writes for a partition is never above
// the highest high watermark that broker's current process (since its
// latest node_start) had reported for it by hw_advance events logged before
// the write. A restart starts from the checkpointed value, so an entry above
// the high watermark makes uncommitted records count as committed. The high
// watermark a process restores at start is not logged, so a partition is
// judged only once an hw_advance of that process shows its high watermark;
// trimmed histories without hw_advance events are not judged at all.
type HWCheckpoint struct {
	// TellGrace is how long a controller must have acted in a restarted
	// process's reach, after the process registered, before its never
	// being told of a partition its checkpoint left out is a violation;
	// 0: DefaultConfig's RegisteredElectGrace. The controller's
	// onBrokerStartup tells a registered broker of every replica it hosts
	// as it elects offline partitions (the registered-elect rule of
	// availability), so it gets the same grace.
	TellGrace time.Duration
}

// Name implements Checker.
func (HWCheckpoint) Name() string { return "hw-checkpoint" }

// written is the last high watermark a broker wrote for a partition.
type written struct {
	hw  int64
	idx int // the write's event
}

// omission is a write that left out a partition its process had not been
// told about, while the partition waits for its process to be told.
type omission struct {
	hw      int64 // the high watermark the file lost
	idx     int   // the write that left it out
	prevIdx int   // the write that had it
	restart int   // the process's node_start; -1: none seen
}

// hwcpState is what HWCheckpoint keeps per broker while it walks the
// history.
type hwcpState struct {
	h *history.History
	r *report
	// last[node][tp]: what the node last wrote for tp, kept across restarts
	// and across writes that omitted tp while its process was not told.
	last map[int32]map[history.TopicPartition]written
	// known[node][tp]: the node's current process holds tp in memory.
	known map[int32]map[history.TopicPartition]bool
	// pending[node][tp]: an omission awaiting the process being told of tp.
	pending map[int32]map[history.TopicPartition]omission
	// started[node]: the current process's node_start (-1: none seen).
	started map[int32]int
	// reported[node][tp]: the highest high watermark the node's current
	// process has reported for tp, with the hw_advance event that did.
	reported map[int32]map[history.TopicPartition]hwMark
	// excused[node][tp]: tp was stopped (-1) or truncated (the lowest
	// target) since the node last wrote it.
	excused map[int32]map[history.TopicPartition]int64
	// assigned[tp]: tp's replica set as the controller's latest
	// LeaderAndIsr carrying one said.
	assigned map[history.TopicPartition][]int32
	// asg[tp]: every replica set the controller's LeaderAndIsr requests
	// carried for tp, in time order: a process is owed a LeaderAndIsr for
	// tp only while tp is assigned to its broker.
	asg map[history.TopicPartition][]asgMark
	// registered[node]: the current process's first broker_registered.
	registered map[int32]int
	// ended[node]: when the current process ended before the next one
	// started: its node_stop, or a fault that killed it.
	ended map[int32]int64
	// refused[node][tp]: the first LeaderAndIsr naming tp that the
	// current process refused, whole or for tp alone.
	refused map[int32]map[history.TopicPartition]int
	grace   time.Duration
	// world and points: the controller terms, fault windows and times
	// they change at, built when an omission is first judged.
	world  *electWorld
	points []int64
	t0     int64
	writes int
	judged int
}

// Check implements Checker.
func (c HWCheckpoint) Check(h *history.History) Result {
	s := &hwcpState{
		h: h, r: &report{name: c.Name()},
		last:       map[int32]map[history.TopicPartition]written{},
		known:      map[int32]map[history.TopicPartition]bool{},
		pending:    map[int32]map[history.TopicPartition]omission{},
		started:    map[int32]int{},
		reported:   map[int32]map[history.TopicPartition]hwMark{},
		excused:    map[int32]map[history.TopicPartition]int64{},
		assigned:   map[history.TopicPartition][]int32{},
		asg:        map[history.TopicPartition][]asgMark{},
		registered: map[int32]int{},
		ended:      map[int32]int64{},
		refused:    map[int32]map[history.TopicPartition]int{},
		grace:      c.TellGrace,
	}
	if s.grace <= 0 {
		s.grace = DefaultConfig().RegisteredElectGrace
	}
	if len(h.Events) > 0 {
		s.t0 = h.Events[0].Time
	}
	for e := range eventsOf(h, history.KindNodeStart, history.KindNodeStop, history.KindFaultStart, history.KindBrokerRegistered, history.KindHWAdvance, history.KindControlSent, history.KindControlRequest, history.KindRoleChange, history.KindTruncation, history.KindHWCheckpoint) {
		switch e.Kind {
		case history.KindControlSent:
			if e.Control != nil && e.Control.API == history.APILeaderAndIsr {
				for _, p := range e.Control.Partitions {
					if len(p.Replicas) > 0 {
						s.assigned[p.TP()] = p.Replicas
						s.asg[p.TP()] = append(s.asg[p.TP()], asgMark{t: e.Time, replicas: p.Replicas})
					}
				}
			}
		case history.KindNodeStart:
			s.lost(e.Node, e.Index)
			delete(s.known, e.Node)
			delete(s.registered, e.Node)
			delete(s.ended, e.Node)
			delete(s.refused, e.Node)
			s.started[e.Node] = e.Index
			// The new process starts from the checkpoint file, not from
			// anything the old one reported.
			delete(s.reported, e.Node)
		case history.KindBrokerRegistered:
			if _, ok := s.registered[e.Node]; !ok {
				s.registered[e.Node] = e.Index
			}
		case history.KindNodeStop:
			if _, ok := s.ended[e.Node]; !ok {
				s.ended[e.Node] = e.Time
			}
		case history.KindFaultStart:
			if e.Fault == nil || !(killsProcess(e.Fault.Name) || e.Fault.Name == crashLoseUnflushed) {
				continue
			}
			for _, t := range e.Fault.Targets {
				if id, ok := brokerTarget(t); ok {
					if _, ended := s.ended[id]; !ended {
						s.ended[id] = e.Time
					}
				}
			}
		case history.KindHWAdvance:
			if e.HW != nil {
				reportHW(s.reported, e)
			}
		case history.KindControlRequest:
			if e.Control == nil {
				continue
			}
			if !acceptedControl(e) {
				s.refuse(e, -1)
				continue
			}
			for _, p := range e.Control.Partitions {
				if p.ErrorCode != history.ErrNone {
					s.refuse(e, p.ErrorCode)
					continue
				}
				switch e.Control.API {
				case history.APIStopReplica:
					s.excuse(e.Node, p.TP(), -1)
					delete(s.pending[e.Node], p.TP())
				case history.APILeaderAndIsr:
					s.know(e.Node, p.TP())
				}
			}
		case history.KindRoleChange:
			if e.Role.Role == history.RoleStopped {
				s.excuse(e.Node, e.Role.TP(), -1)
				delete(s.pending[e.Node], e.Role.TP())
			}
		case history.KindTruncation:
			s.excuse(e.Node, e.Truncation.TP(), e.Truncation.To)
		case history.KindHWCheckpoint:
			if e.Checkpoint != nil {
				s.write(e)
			}
		}
	}
	for _, node := range slices.Sorted(maps.Keys(s.pending)) {
		s.lost(node, -1)
	}
	s.r.detail("checkpoint_writes", s.writes)
	s.r.detail("entries_judged_against_hw", s.judged)
	return s.r.result(fmt.Sprintf("%d checkpoint writes on %d brokers never dropped a partition their process held, left none out that their process was never told about although a controller acted in their reach for the %s grace, never moved a high watermark back, and none of the %d entries judged against its broker's reported high watermark was above it.", s.writes, len(s.last), s.grace, s.judged))
}

func (s *hwcpState) excuse(node int32, tp history.TopicPartition, to int64) {
	m := s.excused[node]
	if m == nil {
		m = map[history.TopicPartition]int64{}
		s.excused[node] = m
	}
	if cur, ok := m[tp]; !ok || to < cur {
		m[tp] = to
	}
}

func (s *hwcpState) know(node int32, tp history.TopicPartition) {
	if s.known[node] == nil {
		s.known[node] = map[history.TopicPartition]bool{}
	}
	s.known[node][tp] = true
	// Told at last: the partition entered memory with whatever the file
	// held; a lower value than the last written shows as a move back at
	// its next write.
	delete(s.pending[node], tp)
}

func (s *hwcpState) procStart(node int32) int {
	if i, ok := s.started[node]; ok {
		return i
	}
	return -1
}

// lost reports node's omissions whose process ended (at event end, -1: the
// history's end) without being told of the partition: a violation when a
// controller had the time to tell it, the known anomaly
// KnownCheckpointUntold otherwise.
func (s *hwcpState) lost(node int32, end int) {
	ps := s.pending[node]
	if len(ps) == 0 {
		return
	}
	reg, to := s.regOf(node), s.endOf(node, end)
	// One report per write and chance: partitions assigned to the broker
	// over different times had different chances.
	type group struct {
		idx int
		c   toldChance
		tps []history.TopicPartition
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, tp := range sortedTPs(ps) {
		// A replica the controller has moved off this broker is not owed
		// a LeaderAndIsr: Kafka 2.6.3 leaves a reassigned-away replica's
		// log on a broker that was down when the StopReplica was due
		// (KafkaController.stopRemovedReplicasOfReassignedPartition sends
		// only to live brokers), and the broker never hears of the
		// partition again; the high watermark its checkpoint drops is of
		// a partition that is no longer its.
		if rs, ok := s.assigned[tp]; ok && !slices.Contains(rs, node) {
			delete(s.last[node], tp)
			continue
		}
		c := s.chance(node, tp, reg, to)
		// Nor is a process owed one for a partition assigned elsewhere
		// for as long as its broker was up and registered (reassigned
		// away while it was down, and back only after it died again).
		if reg >= 0 && !c.owed {
			delete(s.last[node], tp)
			continue
		}
		key := fmt.Sprint(ps[tp].idx, c.over, c.acting, c.by)
		g := byKey[key]
		if g == nil {
			g = &group{idx: ps[tp].idx, c: c}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.tps = append(g.tps, tp)
	}
	slices.SortStableFunc(groups, func(a, b *group) int { return a.idx - b.idx })
	for _, g := range groups {
		idx, tps, c := g.idx, g.tps, g.c
		o := ps[tps[0]]
		events := []int{idx}
		if o.restart >= 0 {
			events = append(events, o.restart)
		}
		if end >= 0 {
			events = append(events, end)
		}
		if c.reg >= 0 {
			events = append(events, c.reg)
		}
		for _, b := range c.by {
			events = append(events, b.span.elected)
		}
		var names []string
		for _, tp := range tps {
			names = append(names, fmt.Sprintf("%s (HW %d, written by event %d)", tp, ps[tp].hw, ps[tp].prevIdx))
			events = append(events, ps[tp].prevIdx)
			// Reported once: the next process starts it afresh.
			delete(s.last[node], tp)
		}
		var refusals []int
		for _, tp := range tps {
			if i, ok := s.refused[node][tp]; ok {
				refusals = append(refusals, i)
				events = append(events, i)
			}
		}
		slices.Sort(refusals)
		text := s.untoldOmission(&s.h.Events[idx], o, tps, names, end, c, slices.Compact(refusals))
		if c.over != 0 {
			s.r.violateAt(c.over, uniqueInts(events), "%s", text)
		} else {
			s.r.knownAnomaly(KnownCheckpointUntold, uniqueInts(events), "%s", text)
		}
	}
	delete(s.pending, node)
}

// refuse records LeaderAndIsr e, which its process refused (code -1) or
// refused for a partition (code, that partition's error): the first such
// request for each partition it names, or only the one refused.
func (s *hwcpState) refuse(e *history.Event, code int16) {
	if e.Control.API != history.APILeaderAndIsr {
		return
	}
	m := s.refused[e.Node]
	if m == nil {
		m = map[history.TopicPartition]int{}
		s.refused[e.Node] = m
	}
	for _, p := range e.Control.Partitions {
		if code >= 0 && p.ErrorCode != code {
			continue
		}
		if _, ok := m[p.TP()]; !ok {
			m[p.TP()] = e.Index
		}
	}
}

// regOf returns node's current process's first broker_registered (-1:
// none yet).
func (s *hwcpState) regOf(node int32) int {
	if i, ok := s.registered[node]; ok {
		return i
	}
	return -1
}

// endOf returns when node's current process ended: its node_stop or the
// fault that killed it, else the next process's node_start (event end),
// else the history's end.
func (s *hwcpState) endOf(node int32, end int) int64 {
	if t, ok := s.ended[node]; ok {
		return t
	}
	if end >= 0 {
		return s.h.Events[end].Time
	}
	return s.h.Events[len(s.h.Events)-1].Time
}

// write judges checkpoint write e against what its node last wrote: one
// violation per write for the in-memory partitions it dropped and those
// whose high watermark it moved back, each against the write that last had
// it; an entry left out that the process was never told about waits in
// pending.
func (s *hwcpState) write(e *history.Event) {
	s.writes++
	s.judged += checkpointAhead(s.r, e, s.reported[e.Node], s.t0)
	cp := e.Checkpoint
	cur := make(map[history.TopicPartition]int64, len(cp.Entries))
	for _, en := range cp.Entries {
		cur[history.TP(en.Topic, en.Partition)] = en.HW
	}
	var hosted map[history.TopicPartition]bool
	if cp.Hosted != nil {
		hosted = make(map[history.TopicPartition]bool, len(cp.Hosted))
		for _, tp := range cp.Hosted {
			hosted[tp] = true
		}
	}
	var dropped, back []string
	events := []int{e.Index}
	last := s.last[e.Node]
	for _, tp := range sortedTPs(last) {
		old := last[tp]
		ex, isEx := s.excused[e.Node][tp]
		newHW, present := cur[tp]
		switch {
		case !present:
			if (isEx && ex < 0) || (hosted != nil && !hosted[tp]) {
				delete(last, tp)
				delete(s.pending[e.Node], tp)
				continue
			}
			if !s.known[e.Node][tp] {
				if _, ok := s.pending[e.Node][tp]; !ok {
					if s.pending[e.Node] == nil {
						s.pending[e.Node] = map[history.TopicPartition]omission{}
					}
					s.pending[e.Node][tp] = omission{hw: old.hw, idx: e.Index, prevIdx: old.idx, restart: s.procStart(e.Node)}
				}
				continue
			}
			dropped = append(dropped, fmt.Sprintf("%s (HW %d, written by event %d)", tp, old.hw, old.idx))
			events = append(events, old.idx)
			delete(last, tp)
		case newHW < old.hw:
			if isEx && (ex < 0 || ex < old.hw) {
				continue
			}
			back = append(back, fmt.Sprintf("%s's high watermark back from %d (event %d) to %d", tp, old.hw, old.idx, newHW))
			events = append(events, old.idx)
		}
	}
	if len(dropped)+len(back) > 0 {
		if p := s.procStart(e.Node); p >= 0 {
			events = append(events, p)
		}
		s.r.violate(uniqueInts(events), "%s", checkpointHarm(e, s.procStart(e.Node), dropped, back))
	}
	if s.last[e.Node] == nil {
		s.last[e.Node] = map[history.TopicPartition]written{}
	}
	for tp, hw := range cur {
		s.last[e.Node][tp] = written{hw: hw, idx: e.Index}
		s.know(e.Node, tp)
		delete(s.excused[e.Node], tp)
	}
}

// hwMark is the highest high watermark a process reported for a partition
// and the hw_advance event that reported it.
type hwMark struct {
	hw   int64
	idx  int
	time int64
}

// reportHW records hw_advance e in reported. The Old value counts as well
// as the New one: the node reads a partition's high watermark for a
// checkpoint under the partition's lock and logs the write afterwards, so a
// move logged between the read and the write (a truncation lowering it)
// leaves the write holding the move's Old value; for the first move after a
// start, Old is also the only record of the high watermark the process
// restored from the checkpoint file.
func reportHW(reported map[int32]map[history.TopicPartition]hwMark, e *history.Event) {
	m := reported[e.Node]
	if m == nil {
		m = map[history.TopicPartition]hwMark{}
		reported[e.Node] = m
	}
	hw := max(e.HW.Old, e.HW.New)
	if cur, ok := m[e.HW.TP()]; !ok || hw > cur.hw {
		m[e.HW.TP()] = hwMark{hw: hw, idx: e.Index, time: e.Time}
	}
}

// checkpointAhead reports checkpoint write e if it put any partition above
// the highest high watermark its process had reported for it (reported, the
// writer's marks) and returns how many entries it could judge. The node sets
// a high watermark and logs its hw_advance under the partition's lock, and
// the checkpoint reads it under the same lock, so the hw_advance of any value
// a checkpoint writes is logged before the checkpoint.
func checkpointAhead(r *report, e *history.Event, reported map[history.TopicPartition]hwMark, t0 int64) int {
	judged := 0
	var ahead []string
	events := []int{e.Index}
	for _, en := range e.Checkpoint.Entries {
		tp := history.TP(en.Topic, en.Partition)
		mk, ok := reported[tp]
		if !ok {
			continue
		}
		judged++
		if en.HW <= mk.hw {
			continue
		}
		ahead = append(ahead, fmt.Sprintf("%s at offset %d while its high watermark was %d (the highest its process had reported, by hw_advance event %d at +%s)",
			tp, en.HW, mk.hw, mk.idx, rel(mk.time, t0)))
		events = append(events, mk.idx)
	}
	if len(ahead) > 0 {
		r.violate(events, "%s's checkpoint write (event %d, +%s) put %s: the checkpoint must hold the high watermark, and a restart from it would take the records above it, uncommitted when it was written, as committed.",
			nodeName(e.Node), e.Index, rel(e.Time, t0), andList(ahead))
	}
	return judged
}

// checkpointHarm explains one checkpoint write of broker e.Node that dropped
// partitions its process held in memory (dropped: "chaos-0 (HW 5, written
// by event 3)") and moved high watermarks back (back: "chaos-1's high
// watermark back from 5 (event 3) to 3"), the process started at event
// restart (-1: none seen).
func checkpointHarm(e *history.Event, restart int, dropped, back []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s's checkpoint write (%s)", nodeName(e.Node), ev(e))
	if restart >= 0 {
		fmt.Fprintf(&b, " by the process started at event %d", restart)
	}
	if len(dropped) > 0 {
		fmt.Fprintf(&b, " dropped %s, which that process held in memory", andList(dropped))
		if len(back) > 0 {
			b.WriteString(", and")
		}
	}
	if len(back) > 0 {
		fmt.Fprintf(&b, " moved %s", andList(back))
	}
	switch {
	case len(dropped) == 1:
		b.WriteString(": that high watermark is lost.")
	case len(dropped) > 1:
		b.WriteString(": those high watermarks are lost.")
	default:
		b.WriteString(": a restart from it starts below the high watermark the broker had written.")
	}
	return b.String()
}

// uniqueInts returns xs sorted without repeats.
func uniqueInts(xs []int) []int {
	slices.Sort(xs)
	return slices.Compact(xs)
}

// andList joins items as "a", "a and b", "a, b and c".
func andList(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}
