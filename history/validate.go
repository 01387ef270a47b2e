package history

import (
	"errors"
	"fmt"
)

// Known reports whether k is a kind of this schema version.
func Known(k Kind) bool {
	_, ok := payloadOf[k]
	return ok
}

// payloadSet lists, in field order, whether each payload pointer is set.
func (e *Event) payloadSet() [24]bool {
	return [24]bool{e.Op != nil, e.Process != nil, e.Registration != nil, e.Controller != nil,
		e.ZKWrite != nil, e.Control != nil, e.Shutdown != nil, e.Role != nil, e.Append != nil,
		e.HW != nil, e.ISR != nil, e.Checkpoint != nil, e.Truncation != nil, e.Watch != nil,
		e.Fault != nil, e.Phase != nil, e.ReplicaFetch != nil, e.Group != nil,
		e.Txn != nil, e.TxnMarker != nil, e.Queue != nil, e.Deletion != nil, e.Refusal != nil, e.Listed != nil}
}

// payloadOf maps every kind this version can read (Kinds) to the position
// in payloadSet of the payload it needs (see the table at Kind).
var payloadOf = map[Kind]int{
	KindOp: 0, KindNodeStart: 1, KindNodeStop: 1, KindBrokerRegistered: 2,
	KindControllerElected: 3, KindControllerResigned: 3, KindZKWrite: 4,
	KindControlSent: 5, KindControlRequest: 5, KindControlledShutdown: 6,
	KindRoleChange: 7, KindProduceAppend: 8, KindProduceAck: 8, KindHWAdvance: 9,
	KindISRChange: 10, KindHWCheckpoint: 11, KindTruncation: 12, KindZKWatch: 13,
	KindFaultStart: 14, KindFaultStop: 14, KindPhase: 15, KindReplicaFetch: 16, KindGroupRequest: 17,
	KindTxnRequest: 18, KindTxnMarker: 19, KindQueueOp: 20, KindTopicDeletion: 21, KindProduceRefused: 22,
	KindListOffsets: 23,
}

// ErrFutureVersion is wrapped by Validate for a record newer than SchemaVersion.
var ErrFutureVersion = errors.New("schema version from the future")

// ErrUnknownKind is wrapped by Validate for a kind this version does not know.
var ErrUnknownKind = errors.New("unknown event kind")

// Validate checks what a reader must be able to rely on: a known version, a
// known kind with its payload (and no other), a well-formed client op, and
// no negative offset anywhere (a checker would otherwise index or compare
// with it and give a confusing verdict instead of naming the bad line).
func (e *Event) Validate() error {
	if e.V < 1 {
		return fmt.Errorf("missing or bad schema version %d", e.V)
	}
	if e.V > SchemaVersion {
		return fmt.Errorf("%w: version %d, this reader knows up to %d", ErrFutureVersion, e.V, SchemaVersion)
	}
	if e.Kind == "" {
		return errors.New("missing event kind")
	}
	slot, known := payloadOf[e.Kind]
	if !known {
		return fmt.Errorf("%w %q", ErrUnknownKind, e.Kind)
	}
	if e.Time <= 0 {
		return fmt.Errorf("missing or bad timestamp %d", e.Time)
	}
	set := e.payloadSet()
	if !set[slot] {
		return fmt.Errorf("kind %q without its payload", e.Kind)
	}
	if n := countTrue(set[:]); n != 1 {
		return fmt.Errorf("kind %q with %d payloads, want 1", e.Kind, n)
	}
	if e.Op != nil {
		switch e.Op.Type {
		case OpInvoke, OpOK, OpFail, OpInfo:
		default:
			return fmt.Errorf("op with unknown type %q", e.Op.Type)
		}
		if e.Op.F == "" {
			return errors.New("op without f")
		}
	}
	if e.Queue != nil {
		if err := e.Queue.validate(); err != nil {
			return err
		}
	}
	return e.validateOffsets()
}

// validateOffsets rejects a negative offset or high watermark in any payload.
func (e *Event) validateOffsets() error {
	neg := func(what string, v int64) error {
		if v < 0 {
			return fmt.Errorf("%s event with negative %s %d", e.Kind, what, v)
		}
		return nil
	}
	switch {
	case e.Op != nil:
		if err := neg("offset", e.Op.Offset); err != nil {
			return err
		}
		if e.Op.HW != nil {
			if err := neg("hw", *e.Op.HW); err != nil {
				return err
			}
		}
		for _, r := range e.Op.Records {
			if err := neg("record offset", r.Offset); err != nil {
				return err
			}
		}
	case e.Append != nil:
		if err := neg("base_offset", e.Append.BaseOffset); err != nil {
			return err
		}
		return neg("last_offset", e.Append.LastOffset)
	case e.HW != nil:
		if err := neg("old high watermark", e.HW.Old); err != nil {
			return err
		}
		return neg("new high watermark", e.HW.New)
	case e.Truncation != nil:
		if err := neg("from offset", e.Truncation.From); err != nil {
			return err
		}
		return neg("to offset", e.Truncation.To)
	case e.Checkpoint != nil:
		for _, en := range e.Checkpoint.Entries {
			if err := neg("checkpoint hw", en.HW); err != nil {
				return err
			}
		}
	}
	return nil
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
