package checkers

import (
	"fmt"

	"github.com/zkchaos/zkchaos/history"
)

// HWCheckpoint checks the replication-offset-checkpoint (KAFKA-7235): a
// partition a broker hosts never disappears from, or goes backwards in, that
// broker's checkpoint from one write to the next, in particular across a
// restart. A partition is excused when the broker accepted a StopReplica for
// it in between, when the later write lists the hosted partitions and it is
// not among them, or (for going backwards) when the broker truncated it
// below the old high watermark in between.
type HWCheckpoint struct{}

// Name implements Checker.
func (HWCheckpoint) Name() string { return "hw-checkpoint" }

// Check implements Checker.
func (c HWCheckpoint) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	type last struct {
		entries  map[history.TopicPartition]int64
		idx      int
		restarts int // node_start events since this write
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
	writes := 0
	for i := range h.Events {
		e := &h.Events[i]
		switch e.Kind {
		case history.KindNodeStart:
			if p := prev[e.Node]; p != nil {
				p.restarts++
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
			writes++
			cp := e.Checkpoint
			cur := &last{entries: make(map[history.TopicPartition]int64, len(cp.Entries)), idx: e.Index}
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
				across := ""
				if p.restarts > 0 {
					across = " across a restart"
				}
				for _, tp := range sortedTPs(p.entries) {
					oldHW := p.entries[tp]
					ex, isEx := excused[e.Node][tp]
					newHW, present := cur.entries[tp]
					switch {
					case !present:
						if (isEx && ex < 0) || (hosted != nil && !hosted[tp]) {
							continue
						}
						r.violate([]int{p.idx, e.Index},
							"broker %d's checkpoint write (%s) dropped hosted partition %s, which had high watermark %d in its previous write (event %d)%s: that high watermark is lost.",
							e.Node, ev(e), tp, oldHW, p.idx, across)
					case newHW < oldHW:
						if isEx && (ex < 0 || ex < oldHW) {
							continue
						}
						r.violate([]int{p.idx, e.Index},
							"broker %d's checkpoint write (%s) moved %s's high watermark back from %d (event %d) to %d%s.",
							e.Node, ev(e), tp, oldHW, p.idx, newHW, across)
					}
				}
			}
			prev[e.Node] = cur
			delete(excused, e.Node)
		}
	}
	r.detail("checkpoint_writes", writes)
	return r.result(fmt.Sprintf("%d checkpoint writes on %d brokers never dropped a hosted partition or moved a high watermark back.", writes, len(prev)))
}
