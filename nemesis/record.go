package nemesis

import (
	"fmt"
	"sync/atomic"

	"github.com/zkchaos/zkchaos/history"
)

// Recorder writes fault_start and fault_stop events, so every fault the
// nemesis applies is in the run's history and the checkers and report can
// shade its window. A nil Recorder records nothing.
type Recorder struct {
	w    *history.Writer
	next atomic.Int64
}

// NewRecorder records into w (typically RUN_DIR/history/nemesis.jsonl).
func NewRecorder(w *history.Writer) *Recorder { return &Recorder{w: w} }

// Start records that fault name began on targets and returns its id for Stop.
func (r *Recorder) Start(name string, targets []string, detail string) string {
	if r == nil {
		return ""
	}
	id := fmt.Sprintf("f%d", r.next.Add(1))
	r.w.Write(history.Event{Kind: history.KindFaultStart, Fault: &history.Fault{ID: id, Name: name, Targets: targets, Detail: detail}})
	return id
}

// Stop records that fault id ended; err, if not nil, says the fault or its
// undoing failed.
func (r *Recorder) Stop(id, name string, targets []string, err error) {
	if r == nil {
		return
	}
	f := &history.Fault{ID: id, Name: name, Targets: targets}
	if err != nil {
		f.Error = err.Error()
	}
	r.w.Write(history.Event{Kind: history.KindFaultStop, Fault: f})
}
