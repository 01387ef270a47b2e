package reports

// This file owns the report's node-coverage section: how many of the node
// program's blocks the run's node processes reached together, per package,
// for a run made with --cover (nodecover wrote coverage.json).

import "github.com/zkchaos/zkchaos/nodecover"

// coverageRow is one package of the section.
type coverageRow struct {
	Path            string
	Covered, Blocks int
	Percent         float64
}

// coverageSummary is the section; nil for a run without coverage.json.
type coverageSummary struct {
	Covered, Blocks int
	Percent         float64
	Rows            []coverageRow
}

func coverageSummaryOf(runDir string) *coverageSummary {
	s, err := nodecover.Read(runDir)
	if err != nil || s.Blocks == 0 {
		return nil
	}
	out := &coverageSummary{Covered: s.Covered, Blocks: s.Blocks, Percent: s.Percent()}
	for _, p := range s.Packages {
		pct := 0.0
		if p.Blocks > 0 {
			pct = 100 * float64(p.Covered) / float64(p.Blocks)
		}
		out.Rows = append(out.Rows, coverageRow{Path: p.Path, Covered: p.Covered, Blocks: p.Blocks, Percent: pct})
	}
	return out
}

// coverageTmpl is the section of the page.
const coverageTmpl = `{{define "coverage"}}{{with .Coverage}}<h2>Node coverage</h2>
<p class="muted">Blocks of the node program that this run's node processes reached together ({{.Covered}} of {{.Blocks}}, {{printf "%.1f" .Percent}}%), from coverage.json; the counters are written every second, so a killed process loses at most its last second.</p>
<table style="width:auto"><tr><th>package</th><th>reached</th><th>blocks</th><th>%</th></tr>
{{range .Rows}}<tr><td class="mono nw">{{.Path}}</td><td class="mono">{{.Covered}}</td><td class="mono">{{.Blocks}}</td><td class="mono">{{printf "%.1f" .Percent}}</td></tr>
{{end}}</table>{{end}}{{end}}`
