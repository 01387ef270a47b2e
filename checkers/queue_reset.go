package checkers

// A consumer that reads backwards is a queue-poll violation unless a broker
// sent it there: a leader answering its fetch OFFSET_OUT_OF_RANGE makes the
// client reset its position by its reset policy (the queue workload's
// consumers reset to the log start). When that leader had been deposed and
// not yet told, the reset is Kafka's documented behaviour, not a bug of the
// broker that owns the partition now.

import (
	"fmt"
	"time"

	"github.com/zkchaos/zkchaos/history"
)

// KnownDeposedLeaderOutOfRange: a consumer read backwards after a leader
// answered its fetch OFFSET_OUT_OF_RANGE for an offset above that leader's
// log end, while another broker already led the partition at a higher
// leader epoch: the deposed leader, not yet told of its successor, answered
// by its own shorter log (Kafka's Fetch fences only a consumer that names a
// newer leader epoch, KIP-320), and the consumer reset by its
// auto.offset.reset policy.
const KnownDeposedLeaderOutOfRange = "deposed-leader-out-of-range"

// KnownDeposedLeaderListOffsets: a consumer assigned a partition from an
// exact offset began reading below it after a broker answered its
// ListOffsets for the latest offset with a high watermark below that
// offset, while another broker already led the partition at a higher leader
// epoch: the client moves an exact start offset above the listed end down
// to it (franz-go, like Kafka's own consumer after an out-of-range reset),
// and the deposed leader, not yet told of its successor and naming itself
// leader in its own stale metadata, answered by its own high watermark
// (ListOffsets fences only a client that names another leader epoch,
// KIP-320).
const KnownDeposedLeaderListOffsets = "deposed-leader-list-offsets"

// outOfRange indexes, per partition, the consumer fetches leaders answered
// OFFSET_OUT_OF_RANGE, the consumer ListOffsets answered with a latest
// offset, and the role changes that made brokers leaders.
type outOfRange struct {
	answers map[history.TopicPartition][]*history.Event
	listed  map[history.TopicPartition][]*history.Event
	leaders map[history.TopicPartition][]*history.Event
	// losses are the consumers' own reports of records lost (a poll's
	// QueueDataLoss), in history order.
	losses []dataLoss
}

// dataLoss is one partition of a consumer's report of records lost, on
// the completion of its poll: no broker event records the
// OffsetForLeaderEpoch answer behind it.
type dataLoss struct {
	e *history.Event
	d history.QueueDataLoss
}

func outOfRangeOf(h *history.History) *outOfRange {
	o := &outOfRange{answers: map[history.TopicPartition][]*history.Event{}, listed: map[history.TopicPartition][]*history.Event{}, leaders: map[history.TopicPartition][]*history.Event{}}
	for e := range eventsOf(h, history.KindReplicaFetch, history.KindListOffsets, history.KindRoleChange, history.KindQueueOp) {
		switch {
		case e.Queue != nil:
			for _, d := range e.Queue.DataLoss {
				o.losses = append(o.losses, dataLoss{e: e, d: d})
			}
		case e.ReplicaFetch != nil && e.ReplicaFetch.Replica < 0 && e.ReplicaFetch.ErrorCode == history.ErrOffsetOutOfRange:
			tp := e.ReplicaFetch.TP()
			o.answers[tp] = append(o.answers[tp], e)
		case e.Listed != nil && e.Listed.Timestamp == -1 && e.Listed.ErrorCode == 0:
			tp := e.Listed.TP()
			o.listed[tp] = append(o.listed[tp], e)
		case e.Role != nil && e.Role.Role == history.RoleLeader:
			tp := e.Role.TP()
			o.leaders[tp] = append(o.leaders[tp], e)
		}
	}
	return o
}

// answeredBy is a broker's answer that sent a consumer back (an
// OFFSET_OUT_OF_RANGE fetch answer, resetBy, or a latest-offset ListOffsets
// answer, listedBy), and the leadership that had deposed the answering
// broker (nil when it led the partition's newest leader epoch).
type answeredBy struct {
	answer, successor *history.Event
}

type (
	resetBy  struct{ answeredBy }
	listedBy struct{ answeredBy }
)

// deposed says who led tp when the answer was given, "" when nobody had
// deposed the answering broker.
func (b answeredBy) deposed(tp history.TopicPartition) string {
	if b.successor == nil {
		return ""
	}
	return fmt.Sprintf(", while broker %d had led %s at leader epoch %d for %s (role change event %d)",
		b.successor.Node, tp, b.successor.Role.LeaderEpoch, time.Duration(b.answer.Time-b.successor.Time).Round(time.Millisecond), b.successor.Index)
}

