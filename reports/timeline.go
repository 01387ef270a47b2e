package reports

// This file owns the report's timeline: one pass over the history that
// aggregates what is worth drawing (harness phases, fault windows, who was
// controller at which epoch, each partition's leader and leader epoch, client
// operation latencies and outcomes), built by a builder fed event by event,
// plus the queries the page asks of it (markers, zoom, active faults). The
// drawing is timeline_svg.go's.
//
// Size is bounded by pixels, not by events: spans narrower than a couple of
// pixels are merged into one "busy" span, and the latency scatter is binned
// into pixel cells (one square per occupied cell and outcome, coarsened until
// at most maxPoints remain), drawn as one <path> per outcome. So a
// million-event history costs the same few hundred kilobytes as a long quiet
// one, and the drawing is deterministic.

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/rundir"
	"github.com/zkchaos/zkchaos/schedule"
	"github.com/zkchaos/zkchaos/zklayout"
)

// Drawing limits.
const (
	maxPoints     = 4000 // latency scatter squares, all outcomes together
	maxMarkers    = 300  // violation markers
	maxPartitions = 32   // partition lanes; more are summarised in a note
	maxFaultRows  = 4    // rows for overlapping faults
	minSpanPx     = 2.0  // narrower spans are merged
)

// span is an interval on one lane.
type span struct {
	from, to int64
	label    string // drawn inside when it fits
	title    string // tooltip
	color    string
	open     bool // never closed: drawn to the end with a dashed edge
}

// opPoint is one completed client operation: invoke time, latency, outcome.
type opPoint struct {
	t, lat  int64
	outcome uint8
}

const (
	outOK = iota
	outFail
	outInfo
	nOutcomes
)

// marker is a violation event drawn on the timeline.
type marker struct {
	t      int64
	title  string
	anchor string
}

// timeline is the aggregate of a history that the SVG is drawn from.
type timeline struct {
	t0, t1 int64 // the first and last event
	// origin is time zero of every relative time in the report: the end of
	// the harness's set-up when the history records it, otherwise t0. Set-up
	// (an image build on a fresh machine takes minutes) would squeeze the
	// workload into a sliver of the drawing, so the whole-run timeline
	// starts here and the page states set-up's duration instead.
	origin   int64
	setup    *span // the set-up phase when it ended; nil otherwise
	phases   []span
	faults   []span
	zkCtrl   []span
	nodes    []int32
	ctrl     map[int32][]span
	parts    []history.TopicPartition
	state    map[history.TopicPartition][]span           // ZooKeeper's partition state
	believed map[history.TopicPartition]map[int32][]span // brokers acting as leader
	ops      []opPoint
	counts   [nOutcomes]int
	pending  int // invokes without a completion
	queueOps int // of ops, the queue workload's
	markers  []marker
	kinds    map[history.Kind]int
	sources  map[string]int
}

