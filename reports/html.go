package reports

// This file owns the HTML failure report (RUN_DIR/report.html): one
// self-contained page, inline CSS and SVG and a few lines of vanilla JS, that
// a person opens after a failed nightly run. Every list in it is capped, and
// the timeline is bounded by pixels (timeline.go), so the page stays a few
// hundred kilobytes however long the history is.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/rundir"
)

// Caps on what the page lists.
const (
	maxViolationsShown = 50 // per checker
	maxEventsShown     = 20 // per violation
	maxWarningsShown   = 20
	maxDetailBytes     = 2000
	maxFaultsListed    = 100
)

// NotChecked is the verdict shown for a run without results.json.
const NotChecked = "not checked"

// RenderHTML writes RUN_DIR/report.html from the run directory and returns
// its path. Bad input (a corrupt results.json, run.json or history line) is
// an error naming the file; a run that was never checked, or whose history
// is partial, still renders, saying so.
func RenderHTML(runDir string) (string, error) {
	var buf bytes.Buffer
	if err := WriteHTML(&buf, runDir); err != nil {
		return "", err
	}
	path := filepath.Join(runDir, rundir.ReportFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("write report: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", errors.Join(fmt.Errorf("write report: %w", err), os.Remove(tmp))
	}
	return path, nil
}

// WriteHTML renders the report of runDir to w.
func WriteHTML(w io.Writer, runDir string) error {
	r, err := loadRun(runDir)
	if err != nil {
		return fmt.Errorf("report %s: %w", runDir, err)
	}
	d := buildPage(r)
	if err := pageTmpl.Execute(w, d); err != nil {
		return fmt.Errorf("report %s: render: %w", runDir, err)
	}
	return nil
}

type pageData struct {
	Version          string
	ID, Dir          string
	Verdict, VClass  string
	Seed, Bugs       string
	TimeLimit        string
	Faults, Topology string
	Replay           string
	CheckedAt        string
	Events, Files    int
	Notes            []string
	// Skipped are the reader's warnings about lines it stepped over (a
	// blank line, a cut-short last line, an empty file); ClockSteps its
	// warnings about a source's wall clock stepping back, where nothing
	// was skipped and the file order was kept. Each box says which it is.
	Skipped, ClockSteps         []string
	MoreSkipped, MoreClockSteps int
	Checkers                    []checkerRow
	Violations                  []checkerViolations
	Known                       []knownRow
	Timeline                    template.HTML
	FaultRows                   []faultRow
	MoreFaults                  int
	Zoom                        template.HTML // the first violation up close
	ZoomCaption                 string
	// TimeNote says where time zero is and how long set-up took (it is
	// left out of the timeline's drawing).
	TimeNote string
	Nodes    []legendItem
	Links    []fileLink
	Kinds    []kindCount
	Fences   *fenceSummary
	Coverage *coverageSummary
}

type checkerRow struct {
	Name, Verdict, VClass, Explanation string
	NViolations                        int
	Anchor                             string
	Undecided                          []string
	Details                            string
}

// knownRow is one known anomaly (documented Kafka behaviour) a checker saw.
type knownRow struct {
	Checker, Name, Example string
	Count                  int
	Events                 []eventRow
}

type checkerViolations struct {
	Name, Anchor string
	Items        []violationItem
	More         int
}

type violationItem struct {
	Anchor, Explanation string
	Events              []eventRow
	MoreEvents          int
}

type eventRow struct {
	Index                       int
	Time, Source, Kind, Summary string
	During                      string // faults active at the event
	Missing                     bool
}

type legendItem struct{ Name, Color string }

type faultRow struct {
	Label, From, To, Held, Title string
	Open                         bool
}

type kindCount struct {
	Name  string
	Count int
}

func verdictClass(v string) string {
	switch v {
	case string(checkers.Valid):
		return "valid"
	case string(checkers.Invalid):
		return "invalid"
	case string(checkers.Unknown):
		return "unknown"
	}
	return "none"
}

func buildPage(r *run) *pageData {
	d := &pageData{Version: reportVersion, ID: r.id, Dir: r.dir, Verdict: NotChecked, Seed: "?", Bugs: "none (every fix on)", TimeLimit: "?", Faults: "?"}
	d.describeRun(r)
	d.Replay = rundir.ReplayCommand(absDir(r.dir), r.info, r.hasSchedule)
	d.Notes = r.notes

	var t0 int64
	tl := r.tl
	var h eventLookup = histLookup{}
	if r.hist != nil {
		h = r.hist
		t0 = tl.origin
		d.Events = r.hist.count()
		d.Files = len(r.hist.files)
		for _, w := range r.hist.warnings {
			list, more := &d.Skipped, &d.MoreSkipped
			if w.ClockStepBack > 0 {
				list, more = &d.ClockSteps, &d.MoreClockSteps
			}
			if len(*list) == maxWarningsShown {
				*more++
				continue
			}
			*list = append(*list, w.String())
		}
	}

	// Markers first: violation rows and the timeline share them.
	tl.addMarkers(h, r.results)

	if res := r.results; res != nil {
		d.Verdict = string(res.Verdict)
		if !res.CheckedAt.IsZero() {
			d.CheckedAt = res.CheckedAt.UTC().Format("2006-01-02 15:04:05 UTC")
		}
		for ci, cr := range res.Results {
			d.addChecker(ci, cr, h, t0, tl)
		}
	}
	d.VClass = verdictClass(d.Verdict)
	d.Fences = fenceSummaryOf(r.results)
	d.Coverage = coverageSummaryOf(r.dir)

	d.Timeline = template.HTML(tl.renderSVG()) // built from escaped parts only
	d.TimeNote = tl.timeNote()
	if from, to, caption, ok := tl.zoomWindow(h, r.results); ok {
		d.Zoom = template.HTML(tl.renderWindow(from, to))
		d.ZoomCaption = caption
	}
	for _, n := range tl.nodes {
		d.Nodes = append(d.Nodes, legendItem{Name: fmt.Sprintf("n%d", n), Color: nodeColor(n)})
	}
	for i, f := range tl.faults {
		if i == maxFaultsListed {
			d.MoreFaults = len(tl.faults) - i
			break
		}
		row := faultRow{Label: f.label, From: relTime(f.from, t0), To: relTime(f.to, t0),
			Held: time.Duration(f.to - f.from).Round(time.Millisecond).String(), Title: f.title, Open: f.open}
		d.FaultRows = append(d.FaultRows, row)
	}
	for k, n := range tl.kinds {
		d.Kinds = append(d.Kinds, kindCount{string(k), n})
	}
	sort.Slice(d.Kinds, func(a, b int) bool {
		return d.Kinds[a].Count > d.Kinds[b].Count || d.Kinds[a].Count == d.Kinds[b].Count && d.Kinds[a].Name < d.Kinds[b].Name
	})

	if r.hasLinear {
		d.Links = append(d.Links, fileLink{Name: rundir.LinearizeFile, Size: fileSize(filepath.Join(r.dir, rundir.LinearizeFile))})
	}
	d.Links = append(d.Links, r.logs...)
	for _, f := range []string{rundir.ResultsFile, rundir.ScheduleFile, rundir.RunFile} {
		if sz := fileSize(filepath.Join(r.dir, f)); sz >= 0 {
			d.Links = append(d.Links, fileLink{Name: f, Size: sz})
		}
	}
	if r.hist != nil {
		d.Links = append(d.Links, fileLink{Name: rundir.HistoryDir + "/", Size: -1})
	}
	return d
}

// describeRun fills the run's description (seed, bugs, faults, topology)
// from run.json, else what the history says.
func (d *pageData) describeRun(r *run) {
	if r.info != nil {
		ri := r.info
		d.Seed = fmt.Sprint(ri.Seed)
		if len(ri.Bugs) > 0 {
			d.Bugs = strings.Join(ri.Bugs, ", ")
		}
		if ri.TimeLimit > 0 {
			d.TimeLimit = ri.TimeLimit.String()
		}
		d.Faults = "none"
		switch {
		case ri.Scenario != "":
			// A scenario's driver, not a schedule, decides the faults.
			d.Faults = "driven by scenario " + ri.Scenario + " (see the faults lane)"
		case len(ri.Faults) > 0:
			d.Faults = strings.Join(ri.Faults, ", ")
		}
		clients := fmt.Sprintf("%d producers, %d readers", ri.Producers, ri.Readers)
		if ri.NoWorkload {
			clients = "no client workload"
		}
		d.Topology = fmt.Sprintf("%d brokers, %d ZooKeeper servers, topic %s × %d partitions (RF %d), %s, session timeout %s",
			ri.Nodes, ri.ZK.Servers, ri.Topic, ri.Partitions, ri.RF, clients, ri.ZKSessionTimeout)
		if ri.SpreadTopic != "" {
			d.Topology += fmt.Sprintf(", topic %s × %d partitions (RF 2, rotating, no clients)", ri.SpreadTopic, ri.Nodes)
		}
		if len(ri.NodeFlags) > 0 {
			d.Topology += ", node flags " + strings.Join(ri.NodeFlags, " ")
		}
	} else if r.hist != nil && len(r.hist.bugs) > 0 {
		bugs := r.hist.bugs
		d.Bugs = strings.Join(bugs, ", ") + " (from node_start events)"
	} else {
		d.Bugs = "?"
	}
}

// addChecker adds checker result cr (the ci-th) as a row, with its known
// anomalies and violations, each with the events it names.
func (d *pageData) addChecker(ci int, cr checkers.Result, h eventLookup, t0 int64, tl *timeline) {
	row := checkerRow{Name: cr.Checker, Verdict: string(cr.Verdict), VClass: verdictClass(string(cr.Verdict)),
		Explanation: cr.Explanation, NViolations: len(cr.Violations) + cr.Omitted}
	if u, ok := cr.Details["undecided"].([]any); ok {
		for i, x := range u {
			if i == maxViolationsShown {
				row.Undecided = append(row.Undecided, fmt.Sprintf("… %d more", len(u)-i))
				break
			}
			row.Undecided = append(row.Undecided, fmt.Sprint(x))
		}
	}
	if len(cr.Details) > 0 {
		if b, err := json.Marshal(cr.Details); err == nil {
			s := string(b)
			if len(s) > maxDetailBytes {
				s = s[:maxDetailBytes] + " … (truncated; see results.json)"
			}
			row.Details = s
		}
	}
	for _, k := range cr.Known {
		kr := knownRow{Checker: cr.Checker, Name: k.Name, Example: k.Example, Count: k.Count}
		for ei, idx := range k.Events {
			if ei == maxEventsShown {
				break
			}
			kr.Events = append(kr.Events, eventRowOf(h, idx, t0, tl))
		}
		d.Known = append(d.Known, kr)
	}
	if len(cr.Violations) > 0 {
		cv := checkerViolations{Name: cr.Checker, Anchor: fmt.Sprintf("c%d", ci), More: cr.Omitted}
		row.Anchor = cv.Anchor
		for vi, v := range cr.Violations {
			if vi == maxViolationsShown {
				cv.More += len(cr.Violations) - vi
				break
			}
			item := violationItem{Anchor: violationAnchor(ci, vi), Explanation: v.Explanation}
			for ei, idx := range v.Events {
				if ei == maxEventsShown {
					item.MoreEvents = len(v.Events) - ei
					break
				}
				item.Events = append(item.Events, eventRowOf(h, idx, t0, tl))
			}
			cv.Items = append(cv.Items, item)
		}
		d.Violations = append(d.Violations, cv)
	}
	d.Checkers = append(d.Checkers, row)
}

// eventRowOf renders event idx of h; an index outside the history (results
// from another history) is shown as missing instead of panicking.
func eventRowOf(h eventLookup, idx int, t0 int64, tl *timeline) eventRow {
	e := h.event(idx)
	if e == nil {
		return eventRow{Index: idx, Missing: true}
	}
	return eventRow{Index: idx, Time: relTime(e.Time, t0), Source: e.Source, Kind: string(e.Kind), Summary: Summarize(e),
		During: tl.activeFaults(e.Time)}
}

func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return -1
	}
	return fi.Size()
}