// find returns the answer for tp at offset given between times from and
// to, the last one when there are several. An answer at a higher offset
// counts when passed says the consumer could have moved there from offset
// by the answer without returning a record: a fetch returns no aborted
// record to a read_committed consumer and no transaction marker to any,
// yet moves its position past them.
func (o *outOfRange) find(tp history.TopicPartition, offset, from, to int64, passed func(to, at int64) bool) (resetBy, bool) {
	var found resetBy
	ok := false
	for _, a := range o.answers[tp] {
		f := a.ReplicaFetch.FetchOffset
		if a.Time >= from && a.Time <= to && (f == offset || (f > offset && passed(f, a.Time))) {
			found, ok = resetBy{answeredBy{answer: a}}, true
		}
	}
	if !ok {
		return found, false
	}
	found.successor = o.successor(tp, found.answer, found.answer.ReplicaFetch.LeaderEpoch)
	return found, true
}

// findShort returns the last answer for tp between times from and to at an
// offset above offset from a leader whose log ended below offset: that
// leader then answered any fetch at offset so too. The answer names no
// consumer, and the consumer's own may be missing (a broker logs an answer
// after sending it, and a crash can cut that short), so it stands for the
// consumer's only where its leader is known to have lost the offset.
func (o *outOfRange) findShort(tp history.TopicPartition, offset, from, to int64) (resetBy, bool) {
	var found resetBy
	ok := false
	for _, a := range o.answers[tp] {
		if f := a.ReplicaFetch; a.Time >= from && a.Time <= to && f.FetchOffset > offset && f.LogEndOffset < offset {
			found, ok = resetBy{answeredBy{answer: a}}, true
		}
	}
	return found, ok
}

// successor is the first leadership of tp another broker than answer's took
// before it at a leader epoch above epoch, the one answer's broker held; nil
// when there was none.
func (o *outOfRange) successor(tp history.TopicPartition, answer *history.Event, epoch int32) *history.Event {
	for _, l := range o.leaders[tp] {
		if l.Time < answer.Time && l.Role.LeaderEpoch > epoch && l.Node != answer.Node {
			return l
		}
	}
	return nil
}

// findListed returns the last latest-offset answer for tp between times
// from and to below offset start and at or below polled, the offset the
// consumer began at.
func (o *outOfRange) findListed(tp history.TopicPartition, start, polled, from, to int64) (listedBy, bool) {
	var found listedBy
	ok := false
	for _, a := range o.listed[tp] {
		if a.Time >= from && a.Time <= to && a.Listed.Offset < start && a.Listed.Offset <= polled {
			found, ok = listedBy{answeredBy{answer: a}}, true
		}
	}
	if ok {
		found.successor = o.successor(tp, found.answer, found.answer.Listed.LeaderEpoch)
	}
	return found, ok
}

// why says what the answer was and, for a deposed leader's, who led then.
func (b listedBy) why(m *queueModel, start int64) string {
	a, l := b.answer, b.answer.Listed
	return fmt.Sprintf("broker %d answered the consumer's ListOffsets of %s for the latest offset with %d (event %d, %s), its high watermark at leader epoch %d (the request carried current leader epoch %d), its log ending at %d%s, and the client moved its start offset %d down to that listed end",
		a.Node, l.TP(), l.Offset, a.Index, m.when(a), l.LeaderEpoch, l.CurrentLeaderEpoch, l.LogEndOffset, b.deposed(l.TP()), start)
}

// why says what the answer was and, for a deposed leader's, who led then.
func (b resetBy) why(m *queueModel) string {
	a, f := b.answer, b.answer.ReplicaFetch
	return fmt.Sprintf("broker %d answered a consumer fetch of %s at offset %d with OFFSET_OUT_OF_RANGE (event %d, %s), its log ending at %d at leader epoch %d%s",
		a.Node, f.TP(), f.FetchOffset, a.Index, m.when(a), f.LogEndOffset, f.LeaderEpoch, b.deposed(f.TP()))
}

// findDataLoss returns process proc's last report, between times from and
// to, that it lost records of partition key at offset at: it had consumed
// to at or past it and moved below it.
func (o *outOfRange) findDataLoss(proc int, key int32, at, from, to int64) (dataLoss, bool) {
	var found dataLoss
	ok := false
	for _, l := range o.losses {
		if l.e.Queue.Process == proc && l.d.Key == key && l.e.Time >= from && l.e.Time <= to && l.d.ResetTo < at && l.d.ConsumedTo >= at {
			found, ok = l, true
		}
	}
	return found, ok
}
