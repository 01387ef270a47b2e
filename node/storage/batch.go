package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// Layout of a Kafka RecordBatch, magic 2 (DefaultRecordBatch in Kafka's
// clients module documents the same fields). All integers are big-endian.
//
//	 0 baseOffset           int64   assigned by the leader
//	 8 batchLength          int32   bytes after this field
//	12 partitionLeaderEpoch int32   assigned by the leader
//	16 magic                int8    = 2
//	17 crc                  uint32  CRC32C of bytes [21, end)
//	21 attributes           int16
//	23 lastOffsetDelta      int32
//	27 baseTimestamp        int64
//	35 maxTimestamp         int64
//	43 producerId           int64
//	51 producerEpoch        int16
//	53 baseSequence         int32
//	57 recordCount          int32
//	61 records...
//
// The CRC starts at the attributes, which is why the leader can stamp the base
// offset and leader epoch into a client's batch without recomputing it.
const (
	// BatchHeaderSize is the size of a v2 batch header up to the records.
	BatchHeaderSize = 61
	// logOverhead is baseOffset + batchLength: the part not counted in
	// batchLength.
	logOverhead = 12
	// minBatchLength is the smallest legal batchLength (an empty batch).
	minBatchLength = BatchHeaderSize - logOverhead
	crcStart       = 21
	magicV2        = 2
	// headerPrefix is enough of the header to know base offset, length,
	// epoch and lastOffsetDelta (used when scanning without reading bodies).
	headerPrefix = 27

	attrCompressionMask = 0x07
	attrTransactional   = 0x10
	attrControl         = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorruptBatch is wrapped by every validation failure of batch bytes: bad
// length, magic, CRC, record count or record framing. The broker answers a
// produce that fails with it with CORRUPT_MESSAGE (2), as Kafka does for
// CorruptRecordException.
var ErrCorruptBatch = errors.New("corrupt record batch")

// ErrBatchTooLarge is returned when a single batch exceeds
// Options.MaxBatchBytes; the broker answers MESSAGE_TOO_LARGE (10).
var ErrBatchTooLarge = errors.New("record batch too large")

// BatchHeader is the decoded fixed header of a v2 record batch.
type BatchHeader struct {
	BaseOffset           int64
	Length               int32 // bytes after the length field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Size is the number of bytes the whole batch occupies.
func (h BatchHeader) Size() int64 { return int64(h.Length) + logOverhead }

// LastOffset is the offset of the batch's last record.
func (h BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Compression is the codec id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
func (h BatchHeader) Compression() int { return int(h.Attributes & attrCompressionMask) }

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorruptBatch, fmt.Sprintf(format, args...))
}

// decodeHeader decodes the fixed header; b must hold at least
// BatchHeaderSize bytes. It checks nothing.
func decodeHeader(b []byte) BatchHeader {
	be := binary.BigEndian
	return BatchHeader{
		BaseOffset:           int64(be.Uint64(b[0:])),
		Length:               int32(be.Uint32(b[8:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[12:])),
		Magic:                int8(b[16]),
		CRC:                  be.Uint32(b[17:]),
		Attributes:           int16(be.Uint16(b[21:])),
		LastOffsetDelta:      int32(be.Uint32(b[23:])),
		BaseTimestamp:        int64(be.Uint64(b[27:])),
		MaxTimestamp:         int64(be.Uint64(b[35:])),
		ProducerID:           int64(be.Uint64(b[43:])),
		ProducerEpoch:        int16(be.Uint16(b[51:])),
		BaseSequence:         int32(be.Uint32(b[53:])),
		NumRecords:           int32(be.Uint32(b[57:])),
	}
}

// PeekHeader decodes the fixed header at the start of b without validating
// anything; ok is false when b is shorter than a header. The leader uses it
// to check a producer's sequence before the append validates the batch.
func PeekHeader(b []byte) (h BatchHeader, ok bool) {
	if len(b) < BatchHeaderSize {
		return BatchHeader{}, false
	}
	return decodeHeader(b), true
}

// IsControl reports a transaction marker batch.
func (h BatchHeader) IsControl() bool { return h.Attributes&attrControl != 0 }

// IsTransactional reports a batch written inside a transaction.
func (h BatchHeader) IsTransactional() bool { return h.Attributes&attrTransactional != 0 }

// NextBatch decodes and fully validates the batch at the start of b and
// returns it with its size in bytes. b may continue past the batch. If b is
// shorter than the batch claims, the error wraps io.ErrUnexpectedEOF as well
// as ErrCorruptBatch (a fetch response or a torn log tail may end in a partial
// batch).
func NextBatch(b []byte) (BatchHeader, int, error) {
	if len(b) < logOverhead {
		return BatchHeader{}, 0, fmt.Errorf("%w: %d bytes, less than the %d-byte offset and length prefix: %w",
			ErrCorruptBatch, len(b), logOverhead, io.ErrUnexpectedEOF)
	}
	length := int32(binary.BigEndian.Uint32(b[8:]))
	if length < minBatchLength {
		return BatchHeader{}, 0, corrupt("batch length %d below the minimum %d", length, minBatchLength)
	}
	size := int64(length) + logOverhead
	if int64(len(b)) < size {
		return BatchHeader{}, 0, fmt.Errorf("%w: batch of %d bytes but only %d available: %w",
			ErrCorruptBatch, size, len(b), io.ErrUnexpectedEOF)
	}
	h, err := ValidateBatch(b[:size])
	return h, int(size), err
}

// ValidateBatch checks that b is exactly one well-formed v2 record batch and
// returns its header. It mirrors the checks Kafka's broker makes on a batch
// (DefaultRecordBatch.ensureValid and LogValidator): length consistent with
// the bytes, magic 2, CRC32C of everything from the attributes on, at least
// one record, lastOffsetDelta = count-1, a known compression codec, and, for
// uncompressed batches, that the records area holds exactly count
// well-framed records with offset deltas 0, 1, 2, ... Records inside
// compressed batches are not decompressed (the CRC still covers them); see
// the package comment. It never panics and never modifies b.
func ValidateBatch(b []byte) (BatchHeader, error) {
	if len(b) < BatchHeaderSize {
		return BatchHeader{}, corrupt("%d bytes, less than the %d-byte batch header", len(b), BatchHeaderSize)
	}
	h := decodeHeader(b)
	if h.Size() != int64(len(b)) {
		return h, corrupt("batch length field says %d bytes in total, have %d", h.Size(), len(b))
	}
	if h.Magic != magicV2 {
		return h, corrupt("magic %d, only magic 2 is supported", h.Magic)
	}
	if got := crc32.Checksum(b[crcStart:], castagnoli); got != h.CRC {
		return h, corrupt("CRC32C mismatch: header %#08x, computed %#08x", h.CRC, got)
	}
	if h.NumRecords <= 0 {
		return h, corrupt("record count %d, a batch needs at least one record", h.NumRecords)
	}
	if h.LastOffsetDelta != h.NumRecords-1 {
		return h, corrupt("lastOffsetDelta %d inconsistent with record count %d", h.LastOffsetDelta, h.NumRecords)
	}
	if c := h.Compression(); c > 4 {
		return h, corrupt("unknown compression codec %d", c)
	}
	if h.Compression() == 0 {
		if err := checkRecords(b[BatchHeaderSize:], h.NumRecords); err != nil {
			return h, err
		}
	}
	return h, nil
}

// checkRecords walks uncompressed v2 records (DefaultRecord framing):
//
//	length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
//	keyLength varint, key, valueLength varint, value,
//	headerCount varint, headers (keyLength varint, key, valueLength varint, value)
//
// Varints are zig-zag encoded, which is what encoding/binary.Varint decodes.
func checkRecords(b []byte, count int32) error {
	for i := int32(0); i < count; i++ {
		if len(b) == 0 {
			return corrupt("record count %d but records end after %d", count, i)
		}
		l, n := binary.Varint(b)
		if n <= 0 || l < 0 || l > int64(len(b)-n) {
			return corrupt("record %d: bad length", i)
		}
		rec := b[n : n+int(l)]
		b = b[n+int(l):]
		if err := checkRecord(rec, i); err != nil {
			return err
		}
	}
	if len(b) != 0 {
		return corrupt("%d bytes after the last of %d records", len(b), count)
	}
	return nil
}

func checkRecord(r []byte, idx int32) error {
	bad := func(what string) error { return corrupt("record %d: bad %s", idx, what) }
	if len(r) < 1 {
		return bad("attributes")
	}
	r = r[1:]
	var ok bool
	if _, r, ok = varint(r, 64); !ok {
		return bad("timestamp delta")
	}
	var od int64
	if od, r, ok = varint(r, 32); !ok {
		return bad("offset delta")
	}
	if od != int64(idx) {
		return corrupt("record %d: offset delta %d, want %d", idx, od, idx)
	}
	if r, ok = bytesField(r, true); !ok {
		return bad("key")
	}
	if r, ok = bytesField(r, true); !ok {
		return bad("value")
	}
	var nh int64
	if nh, r, ok = varint(r, 32); !ok || nh < 0 {
		return bad("header count")
	}
	for j := int64(0); j < nh; j++ {
		if r, ok = bytesField(r, false); !ok {
			return corrupt("record %d: header %d: bad key", idx, j)
		}
		if r, ok = bytesField(r, true); !ok {
			return corrupt("record %d: header %d: bad value", idx, j)
		}
	}
	if len(r) != 0 {
		return corrupt("record %d: %d bytes after the headers", idx, len(r))
	}
	return nil
}

// varint reads a zig-zag varint that must fit in bits.
func varint(b []byte, bits int) (int64, []byte, bool) {
	v, n := binary.Varint(b)
	if n <= 0 {
		return 0, b, false
	}
	if bits == 32 && (v < -1<<31 || v > 1<<31-1) {
		return 0, b, false
	}
	return v, b[n:], true
}

// bytesField reads a varint length and that many bytes; -1 (null) is allowed
// when nullable.
func bytesField(b []byte, nullable bool) ([]byte, bool) {
	l, rest, ok := varint(b, 32)
	if !ok {
		return b, false
	}
	if l == -1 && nullable {
		return rest, true
	}
	if l < 0 || l > int64(len(rest)) {
		return b, false
	}
	return rest[l:], true
}

// SplitBatches validates a sequence of batches, as carried in a Fetch
// response's records field, and returns their headers. A partial batch at the
// end (Kafka may cut a fetch response inside a batch when it hits the size
// limit) is not an error: its bytes are reported as tail and excluded.
// Anything else malformed is an error naming the batch index and byte
// position.
func SplitBatches(b []byte) (headers []BatchHeader, complete int, err error) {
	pos := 0
	for pos < len(b) {
		h, n, err := NextBatch(b[pos:])
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				break
			}
			return headers, pos, fmt.Errorf("batch %d at byte %d: %w", len(headers), pos, err)
		}
		headers = append(headers, h)
		pos += n
	}
	return headers, pos, nil
}

