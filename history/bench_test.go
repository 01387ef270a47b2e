package history_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/bytedance/sonic"
	gojson "github.com/goccy/go-json"
	segjson "github.com/segmentio/encoding/json"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
)

// BenchmarkDecode100k measures reading JSONL: 100,000 generated events of
// every family, written by a Writer and decoded back.
func BenchmarkDecode100k(b *testing.B) {
	h, buf := corpus100k(b)
	b.Logf("%d events, %d bytes", len(h.Events), len(buf))
	benchmarkDecode(b, buf)
}

// corpus100k is the benchmarks' corpus: about 100,000 generated events of
// every family, and the JSONL a Writer makes of them.
func corpus100k(b *testing.B) (*history.History, []byte) {
	h := historytest.Clean(historytest.GenConfig{Partitions: 4, Processes: 10, Ops: 6_500, UnknownRate: 0.05,
		ReadRate: 0.3, FinalReads: true, NodeEvents: true, Seed: 1})
	var buf bytes.Buffer
	w := history.NewWriter(&buf, "bench", 0)
	for _, e := range h.Events {
		if err := w.Write(e); err != nil {
			b.Fatal(err)
		}
	}
	return h, buf.Bytes()
}

// benchmarkDecode times decoding data.
func benchmarkDecode(b *testing.B, data []byte) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := history.Decode(bytes.NewReader(data), "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecoders compares JSON decoders on one corpus, decoding every
// line through the reader (UTF-8 and field validation included):
// encoding/json against goccy/go-json, segmentio/encoding and
// bytedance/sonic. The reader uses the winner (see history.unmarshal).
func BenchmarkDecoders(b *testing.B) {
	h, buf := corpus100k(b)
	decoders := []struct {
		name string
		f    func([]byte, any) error
	}{
		{"encoding-json", json.Unmarshal},
		{"goccy-go-json", gojson.Unmarshal},
		{"segmentio-encoding", segjson.Unmarshal},
		{"sonic", sonic.Unmarshal},
	}
	for _, d := range decoders {
		b.Run(d.name, func(b *testing.B) {
			defer history.SetUnmarshal(d.f)()
			evs, _, err := history.Decode(bytes.NewReader(buf), "bench")
			if err != nil || len(evs) != len(h.Events) {
				b.Fatalf("%d events, %v", len(evs), err)
			}
			benchmarkDecode(b, buf)
		})
	}
}

// BenchmarkReadDir1M reads the generated 1M-event run directory
// (historytest.Bench1M, one file per source): parallel decoding and merge.
func BenchmarkReadDir1M(b *testing.B) {
	dir := b.TempDir()
	if err := history.WriteDir(dir, historytest.Clean(historytest.Bench1M).Events); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h, err := history.ReadDir(dir)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(h.Events)), "events")
	}
}
