package reports

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
	"github.com/zkchaos/zkchaos/nodecover"
	"github.com/zkchaos/zkchaos/rundir"
)

// The summary's fence table shows each fence's stale inputs and refusals
// and names the untested fences; a run checked before fences were counted
// has no table.
func TestReportFenceTable(t *testing.T) {
	b := historytest.New()
	b.Start(1)
	b.Register(1, 100)
	b.Control(1, history.Control{API: history.APIUpdateMetadata, ControllerID: 2, ControllerEpoch: 1, BrokerEpoch: 100,
		KnownControllerEpoch: 2, OwnBrokerEpoch: 100, Verdict: history.VerdictAccepted})
	b.Control(1, history.Control{API: history.APIUpdateMetadata, ControllerID: 2, ControllerEpoch: 1, BrokerEpoch: 100,
		KnownControllerEpoch: 2, OwnBrokerEpoch: 100, Verdict: history.VerdictRejected, ErrorCode: history.ErrStaleControllerEpoch})

	tests := []struct {
		name   string
		drop   bool // results.json without the fences result
		want   []string
		absent []string
	}{
		{"counted", false, []string{
			"<h2>Fences</h2>",
			`<td class="mono nw">broker-controller-epoch</td><td class="mono">2</td><td class="mono">1 <span class="muted">(1 not refused)</span>`,
			`<td class="mono nw">broker-broker-epoch</td><td class="mono">0 <span class="muted">untested</span>`,
			"Untested in this run (no stale input reached them): broker-broker-epoch, controller-broker-epoch,",
			// No group or transaction traffic: those fences have no row.
			"Not applicable to this run (no group or transaction traffic): coordinator-generation, txn-producer-epoch, txn-coordinator-epoch, txn-verification.",
		}, []string{"Untested in this run (no stale input reached them): broker-controller-epoch",
			`<td class="mono nw">coordinator-generation</td><td class="mono">`, "leader-isr-zkversion, coordinator-generation"}},
		{"checked before fences were counted", true, nil, []string{"<h2>Fences</h2>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeSampleRun(t, dir, b.History(), "fences")
			res := check(t, dir)
			if tt.drop {
				var kept []checkers.Result
				for _, r := range res.Results {
					if r.Checker != (checkers.FenceCoverage{}).Name() {
						kept = append(kept, r)
					}
				}
				res.Results = kept
				if err := rundir.WriteResults(dir, res); err != nil {
					t.Fatal(err)
				}
			}
			pageHas(t, render(t, dir), tt.want, tt.absent)
		})
	}
}

// A run made with --cover shows its node coverage per package; a run
// without coverage.json has no such section.
func TestReportNodeCoverage(t *testing.T) {
	b := historytest.New()
	b.Start(1)
	for _, withCover := range []bool{true, false} {
		dir := t.TempDir()
		writeSampleRun(t, dir, b.History(), "coverage")
		check(t, dir)
		if withCover {
			cov := `{"blocks":10,"covered":4,"packages":[{"path":"github.com/zkchaos/zkchaos/node/controller","blocks":6,"covered":3},{"path":"github.com/zkchaos/zkchaos/node/wire","blocks":4,"covered":1}],"reached":["a","b","c","d"]}`
			if err := os.WriteFile(filepath.Join(dir, nodecover.File), []byte(cov), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		page := render(t, dir)
		has := strings.Contains(page, "<h2>Node coverage</h2>")
		if has != withCover {
			t.Fatalf("coverage section %v, want %v", has, withCover)
		}
		if withCover && (!strings.Contains(page, "(4 of 10, 40.0%)") || !strings.Contains(page, `<td class="mono nw">github.com/zkchaos/zkchaos/node/controller</td><td class="mono">3</td><td class="mono">6</td><td class="mono">50.0</td>`)) {
			t.Errorf("coverage section lacks the totals or the controller's row:\n%s", page[strings.Index(page, "<h2>Node coverage</h2>"):])
		}
	}
}
