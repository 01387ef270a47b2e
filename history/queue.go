package history

import (
	"errors"
	"fmt"
)

// Queue operations: the queue workload's (workloads/queue.go) operations,
// shaped as Jepsen's Kafka queue test shapes them. An operation is a list of
// micro-ops, each a send of one value to a key or a poll that returns values
// per key, invoked and completed as a whole (ok, fail or info). A key is a
// partition of the workload topic; values are integers unique in the run.

// KindQueueOp is the event kind of a queue operation (payload Queue).
const KindQueueOp Kind = "queue_op"

// Queue operation functions (QueueOp.F).
const (
	// QueueTxn is a list of micro-ops (Mops): sends and polls. With
	// QueueOp.Transactional the sends are one Kafka transaction: ok means
	// it committed, fail that it aborted.
	QueueTxn = "txn"
	// QueueAssign starts a new assignment of an assigning consumer: the
	// partitions and the offset each is read from (Offsets).
	QueueAssign = "assign"
	// QueueCommit commits a subscribed consumer's positions (Offsets: the
	// next offset to read of each partition) for its group: ok when the
	// coordinator accepted every partition, fail only when no attempt of
	// it can have been written to __consumer_offsets, info otherwise (the
	// client retries, and answers only the last attempt).
	QueueCommit = "commit"
	// QueueDrained closes the final drain: its ok lists (Offsets) each
	// partition the drain read from offset 0 up to the end offset it was
	// given when it began; a partition missing there was not read in full.
	QueueDrained = "drained"
)

// Micro-op functions (QueueMop.F).
const (
	MopSend = "send"
	MopPoll = "poll"
)

// Consumer modes (QueueAssignment.Mode).
const (
	QueueSubscribed = "subscribe" // a member of a consumer group
	QueueAssigned   = "assign"    // partitions assigned by the client itself
)

// Isolation levels (QueueOp.Isolation).
const (
	ReadUncommitted = "read_uncommitted"
	ReadCommitted   = "read_committed"
)

// QueueOp is one queue operation event. An invoke carries what was asked
// (a send's key and value, a poll without results); its completion carries
// the same micro-ops with what happened: each send's offset when the broker
// acknowledged it, each poll's records. Process pairs an invoke with its
// completion as ClientOp's does, within the event's source.
type QueueOp struct {
	_ struct{}

	Type    OpType     `json:"type"`
	Process int        `json:"process"`
	F       string     `json:"f"`
	Topic   string     `json:"topic"`
	Mops    []QueueMop `json:"mops,omitempty"`
	// Offsets: the partitions and start offsets of an assign, the
	// positions of a commit, the end offsets a drain reached.
	Offsets []QueueOffset `json:"offsets,omitempty"`
	// Transactional: the sends went through a transactional producer.
	Transactional bool `json:"transactional,omitempty"`
	// CommitStart, on a transactional txn's completion, is when the client
	// asked to commit the transaction (EndTxn), Unix ns; 0 when it never
	// did (aborted before).
	CommitStart int64 `json:"commit_start,omitempty"`
	// Isolation is the consumer's isolation level, on ops with polls.
	Isolation string `json:"isolation,omitempty"`
	// Assignment is what the consumer held when a poll returned (on the
	// completion of an op with polls, and on commits).
	Assignment *QueueAssignment `json:"assignment,omitempty"`
	// Final marks the drain: polls after the cluster healed, from offset 0
	// of every partition to its end.
	Final     bool   `json:"final,omitempty"`
	Error     string `json:"error,omitempty"`
	ErrorCode int16  `json:"error_code,omitempty"`
	// DataLoss, on a poll's completion, is what the client reported it
	// found lost and where it moved its position for it.
	DataLoss []QueueDataLoss `json:"data_loss,omitempty"`
}

// QueueDataLoss is a consumer's own report that records of partition Key
// were lost, moving it from ConsumedTo to ResetTo (franz-go's
// ErrDataLoss): validating its position after a leader change (KIP-320,
// OffsetForLeaderEpoch to the partition's leader), it was answered an end
// offset below where it had consumed to, an answer no broker event
// records; or a leader answered its fetch OFFSET_OUT_OF_RANGE while it was
// consuming and it moved to the log start it then listed (that answer is
// the leader's replica_fetch event).
type QueueDataLoss struct {
	_ struct{}

	Key             int32 `json:"key"`
	ConsumedTo      int64 `json:"consumed_to"`
	ConsumedToEpoch int32 `json:"consumed_to_epoch"`
	ResetTo         int64 `json:"reset_to"`
	ResetToEpoch    int32 `json:"reset_to_epoch"`
}

