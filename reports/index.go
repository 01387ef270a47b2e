package reports

// This file owns the index of stored runs: a summary of each run directory
// under a runs folder (id, time, verdict, seed, bug switches, link to its
// report), read from run.json and results.json only, never from the history,
// so listing hundreds of runs stays instant.

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/rundir"
)

// RunSummary is what the index and JUnit need about one run.
type RunSummary struct {
	ID      string
	Dir     string
	Time    time.Time // when the run started (run.json's time), else the directory's
	Seed    uint64
	HasSeed bool // Seed is known (run.json present)
	Bugs    []string
	Faults  []string
	Verdict string          // valid, invalid, unknown or NotChecked
	Results *rundir.Results // nil: not checked
	Replay  string          // command that replays the run; "" without run.json
	Report  string          // path of report.html ("" when not rendered yet)
	// Problem is set when the run could not be read or finished (a corrupt
	// results.json, a harness error); the run is then an error in JUnit and
	// flagged in the index instead of hiding the other runs.
	Problem string
}

// Failing returns the names of the run's invalid checkers.
func (s RunSummary) Failing() []string {
	if s.Results == nil {
		return nil
	}
	var out []string
	for _, r := range s.Results.Results {
		if r.Verdict == checkers.Invalid {
			out = append(out, r.Checker)
		}
	}
	return out
}

// LoadSummary reads run.json and results.json of runDir. Corrupt files are
// an error naming the file; absent ones leave the fields empty.
func LoadSummary(runDir string) (RunSummary, error) {
	s := RunSummary{ID: filepath.Base(filepath.Clean(runDir)), Dir: runDir, Verdict: NotChecked}
	fi, err := os.Stat(runDir)
	if err != nil {
		return s, fmt.Errorf("run dir: %w", err)
	}
	s.Time = fi.ModTime()
	if ri, err := os.Stat(filepath.Join(runDir, rundir.RunFile)); err == nil {
		s.Time = ri.ModTime() // written when the run starts
	}
	info, err := rundir.ReadInfo(runDir)
	if err != nil {
		return s, err
	}
	if info != nil {
		if info.RunID != "" {
			s.ID = info.RunID
		}
		s.Seed, s.HasSeed, s.Bugs, s.Faults = info.Seed, true, info.Bugs, info.Faults
	}
	_, serr := os.Stat(filepath.Join(runDir, rundir.ScheduleFile))
	s.Replay = rundir.ReplayCommand(absDir(runDir), info, serr == nil)
	if _, err := os.Stat(filepath.Join(runDir, rundir.ResultsFile)); err == nil {
		if s.Results, err = rundir.ReadResults(runDir); err != nil {
			return s, err
		}
		s.Verdict = string(s.Results.Verdict)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return s, fmt.Errorf("results: %w", err)
	}
	if _, err := os.Stat(filepath.Join(runDir, rundir.ReportFile)); err == nil {
		s.Report = filepath.Join(runDir, rundir.ReportFile)
	}
	return s, nil
}

// isRunDir tells whether dir looks like a run directory.
func isRunDir(dir string) bool {
	for _, f := range []string{rundir.RunFile, rundir.ResultsFile, rundir.HistoryDir} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return true
		}
	}
	return false
}

// Index lists the run directories directly under runsDir, newest first. A
// run whose files are corrupt is listed with Problem set rather than failing
// the listing; only an unreadable runsDir is an error.
func Index(runsDir string) ([]RunSummary, error) {
	ents, err := os.ReadDir(runsDir)
	if err != nil {
		return nil, fmt.Errorf("runs index: %w", err)
	}
	var out []RunSummary
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(runsDir, e.Name())
		if !isRunDir(dir) {
			continue
		}
		s, err := LoadSummary(dir)
		if err != nil {
			s.Problem = err.Error()
		}
		s.ID = e.Name() // the index links by directory name
		out = append(out, s)
	}
	sort.SliceStable(out, func(a, b int) bool {
		if !out[a].Time.Equal(out[b].Time) {
			return out[a].Time.After(out[b].Time)
		}
		return out[a].ID > out[b].ID
	})
	return out, nil
}

// IndexFile is the static index WriteIndexFile writes into a runs folder.
const IndexFile = "index.html"

// PowerFile is the table `chaos power` prints, kept in its runs folder; the
// index shows it above the runs it summarises, so a team sees what its
// nemesis configuration can find next to the runs themselves.
const PowerFile = "power.txt"

// powerTable reads runsDir's PowerFile ("" when there is none).
func powerTable(runsDir string) string {
	b, err := os.ReadFile(filepath.Join(runsDir, PowerFile))
	if err != nil {
		return ""
	}
	return string(b)
}

