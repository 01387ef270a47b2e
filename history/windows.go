package history

// This file holds the pieces of history logic that several readers need
// and must agree on: how fault events pair into windows, how client invokes pair with their completions,
// and how partitions are ordered. Each is written once, here.

import (
	"cmp"
	"slices"
)

// Compare orders partitions by topic, then partition number.
func (tp TopicPartition) Compare(o TopicPartition) int {
	return cmp.Or(cmp.Compare(tp.Topic, o.Topic), cmp.Compare(tp.Partition, o.Partition))
}

// Fault is a nemesis fault starting or stopping. ID pairs a stop with its
// start; Targets name nodes ("n1"), ZooKeeper servers ("zk2") or links.
type Fault struct {
	_ struct{}

	ID      string   `json:"id"`
	Name    string   `json:"name"` // pause, kill, partition-halves, slow-link, ...
	Targets []string `json:"targets,omitempty"`
	Detail  string   `json:"detail,omitempty"`
	Error   string   `json:"error,omitempty"`
	// Failpoint names the node-program failpoint when a node reports that it
	// reached one (Name "failpoint", src the node): fault_start when its
	// action begins, fault_stop when the node goes on. Written by the node
	// program when it reaches a failpoint.
	Failpoint string `json:"failpoint,omitempty"`
}

// FaultWindow is the interval of one fault, from its fault_start to what
// ended it.
type FaultWindow struct {
	// Start is the fault_start event, copied: a window must not pin the
	// events of a whole file.
	Start Event
	End   int64 // when it ended; the last event's time when Open
	// EndIndex is the index of the event that ended it (its fault_stop, a
	// second start of the same fault, the node's restart or stop, the end
	// of the heal phase), -1 when Open.
	EndIndex int
	Stopped  bool // ended by its own fault_stop
	Open     bool // nothing ended it before the history did
}

// FaultWindows pairs fault_start events with what ends them. Faults are
// keyed by (Source, Fault.ID): nodes report their own failpoints as faults.
// A fault_stop ends its fault; a second fault_start of an open fault ends
// the first. Events of one source must come in that source's order;
// sources may come one after another (file by file) rather than merged.
type FaultWindows struct {
	// ProcessEnds makes a node's start or stop end the faults that node
	// reported: the process that was held at a failpoint is gone.
	ProcessEnds bool
	// HealEnds makes the end of the harness's heal phase end every fault
	// still open: heal undoes everything, whether or not the nemesis
	// recorded each stop.
	HealEnds bool

	open map[faultKey]Event
	// Windows are the faults ended so far, in the order they ended; Finish
	// adds the open ones.
	Windows []FaultWindow
	// Orphans are the indices of fault_stop events without an open start.
	Orphans []int
	last    int64
}

type faultKey struct{ src, id string }

// Add feeds one event.
func (w *FaultWindows) Add(e *Event) {
	if w.open == nil {
		w.open = map[faultKey]Event{}
	}
	w.last = max(w.last, e.Time)
	switch e.Kind {
	case KindFaultStart:
		k := faultKey{e.Source, e.Fault.ID}
		if prev, ok := w.open[k]; ok {
			w.end(k, prev, e, false)
		}
		w.open[k] = *e
	case KindFaultStop:
		k := faultKey{e.Source, e.Fault.ID}
		if st, ok := w.open[k]; ok {
			w.end(k, st, e, true)
		} else {
			w.Orphans = append(w.Orphans, e.Index)
		}
	case KindNodeStart, KindNodeStop:
		if w.ProcessEnds {
			w.endAll(e, func(k faultKey) bool { return k.src == e.Source })
		}
	case KindPhase:
		if w.HealEnds && e.Phase != nil && e.Phase.Name == PhaseHeal && e.Phase.Mark == PhaseEnd {
			w.endAll(e, func(faultKey) bool { return true })
		}
	}
}

func (w *FaultWindows) end(k faultKey, start Event, by *Event, stopped bool) {
	w.Windows = append(w.Windows, FaultWindow{Start: start, End: by.Time, EndIndex: by.Index, Stopped: stopped})
	delete(w.open, k)
}

// endAll ends the open faults that match, in start order so the result
// does not depend on map order.
func (w *FaultWindows) endAll(by *Event, match func(faultKey) bool) {
	for _, k := range w.sortedOpen() {
		if match(k) {
			w.end(k, w.open[k], by, false)
		}
	}
}

func (w *FaultWindows) sortedOpen() []faultKey {
	keys := make([]faultKey, 0, len(w.open))
	for k := range w.open {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b faultKey) int {
		ea, eb := w.open[a], w.open[b]
		return cmp.Or(cmp.Compare(ea.Time, eb.Time), cmp.Compare(ea.Source, eb.Source), cmp.Compare(a.id, b.id))
	})
	return keys
}

// Finish closes the faults still open at end (the history's last time when
// end is 0) as Open windows and returns every window.
func (w *FaultWindows) Finish(end int64) []FaultWindow {
	if end == 0 {
		end = w.last
	}
	for _, k := range w.sortedOpen() {
		w.Windows = append(w.Windows, FaultWindow{Start: w.open[k], End: end, EndIndex: -1, Open: true})
		delete(w.open, k)
	}
	return w.Windows
}

// FaultWindowsOf pairs the faults of a merged history.
func FaultWindowsOf(h *History, processEnds, healEnds bool) (windows []FaultWindow, orphans []int) {
	w := FaultWindows{ProcessEnds: processEnds, HealEnds: healEnds}
	for i := range h.Events {
		w.Add(&h.Events[i])
	}
	return w.Finish(0), w.Orphans
}

// OpPairer pairs client invokes with their completions event by event, the
// rule Operations applies to a whole history: by (Source, Process); a
// second invoke on a busy process abandons the first (it never completes,
// so its outcome is unknown); a completion without an invoke is an orphan.
// T is what the caller keeps per pending invoke (a position, a time).
type OpPairer[T any] struct {
	pending map[procKey]T
}

type procKey struct {
	src  string
	proc int
}

// Invoke records e's invoke with v. abandoned says the process already had
// an invoke pending, which is now dropped.
func (p *OpPairer[T]) Invoke(e *Event, v T) (abandoned bool) {
	if p.pending == nil {
		p.pending = map[procKey]T{}
	}
	k := procKey{e.Source, e.Op.Process}
	_, abandoned = p.pending[k]
	p.pending[k] = v
	return abandoned
}

// Complete pairs completion e with its pending invoke and returns what
// Invoke recorded; ok is false for an orphan.
func (p *OpPairer[T]) Complete(e *Event) (v T, ok bool) {
	k := procKey{e.Source, e.Op.Process}
	v, ok = p.pending[k]
	if ok {
		delete(p.pending, k)
	}
	return v, ok
}

// Pending is the number of invokes still waiting for a completion.
func (p *OpPairer[T]) Pending() int { return len(p.pending) }
