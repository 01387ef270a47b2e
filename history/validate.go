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

// payloadFor returns whether the payload field the kind needs is set, and
// how many payload fields are set in total.
func (e *Event) payloads() (want bool, n int) {
	set := map[Kind]bool{
		KindOp:                 e.Op != nil,
		KindNodeStart:          e.Process != nil,
		KindNodeStop:           e.Process != nil,
		KindBrokerRegistered:   e.Registration != nil,
		KindControllerElected:  e.Controller != nil,
		KindControllerResigned: e.Controller != nil,
		KindZKWrite:            e.ZKWrite != nil,
		KindControlSent:        e.Control != nil,
		KindControlRequest:     e.Control != nil,
		KindControlledShutdown: e.Shutdown != nil,
		KindRoleChange:         e.Role != nil,
		KindProduceAppend:      e.Append != nil,
		KindProduceAck:         e.Append != nil,
		KindHWAdvance:          e.HW != nil,
		KindISRChange:          e.ISR != nil,
		KindHWCheckpoint:       e.Checkpoint != nil,
		KindTruncation:         e.Truncation != nil,
		KindZKWatch:            e.Watch != nil,
		KindFaultStart:         e.Fault != nil,
		KindFaultStop:          e.Fault != nil,
		KindPhase:              e.Phase != nil,
	}
	for _, p := range []bool{
		e.Op != nil, e.Process != nil, e.Registration != nil, e.Controller != nil,
		e.ZKWrite != nil, e.Control != nil, e.Shutdown != nil, e.Role != nil,
		e.Append != nil, e.HW != nil, e.ISR != nil, e.Checkpoint != nil,
		e.Truncation != nil, e.Watch != nil, e.Fault != nil, e.Phase != nil,
	} {
		if p {
			n++
		}
	}
	return set[e.Kind], n
}

// ErrFutureVersion is wrapped by Validate for a record newer than SchemaVersion.
var ErrFutureVersion = errors.New("schema version from the future")

// ErrUnknownKind is wrapped by Validate for a kind this version does not know.
var ErrUnknownKind = errors.New("unknown event kind")

// Validate checks what a reader must be able to rely on: a known version, a
// known kind with its payload (and no other), and a well-formed client op.
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
	return nil
}
