package storage

import (
	"fmt"
	"testing"
)

// BenchmarkAppendAsLeader appends realistic small producer batches (1 or 10
// records of 100-byte values) with and without an fsync per append.
func BenchmarkAppendAsLeader(b *testing.B) {
	for _, sync := range []bool{false, true} {
		for _, recs := range []int{1, 10} {
			b.Run(fmt.Sprintf("records=%d/fsync=%v", recs, sync), func(b *testing.B) {
				l, _, err := Open(b.TempDir(), Options{SyncOnAppend: sync})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				batch := makeBatch(recs, 100, 0)
				b.SetBytes(int64(len(batch)))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := l.AppendAsLeader(batch, 1); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*recs)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

// BenchmarkRead fetches a 20,000-batch log (10 records each) front to back,
// as a consumer or follower does: one batch per read (worst case, the
// sparse index scan dominates) and 64 KiB per read (a typical fetch).
func BenchmarkRead(b *testing.B) {
	l, _, err := Open(b.TempDir(), Options{SegmentBytes: 8 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := makeBatch(10, 100, 0)
	for i := 0; i < 20000; i++ {
		if _, err := l.AppendAsLeader(batch, 1); err != nil {
			b.Fatal(err)
		}
	}
	leo := l.LogEndOffset()
	for _, maxBytes := range []int{1, 64 << 10} {
		b.Run(fmt.Sprintf("maxBytes=%d", maxBytes), func(b *testing.B) {
			var bytes, records int64
			next := int64(0)
			for i := 0; i < b.N; i++ {
				if next >= leo {
					next = 0
				}
				out, err := l.Read(next, maxBytes, -1)
				if err != nil || len(out) == 0 {
					b.Fatalf("read %d: %d bytes, %v", next, len(out), err)
				}
				n := int64(len(out)) / int64(len(batch)) * 10
				next += n
				records += n
				bytes += int64(len(out))
			}
			b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(bytes)/b.Elapsed().Seconds()/1e6, "MB/s")
		})
	}
}
