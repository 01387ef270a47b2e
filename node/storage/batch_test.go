package storage

import (
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestValidateBatch(t *testing.T) {
	good := makeBatch(3, 100, 1)
	mut := func(f func(b []byte) []byte) []byte {
		c := append([]byte(nil), good...)
		return f(c)
	}
	put32 := func(off int, v uint32) func(b []byte) []byte {
		return func(b []byte) []byte { binary.BigEndian.PutUint32(b[off:], v); return b }
	}
	oneRec := []kmsg.Record{{Value: []byte("x")}}
	tests := []struct {
		name    string
		b       []byte
		wantErr bool
	}{
		{"valid", good, false},
		{"valid one record, null key and value", batchFromRecords([]kmsg.Record{{}}, 0, nil), false},
		{"valid with headers", batchFromRecords([]kmsg.Record{{Value: []byte("v"), Headers: []kmsg.Header{{Key: "h", Value: nil}, {Key: "", Value: []byte("x")}}}}, 0, nil), false},
		{"leader fields ignored by CRC", mut(func(b []byte) []byte {
			binary.BigEndian.PutUint64(b, 12345)
			binary.BigEndian.PutUint32(b[12:], 7)
			return b
		}), false},
		{"compressed batch: records not walked", batchFromRecords(oneRec, 1, []byte("opaque gzip bytes")), false},
		{"empty", nil, true},
		{"short header", good[:BatchHeaderSize-1], true},
		{"truncated body", good[:len(good)-1], true},
		{"trailing byte", append(append([]byte(nil), good...), 0), true},
		{"length too small", mut(put32(8, 10)), true},
		{"magic 1", mut(func(b []byte) []byte { b[16] = 1; return b }), true},
		{"bad crc", mut(func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b }), true},
		{"zero records", mut(func(b []byte) []byte { return recrc(put32(57, 0)(b)) }), true},
		{"count above records", mut(func(b []byte) []byte { put32(57, 4)(b); return recrc(put32(23, 3)(b)) }), true},
		{"count below records", mut(func(b []byte) []byte { put32(57, 2)(b); return recrc(put32(23, 1)(b)) }), true},
		{"lastOffsetDelta mismatch", mut(func(b []byte) []byte { return recrc(put32(23, 5)(b)) }), true},
		{"unknown codec", mut(func(b []byte) []byte { b[22] |= 7; return recrc(b) }), true},
		{"bad offset delta", batchFromRecords(make([]kmsg.Record, 2), 0, func() []byte {
			r := []kmsg.Record{{Value: []byte("a")}, {Value: []byte("b")}}
			enc := encodeRecords(r[:1])
			return append(enc, enc...) // second record also claims delta 0
		}()), true},
		{"record length past end", batchFromRecords(oneRec, 0, []byte{0x7e, 0, 0, 0}), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ValidateBatch(tc.b)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("want error, got header %+v", h)
				}
				if !errors.Is(err, ErrCorruptBatch) {
					t.Fatalf("error %v does not wrap ErrCorruptBatch", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(tc.b); err != nil {
				t.Fatal(err)
			}
			if rb.NumRecords != h.NumRecords || rb.LastOffsetDelta != h.LastOffsetDelta || rb.FirstOffset != h.BaseOffset {
				t.Fatalf("header %+v disagrees with kmsg %+v", h, rb)
			}
		})
	}
}

func TestNextBatchShort(t *testing.T) {
	b := makeBatch(2, 10, 0)
	for _, cut := range []int{0, 5, 11, 12, 60, len(b) - 1} {
		_, _, err := NextBatch(b[:cut])
		if !errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(err, ErrCorruptBatch) {
			t.Errorf("cut at %d: err %v, want unexpected EOF and corrupt", cut, err)
		}
	}
}

func TestSplitBatches(t *testing.T) {
	a, b := makeBatch(1, 10, 1), makeBatch(2, 10, 2)
	binary.BigEndian.PutUint64(b, 1)
	all := append(append([]byte(nil), a...), b...)
	hs, n, err := SplitBatches(append(all, b[:20]...))
	if err != nil || len(hs) != 2 || n != len(all) {
		t.Fatalf("got %d headers, %d bytes, %v; want 2, %d, nil", len(hs), n, err, len(all))
	}
	bad := append([]byte(nil), all...)
	bad[len(a)+30] ^= 1
	if _, _, err := SplitBatches(bad); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("corrupt second batch: err %v", err)
	}
}

// The data plane logs a batch's record values with its append; a
// compressed or malformed batch gives none.
func TestRecordValues(t *testing.T) {
	b := makeBatch(3, 17, 7)
	vs, ok := RecordValues(b)
	if !ok || len(vs) != 3 || vs[2] != "batch-7-record-2-" {
		t.Fatalf("values %q ok %v", vs, ok)
	}
	if _, ok := RecordValues(b[:len(b)-1]); ok {
		t.Error("a cut batch gave values")
	}
	c := batchFromRecords([]kmsg.Record{{Value: []byte("x")}}, 2, []byte{1, 2, 3})
	if _, ok := RecordValues(recrc(c)); ok {
		t.Error("a compressed batch gave values")
	}
}
