package group

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf16"
)

// Key versions of __consumer_offsets records, as GroupMetadataManager names
// them: 0 and 1 are offset commits, 2 is group metadata.
const (
	offsetKeyVersion      int16 = 1
	groupKeyVersion       int16 = 2
	groupValueVersion     int16 = 3
	offsetValueVersion    int16 = 3
	offsetValueVersionExp int16 = 1 // written when a commit carries an explicit expire timestamp
)

// TopicPartition names a partition whose offset a group commits.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Compare orders partitions by topic, then partition number.
func (tp TopicPartition) Compare(o TopicPartition) int {
	return cmp.Or(cmp.Compare(tp.Topic, o.Topic), cmp.Compare(tp.Partition, o.Partition))
}

// OffsetAndMetadata is one committed offset, Kafka's OffsetAndMetadata.
// LeaderEpoch and ExpireTimestamp are -1 when absent.
type OffsetAndMetadata struct {
	Offset          int64
	LeaderEpoch     int32
	Metadata        string
	CommitTimestamp int64
	ExpireTimestamp int64
}

// Record is one record the coordinator appends to a __consumer_offsets
// partition. A nil Value is a tombstone.
type Record struct {
	Key, Value []byte
	Timestamp  int64 // CreateTime, ms
}

// LoadedRecord is one record read back from a __consumer_offsets partition
// when it is loaded; BatchOffset is the base offset of the batch holding it
// (GroupMetadataManager orders competing commits by it).
//
// A record of a transactional batch (a TxnOffsetCommit) has Transactional
// set and its batch's ProducerID. A transaction marker is one LoadedRecord
// with Control set, the marker's ProducerID and decision (Commit), and no
// key or value.
type LoadedRecord struct {
	BatchOffset   int64
	Key, Value    []byte
	ProducerID    int64
	Transactional bool
	Control       bool
	Commit        bool
}

// PartitionFor is GroupMetadataManager.partitionFor: Utils.abs of Java's
// String.hashCode of the group id, modulo the partition count. Utils.abs
// masks the sign bit rather than negating, so Integer.MIN_VALUE maps to 0.
func PartitionFor(groupID string, numPartitions int32) int32 {
	if numPartitions <= 0 {
		return 0
	}
	return (javaStringHash(groupID) & 0x7fffffff) % numPartitions
}

// javaStringHash is String.hashCode: over UTF-16 code units, with int32
// wrap-around. The JVM decodes the request's UTF-8 bytes first; Go's rune
// conversion maps invalid bytes to U+FFFD as the JVM's decoder does.
func javaStringHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// encoder writes Kafka's classic (non-flexible) schema types.
type encoder struct{ b []byte }

func (e *encoder) int16(v int16) { e.b = binary.BigEndian.AppendUint16(e.b, uint16(v)) }
func (e *encoder) int32(v int32) { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }
func (e *encoder) int64(v int64) { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }
func (e *encoder) str(s string) {
	e.int16(int16(len(s)))
	e.b = append(e.b, s...)
}
func (e *encoder) nullableStr(s *string) {
	if s == nil {
		e.int16(-1)
		return
	}
	e.str(*s)
}
func (e *encoder) bytes(v []byte) {
	e.int32(int32(len(v)))
	e.b = append(e.b, v...)
}

