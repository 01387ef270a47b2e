package linearize

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/zkchaos/zkchaos/history"
)

// DefaultTimeout bounds a check when Options.Timeout is zero: porcupine is
// never run without a timeout.
const DefaultTimeout = 30 * time.Second

// DefaultMaxVisualizeOps caps the operations drawn in the HTML
// visualization; a bigger partition is not drawn (the page would not open).
const DefaultMaxVisualizeOps = 3000

// Mark is an extra annotation for the visualization, in history time.
type Mark struct {
	Tag         string
	Description string
	Start, End  int64 // Unix ns; End 0 for a point in time
}

// Options control a check.
type Options struct {
	_ struct{}

	Timeout         time.Duration // whole check; 0 means DefaultTimeout
	VisualizePath   string        // write porcupine's HTML here ("" = none)
	MaxVisualizeOps int           // 0 means DefaultMaxVisualizeOps
	Marks           []Mark        // drawn in addition to the nemesis windows
	// Ops are the history's client operations when the caller has paired
	// them already (history.Operations of the same history); nil: Check
	// pairs them.
	Ops []history.Operation
}

// PartitionOutcome is the result for one topic-partition.
type PartitionOutcome struct {
	Partition string                `json:"partition"`
	Result    porcupine.CheckResult `json:"result"`
	Ops       int                   `json:"ops"`
	// Resolved counts unknown-outcome produces placed at the offset a read
	// observed; Unresolved those never observed but needed to fill a gap
	// below an acknowledged offset (placed there with an open return time);
	// Dropped the other never-observed ones.
	Resolved   int `json:"resolved"`
	Dropped    int `json:"dropped"`
	Unresolved int `json:"unresolved"`
	// Suspects are history indices of reads that returned a value nobody
	// produced at that offset (or before its produce was invoked): the
	// likely culprits when Result is Illegal.
	Suspects []int `json:"suspects,omitempty"`
	// StaleEmpty lists (up to maxStaleExamples of StaleEmptyCount) the ok
	// reads that returned nothing at an offset below produces acknowledged
	// before they began. Kafka allows that from a new leader whose HW lags
	// (KAFKA-2334); the checkers decide which ones a new leader answered.
	StaleEmpty      []StaleRead `json:"stale_empty,omitempty"`
	StaleEmptyCount int         `json:"stale_empty_count,omitempty"`
	// Duplicates counts extra appends of one produce's value: a value read
	// at an offset other than its acknowledged one, or an unknown produce
	// read at several offsets. A non-idempotent producer's resend does
	// that (at-least-once), so each copy is modelled as another append by
	// the same operation and reported here, never as a violation itself.
	Duplicates        int         `json:"duplicates,omitempty"`
	DuplicateExamples []Duplicate `json:"duplicate_examples,omitempty"`
	// Stuck is, for an Illegal partition without suspects, the invoke
	// index of the operation porcupine could not place: the earliest-
	// returning one outside its longest partial linearization.
	Stuck []int `json:"stuck,omitempty"`
}

// StaleRead is a read that returned nothing from Offset although
// Acknowledged acks=all produces at or above Offset were acknowledged before
// it was invoked; the first (earliest acknowledged) of them is FirstValue at
// FirstOffset, completed at event FirstAck (time FirstAckTime).
type StaleRead struct {
	Partition    string `json:"partition"`
	Invoke       int    `json:"invoke"`
	Read         int    `json:"read"`
	Offset       int64  `json:"offset"`
	Start        int64  `json:"start_ns"`
	End          int64  `json:"end_ns"`
	Acknowledged int    `json:"acknowledged"`
	FirstAck     int    `json:"first_ack"`
	FirstValue   string `json:"first_value"`
	FirstOffset  int64  `json:"first_offset"`
	FirstAckTime int64  `json:"first_ack_ns"`
}

// Duplicate describes one produce whose value was appended more than once.
type Duplicate struct {
	Partition    string  `json:"partition"`
	Value        string  `json:"value"`
	Offsets      []int64 `json:"offsets"`      // every offset the value was at, ascending
	Acknowledged int64   `json:"acknowledged"` // the acknowledged offset, -1 for an unknown produce
	// Events are the produce's invoke and completion and the first read
	// that returned each copy.
	Events []int `json:"events"`
}

// Outcome is the result of a check.
type Outcome struct {
	Result        porcupine.CheckResult `json:"result"` // Illegal if any partition is, else Unknown if any is, else Ok
	Partitions    []PartitionOutcome    `json:"partitions"`
	Elapsed       time.Duration         `json:"elapsed_ns"`
	Visualization string                `json:"visualization,omitempty"`
	Note          string                `json:"note,omitempty"`
}

// partition is one topic-partition's porcupine input.
type partition struct {
	out PartitionOutcome
	ops []porcupine.Operation
	// ins and outs hold what ops' Input and Output point to (push).
	ins  []input
	outs []output
	t    *table
	// acks are the definite acknowledgements by return time, maxAcked[i]
	// the highest offset among acks[:i+1]: what an empty read missed.
	acks     []prod
	maxAcked []int64
}

