package reports

// This file owns the report's timeline: one pass over the history that
// aggregates what is worth drawing (harness phases, fault windows, who was
// controller at which epoch, each partition's leader and leader epoch, client
// operation latencies and outcomes) and an inline SVG drawing of it.
//
// Size is bounded by pixels, not by events: spans narrower than a couple of
// pixels are merged into one "busy" span, and the latency scatter is binned
// into pixel cells (one square per occupied cell and outcome, coarsened until
// at most maxPoints remain), drawn as one <path> per outcome. So a
// million-event history costs the same few hundred kilobytes as a long quiet
// one, and the drawing is deterministic.

import (
	"fmt"
	"html"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/rundir"
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
	t0, t1   int64
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
	add    func(e *history.Event)
	finish func() *timeline
}

func newBuilder() *builder {
	tl := &timeline{
		ctrl:     map[int32][]span{},
		state:    map[history.TopicPartition][]span{},
		believed: map[history.TopicPartition]map[int32][]span{},
		kinds:    map[history.Kind]int{},
		sources:  map[string]int{},
	}
	type openCtrl struct {
		t     int64
		epoch int32
		zkv   int32
	}
	type openLead struct {
		t     int64
		epoch int32
	}
	type openState struct {
		t             int64
		leader, epoch int32
		title         string
	}
	var (
		phaseOpen  = map[string]int64{}
		phaseOrder []string
		faults     = history.FaultWindows{ProcessEnds: true}
		ctrlOpen   = map[int32]openCtrl{}
		nodeSeen   = map[int32]bool{}
		leadOpen   = map[history.TopicPartition]map[int32]openLead{}
		stOpen     = map[history.TopicPartition]*openState{}
		writeState = map[history.TopicPartition][]stateWrite{} // fallback when the watcher saw nothing
		sawWatch   = map[history.TopicPartition]bool{}
		invokes    history.OpPairer[int64] // invoke times
		zkID       = int32(-2)             // -2: not observed yet
		zkEpoch    = int32(-1)
		zkFrom     int64
		seen       bool // any event yet (t0, t1 valid)
	)
	closeCtrl := func(n int32, end int64, open bool, why string) {
		o, ok := ctrlOpen[n]
		if !ok {
			return
		}
		tl.ctrl[n] = append(tl.ctrl[n], span{from: o.t, to: end, label: fmt.Sprintf("e%d", o.epoch), color: nodeColor(n), open: open,
			title: fmt.Sprintf("n%d controller, epoch %d (zkVersion %d)%s", n, o.epoch, o.zkv, why)})
		delete(ctrlOpen, n)
	}
	closeLead := func(tp history.TopicPartition, n int32, end int64, open bool) {
		o, ok := leadOpen[tp][n]
		if !ok {
			return
		}
		if tl.believed[tp] == nil {
			tl.believed[tp] = map[int32][]span{}
		}
		tl.believed[tp][n] = append(tl.believed[tp][n], span{from: o.t, to: end, color: nodeColor(n), open: open,
			title: fmt.Sprintf("n%d acts as leader of %s at leader epoch %d", n, tp, o.epoch)})
		delete(leadOpen[tp], n)
	}
	closeState := func(tp history.TopicPartition, end int64, open bool) {
		o := stOpen[tp]
		if o == nil {
			return
		}
		label, color := fmt.Sprintf("n%d·e%d", o.leader, o.epoch), nodeColor(o.leader)
		if o.leader < 0 {
			label, color = fmt.Sprintf("offline·e%d", o.epoch), "#d62728"
		}
		tl.state[tp] = append(tl.state[tp], span{from: o.t, to: end, label: label, color: color, open: open,
			title: o.title + " (ZooKeeper)"})
		delete(stOpen, tp)
	}
	setState := func(t int64, s *history.PartitionState) {
		tp := s.TP()
		if o := stOpen[tp]; o != nil && o.leader == s.Leader && o.epoch == s.LeaderEpoch {
			return
		}
		closeState(tp, t, false)
		stOpen[tp] = &openState{t: t, leader: s.Leader, epoch: s.LeaderEpoch, title: stateString(s)}
	}
	setZK := func(t int64, id, epoch int32) {
		if id == zkID && epoch == zkEpoch {
			return
		}
		if zkID != -2 {
			tl.zkCtrl = append(tl.zkCtrl, zkSpan(zkFrom, t, zkID, zkEpoch, false))
		}
		zkID, zkEpoch, zkFrom = id, epoch, t
	}
	processEnds := func(e *history.Event) { // a node process started or stopped: its roles end
		closeCtrl(e.Node, e.Time, false, " (process ended)")
		for tp := range leadOpen {
			closeLead(tp, e.Node, e.Time, false)
		}
		faults.Add(e)
	}

	b := &builder{}
	b.add = func(e *history.Event) {
		if !seen || e.Time < tl.t0 {
			tl.t0 = e.Time
		}
		if !seen || e.Time > tl.t1 {
			tl.t1 = e.Time
		}
		seen = true
		tl.kinds[e.Kind]++
		tl.sources[e.Source]++
		if e.Node > 0 && e.Kind != history.KindOp {
			nodeSeen[e.Node] = true
		}
		switch e.Kind {
		case history.KindPhase:
			if e.Phase.Mark == history.PhaseBegin {
				if _, ok := phaseOpen[e.Phase.Name]; !ok {
					phaseOrder = append(phaseOrder, e.Phase.Name)
				}
				phaseOpen[e.Phase.Name] = e.Time
			} else if from, ok := phaseOpen[e.Phase.Name]; ok {
				tl.phases = append(tl.phases, span{from: from, to: e.Time, label: e.Phase.Name, color: phaseColor(e.Phase.Name),
					title: "phase " + e.Phase.Name})
				delete(phaseOpen, e.Phase.Name)
			}
		case history.KindFaultStart, history.KindFaultStop:
			faults.Add(e)
		case history.KindNodeStart, history.KindNodeStop:
			processEnds(e)
		case history.KindControllerElected:
			closeCtrl(e.Node, e.Time, false, " (elected again)")
			ctrlOpen[e.Node] = openCtrl{t: e.Time, epoch: e.Controller.Epoch, zkv: e.Controller.EpochZkVersion}
		case history.KindControllerResigned:
			why := ""
			if e.Controller.Reason != "" {
				why = " (" + e.Controller.Reason + ")"
			}
			closeCtrl(e.Node, e.Time, false, why)
		case history.KindRoleChange:
			tp := e.Role.TP()
			if leadOpen[tp] == nil {
				leadOpen[tp] = map[int32]openLead{}
			}
			if o, ok := leadOpen[tp][e.Node]; ok && (e.Role.Role != history.RoleLeader || o.epoch != e.Role.LeaderEpoch) {
				closeLead(tp, e.Node, e.Time, false)
			}
			if _, ok := leadOpen[tp][e.Node]; !ok && e.Role.Role == history.RoleLeader {
				leadOpen[tp][e.Node] = openLead{t: e.Time, epoch: e.Role.LeaderEpoch}
			}
			if _, ok := tl.state[tp]; !ok {
				tl.state[tp] = nil // make the partition known
			}
		case history.KindZKWatch:
			w := e.Watch
			switch {
			case w.State != nil:
				sawWatch[w.State.TP()] = true
				setState(e.Time, w.State)
			case w.Path == "/controller" && w.ControllerID != nil:
				setZK(e.Time, *w.ControllerID, zkEpoch)
			case w.Path == "/controller" && w.Type == history.WatchDeleted:
				setZK(e.Time, -1, zkEpoch)
			case w.ControllerEpoch != nil:
				id := zkID
				if id == -2 {
					id = -1
				}
				setZK(e.Time, id, *w.ControllerEpoch)
			}
		case history.KindZKWrite:
			if s := e.ZKWrite.State; s != nil && e.ZKWrite.Outcome == history.ZKOK {
				writeState[s.TP()] = append(writeState[s.TP()], stateWrite{t: e.Time, src: e.Source, seq: e.Seq, state: s})
			}
		case history.KindOp:
			o := e.Op
			if o.Type == history.OpInvoke {
				if invokes.Invoke(e, e.Time) {
					tl.pending++ // a second invoke on a busy process: the first never completed
				}
				return
			}
			start, ok := invokes.Complete(e)
			if !ok {
				return
			}
			var out uint8
			switch o.Type {
			case history.OpOK:
				out = outOK
			case history.OpFail:
				out = outFail
			default:
				out = outInfo
			}
			tl.counts[out]++
			tl.ops = append(tl.ops, opPoint{t: start, lat: e.Time - start, outcome: out})
		}
	}
	// The watcher is the authority on partition state; a controller's
	// successful writes stand in for it when the run had no watcher.
	b.finish = func() *timeline {
		for tp, ws := range writeState {
			if sawWatch[tp] {
				continue
			}
			// Writes come from several nodes, possibly file by file: put
			// them in time order first.
			sort.SliceStable(ws, func(a, b int) bool {
				if ws[a].t != ws[b].t {
					return ws[a].t < ws[b].t
				}
				return ws[a].src < ws[b].src
			})
			for _, w := range ws {
				setState(w.t, w.state)
			}
		}
		for _, w := range faults.Finish(tl.t1) {
			tl.faults = append(tl.faults, faultSpan(w))
		}
		for n := range ctrlOpen {
			closeCtrl(n, tl.t1, true, "")
		}
		for tp, m := range leadOpen {
			for n := range m {
				closeLead(tp, n, tl.t1, true)
			}
		}
		for tp := range stOpen {
			closeState(tp, tl.t1, true)
		}
		if zkID != -2 {
			tl.zkCtrl = append(tl.zkCtrl, zkSpan(zkFrom, tl.t1, zkID, zkEpoch, true))
		}
		for _, name := range phaseOrder {
			if from, ok := phaseOpen[name]; ok {
				tl.phases = append(tl.phases, span{from: from, to: tl.t1, label: name + " (unfinished)", color: phaseColor(name), open: true,
					title: "phase " + name})
			}
		}
		tl.pending += invokes.Pending()
		for n := range nodeSeen {
			tl.nodes = append(tl.nodes, n)
		}
		for n := range tl.ctrl {
			if !nodeSeen[n] {
				tl.nodes = append(tl.nodes, n)
			}
		}
		sort.Slice(tl.nodes, func(a, b int) bool { return tl.nodes[a] < tl.nodes[b] })
		for tp := range tl.state {
			tl.parts = append(tl.parts, tp)
		}
		for tp := range tl.believed {
			if _, ok := tl.state[tp]; !ok {
				tl.parts = append(tl.parts, tp)
			}
		}
		slices.SortFunc(tl.parts, history.TopicPartition.Compare)
		// Spans of several sources share these lanes: order them fully,
		// so the drawing does not depend on the order sources were read in.
		sortSpans := func(s []span) {
			sort.SliceStable(s, func(a, b int) bool {
				switch {
				case s[a].from != s[b].from:
					return s[a].from < s[b].from
				case s[a].to != s[b].to:
					return s[a].to < s[b].to
				case s[a].label != s[b].label:
					return s[a].label < s[b].label
				}
				return s[a].title < s[b].title
			})
		}
		sortSpans(tl.faults)
		sortSpans(tl.phases)
		return tl
	}
	return b
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
	if f.Failpoint != "" || f.Name == "failpoint" {
		color = "#d4a017"
	}
	return span{from: w.Start.Time, to: w.End, label: label, title: title, color: color, open: w.Open}
}

