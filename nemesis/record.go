package nemesis

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/zkchaos/zkchaos/history"
)

// Recorder writes fault_start and fault_stop events, so every fault the
// nemesis applies is in the run's history and the checkers and report can
// shade its window. A nil Recorder records nothing.
type Recorder struct {
	next atomic.Int64

	mu   sync.Mutex
	w    *history.Writer
	path string // with NewFileRecorder: created on the first fault
	// recent holds the last faults started, so whoever injected one can
	// say what it hit (`chaos fault` answers with the broker it paused).
	recent []recentStart
}

type recentStart struct {
	n int64
	f history.Fault
}

// keepRecent bounds recent: a caller asks right after its own injection,
// and no fault starts more than a few primitives.
const keepRecent = 16

// NewRecorder records into w.
func NewRecorder(w *history.Writer) *Recorder { return &Recorder{w: w} }

// NewFileRecorder records into the history file at path, creating it only
// when the first fault happens: a history file with no events is bad input
// to the reader, and a run without faults has nothing to say here.
func NewFileRecorder(path string) *Recorder { return &Recorder{path: path} }

// Close closes the file of a NewFileRecorder, if it was created.
func (r *Recorder) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w == nil {
		return nil
	}
	return r.w.Close()
}

func (r *Recorder) write(ev history.Event) {
	r.mu.Lock()
	if r.w == nil && r.path != "" {
		w, err := history.Create(r.path, "nemesis", 0)
		if err != nil {
			r.mu.Unlock()
			return // the fault still happens; the run's own error paths report I/O trouble
		}
		r.w = w
	}
	w := r.w
	r.mu.Unlock()
	if w != nil {
		w.Write(ev)
		w.Sync()
	}
}

// Start records that fault name began on targets and returns its id for Stop.
func (r *Recorder) Start(name string, targets []string, detail string) string {
	return r.StartFault(history.Fault{Name: name, Targets: targets, Detail: detail})
}

// StartFault records the start of f (its ID is given here) and returns the
// id for StopFault: the general form of Start, for a fault whose event
// says more (the failpoint window it armed).
func (r *Recorder) StartFault(f history.Fault) string {
	if r == nil {
		return ""
	}
	n := r.next.Add(1)
	f.ID = fmt.Sprintf("f%d", n)
	r.mu.Lock()
	r.recent = append(r.recent, recentStart{n, f})
	if len(r.recent) > keepRecent {
		r.recent = r.recent[len(r.recent)-keepRecent:]
	}
	r.mu.Unlock()
	r.write(history.Event{Kind: history.KindFaultStart, Fault: &f})
	return f.ID
}

// Mark is a point in the sequence of started faults, for StartedSince.
func (r *Recorder) Mark() int64 {
	if r == nil {
		return 0
	}
	return r.next.Load()
}

// StartedSince returns the faults started after mark, oldest first (at
// most the last 16).
func (r *Recorder) StartedSince(mark int64) []history.Fault {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []history.Fault
	for _, s := range r.recent {
		if s.n > mark {
			out = append(out, s.f)
		}
	}
	return out
}

// Truncated records that a fault cut node's log of a partition while the
// node was down (crash-lose-unflushed): a truncation event of that node,
// from the nemesis, since the node's own log cannot show it.
func (r *Recorder) Truncated(node int32, t history.Truncation) {
	if r == nil {
		return
	}
	r.write(history.Event{Kind: history.KindTruncation, Node: node, Truncation: &t})
}

// Stop records that fault id ended; err, if not nil, says the fault or its
// undoing failed.
func (r *Recorder) Stop(id, name string, targets []string, err error) {
	r.StopDetail(id, name, targets, "", err)
}

// StopDetail records a fault's end with what it came to.
func (r *Recorder) StopDetail(id, name string, targets []string, detail string, err error) {
	r.StopFault(history.Fault{ID: id, Name: name, Targets: targets, Detail: detail}, err)
}

// StopFault records the end of f, started by StartFault; err, if not nil,
// says the fault or its undoing failed.
func (r *Recorder) StopFault(f history.Fault, err error) {
	if r == nil {
		return
	}
	if err != nil {
		f.Error = err.Error()
	}
	r.write(history.Event{Kind: history.KindFaultStop, Fault: &f})
}