// decoder reads them back; the first short read sets err and every later
// read returns zero values.
type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("record truncated")

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b) < n {
		d.err = errShort
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}
func (d *decoder) int16() int16 {
	if v := d.take(2); v != nil {
		return int16(binary.BigEndian.Uint16(v))
	}
	return 0
}
func (d *decoder) int32() int32 {
	if v := d.take(4); v != nil {
		return int32(binary.BigEndian.Uint32(v))
	}
	return 0
}
func (d *decoder) int64() int64 {
	if v := d.take(8); v != nil {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}
func (d *decoder) nullableStr() *string {
	n := d.int16()
	if d.err != nil || n == -1 {
		return nil
	}
	if n < 0 {
		d.err = fmt.Errorf("negative string length %d", n)
		return nil
	}
	s := string(d.take(int(n)))
	return &s
}
func (d *decoder) str() string {
	p := d.nullableStr()
	if p == nil && d.err == nil {
		d.err = errors.New("null in a non-nullable string")
	}
	if p == nil {
		return ""
	}
	return *p
}
func (d *decoder) bytes() []byte {
	n := d.int32()
	if d.err != nil {
		return nil
	}
	if n < 0 {
		d.err = fmt.Errorf("negative bytes length %d", n)
		return nil
	}
	return append([]byte{}, d.take(int(n))...)
}

// OffsetCommitKey is GroupMetadataManager.offsetCommitKey (key version 1).
func OffsetCommitKey(group string, tp TopicPartition) []byte {
	var e encoder
	e.int16(offsetKeyVersion)
	e.str(group)
	e.str(tp.Topic)
	e.int32(tp.Partition)
	return e.b
}

// GroupMetadataKey is GroupMetadataManager.groupMetadataKey (key version 2).
func GroupMetadataKey(group string) []byte {
	var e encoder
	e.int16(groupKeyVersion)
	e.str(group)
	return e.b
}

// OffsetCommitValue is GroupMetadataManager.offsetCommitValue at
// inter.broker.protocol.version 2.6: value version 3, or version 1 when the
// commit carries an explicit expire timestamp (OffsetCommit v2-v4 with a
// retention time).
func OffsetCommitValue(om OffsetAndMetadata) []byte {
	var e encoder
	if om.ExpireTimestamp >= 0 {
		e.int16(offsetValueVersionExp)
		e.int64(om.Offset)
		e.str(om.Metadata)
		e.int64(om.CommitTimestamp)
		e.int64(om.ExpireTimestamp)
		return e.b
	}
	e.int16(offsetValueVersion)
	e.int64(om.Offset)
	e.int32(om.LeaderEpoch)
	e.str(om.Metadata)
	e.int64(om.CommitTimestamp)
	return e.b
}

// MemberRecord is one member inside a group metadata value.
type MemberRecord struct {
	MemberID         string
	InstanceID       *string
	ClientID         string
	ClientHost       string
	RebalanceTimeout int32
	SessionTimeout   int32
	Subscription     []byte
	Assignment       []byte
}

// GroupRecord is a decoded group metadata value.
type GroupRecord struct {
	ProtocolType          string
	Generation            int32
	Protocol              *string
	Leader                *string
	CurrentStateTimestamp int64 // -1: none
	Members               []MemberRecord
}

// GroupMetadataValue is GroupMetadataManager.groupMetadataValue at value
// version 3 (inter.broker.protocol.version >= 2.3).
func GroupMetadataValue(g GroupRecord) []byte {
	var e encoder
	e.int16(groupValueVersion)
	e.str(g.ProtocolType)
	e.int32(g.Generation)
	e.nullableStr(g.Protocol)
	e.nullableStr(g.Leader)
	e.int64(g.CurrentStateTimestamp)
	e.int32(int32(len(g.Members)))
	for _, m := range g.Members {
		e.str(m.MemberID)
		e.nullableStr(m.InstanceID)
		e.str(m.ClientID)
		e.str(m.ClientHost)
		e.int32(m.RebalanceTimeout)
		e.int32(m.SessionTimeout)
		e.bytes(m.Subscription)
		e.bytes(m.Assignment)
	}
	return e.b
}

// Key is a decoded __consumer_offsets key: an offset key (IsOffset) or a
// group metadata key.
type Key struct {
	Version  int16
	Group    string
	IsOffset bool
	TP       TopicPartition
}

// ReadKey is GroupMetadataManager.readMessageKey.
func ReadKey(b []byte) (Key, error) {
	d := decoder{b: b}
	k := Key{Version: d.int16()}
	switch {
	case d.err != nil:
	case k.Version == 0 || k.Version == 1:
		k.IsOffset = true
		k.Group = d.str()
		k.TP.Topic = d.str()
		k.TP.Partition = d.int32()
	case k.Version == 2:
		k.Group = d.str()
	default:
		return k, fmt.Errorf("unknown __consumer_offsets key version %d", k.Version)
	}
	if d.err != nil {
		return k, fmt.Errorf("__consumer_offsets key: %w", d.err)
	}
	return k, nil
}

// ReadOffsetValue is GroupMetadataManager.readOffsetMessageValue for value
// versions 0-3.
func ReadOffsetValue(b []byte) (OffsetAndMetadata, error) {
	d := decoder{b: b}
	v := d.int16()
	om := OffsetAndMetadata{LeaderEpoch: -1, ExpireTimestamp: -1}
	switch v {
	case 0, 2:
		om.Offset = d.int64()
		om.Metadata = d.str()
		om.CommitTimestamp = d.int64()
	case 1:
		om.Offset = d.int64()
		om.Metadata = d.str()
		om.CommitTimestamp = d.int64()
		// OffsetCommitRequest.DEFAULT_TIMESTAMP (-1) means no expiry.
		om.ExpireTimestamp = d.int64()
	case 3:
		om.Offset = d.int64()
		if e := d.int32(); e >= 0 {
			om.LeaderEpoch = e
		}
		om.Metadata = d.str()
		om.CommitTimestamp = d.int64()
	default:
		if d.err == nil {
			return om, fmt.Errorf("unknown offset value version %d", v)
		}
	}
	if d.err != nil {
		return om, fmt.Errorf("offset value v%d: %w", v, d.err)
	}
	return om, nil
}

// ReadGroupValue is GroupMetadataManager.readGroupMessageValue for value
// versions 0-3.
func ReadGroupValue(b []byte) (GroupRecord, error) {
	d := decoder{b: b}
	v := d.int16()
	g := GroupRecord{CurrentStateTimestamp: -1}
	if d.err == nil && (v < 0 || v > 3) {
		return g, fmt.Errorf("unknown group metadata value version %d", v)
	}
	g.ProtocolType = d.str()
	g.Generation = d.int32()
	g.Protocol = d.nullableStr()
	g.Leader = d.nullableStr()
	if v >= 2 {
		g.CurrentStateTimestamp = d.int64()
	}
	n := d.int32()
	if d.err == nil && (n < 0 || int(n) > len(d.b)) {
		return g, fmt.Errorf("group metadata value v%d: bad member count %d", v, n)
	}
	for i := int32(0); i < n && d.err == nil; i++ {
		var m MemberRecord
		m.MemberID = d.str()
		if v >= 3 {
			m.InstanceID = d.nullableStr()
		}
		m.ClientID = d.str()
		m.ClientHost = d.str()
		if v >= 1 {
			m.RebalanceTimeout = d.int32()
		}
		m.SessionTimeout = d.int32()
		if v == 0 {
			m.RebalanceTimeout = m.SessionTimeout
		}
		m.Subscription = d.bytes()
		m.Assignment = d.bytes()
		g.Members = append(g.Members, m)
	}
	if d.err != nil {
		return g, fmt.Errorf("group metadata value v%d: %w", v, d.err)
	}
	return g, nil
}
