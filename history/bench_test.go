package history_test

import (
	"bytes"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
)

// BenchmarkDecode100k measures reading JSONL: 100,000 generated events of
// every family, written by a Writer and decoded back.
func BenchmarkDecode100k(b *testing.B) {
	h := historytest.Clean(historytest.GenConfig{Partitions: 4, Processes: 10, Ops: 6_500, UnknownRate: 0.05,
		ReadRate: 0.3, FinalReads: true, NodeEvents: true, Seed: 1})
	var buf bytes.Buffer
	w := history.NewWriter(&buf, "bench", 0)
	for _, e := range h.Events {
		if err := w.Write(e); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%d events, %d bytes", len(h.Events), buf.Len())
	b.SetBytes(int64(buf.Len()))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := history.Decode(bytes.NewReader(buf.Bytes()), "bench"); err != nil {
			b.Fatal(err)
		}
	}
}