// QueueMop is one micro-op: a send of Value to partition Key (Offset set on
// a completion whose broker acknowledged it, -1 otherwise) or a poll
// (Records, on the completion, per partition).
type QueueMop struct {
	_ struct{}

	F      string      `json:"f"`
	Key    int32       `json:"key,omitempty"`
	Value  int64       `json:"value,omitempty"`
	Offset int64       `json:"offset,omitempty"`
	Polled []QueuePoll `json:"polled,omitempty"`
}

// QueuePoll is what one poll returned of one partition, in offset order.
type QueuePoll struct {
	_ struct{}

	Key     int32         `json:"key"`
	Records []QueueRecord `json:"records"`
}

// QueueRecord is one record a poll returned.
type QueueRecord struct {
	Offset int64 `json:"offset"`
	Value  int64 `json:"value"`
}

// QueueOffset is a partition with an offset.
type QueueOffset struct {
	Key    int32 `json:"key"`
	Offset int64 `json:"offset"`
}

// QueueAssignment is a consumer's assignment when it polled: a group
// member's group, member id and generation (Generation -1: not known, the
// member had not joined), and the partitions it held; an assigning
// consumer's partitions and Epoch, which counts that process's
// assignments from 1.
type QueueAssignment struct {
	_ struct{}

	Mode       string  `json:"mode"`
	Group      string  `json:"group,omitempty"`
	Member     string  `json:"member,omitempty"`
	Generation int32   `json:"generation"`
	Epoch      int     `json:"epoch,omitempty"`
	Keys       []int32 `json:"keys"`
}

// TP returns the topic's partition key.
func (o *QueueOp) TP(key int32) TopicPartition { return TP(o.Topic, key) }

// validate checks a queue op's shape: a known type and function, and
// no negative offset but a send's -1.
func (o *QueueOp) validate() error {
	switch o.Type {
	case OpInvoke, OpOK, OpFail, OpInfo:
	default:
		return fmt.Errorf("queue op with unknown type %q", o.Type)
	}
	switch o.F {
	case QueueTxn, QueueAssign, QueueCommit, QueueDrained:
	case "":
		return errors.New("queue op without f")
	default:
		return fmt.Errorf("queue op with unknown f %q", o.F)
	}
	for _, m := range o.Mops {
		switch m.F {
		case MopSend:
			if m.Offset < -1 {
				return fmt.Errorf("send of %d with offset %d", m.Value, m.Offset)
			}
		case MopPoll:
			for _, p := range m.Polled {
				for _, r := range p.Records {
					if r.Offset < 0 {
						return fmt.Errorf("poll of key %d with negative offset %d", p.Key, r.Offset)
					}
				}
			}
		default:
			return fmt.Errorf("micro-op with unknown f %q", m.F)
		}
	}
	for _, q := range o.Offsets {
		if q.Offset < 0 {
			return fmt.Errorf("queue %s with negative offset %d for key %d", o.F, q.Offset, q.Key)
		}
	}
	return nil
}

// noteQueue records a queue op in the pending invokes, as note does for client
// ops: an error for a completion with no invoke.
func (in invokes) noteQueue(op *QueueOp) error {
	if op.Type == OpInvoke {
		in[op.Process] = struct{}{}
		return nil
	}
	if _, ok := in[op.Process]; !ok {
		return fmt.Errorf("%w: queue %s %s of process %d, and process %d has no invoke pending (each process invokes, then completes once)",
			ErrNoInvoke, op.F, op.Type, op.Process, op.Process)
	}
	delete(in, op.Process)
	return nil
}

// QueueOperation pairs a queue invoke with its completion.
type QueueOperation struct {
	Invoke   *Event
	Complete *Event // nil: the history ended before the op completed
}

// Outcome is the op's Jepsen type; one without a completion is OpInfo.
func (o QueueOperation) Outcome() OpType {
	if o.Complete == nil {
		return OpInfo
	}
	return o.Complete.Queue.Type
}

// Op is the completion's QueueOp when there is one, else the invoke's.
func (o QueueOperation) Op() *QueueOp {
	if o.Complete != nil {
		return o.Complete.Queue
	}
	return o.Invoke.Queue
}

// QueueOperations pairs h's queue op events by (Source, Process), in invoke
// order, as Operations pairs client ops: a second invoke on a busy process
// leaves the first without a completion.
func QueueOperations(h *History) []QueueOperation {
	type key struct {
		src  string
		proc int
	}
	var ops []QueueOperation
	pending := map[key]int{}
	for i := range h.Events {
		e := &h.Events[i]
		if e.Kind != KindQueueOp || e.Queue == nil {
			continue
		}
		k := key{e.Source, e.Queue.Process}
		if e.Queue.Type == OpInvoke {
			pending[k] = len(ops)
			ops = append(ops, QueueOperation{Invoke: e})
			continue
		}
		if p, ok := pending[k]; ok {
			delete(pending, k)
			ops[p].Complete = e
		}
	}
	return ops
}
