package checkers

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/linearize"
)

// leadership is one broker process taking the leader role for a partition
// (a role_change to leader), as the node event log shows it.
type leadership struct {
	node  int32
	epoch int32
	time  int64
	idx   int
}

// nodeFacts indexes what brokers did per partition, for explaining reads:
// leader role changes and high-watermark moves, in history order.
type nodeFacts struct {
	leads map[history.TopicPartition][]leadership
	roles map[history.TopicPartition][]leadership // every role change, leader or follower
	hws   map[history.TopicPartition][]*history.Event
	acks  map[history.TopicPartition][]*history.Event // produce_ack
	// starts are each broker's process starts (node_start), in order.
	starts map[int32][]*history.Event
}

func newNodeFacts(h *history.History) *nodeFacts {
	f := &nodeFacts{leads: map[history.TopicPartition][]leadership{}, roles: map[history.TopicPartition][]leadership{},
		hws: map[history.TopicPartition][]*history.Event{}, acks: map[history.TopicPartition][]*history.Event{},
		starts: map[int32][]*history.Event{}}
	for e := range eventsOf(h, history.KindRoleChange, history.KindHWAdvance, history.KindProduceAck, history.KindNodeStart) {
		switch e.Kind {
		case history.KindNodeStart:
			f.starts[e.Node] = append(f.starts[e.Node], e)
		case history.KindRoleChange:
			f.roles[e.Role.TP()] = append(f.roles[e.Role.TP()], leadership{e.Node, e.Role.LeaderEpoch, e.Time, e.Index})
			if e.Role.Role == history.RoleLeader {
				f.leads[e.Role.TP()] = append(f.leads[e.Role.TP()], leadership{e.Node, e.Role.LeaderEpoch, e.Time, e.Index})
			}
		case history.KindHWAdvance:
			f.hws[e.HW.TP()] = append(f.hws[e.HW.TP()], e)
		case history.KindProduceAck:
			f.acks[e.Append.TP()] = append(f.acks[e.Append.TP()], e)
		}
	}
	return f
}

// leaderAt returns the leadership that answered a read ending at end: the
// latest leader role change before end of broker (any broker if 0), at
// epoch when epoch is non-nil.
func (f *nodeFacts) leaderAt(tp history.TopicPartition, broker int32, epoch *int32, end int64) (leadership, bool) {
	var best leadership
	found := false
	for _, l := range f.leads[tp] {
		if l.time > end {
			continue
		}
		if (broker != 0 && l.node != broker) || (epoch != nil && l.epoch != *epoch) {
			continue
		}
		if !found || l.time >= best.time {
			best, found = l, true
		}
	}
	return best, found
}

// restartedBetween returns broker's last process start after from and at
// or before to: a leadership logged before it belonged to a process that
// is gone.
func (f *nodeFacts) restartedBetween(broker int32, from, to int64) (*history.Event, bool) {
	var last *history.Event
	for _, e := range f.starts[broker] {
		if e.Time > from && e.Time <= to {
			last = e
		}
	}
	return last, last != nil
}

// hwAt returns broker's high watermark for tp as of t, from its hw_advance
// events since since (ok false if it logged none).
func (f *nodeFacts) hwAt(tp history.TopicPartition, broker int32, since, t int64) (int64, bool) {
	hw, ok := int64(0), false
	for _, e := range f.hws[tp] {
		if e.Node != broker || e.Time < since {
			continue
		}
		if e.Time > t {
			break
		}
		hw, ok = e.HW.New, true
	}
	return hw, ok
}

// learnedAbove returns the first role change broker logged for tp at a
// leader epoch above epoch between from and to: when it was told of a newer
// leadership.
func (f *nodeFacts) learnedAbove(tp history.TopicPartition, broker, epoch int32, from, to int64) (leadership, bool) {
	for _, r := range f.roles[tp] {
		if r.node == broker && r.epoch > epoch && r.time >= from && r.time <= to {
			return r, true
		}
	}
	return leadership{}, false
}

