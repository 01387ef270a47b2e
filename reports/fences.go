package reports

// This file owns the report's fence table: per fence, the stale inputs
// that reached it in the run and how many it refused, as the fences
// checker counted them, and the fences the run left untested. A verdict
// says nothing about a fence no stale input reached.

import (
	"strings"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/rundir"
)

// fenceRow is one fence of the table.
type fenceRow struct {
	Fence            string
	Inputs, Rejected int
	// Obeyed counts stale inputs not refused (the fencing checkers judge
	// them).
	Obeyed int
}

// fenceSummary is the table and the untested fences, joined for a
// sentence.
type fenceSummary struct {
	Rows     []fenceRow
	Untested string
	// NotApplicable names the fences no traffic in the run could reach
	// (group and transaction fences in a log-workload run): no row.
	NotApplicable string
}

// fenceSummaryOf reads the fence counts of res; nil when the run was not
// checked or was checked before fences were counted.
func fenceSummaryOf(res *rundir.Results) *fenceSummary {
	if res == nil {
		return nil
	}
	for _, r := range res.Results {
		counts, ok := checkers.FencesOf(r)
		if !ok {
			continue
		}
		s := &fenceSummary{Untested: strings.Join(checkers.UntestedFences(counts), ", ")}
		var notApplicable []string
		for _, c := range counts {
			if c.NotApplicable {
				notApplicable = append(notApplicable, c.Fence)
				continue
			}
			s.Rows = append(s.Rows, fenceRow{Fence: c.Fence, Inputs: c.Inputs, Rejected: c.Rejected, Obeyed: c.Inputs - c.Rejected})
		}
		s.NotApplicable = strings.Join(notApplicable, ", ")
		return s
	}
	return nil
}

// fencesTmpl is the table's section of the page.
const fencesTmpl = `{{define "fences"}}{{with .Fences}}<h2>Fences</h2>
<p class="muted">Stale inputs that reached each fence in this run and how many it refused. A fence no stale input reached was not tested by this run, whatever its verdict.</p>
<table style="width:auto"><tr><th>fence</th><th>stale inputs</th><th>rejected</th></tr>
{{range .Rows}}<tr><td class="mono nw">{{.Fence}}</td><td class="mono">{{.Inputs}}{{if not .Inputs}} <span class="muted">untested</span>{{end}}</td><td class="mono">{{.Rejected}}{{if .Obeyed}} <span class="muted">({{.Obeyed}} not refused)</span>{{end}}</td></tr>
{{end}}</table>
{{if .Untested}}<p class="note">Untested in this run (no stale input reached them): {{.Untested}}.</p>{{end}}
{{if .NotApplicable}}<p class="muted">Not applicable to this run (no group or transaction traffic): {{.NotApplicable}}.</p>{{end}}{{end}}{{end}}`
