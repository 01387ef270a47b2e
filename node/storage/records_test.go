package storage

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestEncodeBatchReadsBack(t *testing.T) {
	tests := []struct {
		name string
		recs []KeyValue
	}{
		{"one", []KeyValue{{Key: []byte("k"), Value: []byte("v")}}},
		{"tombstone and empty", []KeyValue{{Key: []byte("a"), Value: nil}, {Key: []byte("b"), Value: []byte{}}, {Key: nil, Value: bytes.Repeat([]byte{7}, 300)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := EncodeBatch(tc.recs, 1_700_000_000_123)
			if err != nil {
				t.Fatal(err)
			}
			h, err := ValidateBatch(b)
			if err != nil {
				t.Fatalf("ValidateBatch: %v", err)
			}
			if h.ProducerID != -1 || h.NumRecords != int32(len(tc.recs)) || h.BaseTimestamp != 1_700_000_000_123 {
				t.Fatalf("header %+v", h)
			}
			// As the leader stamps it, then twice in a row as a log read returns.
			b[7] = 40
			two := append(append([]byte{}, b...), b...)
			two[len(b)+7] = byte(40 + len(tc.recs))
			got, err := ReadRecords(append(two, b[:20]...)) // and a partial tail
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2*len(tc.recs) {
				t.Fatalf("%d records, want %d", len(got), 2*len(tc.recs))
			}
			for i, r := range got {
				want := tc.recs[i%len(tc.recs)]
				batch := int64(40 + (i/len(tc.recs))*len(tc.recs))
				if r.BatchOffset != batch || r.Offset != 40+int64(i) || !bytes.Equal(r.Key, want.Key) ||
					!bytes.Equal(r.Value, want.Value) || (r.Value == nil) != (want.Value == nil) || (r.Key == nil) != (want.Key == nil) {
					t.Fatalf("record %d: %+v, want %+v in batch %d", i, r, want, batch)
				}
			}
		})
	}
}

func TestReadRecordsRefuses(t *testing.T) {
	good, _ := EncodeBatch([]KeyValue{{Key: []byte("k"), Value: []byte("v")}}, 1)
	compressed := batchFromRecords([]kmsg.Record{{Value: []byte("x")}}, 1, []byte{1, 2, 3})
	bad := append([]byte{}, good...)
	bad[len(bad)-1] ^= 0xff
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"corrupt", bad, ErrCorruptBatch},
		{"compressed", compressed, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadRecords(tc.b)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := EncodeBatch(nil, 1); err == nil {
		t.Fatal("empty batch encoded")
	}
}
