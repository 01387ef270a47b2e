package checkers

import (
	"fmt"
	"strings"

	"github.com/zkchaos/zkchaos/history"
)

// HWCheckpoint checks the replication-offset-checkpoint (KAFKA-7235): a
// partition a broker hosts never disappears from, or goes backwards in, that
// broker's checkpoint from one write to the next, in particular across a
// restart. A partition is excused when the broker accepted a StopReplica for
// it in between, when the later write lists the hosted partitions and it is
// not among them, or (for going backwards) when the broker truncated it
// below the old high watermark in between.
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
type HWCheckpoint struct{}

// Name implements Checker.
func (HWCheckpoint) Name() string { return "hw-checkpoint" }

// Check implements Checker.
func (c HWCheckpoint) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	type last struct {
		entries map[history.TopicPartition]int64
		idx     int
		restart int // the latest node_start event since this write; -1: none
	}
	prev := map[int32]*last{}
	// excused[node][tp] = the partition was stopped or truncated since the
	// node's last checkpoint write; value is the lowest truncation target
	// (or -1 for a stop).
	excused := map[int32]map[history.TopicPartition]int64{}
	excuse := func(node int32, tp history.TopicPartition, to int64) {
		m := excused[node]
		if m == nil {
			m = map[history.TopicPartition]int64{}
			excused[node] = m
		}
		if cur, ok := m[tp]; !ok || to < cur {
			m[tp] = to
		}
	}
	// reported[node][tp]: the highest high watermark the node's current
	// process has reported for tp, with the hw_advance event that did.
	reported := map[int32]map[history.TopicPartition]hwMark{}
	writes, judged := 0, 0
	var t0 int64
	if len(h.Events) > 0 {
		t0 = h.Events[0].Time
	}
	for e := range eventsOf(h, history.KindNodeStart, history.KindHWAdvance, history.KindControlRequest, history.KindRoleChange, history.KindTruncation, history.KindHWCheckpoint) {
		switch e.Kind {
		case history.KindNodeStart:
			if p := prev[e.Node]; p != nil {
				p.restart = e.Index
			}
			// The new process starts from the checkpoint file, not from
			// anything the old one reported.
			delete(reported, e.Node)
		case history.KindHWAdvance:
			if e.HW != nil {
				reportHW(reported, e)
			}
		case history.KindControlRequest:
			if acceptedControl(e) && e.Control.API == history.APIStopReplica {
				for _, p := range e.Control.Partitions {
					if p.ErrorCode == history.ErrNone {
						excuse(e.Node, p.TP(), -1)
					}
				}
			}
		case history.KindRoleChange:
			if e.Role.Role == history.RoleStopped {
				excuse(e.Node, e.Role.TP(), -1)
			}
		case history.KindTruncation:
			excuse(e.Node, e.Truncation.TP(), e.Truncation.To)
		case history.KindHWCheckpoint:
			if e.Checkpoint == nil {
				continue
			}
			writes++
			judged += checkpointAhead(r, e, reported[e.Node], t0)
			cp := e.Checkpoint
			cur := &last{entries: make(map[history.TopicPartition]int64, len(cp.Entries)), idx: e.Index, restart: -1}
			for _, en := range cp.Entries {
				cur.entries[history.TP(en.Topic, en.Partition)] = en.HW
			}
			var hosted map[history.TopicPartition]bool
			if cp.Hosted != nil {
				hosted = make(map[history.TopicPartition]bool, len(cp.Hosted))
				for _, tp := range cp.Hosted {
					hosted[tp] = true
				}
			}
			if p := prev[e.Node]; p != nil {
				// One violation per write: the partitions it dropped and
				// those whose high watermark it moved back.
				var dropped, back []string
				for _, tp := range sortedTPs(p.entries) {
					oldHW := p.entries[tp]
					ex, isEx := excused[e.Node][tp]
					newHW, present := cur.entries[tp]
					switch {
					case !present:
						if (isEx && ex < 0) || (hosted != nil && !hosted[tp]) {
							continue
						}
						dropped = append(dropped, fmt.Sprintf("%s (HW %d)", tp, oldHW))
					case newHW < oldHW:
						if isEx && (ex < 0 || ex < oldHW) {
							continue
						}
						back = append(back, fmt.Sprintf("%s's high watermark back from %d to %d", tp, oldHW, newHW))
					}
				}
				if len(dropped)+len(back) > 0 {
					events := []int{p.idx, e.Index}
					if p.restart >= 0 {
						events = append(events, p.restart)
					}
					r.violate(events, "%s", checkpointHarm(e, p.restart, p.idx, dropped, back))
				}
			}
			prev[e.Node] = cur
			delete(excused, e.Node)
		}
	}
	r.detail("checkpoint_writes", writes)
	r.detail("entries_judged_against_hw", judged)
	return r.result(fmt.Sprintf("%d checkpoint writes on %d brokers never dropped a hosted partition or moved a high watermark back, and none of the %d entries judged against its broker's reported high watermark was above it.", writes, len(prev), judged))
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
// hosted partitions (dropped: "chaos-0 (HW 5)") and moved high watermarks
// back (back: "chaos-1's high watermark back from 5 to 3"), against its
// previous write at event prevIdx, with the broker's restart in between at
// event restart (-1: none).
func checkpointHarm(e *history.Event, restart, prevIdx int, dropped, back []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s's checkpoint write (%s)", nodeName(e.Node), ev(e))
	if restart >= 0 {
		fmt.Fprintf(&b, " after its restart at event %d", restart)
	}
	if len(dropped) > 0 {
		fmt.Fprintf(&b, " dropped %s, which it hosted", andList(dropped))
		if len(back) > 0 {
			b.WriteString(", and")
		}
	}
	if len(back) > 0 {
		fmt.Fprintf(&b, " moved %s", andList(back))
	}
	fmt.Fprintf(&b, " (previous write: event %d)", prevIdx)
	switch {
	case len(dropped) == 1:
		b.WriteString(": that high watermark is lost.")
	case len(dropped) > 1:
		b.WriteString(": those high watermarks are lost.")
	default:
		b.WriteString(": a restart from it starts below the high watermark it had written.")
	}
	return b.String()
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
