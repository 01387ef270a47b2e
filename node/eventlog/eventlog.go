// Package eventlog is the node program's side of the history schema: it
// turns the facts the checkers need (control requests and their verdicts,
// registrations, elections, ZooKeeper writes, role changes, failpoints) into
// history.Event values and appends them through history.Writer, and mirrors a
// one-line summary to the process's stderr for humans.
//
// The schema itself belongs to history/; this package must not invent its
// own fields. A nil *Log is valid and records nothing (unit tests).
package eventlog

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/zkchaos/zkchaos/history"
)

// Log records one node's events.
type Log struct {
	w      *history.Writer
	node   int32
	mu     sync.Mutex
	text   io.Writer
	failed bool
}

// New returns a Log writing to w (may be nil: text only) and text (may be nil).
func New(w *history.Writer, node int32, text io.Writer) *Log {
	return &Log{w: w, node: node, text: text}
}

// Close closes the history writer.
func (l *Log) Close() error {
	if l == nil || l.w == nil {
		return nil
	}
	return l.w.Close()
}

// Sync makes written events durable.
func (l *Log) Sync() {
	if l != nil && l.w != nil {
		l.w.Sync()
	}
}

// Printf writes a human line to the text log only.
func (l *Log) Printf(format string, args ...any) {
	if l == nil || l.text == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.text, "%s [node %d] %s\n", time.Now().UTC().Format("15:04:05.000000"), l.node, fmt.Sprintf(format, args...))
}

// Emit appends ev and mirrors it to the text log. A write error is reported
// once on the text log; the node keeps running (losing its history is bad,
// stopping the system under test because of it is worse).
func (l *Log) Emit(ev history.Event) {
	if l == nil {
		return
	}
	if ev.Time == 0 {
		ev.Time = time.Now().UnixNano()
	}
	if l.w != nil {
		if err := l.w.Write(ev); err != nil {
			l.mu.Lock()
			first := !l.failed
			l.failed = true
			l.mu.Unlock()
			if first {
				l.Printf("EVENT LOG WRITE FAILED (further failures not reported): %v", err)
			}
		}
	}
	if l.text != nil {
		// The header is the writer's business; humans want kind + payload.
		b, _ := json.Marshal(&ev)
		s := string(b)
		if i := strings.Index(s, `"kind":`); i > 0 {
			s = "{" + s[i:]
		}
		l.Printf("%s", s)
	}
}

// NodeStart records the first line of a process.
func (l *Log) NodeStart(p history.Process) {
	l.Emit(history.Event{Kind: history.KindNodeStart, Process: &p})
}

// NodeStop records a clean exit.
func (l *Log) NodeStop(p history.Process) {
	l.Emit(history.Event{Kind: history.KindNodeStop, Process: &p})
}

// Registered records /brokers/ids/<id> creation with its czxid.
func (l *Log) Registered(r history.Registration) {
	l.Emit(history.Event{Kind: history.KindBrokerRegistered, Registration: &r})
}

// ControllerElected records becoming controller.
func (l *Log) ControllerElected(c history.ControllerRun) {
	l.Emit(history.Event{Kind: history.KindControllerElected, Controller: &c})
}

// ControllerResigned records resigning.
func (l *Log) ControllerResigned(c history.ControllerRun) {
	l.Emit(history.Event{Kind: history.KindControllerResigned, Controller: &c})
}

// ZKWrite records one ZooKeeper write and its outcome.
func (l *Log) ZKWrite(w history.ZKWrite) {
	l.Emit(history.Event{Kind: history.KindZKWrite, ZKWrite: &w})
}

// ControlSent records a control request handed to the network.
func (l *Log) ControlSent(c history.Control) {
	l.Emit(history.Event{Kind: history.KindControlSent, Control: &c})
}

// ControlRequest records a control request received and judged by a broker.
func (l *Log) ControlRequest(c history.Control) {
	l.Emit(history.Event{Kind: history.KindControlRequest, Control: &c})
}

// ControlledShutdown records a ControlledShutdown handled by the controller.
func (l *Log) ControlledShutdown(s history.Shutdown) {
	l.Emit(history.Event{Kind: history.KindControlledShutdown, Shutdown: &s})
}

// Role records a replica's leader/follower/stopped transition.
func (l *Log) Role(r history.Role) {
	l.Emit(history.Event{Kind: history.KindRoleChange, Role: &r})
}

// Failpoint records a failpoint firing (start) or the node going on (stop).
func (l *Log) Failpoint(start bool, id, name, detail string) {
	kind := history.KindFaultStop
	if start {
		kind = history.KindFaultStart
	}
	l.Emit(history.Event{Kind: kind, Fault: &history.Fault{
		ID: id, Name: "failpoint", Targets: []string{fmt.Sprintf("n%d", l.node)}, Detail: detail, Failpoint: name,
	}})
}
