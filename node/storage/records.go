package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// KeyValue is one record of a batch the broker writes itself (the group
// coordinator's __consumer_offsets records). A nil Value is a null value
// (a tombstone).
type KeyValue struct {
	Key, Value []byte
}

// LoggedRecord is one record read back from a log: the base offset of the
// batch that holds it, its own offset, key and value (nil when null).
type LoggedRecord struct {
	BatchOffset int64
	Offset      int64
	Key, Value  []byte
}

// EncodeBatch builds an uncompressed magic-2 batch of recs, as
// MemoryRecords.withRecords does for the group coordinator's appends: no
// producer id, every record with the create time ts (milliseconds) and
// offset deltas 0, 1, 2, ... The leader stamps base offset and leader epoch
// when it appends. recs must not be empty.
func EncodeBatch(recs []KeyValue, ts int64) ([]byte, error) {
	if len(recs) == 0 {
		return nil, fmt.Errorf("encode batch: %w", corrupt("no records"))
	}
	b := make([]byte, BatchHeaderSize, BatchHeaderSize+64*len(recs))
	be := binary.BigEndian
	be.PutUint64(b[0:], 0)
	be.PutUint32(b[12:], ^uint32(0)) // partitionLeaderEpoch -1
	b[16] = magicV2
	be.PutUint16(b[21:], 0)
	be.PutUint32(b[23:], uint32(len(recs)-1))
	be.PutUint64(b[27:], uint64(ts))
	be.PutUint64(b[35:], uint64(ts))
	be.PutUint64(b[43:], ^uint64(0)) // producerId -1
	be.PutUint16(b[51:], ^uint16(0)) // producerEpoch -1
	be.PutUint32(b[53:], ^uint32(0)) // baseSequence -1
	be.PutUint32(b[57:], uint32(len(recs)))
	var body []byte
	for i, r := range recs {
		body = body[:0]
		body = append(body, 0)                     // attributes
		body = binary.AppendVarint(body, 0)        // timestamp delta
		body = binary.AppendVarint(body, int64(i)) // offset delta
		body = appendNullableBytes(body, r.Key)    // key
		body = appendNullableBytes(body, r.Value)  // value
		body = binary.AppendVarint(body, 0)        // no headers
		b = binary.AppendVarint(b, int64(len(body)))
		b = append(b, body...)
	}
	be.PutUint32(b[8:], uint32(len(b)-logOverhead))
	be.PutUint32(b[17:], crc32.Checksum(b[crcStart:], castagnoli))
	return b, nil
}

func appendNullableBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(v)))
	return append(b, v...)
}

// ReadRecords decodes every record of the batches in b (as Log.Read returns
// them), oldest first. Control batches are skipped, as
// GroupMetadataManager's load skips them; a compressed batch is an error,
// since only batches the broker wrote itself (uncompressed) are read this
// way. A partial batch at the end is ignored, as in a fetch response.
func ReadRecords(b []byte) ([]LoggedRecord, error) {
	headers, _, err := SplitBatches(b)
	if err != nil {
		return nil, fmt.Errorf("read records: %w", err)
	}
	var out []LoggedRecord
	pos := 0
	for _, h := range headers {
		batch := b[pos : pos+int(h.Size())]
		pos += int(h.Size())
		if h.IsControl() {
			continue
		}
		if h.Compression() != 0 {
			return out, fmt.Errorf("read records: batch at offset %d is compressed (codec %d)", h.BaseOffset, h.Compression())
		}
		r := batch[BatchHeaderSize:]
		for i := int32(0); i < h.NumRecords; i++ {
			rec, rest, err := oneRecord(r)
			if err != nil {
				return out, fmt.Errorf("read records: batch at offset %d record %d: %w", h.BaseOffset, i, err)
			}
			r = rest
			rec.BatchOffset = h.BaseOffset
			rec.Offset += h.BaseOffset
			out = append(out, rec)
		}
	}
	return out, nil
}

// oneRecord decodes one record already checked by ValidateBatch; Offset is
// the offset delta.
func oneRecord(r []byte) (LoggedRecord, []byte, error) {
	l, n := binary.Varint(r)
	if n <= 0 || l < 1 || l > int64(len(r)-n) {
		return LoggedRecord{}, r, corrupt("bad record length")
	}
	rec, rest := r[n+1:n+int(l)], r[n+int(l):] // skip attributes
	var ok bool
	var delta int64
	if _, rec, ok = varint(rec, 64); !ok {
		return LoggedRecord{}, r, corrupt("bad timestamp delta")
	}
	if delta, rec, ok = varint(rec, 32); !ok {
		return LoggedRecord{}, r, corrupt("bad offset delta")
	}
	key, rec, ok := nullableBytes(rec)
	if !ok {
		return LoggedRecord{}, r, corrupt("bad key")
	}
	value, _, ok := nullableBytes(rec)
	if !ok {
		return LoggedRecord{}, r, corrupt("bad value")
	}
	return LoggedRecord{Offset: delta, Key: key, Value: value}, rest, nil
}

// nullableBytes reads a varint length and that many bytes (nil for -1),
// copied so the result does not alias the log's buffer.
func nullableBytes(b []byte) ([]byte, []byte, bool) {
	l, rest, ok := varint(b, 32)
	if !ok || l < -1 || l > int64(len(rest)) {
		return nil, b, false
	}
	if l == -1 {
		return nil, rest, true
	}
	return append([]byte{}, rest[:l]...), rest[l:], true
}

// LoggedBatch is one batch read back from a log with what a reader of
// transactional writes needs: its header (producer id and epoch, the
// transactional and control attributes), its records, and for a control
// batch its transaction marker (nil when the control record is not one).
type LoggedBatch struct {
	Header  BatchHeader
	Records []LoggedRecord
	Marker  *Marker
}

// ReadBatches decodes the batches in b as ReadRecords does, control
// batches included: GroupMetadataManager's load needs the producer id of a
// transactional offset commit and the markers that decide it. A control
// record that is not a transaction marker leaves Marker nil, as Kafka's
// ControlRecordType.parse answers UNKNOWN for it.
func ReadBatches(b []byte) ([]LoggedBatch, error) {
	headers, _, err := SplitBatches(b)
	if err != nil {
		return nil, fmt.Errorf("read batches: %w", err)
	}
	var out []LoggedBatch
	pos := 0
	for _, h := range headers {
		batch := b[pos : pos+int(h.Size())]
		pos += int(h.Size())
		lb := LoggedBatch{Header: h}
		if h.IsControl() {
			if m, ok, err := DecodeMarker(batch); ok && err == nil {
				lb.Marker = &m
			}
			out = append(out, lb)
			continue
		}
		recs, err := ReadRecords(batch)
		if err != nil {
			return out, err
		}
		lb.Records = recs
		out = append(out, lb)
	}
	return out, nil
}