func humanSize(n int64) string {
	switch {
	case n < 0:
		return ""
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

var pageTmpl = template.Must(template.Must(template.New("report").Funcs(template.FuncMap{"size": humanSize}).Parse(fencesTmpl + coverageTmpl)).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="{{.Version}}">
<title>{{.Verdict}} — run {{.ID}}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#222;background:#fff}
main{max-width:1240px;margin:0 auto;padding:16px 20px 40px}
h1{font-size:22px;margin:4px 0 8px;display:flex;align-items:center;gap:12px;flex-wrap:wrap}
h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}
.badge{display:inline-block;padding:2px 10px;border-radius:4px;color:#fff;font-weight:600;text-transform:uppercase;font-size:13px;letter-spacing:.03em}
.valid{background:#2e7d32}.invalid{background:#c62828}.unknown{background:#ef6c00}.none{background:#757575}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eee;vertical-align:top}
th{background:#f6f6f6;font-weight:600}
.meta th{width:130px;background:none;color:#555}
.mono,pre,code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
pre.cmd{background:#f4f4f4;border:1px solid #ddd;padding:8px 10px;white-space:pre-wrap;word-break:break-all;margin:0}
.cmdrow{display:flex;gap:8px;align-items:flex-start}
button{font:inherit;font-size:12px;padding:4px 10px;cursor:pointer}
.note{background:#fff7e0;border-left:4px solid #f0b400;padding:6px 10px;margin:6px 0}
.viol{border-left:4px solid #c62828;padding:2px 0 2px 12px;margin:12px 0}
.viol:target{background:#fbeaea}
.vsec{padding:0 8px;margin:0 -8px;border-radius:4px}
.vsec:target{background:#fdf1f1;box-shadow:0 0 0 2px #e8b4b4}
.ev{table-layout:fixed}
.ev td{font-size:12.5px;overflow-wrap:anywhere}
.ev td.i{color:#777;white-space:nowrap}
.muted{color:#777}
.nw{white-space:nowrap}
.during{font-family:system-ui,sans-serif;font-size:11px;background:#fde2e2;color:#8a1c1c;border-radius:3px;padding:0 4px;white-space:nowrap}
.legend span{display:inline-flex;align-items:center;gap:4px;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:12px;height:12px;border-radius:2px}
.tlwrap{border:1px solid #ddd;overflow-x:auto}
details summary{cursor:pointer;color:#555}
a{color:#1a5fb4}
</style></head>
<body><main>
<h1><span class="badge {{.VClass}}">{{.Verdict}}</span> run <span class="mono">{{.ID}}</span></h1>
<table class="meta">
<tr><th>seed</th><td class="mono">{{.Seed}}</td></tr>
<tr><th>bug switches on</th><td>{{.Bugs}}</td></tr>
<tr><th>time limit</th><td>{{.TimeLimit}}</td></tr>
<tr><th>faults</th><td>{{.Faults}}</td></tr>
{{if .Topology}}<tr><th>cluster</th><td>{{.Topology}}</td></tr>{{end}}
<tr><th>history</th><td>{{.Events}} events from {{.Files}} files{{if .CheckedAt}}; checked {{.CheckedAt}}{{end}}</td></tr>
<tr><th>run directory</th><td class="mono">{{.Dir}}</td></tr>
<tr><th>replay</th><td>{{if .Replay}}<div class="cmdrow"><pre class="cmd" id="replay">{{.Replay}}</pre><button type="button" onclick="navigator.clipboard&&navigator.clipboard.writeText(document.getElementById('replay').textContent)">copy</button></div>{{else}}<span class="muted">no run.json: cannot build a replay command</span>{{end}}</td></tr>
</table>
{{range .Notes}}<div class="note">{{.}}</div>{{end}}
{{if .Skipped}}<div class="note">partial history, lines skipped:<ul>{{range .Skipped}}<li class="mono">{{.}}</li>{{end}}{{if .MoreSkipped}}<li>… {{.MoreSkipped}} more</li>{{end}}</ul></div>{{end}}
{{if .ClockSteps}}<div class="note">wall clock stepped back within a source; nothing skipped, file order kept:<ul>{{range .ClockSteps}}<li class="mono">{{.}}</li>{{end}}{{if .MoreClockSteps}}<li>… {{.MoreClockSteps}} more</li>{{end}}</ul></div>{{end}}
{{if .Links}}<p>{{range $i, $l := .Links}}{{if $i}} · {{end}}<a href="{{$l.Name}}">{{$l.Name}}</a>{{with size $l.Size}} <span class="muted">({{.}})</span>{{end}}{{end}}</p>{{end}}

{{template "fences" .}}
{{template "coverage" .}}
<h2>Checkers</h2>
{{if .Checkers}}<table>
<tr><th style="width:170px">checker</th><th style="width:90px">verdict</th><th>explanation</th></tr>
{{range .Checkers}}<tr><td class="mono nw">{{.Name}}</td><td><span class="badge {{.VClass}}">{{.Verdict}}</span></td><td>{{.Explanation}}{{if .Anchor}} <a href="#{{.Anchor}}">{{.NViolations}} violation(s) ↓</a>{{end}}
{{if .Undecided}}<ul>{{range .Undecided}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .Details}}<details><summary>details</summary><pre class="cmd">{{.Details}}</pre></details>{{end}}</td></tr>
{{end}}</table>
{{else}}<p class="note">Not checked yet: this run has no results.json. Run <code>chaos check {{.Dir}}</code>, then <code>chaos report {{.Dir}}</code>.</p>{{end}}

<h2>Timeline</h2>
{{if .Timeline}}<p class="legend"><span><i style="background:#e15759;opacity:.6"></i>fault window</span><span><i style="background:#d4a017;opacity:.6"></i>failpoint</span><span><i style="background:#7b2cbf"></i>violation event (click)</span><span><i style="background:#888"></i>many short intervals</span>{{range .Nodes}}<span><i style="background:{{.Color}}"></i>{{.Name}}</span>{{end}}<span><i style="background:#2ca02c"></i>ok</span><span><i style="background:#d62728"></i>fail</span><span><i style="background:#ff7f0e"></i>info</span></p>
<div class="tlwrap">{{.Timeline}}</div>
<p class="muted">{{.TimeNote}} Hover a bar for its details. Dashed edges: never ended before the history did.</p>
{{if .Zoom}}<h3>Up close: {{.ZoomCaption}}</h3>
<div class="tlwrap">{{.Zoom}}</div>{{end}}
{{else}}<p class="muted">No events to draw.</p>{{end}}

{{if .FaultRows}}<h2>Faults</h2>
<table><tr><th>fault</th><th>from</th><th>to</th><th>held</th><th>what</th></tr>
{{range .FaultRows}}<tr><td class="mono nw">{{.Label}}</td><td class="mono">{{.From}}</td><td class="mono">{{.To}}{{if .Open}} <span class="badge invalid">never stopped</span>{{end}}</td><td class="mono">{{.Held}}</td><td class="muted">{{.Title}}</td></tr>
{{end}}{{if .MoreFaults}}<tr><td colspan="5" class="muted">… {{.MoreFaults}} more faults</td></tr>{{end}}</table>{{end}}

{{if .Known}}<h2>Known anomalies</h2>
<p class="muted">Documented Kafka behaviour, not violations: they leave a verdict valid (unless a strict mode is on).</p>
<table><tr><th style="width:170px">anomaly</th><th style="width:60px">count</th><th style="width:120px">checker</th><th>example</th></tr>
{{range .Known}}<tr><td class="mono nw">{{.Name}}</td><td class="mono">{{.Count}}</td><td class="mono nw">{{.Checker}}</td><td>{{.Example}}
{{if .Events}}<table class="ev">{{range .Events}}<tr>{{if .Missing}}<td class="i">#{{.Index}}</td><td colspan="4" class="muted">not in this history</td>{{else}}<td class="i">#{{.Index}}</td><td class="mono nw">{{.Time}}</td><td class="mono nw">{{.Source}}</td><td class="mono nw">{{.Kind}}</td><td class="mono">{{.Summary}}</td>{{end}}</tr>
{{end}}</table>{{end}}</td></tr>
{{end}}</table>{{end}}

{{if .Violations}}<h2>Violations</h2>
{{range .Violations}}<section class="vsec" id="{{.Anchor}}"><h3 class="mono">{{.Name}}</h3>
{{range .Items}}<div class="viol" id="{{.Anchor}}"><div>{{.Explanation}}</div>
{{if .Events}}<table class="ev"><colgroup><col style="width:56px"><col style="width:76px"><col style="width:80px"><col style="width:150px"><col></colgroup>{{range .Events}}<tr>{{if .Missing}}<td class="i">#{{.Index}}</td><td colspan="4" class="muted">not in this history</td>{{else}}<td class="i">#{{.Index}}</td><td class="mono nw">{{.Time}}</td><td class="mono nw">{{.Source}}</td><td class="mono nw">{{.Kind}}</td><td class="mono">{{.Summary}}{{if .During}} <span class="during">during {{.During}}</span>{{end}}</td>{{end}}</tr>
{{end}}{{if .MoreEvents}}<tr><td colspan="5" class="muted">… {{.MoreEvents}} more events</td></tr>{{end}}</table>{{end}}</div>
{{end}}{{if .More}}<p class="muted">… and {{.More}} more violations (see results.json).</p>{{end}}</section>
{{end}}{{end}}

{{if .Kinds}}<h2>Events by kind</h2>
<p class="mono">{{range $i, $k := .Kinds}}{{if $i}} · {{end}}{{$k.Name}} {{$k.Count}}{{end}}</p>{{end}}
</main></body></html>
`))
