package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
// on it. Appending keeps earlier lines when a node process restarts; the new
// Writer continues the seq of the last complete line, so (src, seq) stays
// unique and increasing across processes, as the Reader requires. A last
// line cut short by a crash is removed first: appended after it, it would
// become a bad line in the middle of the file.
func Create(path, source string, node int32) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("history: open %s: %w", path, err)
	}
	next, err := resume(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("history: resume %s: %w", path, err)
	}
	w := NewWriter(f, source, node)
	w.seq = next
	return w, nil
}

// resume drops an unterminated last line from f and returns the seq after
// the last complete line's (0 for an empty file).
func resume(f *os.File) (uint64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	if size == 0 {
		return 0, nil
	}
	// The last complete line is within the tail (lines are far shorter
	// than MaxLineBytes in practice; read more if it is not).
	for tail := int64(64 << 10); ; tail *= 4 {
		start := max(0, size-tail)
		buf := make([]byte, size-start)
		if _, err := f.ReadAt(buf, start); err != nil && err != io.EOF {
			return 0, err
		}
		end := bytes.LastIndexByte(buf, '\n')
		if end < 0 && start > 0 {
			continue
		}
		lineStart := -1
		if end >= 0 {
			lineStart = bytes.LastIndexByte(buf[:end], '\n')
			if lineStart < 0 && start > 0 {
				continue // the whole tail is one line: read more
			}
		}
		if end+1 < len(buf) { // a cut-short last line
			if err := f.Truncate(start + int64(end+1)); err != nil {
				return 0, err
			}
		}
		if end < 0 {
			return 0, nil
		}
		line := buf[lineStart+1 : end]
		var hdr struct {
			Seq *uint64 `json:"seq"`
		}
		if err := json.Unmarshal(line, &hdr); err != nil || hdr.Seq == nil {
			return 0, fmt.Errorf("last line does not carry a seq: %q", truncate(line, 80))
		}
		return *hdr.Seq + 1, nil
	}
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
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

// WriteDir writes evs as the history of the run directory runDir (ReadDir's
// layout): one file per source, RUN_DIR/history/<src>.jsonl, each holding
// that source's events in evs' order, written by a Writer (which numbers
// seq per source). Existing files are truncated.
func WriteDir(runDir string, evs []Event) error {
	dir := filepath.Join(runDir, HistoryDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	writers := map[string]*Writer{}
	err := func() error {
		for _, e := range evs {
			w := writers[e.Source]
			if w == nil {
				f, err := os.Create(filepath.Join(dir, e.Source+".jsonl"))
				if err != nil {
					return fmt.Errorf("history: %w", err)
				}
				w = NewWriter(f, e.Source, 0)
				writers[e.Source] = w
			}
			if err := w.Write(e); err != nil {
				return fmt.Errorf("history: %s: %w", e.Source, err)
			}
		}
		return nil
	}()
	for _, w := range writers {
		if cerr := w.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("history: %w", cerr)
		}
	}
	return err
}
