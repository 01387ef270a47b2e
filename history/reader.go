package history

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	segjson "github.com/segmentio/encoding/json"
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
// named so results can state it), or a fact about the input a reader of the
// results should know, such as a source's wall clock stepping back.
type Warning struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Message string `json:"message"`
	// ClockStepBack, for a clock warning, is how far the source's wall
	// clock went back at Line, in nanoseconds.
	ClockStepBack int64 `json:"clock_step_back_ns,omitempty"`
}

func (w Warning) String() string { return fmt.Sprintf("%s:%d: %s", w.File, w.Line, w.Message) }

// ErrEmpty is wrapped when a history file holds no events.
var ErrEmpty = errors.New("no events (empty or truncated file)")

// maxClockWarnings bounds the clock step-back warnings listed per file; the
// rest are summed up in one more warning.
const maxClockWarnings = 1

// Decode reads one source's JSON lines from r; name is used in errors. Events
// come back in file order with Index unset. A bad line is a *LineError,
// except an unterminated last line that does not decode, which is skipped
// with a Warning (a crash while writing it).
//
// Beyond what Event.Validate checks, every line must be valid UTF-8 (without
// lone UTF-16 surrogates in \u escapes, which encoding/json would replace
// silently) and its seq must be above the previous line's, so (src, seq) is
// unique. A client op's completion must follow an invoke of its process
// still pending (ErrNoInvoke). A timestamp below the previous line's is not an error: the file
// order is the true order of one source and wall clocks step; it is reported
// as a Warning with the size of the step.
func Decode(r io.Reader, name string) ([]Event, []Warning, error) {
	return decodeFlat(r, name, "", 0)
}

// decodeFlat is Decode that also requires every event's src to be source
// (when not empty), with a capacity hint for the result.
func decodeFlat(r io.Reader, name, source string, hint int) ([]Event, []Warning, error) {
	sk := &flatSink{evs: make([]Event, 0, hint)}
	warns, err := decode(r, name, source, sk)
	if err != nil {
		return nil, warns, err
	}
	return sk.evs, warns, nil
}

// sink receives decoded events: decode fills the slot it is given and
// commits it once the line is good, so an event is written once, where it
// is kept, rather than decoded on the side and copied in.
type sink interface {
	slot() *Event // the place of the next event (reused until commit)
	commit()      // the slot holds a good event
}

// flatSink keeps every event in one slice.
type flatSink struct{ evs []Event }

func (f *flatSink) slot() *Event {
	if len(f.evs) == cap(f.evs) {
		f.evs = slices.Grow(f.evs, 1)
	}
	return &f.evs[:len(f.evs)+1][len(f.evs)]
}

func (f *flatSink) commit() { f.evs = f.evs[:len(f.evs)+1] }

