package reports

import (
	"os"
	"path/filepath"
	"testing"
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
	h := writeBigRun(b, dir, "bench-1m", 31_500, func(i, j int) int { return i*20011 + j*7919 })
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
