package checkers

import (
	"fmt"
	"time"

	"github.com/zkchaos/zkchaos/history"
)

// leaderObs is one observed partition state: who leads and the ISR.
type leaderObs struct {
	time   int64
	leader int32
	isr    []int32
	idx    int
}

// leaderTimelines collects, per partition, the states the ZooKeeper watcher
// saw and the controller wrote successfully, in history order.
func leaderTimelines(h *history.History) map[history.TopicPartition][]leaderObs {
	out := map[history.TopicPartition][]leaderObs{}
	for i := range h.Events {
		e := &h.Events[i]
		var s *history.PartitionState
		switch e.Kind {
		case history.KindZKWatch:
			s = e.Watch.State
		case history.KindZKWrite:
			if e.ZKWrite.Outcome == history.ZKOK {
				s = e.ZKWrite.State
			}
		}
		if s == nil {
			continue
		}
		out[s.TP()] = append(out[s.TP()], leaderObs{e.Time, s.Leader, s.ISR, e.Index})
	}
	return out
}

// stateAt returns the last observation at or before t (ok false if none).
func stateAt(obs []leaderObs, t int64) (leaderObs, bool) {
	var o leaderObs
	found := false
	for _, x := range obs {
		if x.time > t {
			break
		}
		o, found = x, true
	}
	return o, found
}

// Window is a span of time in which a partition had no leader.
type Window struct {
	Start    int64 `json:"start_ns"`
	End      int64 `json:"end_ns,omitempty"` // 0: still open at the end of the history
	Duration int64 `json:"duration_ms"`
	Events   []int `json:"events"`
}

// PartitionAvailability is the availability summary of one partition.
type PartitionAvailability struct {
	Partition   string   `json:"partition"`
	Offline     []Window `json:"offline_windows,omitempty"`
	ProduceOK   int      `json:"produce_ok"`
	ProduceFail int      `json:"produce_fail"`
	ProduceInfo int      `json:"produce_info"`
	SuccessRate float64  `json:"produce_success_rate"`
}

// Availability reports, per partition, the windows with no leader and the
// produce success rate, and is invalid when a partition still has no leader
// Grace after every fault healed (or loses its leader after healing for
// longer than Grace). If faults never healed, or the history ends before
// Grace passed, a partition without a leader makes the verdict unknown.
type Availability struct {
	Grace time.Duration
}

// Name implements Checker.
func (Availability) Name() string { return "availability" }

// Check implements Checker.
func (c Availability) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	hi := heal(h)
	deadline := hi.at + int64(c.Grace)
	tl := leaderTimelines(h)

	stats := map[history.TopicPartition]*PartitionAvailability{}
	get := func(tp history.TopicPartition) *PartitionAvailability {
		s := stats[tp]
		if s == nil {
			s = &PartitionAvailability{Partition: tp.String()}
			stats[tp] = s
		}
		return s
	}
	ops, _ := history.Operations(h)
	for _, op := range ops {
		if op.Op().F != history.FProduce {
			continue
		}
		s := get(op.Op().TP())
		switch op.Outcome() {
		case history.OpOK:
			s.ProduceOK++
		case history.OpFail:
			s.ProduceFail++
		default:
			s.ProduceInfo++
		}
	}
	for _, tp := range sortedTPs(tl) {
		s := get(tp)
		var open *Window
		closeAt := func(t int64, idx int) {
			open.End = t
			open.Duration = (t - open.Start) / int64(time.Millisecond)
			open.Events = append(open.Events, idx)
			if len(s.Offline) < 100 {
				s.Offline = append(s.Offline, *open)
			}
			open = nil
		}
		var offendIdx int
		for _, o := range tl[tp] {
			switch {
			case o.leader < 0 && open == nil:
				open = &Window{Start: o.time, Events: []int{o.idx}}
				offendIdx = o.idx
			case o.leader >= 0 && open != nil:
				// Offline for longer than Grace after healing?
				if hi.healed && o.time-max(open.Start, hi.at) > int64(c.Grace) && o.time > deadline {
					r.violate([]int{offendIdx, o.idx},
						"partition %s had no leader from event %d until event %d, %s after every fault healed (grace %s).",
						tp, offendIdx, o.idx, time.Duration(o.time-max(open.Start, hi.at)).Round(time.Millisecond), c.Grace)
				}
				closeAt(o.time, o.idx)
			}
		}
		if open != nil {
			since := max(open.Start, hi.at)
			switch {
			case !hi.healed:
				r.cannotDecide("partition %s has no leader since event %d, but fault event %d was never stopped, so it is unclear whether it would recover.", tp, offendIdx, hi.openIdx)
			case hi.end-since > int64(c.Grace):
				evs := []int{offendIdx}
				healed := "there were no faults"
				if hi.lastStop >= 0 {
					evs = append(evs, hi.lastStop)
					healed = fmt.Sprintf("last fault stopped at event %d", hi.lastStop)
				}
				r.violate(evs, "partition %s has had no leader since event %d and was still offline %s after every fault healed (%s; grace %s).",
					tp, offendIdx, time.Duration(hi.end-since).Round(time.Millisecond), healed, c.Grace)
			case hi.end < deadline:
				r.cannotDecide("partition %s has no leader since event %d and the history ends before the %s grace after healing ran out.", tp, offendIdx, c.Grace)
			}
			open.Duration = (hi.end - open.Start) / int64(time.Millisecond)
			if len(s.Offline) < 100 {
				s.Offline = append(s.Offline, *open)
			}
		}
	}
	list := make([]PartitionAvailability, 0, len(stats))
	for _, tp := range sortedTPs(stats) {
		s := stats[tp]
		if n := s.ProduceOK + s.ProduceFail + s.ProduceInfo; n > 0 {
			s.SuccessRate = float64(s.ProduceOK) / float64(n)
		}
		list = append(list, *s)
	}
	r.detail("partitions", capList(list))
	r.detail("faults", hi.faults)
	return r.result(fmt.Sprintf("every one of %d partitions had a leader within %s of every fault healing.", len(tl), c.Grace))
}