// RecordValues returns the values of an uncompressed, valid batch's records
// in offset order (a null value as ""); ok is false for a compressed or
// malformed batch. The data plane logs them with an append so that a
// checker can tell which client's record a batch held.
func RecordValues(b []byte) (values []string, ok bool) {
	h, err := ValidateBatch(b)
	if err != nil || h.Compression() != 0 {
		return nil, false
	}
	r := b[BatchHeaderSize:h.Size()]
	for i := int32(0); i < h.NumRecords; i++ {
		l, n := binary.Varint(r)
		if n <= 0 || l < 0 || l > int64(len(r)-n) {
			return nil, false
		}
		rec := r[n : n+int(l)]
		r = r[n+int(l):]
		if len(rec) < 1 {
			return nil, false
		}
		rec = rec[1:]                          // attributes
		if _, rec, ok = varint(rec, 64); !ok { // timestamp delta
			return nil, false
		}
		if _, rec, ok = varint(rec, 32); !ok { // offset delta
			return nil, false
		}
		if rec, ok = bytesField(rec, true); !ok { // key
			return nil, false
		}
		vl, rest, vok := varint(rec, 32)
		if !vok || vl > int64(len(rest)) {
			return nil, false
		}
		if vl < 0 {
			values = append(values, "")
			continue
		}
		values = append(values, string(rest[:vl]))
	}
	return values, true
}
