package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Transaction markers (KIP-98's control batches, EndTransactionMarker in
// Kafka's clients module): a batch with the control and transactional
// attributes set, the producer id and epoch of the transaction, no
// sequence, and one record whose key is
//
//	version int16 (0), type int16 (0 ABORT, 1 COMMIT)
//
// and whose value is
//
//	version int16 (0), coordinatorEpoch int32
//
// The coordinator epoch lets a partition leader refuse a marker from a
// transaction coordinator older than the last one that wrote to it.

// Marker is a decoded transaction marker.
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
}

// EncodeMarker builds the control batch of m with create time ts
// (milliseconds), as MemoryRecords.withEndTransactionMarker does. The
// leader stamps base offset and leader epoch when it appends.
func EncodeMarker(m Marker, ts int64) []byte {
	typ := uint16(0)
	if m.Commit {
		typ = 1
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), typ)
	value := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), uint32(m.CoordinatorEpoch))
	b, _ := EncodeBatch([]KeyValue{{Key: key, Value: value}}, ts) // one record: cannot fail
	be := binary.BigEndian
	be.PutUint16(b[21:], uint16(attrControl|attrTransactional))
	be.PutUint64(b[43:], uint64(m.ProducerID))
	be.PutUint16(b[51:], uint16(m.ProducerEpoch))
	be.PutUint32(b[17:], crc32.Checksum(b[crcStart:], castagnoli))
	return b
}

// DecodeMarker reads the marker of one control batch (b holds exactly the
// batch, already validated). ok is false for a batch that is not a control
// batch; an unknown control type or a malformed record is an error
// (Kafka's ControlRecordType.parse and EndTransactionMarker.deserialize).
func DecodeMarker(b []byte) (m Marker, ok bool, err error) {
	h, hok := PeekHeader(b)
	if !hok || !h.IsControl() {
		return Marker{}, false, nil
	}
	if h.Compression() != 0 {
		return Marker{}, true, fmt.Errorf("control batch at offset %d is compressed (codec %d)", h.BaseOffset, h.Compression())
	}
	rec, _, err := oneRecord(b[BatchHeaderSize:])
	if err != nil {
		return Marker{}, true, fmt.Errorf("control batch at offset %d: %w", h.BaseOffset, err)
	}
	if len(rec.Key) < 4 || len(rec.Value) < 6 {
		return Marker{}, true, fmt.Errorf("control batch at offset %d: key of %d bytes, value of %d bytes", h.BaseOffset, len(rec.Key), len(rec.Value))
	}
	m = Marker{ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, CoordinatorEpoch: int32(binary.BigEndian.Uint32(rec.Value[2:]))}
	switch typ := int16(binary.BigEndian.Uint16(rec.Key[2:])); typ {
	case 0:
	case 1:
		m.Commit = true
	default:
		return Marker{}, true, fmt.Errorf("control batch at offset %d: control record type %d is not a transaction marker", h.BaseOffset, typ)
	}
	return m, true, nil
}

// EncodeTxnBatch is EncodeBatch for a producer's transactional batch:
// producer id, epoch and base sequence set, the transactional attribute on
// (the group coordinator's TxnOffsetCommit records are written this way).
func EncodeTxnBatch(recs []KeyValue, ts, producerID int64, epoch int16, baseSeq int32) ([]byte, error) {
	b, err := EncodeBatch(recs, ts)
	if err != nil {
		return nil, err
	}
	be := binary.BigEndian
	be.PutUint16(b[21:], uint16(attrTransactional))
	be.PutUint64(b[43:], uint64(producerID))
	be.PutUint16(b[51:], uint16(epoch))
	be.PutUint32(b[53:], uint32(baseSeq))
	be.PutUint32(b[17:], crc32.Checksum(b[crcStart:], castagnoli))
	return b, nil
}
