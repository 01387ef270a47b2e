package reports

// This file draws a timeline as inline SVG: lanes top to bottom on a
// fixed-width canvas, spans merged below a couple of pixels, the latency
// scatter binned into pixel cells.

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strings"
)

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

// renderSVG draws the whole run from the end of set-up (runFrom); it
// returns "" for an empty history.
func (tl *timeline) renderSVG() string {
	if tl.t1 <= tl.t0 && len(tl.ops) == 0 && len(tl.faults) == 0 {
		return ""
	}
	return tl.renderWindow(tl.runFrom(), tl.t1)
}

// renderWindow draws the time window [from, to] of the run: the same lanes,
// clipped, with the latency scatter re-binned at the window's resolution.
// Time labels stay relative to the report's origin (the end of set-up).
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
		what := "client operations"
		if tl.queueOps > 0 {
			what = fmt.Sprintf("client operations (%d of the queue workload: sends, polls, commits, assignments, the drain)", tl.queueOps)
		}
		title := fmt.Sprintf("%s: latency by invoke time (ok %d, fail %d, info %d, never completed %d in the run)",
			what, counts[outOK], counts[outFail], counts[outInfo], tl.pending)
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
		title := fmt.Sprintf("%d short intervals %s → %s", busyN, relTime(busyFrom, s.tl.origin), relTime(busyTo, s.tl.origin))
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
	t := fmt.Sprintf("%s, %s → %s", sp.title, relTime(sp.from, s.tl.origin), relTime(sp.to, s.tl.origin))
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
	off := float64(s.from-s.tl.origin) / 1e9 // window start, seconds since the origin
	for k := math.Ceil(off/step-1e-9) * step; k <= off+secs+1e-9; k += step {
		x := s.left + (k-off)/secs*s.plotW
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000" stroke-opacity="0.08"/>`, x, top, x, bottom)
		v := math.Round(k*1000) / 1000
		sign := "+"
		if v < 0 {
			sign = "-" // before the origin: set-up
		}
		label := fmt.Sprintf("%s%gs", sign, math.Abs(v)) // Abs: no "+-0s"
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