// decode reads the lines of r, checks each, and hands every event to sk in
// file order.
func decode(r io.Reader, name, source string, sk sink) ([]Warning, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		n       int // events added
		prev    Event
		warns   []Warning
		line    int
		steps   int   // clock step-backs seen
		worst   int64 // largest step-back
		intern  string
		scratch = new(eventJSON)
		fast    fastDecoder
		pending = invokes{}
		queued  = invokes{}
	)
	for {
		b, err := readLine(br)
		if len(b) == 0 && err == io.EOF {
			break
		}
		line++
		if err != nil && err != io.EOF {
			return nil, &LineError{File: name, Line: line, Err: err}
		}
		terminated := err == nil
		if terminated {
			b = b[:len(b)-1]
		}
		if len(bytes.TrimSpace(b)) == 0 {
			warns = append(warns, Warning{File: name, Line: line, Message: "blank line skipped"})
			continue
		}
		ev := sk.slot()
		derr := checkText(b)
		if derr == nil && !fast.decode(b, ev, intern) {
			derr = decodeEvent(b, ev, scratch)
		}
		if derr == nil {
			derr = ev.Validate()
		}
		if derr != nil {
			if !terminated && !errors.Is(derr, ErrFutureVersion) && !errors.Is(derr, ErrUnknownKind) {
				warns = append(warns, Warning{File: name, Line: line,
					Message: fmt.Sprintf("unterminated last line skipped (cut short by a crash?): %v", derr)})
				break
			}
			return nil, &LineError{File: name, Line: line, Err: derr}
		}
		if source != "" && ev.Source != source {
			return nil, &LineError{File: name, Line: line,
				Err: fmt.Errorf("src %q in the file of source %q (each source has one file, named after it)", ev.Source, source)}
		}
		// One string per source, not one per event.
		if ev.Source == intern {
			ev.Source = intern
		} else {
			intern = ev.Source
		}
		ev.Kind = internKind(ev.Kind)
		if n > 0 {
			if ev.Seq <= prev.Seq {
				return nil, &LineError{File: name, Line: line,
					Err: fmt.Errorf("seq %d after seq %d: a source's seq must be unique and increasing", ev.Seq, prev.Seq)}
			}
			if back := prev.Time - ev.Time; back > 0 {
				steps++
				worst = max(worst, back)
				if steps <= maxClockWarnings {
					warns = append(warns, Warning{File: name, Line: line, ClockStepBack: back,
						Message: fmt.Sprintf("%s's wall clock stepped back %s (seq %d after seq %d); file order kept",
							ev.Source, time.Duration(back), ev.Seq, prev.Seq)})
				}
			}
		}
		if ev.Kind == KindOp {
			if err := pending.note(ev.Op); err != nil {
				return nil, &LineError{File: name, Line: line, Err: err}
			}
		}
		if ev.Kind == KindQueueOp {
			if err := queued.noteQueue(ev.Queue); err != nil {
				return nil, &LineError{File: name, Line: line, Err: err}
			}
		}
		prev.Seq, prev.Time = ev.Seq, ev.Time
		sk.commit()
		n++
		if !terminated {
			break
		}
	}
	if steps > maxClockWarnings {
		warns = append(warns, Warning{File: name, Line: line, ClockStepBack: worst,
			Message: fmt.Sprintf("%d more wall-clock step-backs in this file (largest of all %s); file order kept",
				steps-maxClockWarnings, time.Duration(worst))})
	}
	if n == 0 {
		return warns, &LineError{File: name, Line: line, Err: ErrEmpty}
	}
	return warns, nil
}

// internKind returns the package's own string for a known kind, so decoded
// events do not each hold a copy.
func internKind(k Kind) Kind {
	for _, c := range Kinds {
		if c == k {
			return c
		}
	}
	return k
}

// checkText rejects a line that is not valid UTF-8 or whose \u escapes hold
// a lone UTF-16 surrogate: encoding/json would turn either into U+FFFD and a
// value would silently differ from what was written.
func checkText(b []byte) error {
	if !utf8.Valid(b) {
		i := 0
		for i < len(b) {
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return fmt.Errorf("not valid UTF-8 (byte %d of the line)", i+1)
	}
	for i := bytes.IndexByte(b, '\\'); i >= 0 && i < len(b); {
		if i+1 >= len(b) {
			return nil
		}
		if b[i+1] != 'u' {
			i = nextBackslash(b, i+2)
			continue
		}
		r, ok := hex4(b, i+2)
		if !ok {
			return nil // malformed escape: the JSON decoder names it
		}
		switch {
		case utf16.IsSurrogate(rune(r)) && r < 0xdc00:
			// A high surrogate must be followed by an escaped low one.
			if lo, ok := hex4(b, i+8); ok && i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' && lo >= 0xdc00 && lo <= 0xdfff {
				i = nextBackslash(b, i+12)
				continue
			}
			return fmt.Errorf("lone UTF-16 surrogate \\u%04x at byte %d of the line", r, i+1)
		case utf16.IsSurrogate(rune(r)):
			return fmt.Errorf("lone UTF-16 surrogate \\u%04x at byte %d of the line", r, i+1)
		}
		i = nextBackslash(b, i+6)
	}
	return nil
}

