package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// seedBatches are the in-code seeds; testdata/fuzz holds more (regenerate
// with ZKCHAOS_WRITE_FUZZ_SEEDS=1 go test -run TestWriteFuzzSeeds).
func seedBatches() [][]byte {
	return [][]byte{
		makeBatch(1, 0, 0),
		makeBatch(3, 20, 1),
		batchFromRecords([]kmsg.Record{{Value: []byte("v"), Headers: []kmsg.Header{{Key: "h", Value: []byte("x")}}}}, 0, nil),
		batchFromRecords([]kmsg.Record{{}}, 2, []byte("snappy?")),
	}
}

// seedLog is a valid segment: three contiguous batches.
func seedLog() []byte {
	var out []byte
	next := int64(0)
	for i, n := range []int{2, 1, 3} {
		b := makeBatch(n, 10, i)
		binary.BigEndian.PutUint64(b, uint64(next))
		binary.BigEndian.PutUint32(b[12:], uint32(i))
		next += int64(n)
		out = append(out, b...)
	}
	return out
}

// FuzzValidateBatch: never panics; anything accepted is a batch kmsg can
// decode with the same header, whose uncompressed records decode one by one
// with kmsg, and which stays valid when the leader stamps offset and epoch.
func FuzzValidateBatch(f *testing.F) {
	for _, b := range seedBatches() {
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ValidateBatch(data)
		if err != nil {
			return
		}
		checkAccepted(t, data, h)
	})
}

// FuzzRecords fuzzes the records area and count of an otherwise valid,
// uncompressed batch whose CRC is recomputed, so the record walker is
// exercised (random bytes almost never pass the CRC in FuzzValidateBatch).
func FuzzRecords(f *testing.F) {
	for _, b := range seedBatches()[:3] {
		h := decodeHeader(b)
		f.Add(b[BatchHeaderSize:], h.NumRecords)
	}
	f.Add([]byte{0x0e, 0, 0, 0, 1, 2, 'a', 2, 'b', 0}, int32(1))
	f.Fuzz(func(t *testing.T, records []byte, count int32) {
		b := batchFromRecords(nil, 0, records)
		binary.BigEndian.PutUint32(b[23:], uint32(count-1))
		binary.BigEndian.PutUint32(b[57:], uint32(count))
		recrc(b)
		h, err := ValidateBatch(b)
		if err != nil {
			return
		}
		checkAccepted(t, b, h)
	})
}

func checkAccepted(t *testing.T, data []byte, h BatchHeader) {
	t.Helper()
	if _, n, nerr := NextBatch(data); nerr != nil || n != len(data) {
		t.Fatalf("ValidateBatch accepts but NextBatch gives %d bytes, %v", n, nerr)
	}
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(data); err != nil {
		t.Fatalf("accepted but kmsg rejects: %v", err)
	}
	if rb.NumRecords != h.NumRecords || rb.LastOffsetDelta != h.LastOffsetDelta || uint32(rb.CRC) != h.CRC {
		t.Fatalf("header %+v disagrees with kmsg", h)
	}
	if h.Compression() == 0 {
		recs := rb.Records
		for i := int32(0); i < h.NumRecords; i++ {
			var r kmsg.Record
			if err := r.ReadFrom(recs); err != nil {
				t.Fatalf("record %d: kmsg: %v", i, err)
			}
			if r.OffsetDelta != i {
				t.Fatalf("record %d has offset delta %d", i, r.OffsetDelta)
			}
			_, n := binary.Varint(recs)
			recs = recs[n+int(r.Length):]
		}
		if len(recs) != 0 {
			t.Fatalf("%d bytes after records", len(recs))
		}
	}
	c := append([]byte(nil), data...)
	binary.BigEndian.PutUint64(c, 1<<40)
	binary.BigEndian.PutUint32(c[12:], 77)
	if _, err := ValidateBatch(c); err != nil {
		t.Fatalf("stamping broke the batch: %v", err)
	}
}

// FuzzRecovery opens a log whose only segment holds the fuzz input. It must
// never panic; on error the file is untouched; on success the file is a
// prefix of the input, any cut is reported, everything left reads back, and
// a second open is clean.
func FuzzRecovery(f *testing.F) {
	l := seedLog()
	f.Add(l)
	f.Add(l[:len(l)-7])
	f.Add(append(append([]byte(nil), l...), make([]byte, 100)...))
	mid := append([]byte(nil), l...)
	mid[80] ^= 1
	f.Add(mid)
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		p := filepath.Join(dir, segmentName(0))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		lg, warns, err := Open(dir, Options{SegmentBytes: 1 << 20, IndexIntervalBytes: 64})
		now, _ := os.ReadFile(p)
		if err != nil {
			if !bytes.Equal(now, data) {
				t.Fatalf("failed open modified the segment: %v", err)
			}
			return
		}
		defer lg.Close()
		if !bytes.HasPrefix(data, now) {
			t.Fatal("recovered segment is not a prefix of the input")
		}
		dropped := int64(len(data) - len(now))
		if (dropped > 0) != (len(warns) == 1) || (dropped > 0 && warns[0].DroppedBytes != dropped) {
			t.Fatalf("dropped %d bytes, warnings %v", dropped, warns)
		}
		var got []byte
		for next := lg.LogStartOffset(); next < lg.LogEndOffset(); {
			b, err := lg.Read(next, 1, -1)
			if err != nil || len(b) == 0 {
				t.Fatalf("read %d: %d bytes, %v", next, len(b), err)
			}
			h, _, err := NextBatch(b)
			if err != nil {
				t.Fatal(err)
			}
			next = h.LastOffset() + 1
			got = append(got, b...)
		}
		if !bytes.Equal(got, now) {
			t.Fatal("reading the log back differs from the segment")
		}
		lg.Close()
		lg2, w2, err := Open(dir, Options{})
		if err != nil || len(w2) != 0 {
			t.Fatalf("second open: %v %v", w2, err)
		}
		lg2.Close()
	})
}

// TestWriteFuzzSeeds regenerates the checked-in seed corpus.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("ZKCHAOS_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set ZKCHAOS_WRITE_FUZZ_SEEDS=1 to rewrite testdata/fuzz")
	}
	write := func(fuzz string, i int, b []byte) {
		dir := filepath.Join("testdata", "fuzz", fuzz)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	batches := seedBatches()
	for i, b := range batches {
		write("FuzzValidateBatch", i, b)
		bad := append([]byte(nil), b...)
		bad[len(bad)-1] ^= 0x55
		write("FuzzValidateBatch", 100+i, recrc(bad))
	}
	l := seedLog()
	for i, cut := range []int{len(l), len(l) - 1, 12, 61, 70} {
		write("FuzzRecovery", i, l[:cut])
	}
	zeros := append(append([]byte(nil), l...), make([]byte, 64)...)
	write("FuzzRecovery", 10, zeros)
	for i, b := range batches[:3] {
		h := decodeHeader(b)
		dir := filepath.Join("testdata", "fuzz", "FuzzRecords")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nint32(%d)\n", b[BatchHeaderSize:], h.NumRecords)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
