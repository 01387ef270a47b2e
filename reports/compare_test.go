package reports

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/rundir"

	"github.com/zkchaos/zkchaos/checkers"
)

func writeCompareRun(t *testing.T, dir string, res []checkers.Result, v checkers.Verdict) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := rundir.WriteResults(dir, &rundir.Results{Schema: rundir.ResultsSchema, RunDir: dir, Verdict: v, Results: res}); err != nil {
		t.Fatal(err)
	}
}

func TestCompareReadsOfflineAndLost(t *testing.T) {
	root := t.TempDir()
	avail := func(ms ...int64) checkers.Result {
		var ws []checkers.Window
		for _, d := range ms {
			ws = append(ws, checkers.Window{Duration: d})
		}
		return checkers.Result{Checker: "availability", Verdict: checkers.Valid,
			Details: map[string]any{"partitions": []checkers.PartitionAvailability{{Partition: "chaos-0", Offline: ws}}}}
	}
	dur := func(acked, lost int) checkers.Result {
		v := checkers.Valid
		if lost > 0 {
			v = checkers.Invalid
		}
		return checkers.Result{Checker: "durability", Verdict: v, Explanation: "lost some",
			Details: map[string]any{"acknowledged": acked, "lost_count": lost}}
	}
	tests := []struct {
		mode        string
		results     []checkers.Result
		wantOffline time.Duration
		wantLost    int
		wantFinding bool
	}{
		{"offline", []checkers.Result{avail(300, 8200), dur(500, 0)}, 8200 * time.Millisecond, 0, false},
		{"unclean", []checkers.Result{avail(2100), dur(500, 42)}, 2100 * time.Millisecond, 42, true},
		{"no-durability", []checkers.Result{avail()}, 0, -1, false},
		// Valid, with the unclean election's cost as a known anomaly.
		{"unclean-known", []checkers.Result{avail(2100), dur(500, 0), {Checker: "isr", Verdict: checkers.Valid,
			Known: []checkers.KnownAnomaly{{Name: checkers.KnownUncleanElection, Count: 1, Example: "it cost 42 acknowledged records"}}}}, 2100 * time.Millisecond, 0, true},
	}
	var runs []CompareRun
	for _, tt := range tests {
		dir := filepath.Join(root, tt.mode)
		v := checkers.Valid
		for _, r := range tt.results {
			v = checkers.Combine(v, r.Verdict)
		}
		writeCompareRun(t, dir, tt.results, v)
		runs = append(runs, CompareRun{Mode: tt.mode, RunDir: dir})
	}
	rows, err := Compare(runs)
	if err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		r := rows[i]
		if r.LongestOffline != tt.wantOffline || r.Lost != tt.wantLost || (len(r.Findings) > 0) != tt.wantFinding {
			t.Errorf("%s: offline %s lost %d findings %v, want %s %d %v", tt.mode, r.LongestOffline, r.Lost, r.Findings, tt.wantOffline, tt.wantLost, tt.wantFinding)
		}
	}
	page := filepath.Join(root, "compare.html")
	if err := RenderCompare(page, "KAFKA-3861 <test>", rows); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(page)
	if !strings.Contains(string(b), "isr valid, known anomaly unclean-election ×1: it cost 42 acknowledged records") {
		t.Errorf("page lacks the known anomaly of a valid run:\n%s", b)
	}
	if !strings.Contains(string(b), "42 of 500") || strings.Contains(string(b), "<test>") {
		t.Errorf("page lacks the lost count or does not escape the title:\n%s", b)
	}
	var txt bytes.Buffer
	WriteCompareText(&txt, rows)
	if !strings.Contains(txt.String(), "not counted") {
		t.Errorf("text table:\n%s", txt.String())
	}
}

func TestCompareMissingResults(t *testing.T) {
	if _, err := Compare([]CompareRun{{Mode: "offline", RunDir: t.TempDir()}}); err == nil {
		t.Error("a run without results.json compared")
	}
}