func nextBackslash(b []byte, from int) int {
	if from >= len(b) {
		return -1
	}
	j := bytes.IndexByte(b[from:], '\\')
	if j < 0 {
		return -1
	}
	return from + j
}

// hex4 parses the four hex digits at b[i:i+4].
func hex4(b []byte, i int) (uint16, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var v uint16
	for _, c := range b[i : i+4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		v = v<<4 | uint16(d)
	}
	return v, true
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
func ReadFile(path string) ([]Event, []Warning, error) { return readPath(path, "") }

// ReadSource is ReadFile for a file of a run directory, whose events must
// all name the file's source (client-0.jsonl holds src "client-0").
func ReadSource(path string) ([]Event, []Warning, error) { return readPath(path, sourceOf(path)) }

// readPath decodes the file at path, whose events must name source when it
// is not empty.
func readPath(path, source string) ([]Event, []Warning, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	hint := 0
	if fi, err := f.Stat(); err == nil {
		hint = int(min(fi.Size()/160, 1<<24)) // typical lines are 150-250 bytes
	}
	return decodeFlat(f, path, source, hint)
}

// sourceOf is the source a run-directory file holds: its name without .jsonl.
func sourceOf(path string) string { return strings.TrimSuffix(filepath.Base(path), ".jsonl") }

// History is a merged run history: every event of every source, with
// Event.Index equal to its position. Each source's events keep their file
// order; events of different sources are ordered by Time (see Merge).
type History struct {
	Events   []Event   `json:"-"`
	Files    []string  `json:"files"`
	Warnings []Warning `json:"warnings,omitempty"`
}

// ReadDir reads every *.jsonl file in RUN_DIR/history and merges them. Each
// file holds one source, named after it (client-0.jsonl holds src
// "client-0"), so a source cannot be split across files.
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
	h, err := readMerged(files)
	if err != nil {
		return nil, err
	}
	h.Files = files
	return h, nil
}

// Merge orders the events of several sources into one History. Within a
// source the argument order is the true order and is kept even where its
// timestamps step back (a wall clock is not monotonic); across sources the
// next events are ordered by Time, then Source, then the source's position
// in the argument list, which is deterministic. Events are copied; Index is
// set. It is a k-way merge with a small heap: O(n log k) for k sources.
func Merge(sources ...[]Event) *History {
	n := 0
	for _, s := range sources {
		n += len(s)
	}
	out := make([]Event, 0, n)
	interleave(len(sources), func(s int) int { return len(sources[s]) },
		func(s, i int) (int64, string) { return sources[s][i].Time, sources[s][i].Source },
		func(s, i int) {
			e := sources[s][i]
			e.Index = len(out)
			out = append(out, e)
		})
	return &History{Events: out}
}

// SourcePos names one event of a merge's input: the source's position in
// the argument list and the event's position in that source.
type SourcePos struct{ Source, Pos int32 }

// MergeOrder returns the order in which Merge takes the events of sources
// known only by their timestamps (file order) and names, one name per
// source: element i is the event Merge numbers i. It lets a reader that
// does not hold whole events (reports streams them) number them exactly as
// the checkers see them.
func MergeOrder(times [][]int64, names []string) []SourcePos {
	n := 0
	for _, t := range times {
		n += len(t)
	}
	out := make([]SourcePos, 0, n)
	interleave(len(times), func(s int) int { return len(times[s]) },
		func(s, i int) (int64, string) { return times[s][i], names[s] },
		func(s, i int) { out = append(out, SourcePos{int32(s), int32(i)}) })
	return out
}