// Check converts h into per-partition porcupine histories and checks each
// against the log model, partitions in parallel, under one overall timeout.
func Check(h *history.History, opts Options) Outcome {
	start := time.Now()
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxVisualizeOps <= 0 {
		opts.MaxVisualizeOps = DefaultMaxVisualizeOps
	}
	pl := newPlan(h, opts.Ops)
	deadline := start.Add(opts.Timeout)

	// Each worker builds a partition, checks it and keeps its porcupine
	// operations only where later steps need them (the diagnosis of an
	// illegal partition, the visualization): at most one partition per
	// worker is held in full, not all of them.
	parts := make([]*partition, len(pl.order))
	workers := runtime.GOMAXPROCS(0)
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for i, tp := range pl.order {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			p := buildPartition(tp, pl.ops[i], pl.t0, pl.clientID)
			pl.ops[i] = nil // the partition holds what it needs
			parts[i] = p
			left := time.Until(deadline)
			switch {
			case left <= 0:
				p.out.Result = porcupine.Unknown
			case witness(p.ops):
				p.out.Result = porcupine.Ok
			default:
				p.out.Result = porcupine.CheckOperationsTimeout(logModel, p.ops, left)
			}
			if p.out.Result == porcupine.Ok && !(i == 0 && opts.VisualizePath != "" && len(p.ops) <= opts.MaxVisualizeOps) {
				p.release()
			}
		}()
	}
	wg.Wait()
	t0 := pl.t0
	pl = nil

	for _, p := range parts {
		if p.out.Result == porcupine.Illegal && len(p.out.Suspects) == 0 && len(p.ops) <= maxDiagnoseOps {
			p.out.Stuck = stuck(p, min(10*time.Second, max(time.Until(deadline), time.Second)))
		}
	}
	o := Outcome{Result: porcupine.Ok}
	for _, p := range parts {
		o.Partitions = append(o.Partitions, p.out)
		switch {
		case p.out.Result == porcupine.Illegal:
			o.Result = porcupine.Illegal
		case p.out.Result == porcupine.Unknown && o.Result != porcupine.Illegal:
			o.Result = porcupine.Unknown
		}
	}
	if opts.VisualizePath != "" && len(parts) > 0 {
		o.Visualization, o.Note = visualize(h, parts, t0, opts)
	}
	o.Elapsed = time.Since(start)
	return o
}

// maxDiagnoseOps bounds the partitions re-checked verbosely to name the
// operation porcupine got stuck on.
const maxDiagnoseOps = 20_000

// stuck re-checks an illegal partition with linearization info and returns
// the invoke index of the operation that could not be placed: among the
// operations outside the longest partial linearization, the one that must
// have taken effect first (earliest return).
func stuck(p *partition, timeout time.Duration) []int {
	res, info := porcupine.CheckOperationsVerbose(logModel, p.ops, timeout)
	if res != porcupine.Illegal {
		return nil
	}
	partials := info.PartialLinearizations()
	if len(partials) == 0 {
		return nil
	}
	var longest []int
	for _, l := range partials[0] {
		if len(l) > len(longest) {
			longest = l
		}
	}
	in := make([]bool, len(p.ops))
	for _, id := range longest {
		if id >= 0 && id < len(in) {
			in[id] = true
		}
	}
	best := -1
	for id, op := range p.ops {
		if !in[id] && (best < 0 || op.Return < p.ops[best].Return) {
			best = id
		}
	}
	if best < 0 {
		return nil
	}
	if idx, ok := p.ops[best].Metadata.(int); ok {
		return []int{idx}
	}
	return nil
}

// visualize draws the first illegal partition (else the first unknown,
// else the first) with nemesis windows and marks as annotations.
func visualize(h *history.History, parts []*partition, t0 int64, opts Options) (string, string) {
	pick := parts[0]
	for _, want := range []porcupine.CheckResult{porcupine.Illegal, porcupine.Unknown} {
		found := false
		for _, p := range parts {
			if p.out.Result == want {
				pick, found = p, true
				break
			}
		}
		if found {
			break
		}
	}
	if pick.out.Ops > opts.MaxVisualizeOps {
		return "", fmt.Sprintf("partition %s has %d operations, more than the %d drawn; no visualization written", pick.out.Partition, pick.out.Ops, opts.MaxVisualizeOps)
	}
	_, info := porcupine.CheckOperationsVerbose(logModel, pick.ops, 10*time.Second)
	info.AddAnnotations(annotations(h, t0, opts.Marks))
	if err := porcupine.VisualizePath(logModel, info, opts.VisualizePath); err != nil {
		return "", fmt.Sprintf("visualization failed: %v", err)
	}
	return opts.VisualizePath, fmt.Sprintf("visualized partition %s", pick.out.Partition)
}

// annotations turns fault windows and marks into porcupine annotations.
// Faults are paired by history.FaultWindowsOf as the report's timeline
// pairs them (a node's restart ends the failpoints it reported); one still
// open is drawn to the end of the history.
func annotations(h *history.History, t0 int64, marks []Mark) []porcupine.Annotation {
	windows, _ := history.FaultWindowsOf(h, true, false)
	out := make([]porcupine.Annotation, 0, len(windows)+len(marks))
	for _, w := range windows {
		s := w.Start
		out = append(out, porcupine.Annotation{
			Tag:             "nemesis",
			Start:           s.Time - t0,
			End:             w.End - t0,
			Description:     s.Fault.Name,
			Details:         fmt.Sprintf("%s on %s (event %d)", s.Fault.Name, strings.Join(s.Fault.Targets, ", "), s.Index),
			BackgroundColor: "#fde7a9",
		})
	}
	for _, m := range marks {
		a := porcupine.Annotation{Tag: m.Tag, Start: m.Start - t0, Description: m.Description,
			BackgroundColor: "#f6b2b2"}
		if m.End > 0 {
			a.End = m.End - t0
		}
		out = append(out, a)
	}
	return out
}
