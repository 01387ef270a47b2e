package checkers

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/zklayout"
)

// KAFKA-3861's harm, judged on what happened rather than on the election
// policy a run was started with: a controller decided a partition has no
// leader (it wrote leader -1) while a broker registered in ZooKeeper held
// every record acknowledged so far, and the partition stayed without a
// leader for longer than the grace with that broker still registered. Kafka
// does this by design when no ISR member is alive and unclean election is
// off, so by default it is a known anomaly; Availability.Strict makes it a
// violation (chaos power's KAFKA-3861 row, which measures whether random
// runs reach that window).
//
// Who holds every acknowledged record is known without a broker's log end
// offset: a leader acknowledges an acks=all record only once its high
// watermark passed it, and the high watermark is the smallest log end
// offset in the ISR, so every ISR member at the last acknowledgement held
// everything acknowledged up to then. Leaving the ISR later does not delete
// records; a truncation below the last acknowledged offset does, and
// removes the broker from the holders.

// electableOffline is one such finding.
type electableOffline struct {
	tp       history.TopicPartition
	write    int   // the controller's leader -1 write
	ack      int   // the last acknowledged produce before it (its completion)
	offset   int64 // that produce's offset
	ackISR   []int32
	holders  []int32 // registered the whole time and holding every acknowledged record
	offline  time.Duration
	onlineAt int // event that brought a leader back; -1 if none
}

// registrations is, in time order, which brokers /brokers/ids listed after
// each change the ZooKeeper watcher saw.
type registrations []listing

// listing is one /brokers/ids observation.
type listing struct {
	time int64
	ids  []int32
}

func brokerRegistrations(h *history.History) registrations {
	var out registrations
	for e := range eventsOf(h, history.KindZKWatch) {
		if e.Kind != history.KindZKWatch || e.Watch.Path != zklayout.BrokerIDsPath || e.Watch.Type != history.WatchChildren {
			continue
		}
		ids := make([]int32, 0, len(e.Watch.Brokers))
		for _, b := range e.Watch.Brokers {
			ids = append(ids, b.ID)
		}
		out = append(out, listing{e.Time, ids})
	}
	return out
}

// throughout says whether broker was listed from..to without a gap: by the
// last listing at or before from, and by every listing until to. Without a
// listing at or before from nothing is known, and the answer is no.
func (r registrations) throughout(broker int32, from, to int64) bool {
	known := false
	for _, s := range r {
		if s.time > to {
			break
		}
		listed := slices.Contains(s.ids, broker)
		if s.time <= from {
			known = listed
			continue
		}
		if !listed {
			return false
		}
	}
	return known
}

// findElectableOffline returns the KAFKA-3861 findings of h: tl are the
// partitions' ZooKeeper states, serving their acting-leader timelines.
func findElectableOffline(h *history.History, ops []history.Operation, tl map[history.TopicPartition][]leaderObs, serving map[history.TopicPartition][]servingObs, grace time.Duration) []electableOffline {
	acks := ackedProduces(ops)
	truncs := map[history.TopicPartition][]*history.Event{}
	for e := range eventsOf(h, history.KindTruncation) {
		if e.Kind == history.KindTruncation {
			truncs[e.Truncation.TP()] = append(truncs[e.Truncation.TP()], e)
		}
	}
	regs := brokerRegistrations(h)
	var out []electableOffline
	reported := map[history.TopicPartition]int64{} // partition → end of the offline run reported
	for e := range eventsOf(h, history.KindZKWrite) {
		if e.Kind != history.KindZKWrite || e.ZKWrite.Outcome != history.ZKOK || e.ZKWrite.State == nil || e.ZKWrite.State.Leader != -1 {
			continue
		}
		tp := e.ZKWrite.State.TP()
		if end, ok := reported[tp]; ok && (end == 0 || e.Time <= end) {
			continue
		}
		// The last acknowledgement before the decision.
		as := acks[tp]
		k := sort.Search(len(as), func(j int) bool { return as[j].time > e.Time }) - 1
		if k < 0 {
			continue // nothing acknowledged: no record to keep, no claim
		}
		last := as[k]
		st, ok := stateAt(tl[tp], last.time)
		if !ok {
			continue
		}
		// The partition must stay without an acting leader from the
		// decision for longer than the grace.
		until, onlineAt := offlineUntil(serving[tp], e.Time, h)
		if time.Duration(until-e.Time) <= grace {
			continue
		}
		var holders []int32
		for _, b := range st.ISR {
			if truncatedBelow(truncs[tp], b, last.time, until, last.offset) {
				continue
			}
			if regs.throughout(b, e.Time, e.Time+int64(grace)) {
				holders = append(holders, b)
			}
		}
		if len(holders) == 0 {
			continue
		}
		end := until
		if onlineAt < 0 {
			end = 0
		}
		reported[tp] = end
		out = append(out, electableOffline{tp: tp, write: e.Index, ack: last.idx, offset: last.offset, ackISR: st.ISR,
			holders: holders, offline: time.Duration(until - e.Time), onlineAt: onlineAt})
	}
	return out
}

// offlineUntil returns when the partition next had an acting leader after
// t, and the event that brought it (the history's end and -1 if none).
func offlineUntil(s []servingObs, t int64, h *history.History) (int64, int) {
	for _, o := range s {
		if o.time > t && o.online {
			return o.time, o.idx
		}
	}
	return h.Events[len(h.Events)-1].Time, -1
}

// truncatedBelow says whether broker truncated tp to at most offset
// (losing the record there) between from and to.
func truncatedBelow(ts []*history.Event, broker int32, from, to, offset int64) bool {
	for _, e := range ts {
		if e.Node == broker && e.Time > from && e.Time <= to && e.Truncation.To <= offset {
			return true
		}
	}
	return false
}

// explain says what happened, with the partition, the brokers, the offsets
// and the times (from the history's first event).
func (f electableOffline) explain(h *history.History) string {
	t0 := firstTime(h)
	w, a := &h.Events[f.write], &h.Events[f.ack]
	back := "and was still without one when the history ended"
	if f.onlineAt >= 0 {
		back = fmt.Sprintf("until event %d", f.onlineAt)
	}
	return fmt.Sprintf("controller %d wrote leader -1 for partition %s at leader epoch %d (event %d, +%s), and the partition had no leader for %s, %s, although %s registered in ZooKeeper all along and held every acknowledged record: the last acknowledged produce, offset %d (event %d, +%s), was acknowledged with ISR %v. Kafka elects only from the ISR unless unclean election is on (KAFKA-3861).",
		w.Node, f.tp, w.ZKWrite.State.LeaderEpoch, f.write, rel(w.Time, t0), f.offline.Round(100*time.Millisecond), back,
		brokersWere(f.holders), f.offset, f.ack, rel(a.Time, t0), f.ackISR)
}

func rel(t, t0 int64) time.Duration { return time.Duration(t - t0).Round(10 * time.Millisecond) }

// brokersWere names ids as the subject of a sentence: "broker 2 was",
// "brokers 2 and 3 were".
func brokersWere(ids []int32) string {
	if len(ids) == 1 {
		return fmt.Sprintf("broker %d was", ids[0])
	}
	s := "brokers "
	for i, id := range ids {
		switch {
		case i == 0:
		case i == len(ids)-1:
			s += " and "
		default:
			s += ", "
		}
		s += fmt.Sprint(id)
	}
	return s + " were"
}
