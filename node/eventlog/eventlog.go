// Package eventlog is the node program's side of the history schema: it
// appends the facts the checkers need (control requests and their verdicts,
// registrations, elections, ZooKeeper writes, role changes, failpoints), as
// history.Event values the caller builds with the kind and payload the schema
// pairs, through history.Writer (Emit), and mirrors a one-line summary to the
// process's stderr for humans.
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

// ZKWrite records one ZooKeeper write and its outcome.
func (l *Log) ZKWrite(w history.ZKWrite) {
	l.Emit(history.Event{Kind: history.KindZKWrite, ZKWrite: &w})
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
