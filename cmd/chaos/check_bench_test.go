package main

import (
	"io"
	"os"
	"testing"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
)

// BenchmarkCheck1M is `chaos check` end to end (read, every checker,
// results.json, porcupine's visualization) on the generated 1M-event run
// directory (historytest.Bench1M). Generating it takes longer than checking
// it: ZKCHAOS_BENCH_RUNDIR names a directory written by
// `go run ./history/historytest/gen1m` to check instead.
func BenchmarkCheck1M(b *testing.B) {
	dir := os.Getenv("ZKCHAOS_BENCH_RUNDIR")
	if dir == "" {
		dir = b.TempDir()
		if err := history.WriteDir(dir, historytest.Clean(historytest.Bench1M).Events); err != nil {
			b.Fatal(err)
		}
	}
	cfg := checkers.DefaultConfig()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cfg.VisualizePath = b.TempDir() + "/linearizability.html"
		if err := runCheck(io.Discard, dir, cfg); err != nil {
			b.Fatalf("check: %v", err)
		}
	}
}