// stateWrite is a controller's successful partition-state write, kept for
// when the run had no watcher.
type stateWrite struct {
	t     int64
	src   string
	seq   uint64
	state *history.PartitionState
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
					title: fmt.Sprintf("%s: %s — event %d %s %s %s", r.Checker, v.Explanation, idx, e.Source, e.Kind, relTime(e.Time, tl.t0))})
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
			from, to = max(tl.t0, a-pad), min(tl.t1, b+pad)
			if tl.t1 <= tl.t0 || float64(to-from) > 0.5*float64(tl.t1-tl.t0) {
				return 0, 0, "", false
			}
			caption = fmt.Sprintf("%s → %s, around the first violation of %s: %s", relTime(from, tl.t0), relTime(to, tl.t0), r.Checker, v.Explanation)
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

// svgWriter lays out lanes top to bottom on a fixed-width canvas.
type svgWriter struct {
	tl       *timeline
	w        float64
	left     float64
	plotW    float64
	y        float64
	dur      float64
	laneTops []float64 // for the alternating lane background
	// from and to are the window drawn: the whole run, or a zoom.
	from, to int64
}

const (
	svgWidth = 1200.0
	svgLeft  = 150.0
)

func (s *svgWriter) x(t int64) float64 {
	return s.left + float64(t-s.from)/s.dur*s.plotW
}

