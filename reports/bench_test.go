package reports

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/history/historytest"
	"github.com/zkchaos/zkchaos/rundir"
)

// BenchmarkRenderHTML1M renders the report of a run directory holding a
// generated history of about a million events (the checkers' 1M benchmark
// history: 8 partitions × 31,500 operations plus node, watcher and nemesis
// events, written as per-source JSONL files) with an invalid checker
// listing 50 violations of 100 events each plus 1,234 omitted. It reports
// the page size as report-bytes; reading and decoding the history is
// included in the time, as `chaos report` pays it.
//
//	go test ./reports/ -run XXX -bench RenderHTML1M -benchtime 1x -benchmem
func BenchmarkRenderHTML1M(b *testing.B) {
	dir := b.TempDir()
	h := historytest.Clean(historytest.GenConfig{Partitions: 8, Processes: 10, Ops: 31_500, UnknownRate: 0.05,
		ReadRate: 0.3, FinalReads: true, NodeEvents: true, Seed: 1})
	writeHistory(b, dir, h)
	writeRunInfo(b, dir, sampleInfo("bench-1m"))
	var vs []checkers.Violation
	for i := 0; i < checkers.MaxViolations; i++ {
		ev := make([]int, 100)
		for j := range ev {
			ev[j] = (i*20011 + j*7919) % len(h.Events)
		}
		vs = append(vs, checkers.Violation{Explanation: fmt.Sprintf("violation %d", i), Events: ev})
	}
	r := &rundir.Results{Schema: rundir.ResultsSchema, Verdict: checkers.Invalid, Events: len(h.Events), Results: []checkers.Result{
		{Checker: "durability", Verdict: checkers.Invalid, Explanation: "lost", Violations: vs, Omitted: 1234}}}
	if err := rundir.WriteResults(dir, r); err != nil {
		b.Fatal(err)
	}
	var histBytes int64
	files, _ := filepath.Glob(filepath.Join(dir, "history", "*.jsonl"))
	for _, f := range files {
		histBytes += fileSize(f)
	}
	b.Logf("%d events, %d history files, %.0f MB of JSONL", len(h.Events), len(files), float64(histBytes)/1e6)
	h = nil // let the generator's copy go before measuring
	b.ReportAllocs()
	b.ResetTimer()
	var size int64
	for i := 0; i < b.N; i++ {
		p, err := RenderHTML(dir)
		if err != nil {
			b.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		size = fi.Size()
	}
	b.StopTimer()
	b.ReportMetric(float64(size), "report-bytes")
	if size > 4<<20 {
		b.Fatalf("report of %d bytes exceeds 4 MiB", size)
	}
}
