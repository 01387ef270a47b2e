package reports

// This file owns reading a run's history for a report without holding it:
// files are decoded a few at a time (history.Decode, so errors and skipped
// lines are exactly the checkers'), fed to the timeline builder and
// dropped. What stays per event is an 8-byte merge key, an 8-byte time and
// an 8-byte line offset, enough to number events exactly as history.Merge
// does (history.MergeOrder) and to
// re-read the few events that results.json names (by merged index) from
// their lines afterwards. Memory is then bounded by the largest files, not
// by the history.

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

	"github.com/zkchaos/zkchaos/history"
)

// eventLookup gives the events a report shows, by merged index.
type eventLookup interface {
	count() int
	// event returns event i, or nil when i is outside the history or was
	// not loaded.
	event(i int) *history.Event
}

// histLookup serves events from a merged history held in memory.
type histLookup struct{ h *history.History }

func (l histLookup) count() int {
	if l.h == nil {
		return 0
	}
	return len(l.h.Events)
}

func (l histLookup) event(i int) *history.Event {
	if l.h == nil || i < 0 || i >= len(l.h.Events) {
		return nil
	}
	return &l.h.Events[i]
}

// scanned is what a streamed read of a history leaves.
type scanned struct {
	files    []string
	warnings []history.Warning
	n        int
	events   map[int]*history.Event // the wanted events, by merged index
	bugs     []string               // bug switches named by node_start events
}

func (s *scanned) count() int                 { return s.n }
func (s *scanned) event(i int) *history.Event { return s.events[i] }

// mergeKey locates an event: its file and its position in the file.
type mergeKey struct {
	file int32
	pos  int32
}

// fileScan is one decoded history file.
type fileScan struct {
	evs   []history.Event
	warns []history.Warning
	lines []int64 // byte offset of each decoded event's line, file order
	err   error
}

// decodeFile decodes one file (history.ReadFile, which sizes its result
// from the file size) and notes where each event's line starts, skipping
// blank lines as the decoder does. The offsets come from a second,
// streaming pass over the file (served from the page cache), so the file's
// bytes are never held whole.
func decodeFile(path string) fileScan {
	evs, warns, err := history.ReadSource(path)
	if err != nil {
		return fileScan{warns: warns, err: err}
	}
	lines, err := lineOffsets(path, len(evs))
	if err != nil {
		return fileScan{err: err}
	}
	return fileScan{evs: evs, warns: warns, lines: lines}
}

// lineOffsets returns the byte offsets of the first n non-blank lines.
func lineOffsets(path string, n int) ([]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	lines := make([]int64, 0, n)
	var off int64
	blank := true // the current line so far is blank
	start := int64(0)
	for len(lines) < n {
		chunk, err := br.ReadSlice('\n')
		if len(bytes.TrimSpace(chunk)) > 0 {
			blank = false
		}
		off += int64(len(chunk))
		if err == bufio.ErrBufferFull {
			continue // a long line: keep reading it
		}
		if !blank {
			lines = append(lines, start)
		}
		start, blank = off, true
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("history: %s: %w", path, err)
		}
	}
	if len(lines) != n {
		return nil, fmt.Errorf("history: %s: %d events but %d lines (did the file change?)", path, n, len(lines))
	}
	return lines, nil
}

// scanHistory reads RUN_DIR/history into b and loads the events whose
// merged indices are in want. Unlike history.ReadDir, an empty file (a run
// that stopped early) is skipped with a warning; any other bad record is an
// error naming file and line, as there.
func scanHistory(runDir string, b *builder, want []int) (*scanned, error) {
	dir := filepath.Join(runDir, history.HistoryDir)
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("history: list %s: %w", dir, err)
	}
	sort.Strings(files)
	sc := &scanned{files: files, events: map[int]*history.Event{}}

	// Decode ahead in parallel, at most GOMAXPROCS files in memory; feed
	// the builder in file order.
	slots := make([]chan fileScan, len(files))
	for i := range slots {
		slots[i] = make(chan fileScan, 1)
	}
	// cpu bounds decoders running; held bounds files decoded and not yet
	// aggregated (one more than the decoders, so decoding goes on while
	// the builder works through a file).
	cpu := make(chan struct{}, runtime.GOMAXPROCS(0))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0)+1)
	go func() {
		for i, f := range files {
			sem <- struct{}{}
			cpu <- struct{}{}
			go func() {
				fs := decodeFile(f)
				<-cpu
				slots[i] <- fs
			}()
		}
	}()

	var (
		keys     []mergeKey
		lines    = make([][]int64, len(files))
		times    = make([][]int64, len(files))
		names    = make([]string, len(files))
		firstErr error
		bugSeen  = map[string]bool{}
	)
	for i := range files {
		fs := <-slots[i]
		if firstErr != nil {
			<-sem
			continue // drain, so the decoders finish
		}
		sc.warnings = append(sc.warnings, fs.warns...)
		if fs.err != nil {
			if errors.Is(fs.err, history.ErrEmpty) {
				sc.warnings = append(sc.warnings, history.Warning{File: files[i], Message: "empty history file skipped (the run stopped early?)"})
			} else {
				firstErr = fs.err
			}
			<-sem
			continue
		}
		evs := fs.evs
		times[i] = make([]int64, len(evs))
		for j := range evs {
			times[i][j] = evs[j].Time
		}
		names[i] = evs[0].Source
		lines[i] = fs.lines
		for j := range evs {
			e := &evs[j]
			keys = append(keys, mergeKey{file: int32(i), pos: int32(j)})
			if e.Kind == history.KindNodeStart && e.Process != nil {
				for _, bug := range e.Process.Bugs {
					if !bugSeen[bug] {
						bugSeen[bug] = true
						sc.bugs = append(sc.bugs, bug)
					}
				}
			}
			b.add(e)
		}
		<-sem
	}
	if firstErr != nil {
		return nil, fmt.Errorf("history: %w", firstErr)
	}
	sort.Strings(sc.bugs)

	// Number events as history.Merge does (each file is one source, in
	// file order).
	byFile := make([][]mergeKey, len(files))
	for _, k := range keys {
		byFile[k.file] = append(byFile[k.file], k)
	}
	for i, sp := range history.MergeOrder(times, names) {
		keys[i] = byFile[sp.Source][sp.Pos]
	}
	sc.n = len(keys)

	// Re-read the wanted events from their lines, file by file.
	type at struct {
		index int
		off   int64
	}
	perFile := map[int32][]at{}
	for _, g := range want {
		if g < 0 || g >= len(keys) {
			continue
		}
		k := keys[g]
		perFile[k.file] = append(perFile[k.file], at{g, lines[k.file][k.pos]})
	}
	for fi, ats := range perFile {
		if err := readEvents(files[fi], ats, sc.events, func(a at) (int, int64) { return a.index, a.off }); err != nil {
			return nil, err
		}
	}
	return sc, nil
}

// readEvents decodes the lines at the given offsets of path into out.
func readEvents[A any](path string, ats []A, out map[int]*history.Event, get func(A) (int, int64)) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	for _, a := range ats {
		idx, off := get(a)
		if _, ok := out[idx]; ok {
			continue
		}
		line, err := bufio.NewReader(io.NewSectionReader(f, off, history.MaxLineBytes+1)).ReadBytes('\n')
		if err != nil && err != io.EOF {
			return fmt.Errorf("history: %s: re-read: %w", path, err)
		}
		var ev history.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return fmt.Errorf("history: %s: re-read at byte %d: %w (did the file change?)", path, off, err)
		}
		ev.Index = idx
		out[idx] = &ev
	}
	return nil
}