// in tells whether [a, b] overlaps the drawn window.
func (s *svgWriter) in(a, b int64) bool { return b >= s.from && a <= s.to }

// clip limits [a, b] to the drawn window.
func (s *svgWriter) clip(a, b int64) (int64, int64) { return max(a, s.from), min(b, s.to) }

func esc(s string) string { return html.EscapeString(s) }

// renderSVG draws the whole run; it returns "" for an empty history.
func (tl *timeline) renderSVG() string {
	if tl.t1 <= tl.t0 && len(tl.ops) == 0 && len(tl.faults) == 0 {
		return ""
	}
	return tl.renderWindow(tl.t0, tl.t1)
}

// renderWindow draws the time window [from, to] of the run: the same lanes,
// clipped, with the latency scatter re-binned at the window's resolution.
// Time labels stay relative to the run's start.
func (tl *timeline) renderWindow(from, to int64) string {
	s := &svgWriter{tl: tl, w: svgWidth, left: svgLeft, plotW: svgWidth - svgLeft - 14, from: from, to: to, dur: float64(to - from)}
	if s.dur <= 0 {
		s.dur = 1e9
		s.to = s.from + 1e9
	}
	var body strings.Builder
	s.y = 24 // top axis labels
	top := s.y

	lane := func(label string, h float64, draw func(y, h float64)) {
		fmt.Fprintf(&body, `<rect x="0" y="%.1f" width="%.0f" height="%.1f" fill="%s"/>`, s.y, s.w, h, laneBG(len(s.laneTops)))
		fmt.Fprintf(&body, `<text x="6" y="%.1f" class="ll">%s</text>`, s.y+h/2+4, esc(label))
		s.laneTops = append(s.laneTops, s.y)
		draw(s.y, h)
		s.y += h
	}
	section := func(title string) {
		fmt.Fprintf(&body, `<text x="6" y="%.1f" class="sec">%s</text>`, s.y+14, esc(title))
		s.y += 20
	}

	if len(tl.phases) > 0 {
		lane("harness phases", 18, func(y, h float64) { s.spans(&body, tl.phases, y+2, h-4) })
	}
	// Faults: overlapping windows go to separate rows.
	rows := packRows(tl.faults, maxFaultRows)
	if len(tl.faults) > 0 {
		for r, fs := range rows {
			label := "faults"
			if r > 0 {
				label = ""
			}
			lane(label, 18, func(y, h float64) { s.spans(&body, fs, y+2, h-4) })
		}
	}
	if len(tl.zkCtrl) > 0 || len(tl.nodes) > 0 {
		section("controller (bars: node is controller, label = controller epoch)")
	}
	if len(tl.zkCtrl) > 0 {
		lane("ZooKeeper /controller", 18, func(y, h float64) { s.spans(&body, tl.zkCtrl, y+2, h-4) })
	}
	for _, n := range tl.nodes {
		lane(fmt.Sprintf("n%d controller", n), 18, func(y, h float64) { s.spans(&body, tl.ctrl[n], y+2, h-4) })
	}
	if len(tl.parts) > 0 {
		section("partitions (top: ZooKeeper state leader·leader epoch; thin lines: brokers acting as leader)")
	}
	for i, tp := range tl.parts {
		if i == maxPartitions {
			fmt.Fprintf(&body, `<text x="6" y="%.1f" class="ll">… %d more partitions not drawn</text>`, s.y+14, len(tl.parts)-maxPartitions)
			s.y += 20
			break
		}
		nodes := tl.nodes
		h := 18 + 5*float64(len(nodes)) + 2
		lane(tp.String(), h, func(y, h float64) {
			s.spans(&body, tl.state[tp], y+2, 14)
			for k, n := range nodes {
				s.spans(&body, tl.believed[tp][n], y+18+5*float64(k), 4)
			}
		})
	}
	if len(tl.ops) > 0 || tl.pending > 0 {
		counts := tl.counts
		if s.from > tl.t0 || s.to < tl.t1 {
			counts = [nOutcomes]int{}
			for _, p := range tl.ops {
				if s.in(p.t, p.t) {
					counts[p.outcome]++
				}
			}
		}
		title := fmt.Sprintf("client operations: latency by invoke time (ok %d, fail %d, info %d, never completed %d in the run)",
			counts[outOK], counts[outFail], counts[outInfo], tl.pending)
		var plot strings.Builder
		if note := s.scatter(&plot, 170, s.y+20); note != "" {
			title += "; " + note
		}
		section(title)
		body.WriteString(plot.String())
		s.y += 170
		if len(tl.ops) > 0 {
			section("client throughput: completed operations per second, stacked by outcome")
			s.throughput(&body, 60)
			s.y += 60
		}
	}
	bottom := s.y

	var b strings.Builder
	height := bottom + 26
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" width="100%%" class="tl" role="img" aria-label="run timeline">`, s.w, height)
	b.WriteString(`<style>.ll{font:11px sans-serif;fill:#333}.sec{font:bold 11px sans-serif;fill:#555}.sl{font:10px sans-serif;fill:#fff;pointer-events:none}.ax{font:10px sans-serif;fill:#666}.sl.dk{fill:#222}</style>`)
	// Lanes (with their opaque backgrounds) first, then the translucent
	// fault shading over every lane, the axis grid, and markers on top.
	b.WriteString(body.String())
	for _, f := range tl.faults {
		if !s.in(f.from, f.to) {
			continue
		}
		x0, x1 := s.x(max(f.from, s.from)), s.x(min(f.to, s.to))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" opacity="0.09" pointer-events="none"/>`,
			x0, top, math.Max(x1-x0, 1), bottom-top, f.color)
	}
	s.axis(&b, top, bottom)
	s.drawMarkers(&b, top, bottom)
	b.WriteString(`</svg>`)
	return b.String()
}