// ackEpoch returns the leader epoch at which a leader acknowledged offset
// of tp (from produce_ack), if logged.
func (f *nodeFacts) ackEpoch(tp history.TopicPartition, offset int64) (int32, bool) {
	for _, e := range f.acks[tp] {
		if e.Append.BaseOffset <= offset && offset <= e.Append.LastOffset {
			return e.Append.LeaderEpoch, true
		}
	}
	return 0, false
}

// staleVerdict is the classification of one stale empty read.
type staleVerdict struct {
	known       string // the known anomaly's name; "" for a violation
	explanation string
	events      []int
}

// classifyStale decides whether a stale empty read is one of the two kinds
// Kafka allows and explains it with who answered, at what epoch, for how
// long and with what high watermark, when the history records it:
//   - KAFKA-2334: a new leader answered it. A leadership counts as new when
//     it began after the first produce the read missed was acknowledged,
//     when the answering broker's process started after that
//     acknowledgement (a bounced leader made leader again at the same epoch
//     answers with its checkpoint's high watermark), or when the read's
//     leader epoch is above the one that acknowledged it.
//   - a deposed leader answered it: the missed records were acknowledged at
//     a leader epoch above the one the answer carries, and the answering
//     broker had not been told of any newer epoch (a leader frozen through
//     a failover serves its old state until a LeaderAndIsr reaches it;
//     Fetch fences only a client that itself names a newer epoch, KIP-320).
//
// "Told" means a role change at a higher epoch that the broker logged
// before the read was invoked. A fetch is a long poll: the broker checks
// leadership when the request arrives (Kafka 2.6.3's DelayedFetch checks
// again when it completes and then answers with an error, not an empty
// read) and the client logs the answer when it comes back, so a role change
// logged while the fetch was in flight does not show what the broker knew
// when it answered; such a read stays a deposed-leader-read.
//
// The leader that acknowledged a record answering nothing for it, a broker
// answering at an epoch it had been told was superseded before the read
// was sent, and an answer whose own HW is above the offset, are not Kafka
// behaviour: violations.
func classifyStale(h *history.History, f *nodeFacts, s linearize.StaleRead, t0 int64) staleVerdict {
	read := h.Events[s.Read].Op
	tp := read.TP()
	missed := fmt.Sprintf("%d %s at ≥ %d %s acknowledged before the read began, the first %q at +%s (event %d)",
		s.Acknowledged, plural(s.Acknowledged, "produce", "produces"), s.Offset, plural(s.Acknowledged, "was", "were"),
		s.FirstValue, time.Duration(s.FirstAckTime-t0).Round(100*time.Millisecond), s.FirstAck)
	v := staleVerdict{events: []int{s.FirstAck, s.Read}}
	l, found := f.leaderAt(tp, read.Broker, read.LeaderEpoch, s.End)
	ackEp, ackKnown := f.ackEpoch(tp, s.FirstOffset)
	newLeader := found && l.time > s.FirstAckTime
	// The answering broker restarted after the leadership found began: its
	// new process answered, made leader again (a controller that missed
	// the bounce re-sends the same epoch) with the high watermark of its
	// checkpoint. Its role change may be logged just after the answer it
	// gave as leader.
	restart, restarted := (*history.Event)(nil), false
	if found {
		restart, restarted = f.restartedBetween(l.node, l.time, s.End)
		if restarted && restart.Time > s.FirstAckTime {
			newLeader = true
		}
	}
	if !newLeader && read.LeaderEpoch != nil && ackKnown && *read.LeaderEpoch > ackEp {
		newLeader = true
	}
	older := !newLeader && found && read.LeaderEpoch != nil && ackKnown && ackEp > *read.LeaderEpoch
	// Only a role change logged before the fetch was sent proves the
	// broker knew when it answered: a fetch is a long poll, the node checks
	// leadership once when the request arrives, and the client logs the
	// answer when it comes back, so a change logged in between may have
	// come after the broker had decided its answer.
	var told, inFlight leadership
	deposed, changedInFlight := false, false
	if older {
		var knew bool
		told, knew = f.learnedAbove(tp, l.node, *read.LeaderEpoch, l.time, s.Start)
		deposed = !knew
		if deposed {
			inFlight, changedInFlight = f.learnedAbove(tp, l.node, *read.LeaderEpoch, max(l.time, s.Start), s.End)
		}
	}
	who := ""
	switch {
	case found:
		v.events = append(v.events, l.idx)
		who = fmt.Sprintf("broker %d, leader of %s at epoch %d for %s (role change event %d)", l.node, tp, l.epoch,
			time.Duration(s.End-l.time).Round(time.Millisecond), l.idx)
		if restarted {
			v.events = append(v.events, restart.Index)
			who = fmt.Sprintf("broker %d, leader of %s at epoch %d (role change event %d) and restarted %s before the read ended (node start event %d), its new process answering at that epoch,",
				l.node, tp, l.epoch, l.idx, time.Duration(s.End-restart.Time).Round(time.Millisecond), restart.Index)
		}
		hw, ok := int64(0), false
		if read.HW != nil {
			hw, ok = *read.HW, true
		} else {
			hw, ok = f.hwAt(tp, l.node, l.time, s.End)
		}
		if ok {
			who += fmt.Sprintf(" with HW %d", hw)
		}
	case read.Broker != 0:
		who = fmt.Sprintf("broker %d", read.Broker)
		if read.LeaderEpoch != nil {
			who += fmt.Sprintf(" at leader epoch %d", *read.LeaderEpoch)
		}
		if read.HW != nil {
			who += fmt.Sprintf(" with HW %d", *read.HW)
		}
	}
	sort.Ints(v.events)
	base := fmt.Sprintf("%s returned nothing from %d of %s (read event %d); %s", who, s.Offset, tp, s.Read, missed)
	if who == "" {
		base = fmt.Sprintf("read event %d returned nothing from %d of %s; %s", s.Read, s.Offset, tp, missed)
	}
	caughtUp := read.HW != nil && *read.HW > s.Offset
	switch {
	case caughtUp:
		// A high watermark above the offset means records were readable
		// there: the answer was not a lagging HW.
		v.explanation = base + fmt.Sprintf(": its response carried HW %d, above %d, so a lagging high watermark does not explain the empty read.", *read.HW, s.Offset)
	case newLeader:
		v.known = KnownKafka2334
		v.explanation = base + ": a new leader whose high watermark had not caught up (KAFKA-2334)."
	case deposed:
		v.known = KnownDeposedLeaderRead
		v.explanation = base + fmt.Sprintf(": those were acknowledged at leader epoch %d, and broker %d had not yet been told of any epoch above %d, so it answered as the deposed leader it was (Kafka's Fetch fences only a client that names a newer epoch, KIP-320).", ackEp, l.node, *read.LeaderEpoch)
		if changedInFlight {
			v.events = append(v.events, inFlight.idx)
			sort.Ints(v.events)
			v.explanation = strings.TrimSuffix(v.explanation, ".") + fmt.Sprintf("; its role change to epoch %d (event %d) was logged %s after the fetch was sent and %s before its answer came back, while the fetch was in flight: the broker checks leadership when a fetch arrives, so that change does not show it knew when it answered.",
				inFlight.epoch, inFlight.idx, time.Duration(inFlight.time-s.Start).Round(100*time.Microsecond), time.Duration(s.End-inFlight.time).Round(100*time.Microsecond))
		}
	case older:
		v.events = append(v.events, told.idx)
		sort.Ints(v.events)
		v.explanation = base + fmt.Sprintf(": those were acknowledged at leader epoch %d, and broker %d answered at epoch %d although it had been told of epoch %d %s before the fetch was sent (role change event %d).",
			ackEp, l.node, *read.LeaderEpoch, told.epoch, time.Duration(s.Start-told.time).Round(time.Millisecond), told.idx)
	case found:
		v.explanation = base + fmt.Sprintf(": broker %d had led %s since before that acknowledgement, so no leader change explains the empty read.", l.node, tp)
	default:
		v.explanation = base + fmt.Sprintf(": no broker took the leadership of %s after that acknowledgement, so no leader change explains the empty read.", tp)
	}
	return v
}