// nodeColors are distinguishable colours for brokers n1, n2, ...
//
// They avoid the hues that carry meaning elsewhere on the page: green, red
// and orange (operation outcomes, faults) and gold (failpoints).
var nodeColors = []string{"#4e79a7", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#1f3b73", "#bcbd22"}

func nodeColor(id int32) string {
	if id <= 0 {
		return "#bbbbbb"
	}
	return nodeColors[int(id-1)%len(nodeColors)]
}

// buildTimeline aggregates a merged history in one pass.
func buildTimeline(h *history.History) *timeline {
	b := newBuilder()
	if h != nil {
		for i := range h.Events {
			b.add(&h.Events[i])
		}
	}
	return b.finish()
}

// builder aggregates events into a timeline. Events of one source must come
// in that source's order; different sources may come one after the other
// (file by file) rather than interleaved, because every open interval is
// keyed by what owns it (a node, a fault's source and id, the watcher), and
// titles get their times only when drawn, once the run's start is known.
// It keeps only small per-change records and one opPoint per client
// operation, never the events themselves.
type builder struct {
	tl   *timeline
	seen bool // any event yet (t0, t1 valid)

	phaseOpen  map[string]int64
	phaseOrder []string
	faults     history.FaultWindows
	invokes    history.OpPairer[int64] // invoke times
	// queueInvokes are the queue operations' invoke times by process.
	queueInvokes map[queueProc]int64
	nodeSeen     map[int32]bool

	// Controller lanes: who ZooKeeper names, and who acts as controller.
	zkID     int32 // -2: not observed yet
	zkEpoch  int32
	zkFrom   int64
	ctrlOpen map[int32]openCtrl

	// Partition lanes: ZooKeeper's state, and brokers acting as leader.
	stOpen     map[history.TopicPartition]*openState
	writeState map[history.TopicPartition][]stateWrite // fallback when the watcher saw nothing
	sawWatch   map[history.TopicPartition]bool
	leadOpen   map[history.TopicPartition]map[int32]openLead
}

// openCtrl is a controller tenure not yet ended.
type openCtrl struct {
	t     int64
	epoch int32
	zkv   int32
}

// openLead is a broker acting as a partition's leader since t.
type openLead struct {
	t     int64
	epoch int32
}

// openState is ZooKeeper's state of a partition since t.
type openState struct {
	t             int64
	leader, epoch int32
	title         string
}

// stateWrite is a controller's successful partition-state write, kept for
// when the run had no watcher.
type stateWrite struct {
	t     int64
	src   string
	seq   uint64
	state *history.PartitionState
}

func newBuilder() *builder {
	return &builder{
		tl: &timeline{
			ctrl:     map[int32][]span{},
			state:    map[history.TopicPartition][]span{},
			believed: map[history.TopicPartition]map[int32][]span{},
			kinds:    map[history.Kind]int{},
			sources:  map[string]int{},
		},
		phaseOpen:    map[string]int64{},
		faults:       history.FaultWindows{ProcessEnds: true},
		nodeSeen:     map[int32]bool{},
		queueInvokes: map[queueProc]int64{},
		zkID:         -2,
		zkEpoch:      -1,
		ctrlOpen:     map[int32]openCtrl{},
		stOpen:       map[history.TopicPartition]*openState{},
		writeState:   map[history.TopicPartition][]stateWrite{},
		sawWatch:     map[history.TopicPartition]bool{},
		leadOpen:     map[history.TopicPartition]map[int32]openLead{},
	}
}

// add aggregates one event.
func (b *builder) add(e *history.Event) {
	tl := b.tl
	if !b.seen || e.Time < tl.t0 {
		tl.t0 = e.Time
	}
	if !b.seen || e.Time > tl.t1 {
		tl.t1 = e.Time
	}
	b.seen = true
	tl.kinds[e.Kind]++
	tl.sources[e.Source]++
	if e.Node > 0 && e.Kind != history.KindOp {
		b.nodeSeen[e.Node] = true
	}
	switch e.Kind {
	case history.KindPhase:
		b.phase(e)
	case history.KindFaultStart, history.KindFaultStop:
		b.faults.Add(e)
	case history.KindNodeStart, history.KindNodeStop:
		b.processEnds(e)
	case history.KindControllerElected:
		b.closeCtrl(e.Node, e.Time, false, " (elected again)")
		b.ctrlOpen[e.Node] = openCtrl{t: e.Time, epoch: e.Controller.Epoch, zkv: e.Controller.EpochZkVersion}
	case history.KindControllerResigned:
		why := ""
		if e.Controller.Reason != "" {
			why = " (" + e.Controller.Reason + ")"
		}
		b.closeCtrl(e.Node, e.Time, false, why)
	case history.KindRoleChange:
		b.role(e)
	case history.KindZKWatch:
		b.watch(e)
	case history.KindZKWrite:
		if s := e.ZKWrite.State; s != nil && e.ZKWrite.Outcome == history.ZKOK {
			b.writeState[s.TP()] = append(b.writeState[s.TP()], stateWrite{t: e.Time, src: e.Source, seq: e.Seq, state: s})
		}
	case history.KindOp:
		b.op(e)
	case history.KindQueueOp:
		b.queueOp(e)
	}
}

func (b *builder) phase(e *history.Event) {
	if e.Phase.Mark == history.PhaseBegin {
		if _, ok := b.phaseOpen[e.Phase.Name]; !ok {
			b.phaseOrder = append(b.phaseOrder, e.Phase.Name)
		}
		b.phaseOpen[e.Phase.Name] = e.Time
	} else if from, ok := b.phaseOpen[e.Phase.Name]; ok {
		b.tl.phases = append(b.tl.phases, span{from: from, to: e.Time, label: e.Phase.Name, color: phaseColor(e.Phase.Name),
			title: "phase " + e.Phase.Name})
		delete(b.phaseOpen, e.Phase.Name)
	}
}

// processEnds: a node process started or stopped, so its roles and the
// failpoints it held end.
func (b *builder) processEnds(e *history.Event) {
	b.closeCtrl(e.Node, e.Time, false, " (process ended)")
	for tp := range b.leadOpen {
		b.closeLead(tp, e.Node, e.Time, false)
	}
	b.faults.Add(e)
}

func (b *builder) role(e *history.Event) {
	tp := e.Role.TP()
	if b.leadOpen[tp] == nil {
		b.leadOpen[tp] = map[int32]openLead{}
	}
	if o, ok := b.leadOpen[tp][e.Node]; ok && (e.Role.Role != history.RoleLeader || o.epoch != e.Role.LeaderEpoch) {
		b.closeLead(tp, e.Node, e.Time, false)
	}
	if _, ok := b.leadOpen[tp][e.Node]; !ok && e.Role.Role == history.RoleLeader {
		b.leadOpen[tp][e.Node] = openLead{t: e.Time, epoch: e.Role.LeaderEpoch}
	}
	if _, ok := b.tl.state[tp]; !ok {
		b.tl.state[tp] = nil // make the partition known
	}
}

func (b *builder) watch(e *history.Event) {
	w := e.Watch
	switch {
	case w.State != nil:
		b.sawWatch[w.State.TP()] = true
		b.setState(e.Time, w.State)
	case w.Path == zklayout.ControllerPath && w.ControllerID != nil:
		b.setZK(e.Time, *w.ControllerID, b.zkEpoch)
	case w.Path == zklayout.ControllerPath && w.Type == history.WatchDeleted:
		b.setZK(e.Time, -1, b.zkEpoch)
	case w.ControllerEpoch != nil:
		id := b.zkID
		if id == -2 {
			id = -1
		}
		b.setZK(e.Time, id, *w.ControllerEpoch)
	}
}

func (b *builder) op(e *history.Event) {
	o := e.Op
	if o.Type == history.OpInvoke {
		if b.invokes.Invoke(e, e.Time) {
			b.tl.pending++ // a second invoke on a busy process: the first never completed
		}
		return
	}
	start, ok := b.invokes.Complete(e)
	if !ok {
		return
	}
	b.completed(start, e.Time, o.Type)
	if isAdminOp(o.F) { // operator actions (the control-plane workload) share the fault lane
		b.tl.faults = append(b.tl.faults, adminSpan(start, e))
	}
}

// queueOp pairs the queue workload's operations (sends, polls, commits,
// assignments, the drain) as Operations pairs client ones, by source and
// process, and draws them in the same scatter: a queue run has no other
// client operations.
func (b *builder) queueOp(e *history.Event) {
	q := e.Queue
	if q == nil {
		return
	}
	k := queueProc{e.Source, q.Process}
	if q.Type == history.OpInvoke {
		if _, busy := b.queueInvokes[k]; busy {
			b.tl.pending++
		}
		b.queueInvokes[k] = e.Time
		return
	}
	start, ok := b.queueInvokes[k]
	if !ok {
		return
	}
	delete(b.queueInvokes, k)
	b.tl.queueOps++
	b.completed(start, e.Time, q.Type)
}

// queueProc is a queue process of one source.
type queueProc struct {
	src  string
	proc int
}

// completed adds one completed operation to the scatter.
func (b *builder) completed(start, end int64, typ history.OpType) {
	var out uint8
	switch typ {
	case history.OpOK:
		out = outOK
	case history.OpFail:
		out = outFail
	default:
		out = outInfo
	}
	b.tl.counts[out]++
	b.tl.ops = append(b.tl.ops, opPoint{t: start, lat: end - start, outcome: out})
}

func (b *builder) closeCtrl(n int32, end int64, open bool, why string) {
	o, ok := b.ctrlOpen[n]
	if !ok {
		return
	}
	b.tl.ctrl[n] = append(b.tl.ctrl[n], span{from: o.t, to: end, label: fmt.Sprintf("e%d", o.epoch), color: nodeColor(n), open: open,
		title: fmt.Sprintf("n%d controller, epoch %d (zkVersion %d)%s", n, o.epoch, o.zkv, why)})
	delete(b.ctrlOpen, n)
}

func (b *builder) closeLead(tp history.TopicPartition, n int32, end int64, open bool) {
	o, ok := b.leadOpen[tp][n]
	if !ok {
		return
	}
	if b.tl.believed[tp] == nil {
		b.tl.believed[tp] = map[int32][]span{}
	}
	b.tl.believed[tp][n] = append(b.tl.believed[tp][n], span{from: o.t, to: end, color: nodeColor(n), open: open,
		title: fmt.Sprintf("n%d acts as leader of %s at leader epoch %d", n, tp, o.epoch)})
	delete(b.leadOpen[tp], n)
}

func (b *builder) closeState(tp history.TopicPartition, end int64, open bool) {
	o := b.stOpen[tp]
	if o == nil {
		return
	}
	label, color := fmt.Sprintf("n%d·e%d", o.leader, o.epoch), nodeColor(o.leader)
	if o.leader < 0 {
		label, color = fmt.Sprintf("offline·e%d", o.epoch), "#d62728"
	}
	b.tl.state[tp] = append(b.tl.state[tp], span{from: o.t, to: end, label: label, color: color, open: open,
		title: o.title + " (ZooKeeper)"})
	delete(b.stOpen, tp)
}

func (b *builder) setState(t int64, s *history.PartitionState) {
	tp := s.TP()
	if o := b.stOpen[tp]; o != nil && o.leader == s.Leader && o.epoch == s.LeaderEpoch {
		return
	}
	b.closeState(tp, t, false)
	b.stOpen[tp] = &openState{t: t, leader: s.Leader, epoch: s.LeaderEpoch, title: stateString(s)}
}

func (b *builder) setZK(t int64, id, epoch int32) {
	if id == b.zkID && epoch == b.zkEpoch {
		return
	}
	if b.zkID != -2 {
		b.tl.zkCtrl = append(b.tl.zkCtrl, zkSpan(b.zkFrom, t, b.zkID, b.zkEpoch, false))
	}
	b.zkID, b.zkEpoch, b.zkFrom = id, epoch, t
}

// finish closes what is still open at the run's last event and orders the
// lanes, so the drawing does not depend on the order sources were read in.
func (b *builder) finish() *timeline {
	tl := b.tl
	// The watcher is the authority on partition state; a controller's
	// successful writes stand in for it when the run had no watcher.
	for tp, ws := range b.writeState {
		if b.sawWatch[tp] {
			continue
		}
		// Writes come from several nodes, possibly file by file: put them
		// in time order first.
		slices.SortStableFunc(ws, func(x, y stateWrite) int { return cmp.Or(cmp.Compare(x.t, y.t), cmp.Compare(x.src, y.src)) })
		for _, w := range ws {
			b.setState(w.t, w.state)
		}
	}
	for _, w := range b.faults.Finish(tl.t1) {
		tl.faults = append(tl.faults, faultSpan(w))
	}
	for n := range b.ctrlOpen {
		b.closeCtrl(n, tl.t1, true, "")
	}
	for tp, m := range b.leadOpen {
		for n := range m {
			b.closeLead(tp, n, tl.t1, true)
		}
	}
	for tp := range b.stOpen {
		b.closeState(tp, tl.t1, true)
	}
	if b.zkID != -2 {
		tl.zkCtrl = append(tl.zkCtrl, zkSpan(b.zkFrom, tl.t1, b.zkID, b.zkEpoch, true))
	}
	for _, name := range b.phaseOrder {
		if from, ok := b.phaseOpen[name]; ok {
			tl.phases = append(tl.phases, span{from: from, to: tl.t1, label: name + " (unfinished)", color: phaseColor(name), open: true,
				title: "phase " + name})
		}
	}
	tl.pending += b.invokes.Pending() + len(b.queueInvokes)
	for n := range b.nodeSeen {
		tl.nodes = append(tl.nodes, n)
	}
	for n := range tl.ctrl {
		if !b.nodeSeen[n] {
			tl.nodes = append(tl.nodes, n)
		}
	}
	slices.Sort(tl.nodes)
	for tp := range tl.state {
		tl.parts = append(tl.parts, tp)
	}
	for tp := range tl.believed {
		if _, ok := tl.state[tp]; !ok {
			tl.parts = append(tl.parts, tp)
		}
	}
	slices.SortFunc(tl.parts, history.TopicPartition.Compare)
	// Spans of several sources share these lanes: order them fully.
	sortSpans(tl.faults)
	sortSpans(tl.phases)
	tl.origin = tl.t0
	for i, p := range tl.phases {
		if p.label == history.PhaseSetup && !p.open {
			tl.setup = &tl.phases[i]
			tl.origin = p.to
			break
		}
	}
	return tl
}

// timeNote tells the reader where time zero is, and set-up's duration when
// the drawing leaves it out.
func (tl *timeline) timeNote() string {
	if tl.setup == nil {
		return "Time is relative to the first event of the history."
	}
	d := time.Duration(tl.setup.to - tl.setup.from).Round(time.Millisecond)
	if tl.runFrom() < tl.origin {
		return fmt.Sprintf("Time is relative to the end of set-up, which took %s (image build, ZooKeeper ensemble, brokers, topic); negative times are during set-up.", d)
	}
	return fmt.Sprintf("Time is relative to the end of set-up, which took %s (image build, ZooKeeper ensemble, brokers, topic) and is not drawn.", d)
}

// runFrom is where the whole-run drawing starts: the origin, or earlier when
// a fault or a violation event lies in set-up (it must stay visible).
func (tl *timeline) runFrom() int64 {
	from := tl.origin
	for _, f := range tl.faults {
		from = min(from, f.from)
	}
	for _, m := range tl.markers {
		from = min(from, m.t)
	}
	return max(from, tl.t0)
}

func sortSpans(s []span) {
	slices.SortStableFunc(s, func(a, b span) int {
		return cmp.Or(cmp.Compare(a.from, b.from), cmp.Compare(a.to, b.to), cmp.Compare(a.label, b.label), cmp.Compare(a.title, b.title))
	})
}

// faultSpan draws one fault window: red for the nemesis, gold for a
// failpoint.
func faultSpan(w history.FaultWindow) span {
	f := w.Start.Fault
	label := f.Name
	if f.Failpoint != "" {
		label = f.Failpoint
	}
	if len(f.Targets) > 0 {
		label += " " + strings.Join(f.Targets, ",")
	}
	title := fmt.Sprintf("%s, by %s", Summarize(&w.Start), w.Start.Source)
	color := "#e15759"
	switch {
	case f.Failpoint != "" || f.Name == "failpoint":
		color = "#d4a017"
	case f.Name == string(schedule.CrashLoseUnflushed):
		// A crash that lost what the broker had not fsynced: darker than
		// a plain kill (the title, from the start's detail, says what it
		// dropped).
		color = "#8b1a1a"
	case f.Name == string(schedule.DeleteRecreateTopic):
		// Not a process or a link: a topic's deletion, whose partitions
		// come back as a new incarnation at the heal (the title names the
		// topic and its assignment).
		color = "#7b4f9d"
	case f.Name == string(schedule.StallZKSessionServer):
		// A ZooKeeper server stopped in short stalls while it holds a
		// broker's session: not a pause that moves the session (the title
		// names the server, the broker and its role).
		color = "#2a7f8f"
	}
	return span{from: w.Start.Time, to: w.End, label: label, title: title, color: color, open: w.Open}
}

func zkSpan(from, to int64, id, epoch int32, open bool) span {
	label, color := fmt.Sprintf("n%d·e%d", id, epoch), nodeColor(id)
	if id < 0 {
		label, color = "none", "#dddddd"
	}
	if epoch < 0 {
		label = fmt.Sprintf("n%d", id)
	}
	return span{from: from, to: to, label: label, color: color, open: open,
		title: fmt.Sprintf("ZooKeeper /controller = %d, /controller_epoch = %d", id, epoch)}
}

func phaseColor(name string) string {
	switch name {
	case history.PhaseSetup:
		return "#e8e8e8"
	case history.PhaseWorkload:
		return "#d7e9f7"
	case history.PhaseHeal:
		return "#dff2d8"
	case history.PhaseFinalReads:
		return "#fdf0c8"
	case history.PhaseCollect:
		return "#eee4f4"
	}
	return "#eeeeee"
}

// addMarkers records the events named in the violations of invalid checkers
// (and the events of unknown ones, which point where to look), capped at
// maxMarkers; anchor links each marker to its violation in the page.
func (tl *timeline) addMarkers(h eventLookup, res *rundir.Results) {
	if h == nil || res == nil {
		return
	}
	for ci, r := range res.Results {
		for vi, v := range r.Violations {
			for _, idx := range v.Events {
				if len(tl.markers) >= maxMarkers {
					return
				}
				e := h.event(idx)
				if e == nil {
					continue
				}
				tl.markers = append(tl.markers, marker{t: e.Time, anchor: violationAnchor(ci, vi),
					title: fmt.Sprintf("%s: %s — event %d %s %s %s", r.Checker, v.Explanation, idx, e.Source, e.Kind, relTime(e.Time, tl.origin))})
			}
		}
	}
}

// zoomWindow picks the stretch of the run worth a closer look: the events of
// the first violation of the first invalid checker, reaching back to the
// start of the fault that was active (or last began) shortly before, padded
// by a second. ok is false when there is no violation or the window would
// cover most of the run anyway.
func (tl *timeline) zoomWindow(h eventLookup, res *rundir.Results) (from, to int64, caption string, ok bool) {
	if h == nil || res == nil {
		return 0, 0, "", false
	}
	for _, r := range res.Results {
		for _, v := range r.Violations {
			a, b := int64(math.MaxInt64), int64(math.MinInt64)
			for _, idx := range v.Events {
				if e := h.event(idx); e != nil {
					a, b = min(a, e.Time), max(b, e.Time)
				}
			}
			if a > b {
				continue
			}
			const lookBack = int64(10e9) // a fault that began this long before still explains it
			for _, f := range tl.faults {
				if f.from <= a && f.from >= a-lookBack {
					a = min(a, f.from)
					break
				}
			}
			const pad = int64(1e9)
			start := tl.runFrom()
			from, to = max(start, a-pad), min(tl.t1, b+pad)
			if tl.t1 <= start || float64(to-from) > 0.5*float64(tl.t1-start) {
				return 0, 0, "", false
			}
			caption = fmt.Sprintf("%s → %s, around the first violation of %s: %s", relTime(from, tl.origin), relTime(to, tl.origin), r.Checker, v.Explanation)
			return from, to, caption, true
		}
	}
	return 0, 0, "", false
}

// activeFaults names the faults active at time t ("pause n1, slow-zk-follower zk2").
func (tl *timeline) activeFaults(t int64) string {
	var out []string
	for _, f := range tl.faults {
		if f.from > t {
			break // sorted by start
		}
		if t <= f.to {
			out = append(out, f.label)
		}
	}
	return strings.Join(out, ", ")
}

func violationAnchor(checker, violation int) string { return fmt.Sprintf("v%d-%d", checker, violation) }
