package reports

// This file owns the side-by-side page of one scenario run several ways on
// the same schedule (KAFKA-3861's three election policies): per run, its
// verdict, how long a partition stayed without a leader and how many
// acknowledged records were lost, read from each run's results.json.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/rundir"
)

// CompareRun is one run of a comparison: the mode it ran in and its folder.
type CompareRun struct {
	Mode   string
	About  string
	RunDir string
}

// CompareRow is what the comparison shows of one run.
type CompareRow struct {
	Mode, About string
	RunDir      string
	Verdict     checkers.Verdict
	// LongestOffline is the longest window any partition had no leader.
	LongestOffline time.Duration
	// Acknowledged and Lost count acknowledged records and those the final
	// reads did not find (durability's figures); Lost is -1 when durability
	// could not count them.
	Acknowledged, Lost int
	// Findings are the explanations of the checkers that were not valid
	// and the known anomalies of those that were.
	Findings []string
}

// Compare reads the results of every run.
func Compare(runs []CompareRun) ([]CompareRow, error) {
	var rows []CompareRow
	for _, r := range runs {
		res, err := rundir.ReadResults(r.RunDir)
		if err != nil {
			return nil, fmt.Errorf("compare %s: %w", r.Mode, err)
		}
		row := CompareRow{Mode: r.Mode, About: r.About, RunDir: r.RunDir, Verdict: res.Verdict, Lost: -1}
		for _, c := range res.Results {
			if c.Verdict != checkers.Valid {
				row.Findings = append(row.Findings, fmt.Sprintf("%s %s: %s", c.Checker, c.Verdict, c.Explanation))
			} else {
				// A valid run's known anomalies are what a mode traded
				// (an unclean election's lost records): say them.
				for _, k := range c.Known {
					row.Findings = append(row.Findings, fmt.Sprintf("%s valid, known anomaly %s ×%d: %s", c.Checker, k.Name, k.Count, k.Example))
				}
			}
			switch c.Checker {
			case checkers.Availability{}.Name():
				row.LongestOffline = longestOffline(c.Details["partitions"])
			case checkers.Durability{}.Name():
				row.Acknowledged = intDetail(c.Details["acknowledged"])
				if _, ok := c.Details["lost_count"]; ok {
					row.Lost = intDetail(c.Details["lost_count"])
				}
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// longestOffline reads availability's per-partition windows back from
// results.json (where they are plain JSON).
func longestOffline(v any) time.Duration {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	var parts []checkers.PartitionAvailability
	if json.Unmarshal(b, &parts) != nil {
		return 0
	}
	var longest time.Duration
	for _, p := range parts {
		for _, w := range p.Offline {
			longest = max(longest, time.Duration(w.Duration)*time.Millisecond)
		}
	}
	return longest
}

func intDetail(v any) int {
	if f, ok := v.(float64); ok {
		return int(f)
	}
	return 0
}

// WriteCompareText writes the comparison as a table for a terminal.
func WriteCompareText(w io.Writer, rows []CompareRow) {
	fmt.Fprintf(w, "%-10s %-8s %16s %24s\n", "mode", "verdict", "longest offline", "acknowledged lost")
	for _, r := range rows {
		lost := "not counted"
		if r.Lost >= 0 {
			lost = fmt.Sprintf("%d of %d", r.Lost, r.Acknowledged)
		}
		fmt.Fprintf(w, "%-10s %-8s %16s %24s\n", r.Mode, r.Verdict, r.LongestOffline.Round(100*time.Millisecond), lost)
	}
}

// RenderCompare writes the comparison page to path.
func RenderCompare(path, title string, rows []CompareRow) error {
	var buf bytes.Buffer
	data := struct {
		Title string
		Rows  []CompareRow
	}{title, rows}
	if err := compareTmpl.Execute(&buf, data); err != nil {
		return fmt.Errorf("render %s: %w", path, err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

var compareTmpl = template.Must(template.New("compare").Funcs(template.FuncMap{
	"base": filepath.Base,
	"round": func(d time.Duration) string {
		return d.Round(100 * time.Millisecond).String()
	},
	"lost": func(r CompareRow) string {
		if r.Lost < 0 {
			return "not counted"
		}
		return fmt.Sprintf("%d of %d", r.Lost, r.Acknowledged)
	},
	"lower": func(v checkers.Verdict) string { return strings.ToLower(string(v)) },
}).Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;max-width:72em}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.4em .7em;text-align:left;vertical-align:top}
.valid{color:#17702f}.invalid{color:#b3261e}.unknown{color:#8a6d00}
</style></head><body>
<h1>{{.Title}}</h1>
<p>The same driver and seed, one run per mode.</p>
<table>
<tr><th>mode</th><th>verdict</th><th>longest time a partition had no leader</th><th>acknowledged records lost</th><th>findings</th><th>run</th></tr>
{{range .Rows}}<tr>
<td><b>{{.Mode}}</b><br><small>{{.About}}</small></td>
<td class="{{lower .Verdict}}">{{.Verdict}}</td>
<td>{{round .LongestOffline}}</td>
<td>{{lost .}}</td>
<td>{{range .Findings}}<div>{{.}}</div>{{else}}every checker valid{{end}}</td>
<td><a href="{{base .RunDir}}/report.html">{{base .RunDir}}</a></td>
</tr>{{end}}
</table>
</body></html>
`))
