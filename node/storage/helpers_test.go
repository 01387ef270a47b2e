package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// encodeRecords encodes records with kmsg, filling in each record's length
// and offset delta.
func encodeRecords(recs []kmsg.Record) []byte {
	var out []byte
	for i := range recs {
		r := recs[i]
		r.OffsetDelta = int32(i)
		r.Length = 0
		body := r.AppendTo(nil)[1:] // drop the one-byte varint 0 length
		r.Length = int32(len(body))
		out = r.AppendTo(out)
	}
	return out
}

// batchFromRecords builds a valid magic-2 batch with kmsg, as a producer
// would send it (base offset 0, leader epoch -1).
func batchFromRecords(recs []kmsg.Record, attrs int16, raw []byte) []byte {
	records := raw
	if records == nil {
		records = encodeRecords(recs)
	}
	b := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       1_700_000_000_000,
		MaxTimestamp:         1_700_000_000_000,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(recs)),
		Records:              records,
	}
	b.Length = int32(BatchHeaderSize - logOverhead + len(records))
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[crcStart:], castagnoli))
	return out
}

// makeBatch builds a batch of n records with values of valueSize bytes whose
// contents depend on tag, so different batches differ.
func makeBatch(n, valueSize int, tag int) []byte {
	recs := make([]kmsg.Record, n)
	for i := range recs {
		v := make([]byte, valueSize)
		copy(v, fmt.Sprintf("batch-%d-record-%d-", tag, i))
		recs[i] = kmsg.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: v, TimestampDelta64: int64(i)}
	}
	return batchFromRecords(recs, 0, nil)
}

// recrc recomputes the CRC of a batch the test mutated on purpose.
func recrc(b []byte) []byte {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[crcStart:], castagnoli))
	return b
}

func mustOpen(t testing.TB, dir string, opts Options) *Log {
	t.Helper()
	l, w, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if len(w) != 0 {
		t.Fatalf("Open: unexpected warnings %v", w)
	}
	return l
}

// parseAll splits bytes returned by Read into kmsg batches.
func parseAll(t testing.TB, b []byte) []kmsg.RecordBatch {
	t.Helper()
	var out []kmsg.RecordBatch
	for len(b) > 0 {
		h, n, err := NextBatch(b)
		if err != nil {
			t.Fatalf("returned bytes do not split into batches: %v", err)
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b[:n]); err != nil {
			t.Fatalf("kmsg cannot read batch at offset %d: %v", h.BaseOffset, err)
		}
		out = append(out, rb)
		b = b[n:]
	}
	return out
}
