package history

import (
	"errors"
	"fmt"
)

// known is the set of kinds this version can read.
var known = func() map[Kind]bool {
	m := make(map[Kind]bool, len(Kinds))
	for _, k := range Kinds {
		m[k] = true
	}
	return m
}()

// Known reports whether k is a kind of this schema version.
func Known(k Kind) bool { return known[k] }

// payloads reports whether the payload field the kind needs is set, and how
// many payload fields are set in total. (No allocation: it runs per line.)
func (e *Event) payloads() (want bool, n int) {
	switch e.Kind {
	case KindOp:
		want = e.Op != nil
	case KindNodeStart, KindNodeStop:
		want = e.Process != nil
	case KindBrokerRegistered:
		want = e.Registration != nil
	case KindControllerElected, KindControllerResigned:
		want = e.Controller != nil
	case KindZKWrite:
		want = e.ZKWrite != nil
	case KindControlSent, KindControlRequest:
		want = e.Control != nil
	case KindControlledShutdown:
		want = e.Shutdown != nil
	case KindRoleChange:
		want = e.Role != nil
	case KindProduceAppend, KindProduceAck:
		want = e.Append != nil
	case KindHWAdvance:
		want = e.HW != nil
	case KindISRChange:
		want = e.ISR != nil
	case KindHWCheckpoint:
		want = e.Checkpoint != nil
	case KindTruncation:
		want = e.Truncation != nil
	case KindZKWatch:
		want = e.Watch != nil
	case KindFaultStart, KindFaultStop:
		want = e.Fault != nil
	case KindPhase:
		want = e.Phase != nil
	}
	count := func(set bool) {
		if set {
			n++
		}
	}
	count(e.Op != nil)
	count(e.Process != nil)
	count(e.Registration != nil)
	count(e.Controller != nil)
	count(e.ZKWrite != nil)
	count(e.Control != nil)
	count(e.Shutdown != nil)
	count(e.Role != nil)
	count(e.Append != nil)
	count(e.HW != nil)
	count(e.ISR != nil)
	count(e.Checkpoint != nil)
	count(e.Truncation != nil)
	count(e.Watch != nil)
	count(e.Fault != nil)
	count(e.Phase != nil)
	return want, n
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
	if !Known(e.Kind) {
		return fmt.Errorf("%w %q", ErrUnknownKind, e.Kind)
	}
	if e.Time <= 0 {
		return fmt.Errorf("missing or bad timestamp %d", e.Time)
	}
	want, n := e.payloads()
	if !want {
		return fmt.Errorf("kind %q without its payload", e.Kind)
	}
	if n != 1 {
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