// WriteIndexFile writes RUNS_DIR/index.html listing its runs, so a runs
// folder kept as a CI artifact can be browsed without `chaos serve` (each
// run's report must have been rendered).
func WriteIndexFile(runsDir string) (string, error) {
	runs, err := Index(runsDir)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	abs, _ := filepath.Abs(runsDir)
	if err := writeIndex(&buf, "chaos runs in "+abs, runs, powerTable(runsDir)); err != nil {
		return "", err
	}
	p := filepath.Join(runsDir, IndexFile)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("runs index: %w", err)
	}
	return p, nil
}

type indexRow struct {
	RunSummary
	Link, When, VClass, SeedS, BugsS, FailS string
	Events                                  int
}

// WriteIndexHTML writes a self-contained page listing runs. Each run's
// report is linked as <ID>/report.html relative to the page, which is how
// `chaos serve` lays them out (and how a runs folder opened from disk works
// once reports are rendered).
func WriteIndexHTML(w io.Writer, title string, runs []RunSummary) error {
	return writeIndex(w, title, runs, "")
}

// writeIndex is WriteIndexHTML with the folder's power table, if any.
func writeIndex(w io.Writer, title string, runs []RunSummary, power string) error {
	d := struct {
		Title                          string
		Power                          string
		Rows                           []indexRow
		Valid, Invalid, Unknown, Other int
	}{Title: title, Power: power}
	for _, r := range runs {
		row := indexRow{RunSummary: r, Link: url.PathEscape(r.ID) + "/" + rundir.ReportFile, When: r.Time.UTC().Format("2006-01-02 15:04:05"),
			VClass: verdictClass(r.Verdict), SeedS: "?", BugsS: "none", FailS: strings.Join(r.Failing(), ", ")}
		if r.HasSeed {
			row.SeedS = fmt.Sprint(r.Seed)
		} else {
			row.BugsS = "?"
		}
		if len(r.Bugs) > 0 {
			row.BugsS = strings.Join(r.Bugs, ", ")
		}
		if r.Results != nil {
			row.Events = r.Results.Events
		}
		switch {
		case r.Problem != "":
			row.VClass = "none"
			d.Other++
		case r.Verdict == string(checkers.Valid):
			d.Valid++
		case r.Verdict == string(checkers.Invalid):
			d.Invalid++
		case r.Verdict == string(checkers.Unknown):
			d.Unknown++
		default:
			d.Other++
		}
		d.Rows = append(d.Rows, row)
	}
	if err := indexTmpl.Execute(w, d); err != nil {
		return fmt.Errorf("runs index: %w", err)
	}
	return nil
}

var indexTmpl = template.Must(template.New("index").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#222}
main{max-width:1240px;margin:0 auto;padding:16px 20px}
h1{font-size:20px}h2{font-size:16px}pre{background:#f6f6f6;padding:8px;overflow-x:auto}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eee;vertical-align:top}
th{background:#f6f6f6}
.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}
.badge{display:inline-block;padding:1px 8px;border-radius:4px;color:#fff;font-weight:600;font-size:12px;text-transform:uppercase}
.valid{background:#2e7d32}.invalid{background:#c62828}.unknown{background:#ef6c00}.none{background:#757575}
.muted{color:#777}.prob{color:#c62828;font-size:12px}.nw{white-space:nowrap}
a{color:#1a5fb4}
</style></head><body><main>
<h1>{{.Title}}</h1>
{{if .Power}}<h2>What these random runs caught (<span class="mono">chaos power</span>)</h2>
<pre class="mono">{{.Power}}</pre>{{end}}
<p>{{len .Rows}} runs: {{.Invalid}} invalid, {{.Unknown}} unknown, {{.Valid}} valid, {{.Other}} not checked or unreadable.</p>
{{if .Rows}}<table>
<tr><th>started (UTC)</th><th>run</th><th>verdict</th><th>seed</th><th>bug switches</th><th>failing checkers</th><th>events</th></tr>
{{range .Rows}}<tr><td class="mono nw">{{.When}}</td><td class="mono nw"><a href="{{.Link}}">{{.ID}}</a> <a class="muted" href="{{.ID}}/">files</a></td>
<td>{{if .Problem}}<span class="badge none">unreadable</span><div class="prob">{{.Problem}}</div>{{else}}<span class="badge {{.VClass}}">{{.Verdict}}</span>{{end}}</td>
<td class="mono">{{.SeedS}}</td><td>{{.BugsS}}</td><td class="mono">{{.FailS}}</td><td>{{if .Events}}{{.Events}}{{end}}</td></tr>
{{end}}</table>{{else}}<p class="muted">No runs yet.</p>{{end}}
</main></body></html>
`))
