package harness

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/zkchaos/zkchaos/history"
)

// nodeLogs follows the nodes' own event logs for the nemesis's questions
// (was a failpoint reached, is the controller retrying BADVERSION) while a
// run goes on. The failpoint fault polls every 100 ms; decoding a whole log
// each time would cost CPU in proportion to the run's length, on the same
// two cores the cluster runs on. Each log is read once, from where the last
// read stopped, and only the kinds its owner's questions need are kept.
type nodeLogs struct {
	// keep says which event kinds to keep; set before the first read.
	keep  func(history.Kind) bool
	mu    sync.Mutex
	tails map[int]*nodeTail
}

// nodeTail is how far one node's log has been read, and what was kept.
type nodeTail struct {
	off  int64 // byte offset after the last complete line read
	kept []history.Event
}

// events returns node's kept events in file order, reading what the node
// has written since the last call from the log at path. A last line still
// being written is left for the next call. The slice must not be changed.
func (l *nodeLogs) events(node int, path string) ([]history.Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tails == nil {
		l.tails = map[int]*nodeTail{}
	}
	t := l.tails[node]
	if t == nil {
		t = &nodeTail{}
		l.tails[node] = t
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() < t.off {
		// The log is shorter than what was read: not the file the tail
		// began on (a restart only drops an unterminated last line, which
		// was never read). Start again.
		*t = nodeTail{}
	}
	if fi.Size() == t.off {
		return t.kept, nil
	}
	buf := make([]byte, fi.Size()-t.off)
	if _, err := fh.ReadAt(buf, t.off); err != nil && err != io.EOF {
		return nil, err
	}
	end := bytes.LastIndexByte(buf, '\n')
	if end < 0 {
		return t.kept, nil
	}
	evs, _, err := history.Decode(bytes.NewReader(buf[:end+1]), path)
	if err != nil {
		return nil, fmt.Errorf("from byte %d: %w", t.off, err)
	}
	for _, e := range evs {
		if l.keep(e.Kind) {
			t.kept = append(t.kept, e)
		}
	}
	t.off += int64(end + 1)
	return t.kept, nil
}