func laneBG(i int) string {
	if i%2 == 0 {
		return "#fafafa"
	}
	return "#f2f2f2"
}

// packRows assigns overlapping spans to rows greedily (first row whose last
// span ended), at most maxRows; extra overlaps share the last row.
func packRows(spans []span, maxRows int) [][]span {
	var rows [][]span
	for _, sp := range spans {
		placed := false
		for r := range rows {
			if rows[r][len(rows[r])-1].to <= sp.from {
				rows[r] = append(rows[r], sp)
				placed = true
				break
			}
		}
		if !placed {
			if len(rows) < maxRows {
				rows = append(rows, []span{sp})
			} else {
				rows[len(rows)-1] = append(rows[len(rows)-1], sp)
			}
		}
	}
	return rows
}

// spans draws one lane's spans, merging runs of spans narrower than
// minSpanPx into one grey "busy" span so flapping state costs pixels, not
// events.
func (s *svgWriter) spans(b *strings.Builder, spans []span, y, h float64) {
	var (
		busyFrom, busyTo int64
		busyN            int
		busy             span // the first merged span
		busyColor        string
	)
	// A merged run keeps its colour when every span in it had the same
	// one (a short fault stays red), else it turns grey; a run of one span
	// keeps its tooltip.
	flush := func() {
		if busyN == 0 {
			return
		}
		x0, x1 := s.x(busyFrom), s.x(busyTo)
		title := fmt.Sprintf("%d short intervals %s → %s", busyN, relTime(busyFrom, s.tl.t0), relTime(busyTo, s.tl.t0))
		if busyN == 1 {
			title = s.spanTitle(busy)
		}
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s</title></rect>`,
			x0, y, math.Max(x1-x0, 1), h, busyColor, esc(title))
		busyN = 0
	}
	for _, sp := range spans {
		if !s.in(sp.from, sp.to) {
			continue
		}
		orig := sp
		sp.from, sp.to = s.clip(sp.from, sp.to)
		x0, x1 := s.x(sp.from), s.x(sp.to)
		if x1-x0 < minSpanPx {
			if busyN > 0 && s.x(sp.from)-s.x(busyTo) > minSpanPx {
				flush()
			}
			if busyN == 0 {
				busyFrom, busy, busyColor = sp.from, orig, sp.color
			} else if sp.color != busyColor {
				busyColor = "#888"
			}
			busyTo = max(busyTo, sp.to)
			busyN++
			if s.x(busyTo)-s.x(busyFrom) >= minSpanPx {
				flush()
			}
			continue
		}
		flush()
		dash := ""
		if sp.open && h >= 10 {
			dash = ` stroke="#000" stroke-opacity="0.45" stroke-dasharray="3 2" stroke-width="0.8"`
		}
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" rx="2"%s><title>%s</title></rect>`,
			x0, y, x1-x0, h, sp.color, dash, esc(s.spanTitle(orig)))
		if sp.label != "" && h >= 10 && float64(len(sp.label))*6+4 < x1-x0 {
			cls := "sl"
			if isLight(sp.color) {
				cls = "sl dk"
			}
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" class="%s">%s</text>`, x0+3, y+h-3.5, cls, esc(sp.label))
		}
	}
	flush()
}