// interleave is the k-way merge behind Merge and MergeOrder: it emits every
// event of k sources, each source in its own order, taking at each step the
// least next event by the merge order (sourceHeap).
func interleave(k int, length func(s int) int, key func(s, i int) (int64, string), emit func(s, i int)) {
	pos := make([]int, k)
	q := newSourceHeap(k)
	for s := 0; s < k; s++ {
		if length(s) > 0 {
			t, name := key(s, 0)
			q.push(s, t, name)
		}
	}
	q.init()
	for q.len() > 0 {
		s := q.top()
		emit(s, pos[s])
		pos[s]++
		if pos[s] == length(s) {
			q.pop()
		} else {
			q.fix(key(s, pos[s]))
		}
	}
}

// sourceHeap holds the sources of a merge that still have events, least
// first by the key of each one's next event: (time, source name, source
// number), the merge order of every reader. ReadDir's streaming merge and
// interleave share it, so the order is written once.
type sourceHeap struct {
	t    []int64  // time of each source's next event
	name []string // source name of each source's next event
	h    []int
}

func newSourceHeap(k int) *sourceHeap {
	return &sourceHeap{t: make([]int64, k), name: make([]string, k), h: make([]int, 0, k)}
}

func (q *sourceHeap) less(a, b int) bool {
	if q.t[a] != q.t[b] {
		return q.t[a] < q.t[b]
	}
	if q.name[a] != q.name[b] {
		return q.name[a] < q.name[b]
	}
	return a < b
}

func (q *sourceHeap) down(i int) {
	h := q.h
	for {
		l, m := 2*i+1, i
		if l < len(h) && q.less(h[l], h[m]) {
			m = l
		}
		if r := l + 1; r < len(h) && q.less(h[r], h[m]) {
			m = r
		}
		if m == i {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// push adds source s with its next event's key; init orders what was pushed.
func (q *sourceHeap) push(s int, t int64, name string) {
	q.t[s], q.name[s] = t, name
	q.h = append(q.h, s)
}

func (q *sourceHeap) init() {
	for i := len(q.h)/2 - 1; i >= 0; i-- {
		q.down(i)
	}
}

func (q *sourceHeap) len() int { return len(q.h) }

// top is the source whose next event comes first.
func (q *sourceHeap) top() int { return q.h[0] }

// fix gives the top source the key of its new next event.
func (q *sourceHeap) fix(t int64, name string) {
	s := q.h[0]
	q.t[s], q.name[s] = t, name
	q.down(0)
}

// pop removes the top source, which has no events left.
func (q *sourceHeap) pop() {
	last := len(q.h) - 1
	q.h[0] = q.h[last]
	q.h = q.h[:last]
	if len(q.h) > 0 {
		q.down(0)
	}
}

// New wraps events that are already in order (tests, generators) into a
// History, setting Index.
func New(evs []Event) *History {
	for i := range evs {
		evs[i].Index = i
	}
	return &History{Events: evs}
}

// unmarshal is the JSON decoder of every line: segmentio/encoding, which
// decodes the same JSON into the same values as encoding/json 2 to 5 times
// faster with less memory; BenchmarkDecoders compares it with encoding/json,
// goccy/go-json and bytedance/sonic on one corpus. It would replace invalid
// UTF-8 silently like encoding/json, so checkText runs first.
var unmarshal = segjson.Unmarshal

// eventJSON is Event as decoded: Event's own fields (eventFields), with
// the client op in its wire form in place of Event's, so the line decodes
// in one pass with no json.Unmarshaler in the way (which would make any
// decoder scan an op twice).
type eventJSON struct {
	eventFields
	Op *clientOpJSON `json:"op"` // hides eventFields.Op
}

// eventFields is Event as encoding/json sees it.
type eventFields Event

// decodeEvent decodes one line into ev, using w (reset here) as scratch.
func decodeEvent(b []byte, ev *Event, w *eventJSON) error {
	*w = eventJSON{}
	if err := unmarshal(b, w); err != nil {
		return err
	}
	*ev = Event(w.eventFields)
	if w.Op != nil {
		ev.Op = new(ClientOp)
		return w.Op.to(ev.Op)
	}
	return nil
}
