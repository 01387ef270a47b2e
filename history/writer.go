package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Writer appends events of one source as JSON lines. It is safe for
// concurrent use. Each event is encoded completely and handed to the
// underlying writer in a single Write call, so after a crash of the writing
// process a line is either complete or absent (a cut-short last line is
// possible only if the machine itself fails; the Reader skips it with a
// warning). Writer does not buffer: an event is in the kernel when Write
// returns. Call Sync at phase ends to make it durable.
type Writer struct {
	mu     sync.Mutex
	w      io.Writer
	source string
	node   int32
	seq    uint64
	now    func() time.Time
	err    error // first write error; later writes return it
}

// NewWriter returns a Writer stamping events with source and, unless it is
// 0, node (non-node sources pass 0; a node's events then keep their own
// Node).
func NewWriter(w io.Writer, source string, node int32) *Writer {
	return &Writer{w: w, source: source, node: node, now: time.Now}
}

// Create opens (creating or appending to) the file path and returns a Writer
// on it. Appending keeps earlier lines when a node process restarts; Seq
// restarts at 0 in the new process, which merging tolerates because ordering
// is by time first.
func Create(path, source string, node int32) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("history: open %s: %w", path, err)
	}
	return NewWriter(f, source, node), nil
}

// Write stamps ev (V, Source, Seq, Time when zero, and Node when the Writer
// has one) and appends it as one line. It validates the event first, so a bad event is reported to the
// caller instead of poisoning the file.
func (w *Writer) Write(ev Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	ev.V = SchemaVersion
	ev.Source = w.source
	if w.node != 0 {
		ev.Node = w.node
	}
	if ev.Time == 0 {
		ev.Time = w.now().UnixNano()
	}
	ev.Seq = w.seq
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("history: refusing to write %s event: %w", ev.Kind, err)
	}
	b, err := json.Marshal(&ev)
	if err != nil {
		return fmt.Errorf("history: encode %s event: %w", ev.Kind, err)
	}
	b = append(b, '\n')
	if _, err := w.w.Write(b); err != nil {
		w.err = fmt.Errorf("history: write %s: %w", w.source, err)
		return w.err
	}
	w.seq++
	return nil
}

// Sync flushes the file to stable storage when the underlying writer can
// (an *os.File); otherwise it is a no-op.
func (w *Writer) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.w.(interface{ Sync() error }); ok {
		if err := s.Sync(); err != nil {
			return fmt.Errorf("history: sync %s: %w", w.source, err)
		}
	}
	return nil
}

// Close syncs and closes the underlying writer if it is an io.Closer.
func (w *Writer) Close() error {
	serr := w.Sync()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = errors.New("history: writer closed")
	}
	if c, ok := w.w.(io.Closer); ok {
		if err := c.Close(); err != nil {
			return fmt.Errorf("history: close %s: %w", w.source, err)
		}
	}
	return serr
}