// spanTitle is a span's tooltip: what it is and when, relative to the run's
// start (titles are stored without times so a builder fed file by file need
// not know the start yet).
func (s *svgWriter) spanTitle(sp span) string {
	t := fmt.Sprintf("%s, %s → %s", sp.title, relTime(sp.from, s.tl.t0), relTime(sp.to, s.tl.t0))
	if sp.open {
		t += " (not ended when the history ends)"
	}
	return t
}

// isLight tells whether dark text reads better on colour c (#rrggbb).
func isLight(c string) bool {
	if len(c) != 7 || c[0] != '#' {
		return false
	}
	var r, g, bl int
	fmt.Sscanf(c[1:], "%02x%02x%02x", &r, &g, &bl)
	return 0.299*float64(r)+0.587*float64(g)+0.114*float64(bl) > 170
}

// axis draws vertical grid lines and time labels at a round step.
func (s *svgWriter) axis(b *strings.Builder, top, bottom float64) {
	secs := s.dur / 1e9
	step := niceStep(secs / 10)
	off := float64(s.from-s.tl.t0) / 1e9 // window start, seconds since the run's start
	for k := math.Ceil(off/step-1e-9) * step; k <= off+secs+1e-9; k += step {
		x := s.left + (k-off)/secs*s.plotW
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000" stroke-opacity="0.08"/>`, x, top, x, bottom)
		label := fmt.Sprintf("+%gs", math.Abs(math.Round(k*1000)/1000)) // Abs: no "+-0s"
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" class="ax" text-anchor="middle">%s</text>`, x, top-8, label)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" class="ax" text-anchor="middle">%s</text>`, x, bottom+14, label)
	}
}

// niceStep rounds v up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// drawMarkers draws violation markers, at most one per pixel column and
// anchor, each linking to its violation.
func (s *svgWriter) drawMarkers(b *strings.Builder, top, bottom float64) {
	// One marker per pixel column: a column shared by several violations
	// links to the first; its tooltip says how many more are there.
	type col struct {
		m    marker
		more int
	}
	var cols []*col
	byX := map[int]*col{}
	for _, m := range s.tl.markers {
		if !s.in(m.t, m.t) {
			continue
		}
		x := int(s.x(m.t))
		if c := byX[x]; c != nil {
			c.more++
			continue
		}
		c := &col{m: m}
		byX[x] = c
		cols = append(cols, c)
	}
	// Many markers would hide the lanes: then only the triangles stay
	// strong and the lines fade.
	opacity := 0.7
	if len(cols) > 40 {
		opacity = 0.25
	}
	for _, c := range cols {
		m, x := c.m, s.x(c.m.t)
		if c.more > 0 {
			m.title += fmt.Sprintf(" (and %d more violation events here)", c.more)
		}
		fmt.Fprintf(b, `<a href="#%s"><g><title>%s</title><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#7b2cbf" stroke-width="1.2" stroke-opacity="%.2f" stroke-dasharray="4 2"/><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="transparent" stroke-width="6"/><path d="M%.1f %.1fl-5 -7h10z" fill="#7b2cbf"/></g></a>`,
			m.anchor, esc(m.title), x, top, x, bottom, opacity, x, top, x, bottom, x, top)
	}
}

