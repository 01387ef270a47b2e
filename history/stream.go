package history

// This file is ReadDir's decoding and merging: every file is decoded by its
// own goroutine into small chunks, and one k-way merge takes the chunks as
// they come, so decoding and merging overlap and a run's events are held
// once (in the merged history) rather than twice (decoded per file, then
// merged) at the peak. Chunks go back to their decoder once merged.

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/zkchaos/zkchaos/internal/hugepage"
)

// streamChunkLen is the number of events a decoder hands over at a time;
// streamDepth chunks per file can wait for the merge.
const (
	streamChunkLen = 256
	streamDepth    = 8
)

// stream is one file's decoder as the merge sees it.
type stream struct {
	full  chan []Event // decoded chunks, closed when the file is done
	free  chan []Event // merged chunks, for reuse
	lines chan int     // the file's line count, sent once before decoding
	warns []Warning    // set before full is closed
	err   error        // set before full is closed
}

// chunkSink hands a stream's events over in chunks.
type chunkSink struct {
	st  *stream
	buf []Event
}

func (c *chunkSink) slot() *Event {
	if c.buf == nil {
		select {
		case c.buf = <-c.st.free:
			c.buf = c.buf[:0]
		default:
			c.buf = make([]Event, 0, streamChunkLen)
		}
	}
	return &c.buf[:len(c.buf)+1][len(c.buf)]
}

func (c *chunkSink) commit() {
	c.buf = c.buf[:len(c.buf)+1]
	if len(c.buf) == cap(c.buf) {
		c.flush()
	}
}

func (c *chunkSink) flush() {
	if len(c.buf) > 0 {
		c.st.full <- c.buf
	}
	c.buf = nil
}

// countLines counts the lines of f (an unterminated last one included) and
// rewinds it: the merged history is allocated once, at its final size.
func countLines(f *os.File) (int, error) {
	buf := make([]byte, 256<<10)
	n, last := 0, byte('\n')
	for {
		k, err := f.Read(buf)
		if k > 0 {
			n += bytes.Count(buf[:k], []byte{'\n'})
			last = buf[k-1]
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if last != '\n' {
		n++
	}
	_, err := f.Seek(0, io.SeekStart)
	return n, err
}

// decodeFile runs one file's decoder: it sends the line count, then the
// events in chunks, and closes full.
func (st *stream) decodeFile(path string) {
	defer close(st.full)
	fh, err := os.Open(path)
	if err != nil {
		st.lines <- 0
		st.err = fmt.Errorf("history: %w", err)
		return
	}
	defer fh.Close()
	n, err := countLines(fh)
	st.lines <- n
	if err != nil {
		st.err = &LineError{File: path, Err: err}
		return
	}
	sk := &chunkSink{st: st}
	st.warns, st.err = decode(fh, path, sourceOf(path), sk)
	if st.err == nil {
		sk.flush()
	}
}

// readMerged decodes files (sorted) and merges them as Merge does. The
// first error in file order is returned, whatever the order the decoders
// met theirs, so the message does not depend on scheduling: on an error
// the merge stops and every decoder still runs to its own end.
func readMerged(files []string) (*History, error) {
	streams := make([]*stream, len(files))
	for i, f := range files {
		st := &stream{full: make(chan []Event, streamDepth), free: make(chan []Event, streamDepth+1), lines: make(chan int, 1)}
		streams[i] = st
		go st.decodeFile(f)
	}
	total := 0
	for _, st := range streams {
		total += <-st.lines
	}
	out := make([]Event, 0, total)
	hugepage.Advise(out)

	cur := make([][]Event, len(streams)) // each source's chunk being merged
	pos := make([]int, len(streams))     // position in it
	failed := false
	// next makes sure source s has an event at pos[s], reporting false
	// when the source is done (or failed, which stops the merge).
	next := func(s int) bool {
		if pos[s] < len(cur[s]) {
			return true
		}
		if cur[s] != nil {
			select {
			case streams[s].free <- cur[s]:
			default:
			}
			cur[s] = nil
		}
		c, ok := <-streams[s].full
		if !ok {
			if streams[s].err != nil {
				failed = true
			}
			return false
		}
		cur[s], pos[s] = c, 0
		return true
	}
	q := newSourceHeap(len(streams))
	key := func(s int) (int64, string) { e := &cur[s][pos[s]]; return e.Time, e.Source }
	for s := range streams {
		if next(s) {
			t, name := key(s)
			q.push(s, t, name)
		}
	}
	q.init()
	for q.len() > 0 && !failed {
		s := q.top()
		out = append(out, cur[s][pos[s]])
		out[len(out)-1].Index = len(out) - 1
		pos[s]++
		if next(s) {
			q.fix(key(s))
		} else {
			q.pop()
		}
	}
	// Let every decoder finish (an error in an earlier file may come later
	// than the one that stopped the merge), then report in file order.
	var warnings []Warning
	for _, st := range streams {
		for range st.full {
		}
		warnings = append(warnings, st.warns...)
		if st.err != nil {
			return nil, st.err
		}
	}
	return &History{Events: out, Warnings: warnings}, nil
}
