package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
)

// MaxLineBytes bounds one history line; a longer line is reported as bad
// input rather than read into memory without limit.
const MaxLineBytes = 16 << 20

// HistoryDir is the run-directory folder holding per-source JSONL files.
const HistoryDir = "history"

// LineError reports a bad record with the file and 1-based line it is on.
type LineError struct {
	File string
	Line int
	Err  error
}

func (e *LineError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// Warning is a problem the reader could safely step over (the skipped line is
// named so results can state it).
type Warning struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Message string `json:"message"`
}

func (w Warning) String() string { return fmt.Sprintf("%s:%d: %s", w.File, w.Line, w.Message) }

// ErrEmpty is wrapped when a history file holds no events.
var ErrEmpty = errors.New("no events (empty or truncated file)")

// Decode reads one source's JSON lines from r; name is used in errors. Events
// come back in file order with Index unset. A bad line is a *LineError,
// except an unterminated last line that does not decode, which is skipped
// with a Warning (a crash while writing it).
func Decode(r io.Reader, name string) ([]Event, []Warning, error) {
	return decode(r, name, 0)
}

// decode is Decode with a capacity hint for the result.
func decode(r io.Reader, name string, hint int) ([]Event, []Warning, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		evs   = make([]Event, 0, hint)
		warns []Warning
		line  int
	)
	for {
		b, err := readLine(br)
		if len(b) == 0 && err == io.EOF {
			break
		}
		line++
		if err != nil && err != io.EOF {
			return nil, nil, &LineError{File: name, Line: line, Err: err}
		}
		terminated := err == nil
		if terminated {
			b = b[:len(b)-1]
		}
		if len(bytes.TrimSpace(b)) == 0 {
			warns = append(warns, Warning{File: name, Line: line, Message: "blank line skipped"})
			continue
		}
		var ev Event
		derr := json.Unmarshal(b, &ev)
		if derr == nil {
			derr = ev.Validate()
		}
		if derr != nil {
			if !terminated && !errors.Is(derr, ErrFutureVersion) && !errors.Is(derr, ErrUnknownKind) {
				warns = append(warns, Warning{File: name, Line: line,
					Message: fmt.Sprintf("unterminated last line skipped (cut short by a crash?): %v", derr)})
				break
			}
			return nil, nil, &LineError{File: name, Line: line, Err: derr}
		}
		evs = append(evs, ev)
		if !terminated {
			break
		}
	}
	if len(evs) == 0 {
		return nil, warns, &LineError{File: name, Line: line, Err: ErrEmpty}
	}
	return evs, warns, nil
}

// readLine returns one line including its '\n', or the unterminated rest
// with io.EOF; lines longer than MaxLineBytes are an error. The returned
// slice is valid only until the next call (no copy for lines that fit in
// the buffer, which is nearly all of them).
func readLine(br *bufio.Reader) ([]byte, error) {
	chunk, err := br.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return chunk, err
	}
	buf := append([]byte(nil), chunk...)
	for {
		chunk, err = br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > MaxLineBytes {
			return buf, fmt.Errorf("line longer than %d bytes", MaxLineBytes)
		}
		if err != bufio.ErrBufferFull {
			return buf, err
		}
	}
}

// ReadFile decodes one history file.
func ReadFile(path string) ([]Event, []Warning, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	hint := 0
	if fi, err := f.Stat(); err == nil {
		hint = int(min(fi.Size()/160, 1<<24)) // typical lines are 150-250 bytes
	}
	return decode(f, path, hint)
}

// History is a merged run history: every event of every source, ordered by
// (Time, Source, file, line), with Event.Index equal to its position.
type History struct {
	Events   []Event   `json:"-"`
	Files    []string  `json:"files"`
	Warnings []Warning `json:"warnings,omitempty"`
}

// ReadDir reads every *.jsonl file in RUN_DIR/history and merges them.
func ReadDir(runDir string) (*History, error) {
	dir := filepath.Join(runDir, HistoryDir)
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("history: list %s: %w", dir, err)
	}
	if len(files) == 0 {
		if _, serr := os.Stat(dir); serr != nil {
			return nil, fmt.Errorf("history: %w", serr)
		}
		return nil, fmt.Errorf("history: no *.jsonl files in %s", dir)
	}
	sort.Strings(files)
	// Decode files in parallel (one goroutine per file, bounded by the
	// CPUs); report the first error in file order, so the message does not
	// depend on scheduling.
	type decoded struct {
		evs   []Event
		warns []Warning
		err   error
	}
	out := make([]decoded, len(files))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			evs, w, err := ReadFile(f)
			out[i] = decoded{evs, w, err}
		}()
	}
	wg.Wait()
	var (
		sources  [][]Event
		warnings []Warning
	)
	for _, d := range out {
		warnings = append(warnings, d.warns...)
		if d.err != nil {
			return nil, d.err
		}
		sources = append(sources, d.evs)
	}
	h := Merge(sources...)
	h.Files = files
	h.Warnings = warnings
	return h, nil
}

// Merge orders the events of several sources into one History. The order is
// by Time, then Source, then the source's position in the argument list, then
// the event's position in its source: stable and deterministic, and it keeps a
// source's own order for equal timestamps. Events are copied; Index is set.
//
// Each source is nearly always already in order (its Writer stamps times as
// it goes), so Merge stably sorts only a source that is not, then merges the
// sources with a small heap: O(n log k) for k sources.
func Merge(sources ...[]Event) *History {
	n := 0
	srcs := make([][]Event, len(sources))
	for i, s := range sources {
		n += len(s)
		srcs[i] = s
		if !sort.SliceIsSorted(s, func(a, b int) bool { return timeSourceLess(&s[a], &s[b]) }) {
			c := append([]Event(nil), s...)
			sort.SliceStable(c, func(a, b int) bool { return timeSourceLess(&c[a], &c[b]) })
			srcs[i] = c
		}
	}
	pos := make([]int, len(srcs))
	less := func(a, b int) bool { // source a's next event before source b's?
		ea, eb := &srcs[a][pos[a]], &srcs[b][pos[b]]
		if ea.Time != eb.Time {
			return ea.Time < eb.Time
		}
		if ea.Source != eb.Source {
			return ea.Source < eb.Source
		}
		return a < b
	}
	heap := make([]int, 0, len(srcs))
	down := func(i int) {
		for {
			l, m := 2*i+1, i
			if l < len(heap) && less(heap[l], heap[m]) {
				m = l
			}
			if r := l + 1; r < len(heap) && less(heap[r], heap[m]) {
				m = r
			}
			if m == i {
				return
			}
			heap[i], heap[m] = heap[m], heap[i]
			i = m
		}
	}
	for i := range srcs {
		if len(srcs[i]) > 0 {
			heap = append(heap, i)
		}
	}
	for i := len(heap)/2 - 1; i >= 0; i-- {
		down(i)
	}
	out := make([]Event, 0, n)
	for len(heap) > 0 {
		si := heap[0]
		e := srcs[si][pos[si]]
		e.Index = len(out)
		out = append(out, e)
		pos[si]++
		if pos[si] == len(srcs[si]) {
			heap[0] = heap[len(heap)-1]
			heap = heap[:len(heap)-1]
		}
		if len(heap) > 0 {
			down(0)
		}
	}
	return &History{Events: out}
}

func timeSourceLess(a, b *Event) bool {
	if a.Time != b.Time {
		return a.Time < b.Time
	}
	return a.Source < b.Source
}

// New wraps events that are already in order (tests, generators) into a
// History, setting Index.
func New(evs []Event) *History {
	for i := range evs {
		evs[i].Index = i
	}
	return &History{Events: evs}
}