// scatter draws client operation latency (log scale) against invoke time
// at y0, binned into pixel cells; it returns a note when binning merged
// operations.
func (s *svgWriter) scatter(b *strings.Builder, h, y0 float64) string {
	fmt.Fprintf(b, `<rect x="0" y="%.1f" width="%.0f" height="%.1f" fill="#fcfcfc"/>`, y0, s.w, h)
	// The latency axis spans every operation of the run, so a zoom keeps
	// the whole run's scale and the two plots compare.
	lo, hi := int64(math.MaxInt64), int64(0)
	for _, p := range s.tl.ops {
		lo, hi = min(lo, p.lat), max(hi, p.lat)
	}
	const floor = int64(100_000) // 0.1 ms: below this latency is noise
	lo = max(lo, floor)
	if hi < lo*10 {
		hi = lo * 10
	}
	llo, lhi := math.Log10(float64(lo)), math.Log10(float64(hi))
	pad := 6.0
	yOf := func(lat int64) float64 {
		l := math.Log10(float64(max(lat, floor)))
		return y0 + h - pad - (l-llo)/(lhi-llo)*(h-2*pad)
	}
	// decade grid lines
	for d := math.Ceil(llo); d <= lhi; d++ {
		y := yOf(int64(math.Pow(10, d)))
		fmt.Fprintf(b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#000" stroke-opacity="0.1"/><text x="%.0f" y="%.1f" class="ax" text-anchor="end">%s</text>`,
			s.left, y, s.w, y, s.left-4, y+3, latLabel(math.Pow(10, d)))
	}
	fmt.Fprintf(b, `<text x="6" y="%.1f" class="ll">latency (log)</text>`, y0+14)

	cell := 3.0
	type ckey struct {
		cx, cy int
		out    uint8
	}
	var (
		cells    map[ckey]int
		inWindow int
	)
	for {
		cells = make(map[ckey]int, min(len(s.tl.ops), 2*maxPoints))
		inWindow = 0
		for _, p := range s.tl.ops {
			if !s.in(p.t, p.t) {
				continue
			}
			inWindow++
			k := ckey{int((s.x(p.t) - s.left) / cell), int((yOf(p.lat) - y0) / cell), p.outcome}
			cells[k]++
		}
		if len(cells) <= maxPoints || cell > 64 {
			break
		}
		cell *= 2
	}
	keys := make([]ckey, 0, len(cells))
	for k := range cells {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a].out != keys[b].out {
			return keys[a].out < keys[b].out
		}
		if keys[a].cx != keys[b].cx {
			return keys[a].cx < keys[b].cx
		}
		return keys[a].cy < keys[b].cy
	})
	colors := [nOutcomes]string{"#2ca02c", "#d62728", "#ff7f0e"}
	names := [nOutcomes]string{"ok", "fail", "info (unknown outcome)"}
	sz := math.Max(2, cell-1)
	if inWindow < 500 {
		sz = 4 // few operations: make each one easy to see
	}
	// ok first so fail and info draw on top.
	for _, out := range []uint8{outOK, outInfo, outFail} {
		var d strings.Builder
		n := 0
		for _, k := range keys {
			if k.out != out {
				continue
			}
			x := s.left + float64(k.cx)*cell
			y := y0 + float64(k.cy)*cell
			fmt.Fprintf(&d, "M%.0f %.0fh%.0fv%.0fh-%.0fz", x, y, sz, sz, sz)
			n++
		}
		if n == 0 {
			continue
		}
		fmt.Fprintf(b, `<path d="%s" fill="%s" fill-opacity="0.75"><title>%s: %d operations</title></path>`, d.String(), colors[out], names[out], s.tl.counts[out])
	}
	if inWindow > len(keys) {
		return fmt.Sprintf("drawn as %d squares of %.0f px cells", len(keys), cell)
	}
	return ""
}

// throughput draws completions per second in buckets of a few pixels,
// stacked ok, info, fail: a dip or a red band during a fault window is the
// availability story at a glance. One <path> per outcome.
func (s *svgWriter) throughput(b *strings.Builder, h float64) {
	y0 := s.y
	fmt.Fprintf(b, `<rect x="0" y="%.1f" width="%.0f" height="%.1f" fill="#fcfcfc"/>`, y0, s.w, h)
	const bw = 4.0 // bucket width, px
	nb := int(s.plotW/bw) + 1
	counts := make([][nOutcomes]int, nb)
	for _, p := range s.tl.ops {
		done := p.t + p.lat
		if !s.in(done, done) {
			continue
		}
		i := min(nb-1, max(0, int((s.x(done)-s.left)/bw)))
		counts[i][p.outcome]++
	}
	peak := 0
	for _, c := range counts {
		peak = max(peak, c[outOK]+c[outInfo]+c[outFail])
	}
	if peak == 0 {
		return
	}
	bucketSecs := s.dur / 1e9 * bw / s.plotW
	scale := (h - 4) / float64(peak)
	colors := [nOutcomes]string{"#2ca02c", "#d62728", "#ff7f0e"}
	var paths [nOutcomes]strings.Builder
	for i, c := range counts {
		base := y0 + h
		x := s.left + float64(i)*bw
		for _, out := range []uint8{outOK, outInfo, outFail} {
			if c[out] == 0 {
				continue
			}
			hh := float64(c[out]) * scale
			fmt.Fprintf(&paths[out], "M%.0f %.1fh%.0fv%.1fh-%.0fz", x, base-hh, bw, hh, bw)
			base -= hh
		}
	}
	for _, out := range []uint8{outOK, outInfo, outFail} {
		if paths[out].Len() > 0 {
			fmt.Fprintf(b, `<path d="%s" fill="%s" fill-opacity="0.8"/>`, paths[out].String(), colors[out])
		}
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.1f" class="ax" text-anchor="end">%s ops/s</text><text x="%.0f" y="%.1f" class="ax" text-anchor="end">0</text>`,
		s.left-4, y0+10, rateLabel(float64(peak)/bucketSecs), s.left-4, y0+h)
}

func rateLabel(r float64) string {
	if r >= 100 {
		return fmt.Sprintf("%.0f", r)
	}
	return fmt.Sprintf("%.1f", r)
}

func latLabel(ns float64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%gs", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%gms", ns/1e6)
	}
	return fmt.Sprintf("%gµs", ns/1e3)
}
