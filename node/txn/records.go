package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/zkchaos/zkchaos/node/group"
)

// PartitionFor is TransactionStateManager.partitionFor: the
// __transaction_state partition of a transactional id, by the same Java
// String.hashCode rule as a group's partition.
func PartitionFor(transactionalID string, numPartitions int32) int32 {
	return group.PartitionFor(transactionalID, numPartitions)
}

// encodeKey is TransactionLog.keyToBytes: version 0, the transactional id.
func encodeKey(id string) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(id)))
	return append(b, id...)
}

// encodeValue is TransactionLog.valueToBytes (value v0): producer id,
// epoch, timeout, state byte, the partitions grouped by topic (null when
// Empty), last update and start timestamps.
func encodeValue(tr transit) []byte {
	be := binary.BigEndian
	b := be.AppendUint16(nil, 0)
	b = be.AppendUint64(b, uint64(tr.producerID))
	b = be.AppendUint16(b, uint16(tr.producerEpoch))
	b = be.AppendUint32(b, uint32(tr.timeoutMs))
	b = append(b, byte(tr.state))
	if tr.state == Empty {
		b = be.AppendUint32(b, ^uint32(0))
	} else {
		byTopic := map[string][]int32{}
		for _, tp := range tr.partitions {
			byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
		}
		topics := make([]string, 0, len(byTopic))
		for t := range byTopic {
			topics = append(topics, t)
		}
		sort.Strings(topics)
		b = be.AppendUint32(b, uint32(len(topics)))
		for _, t := range topics {
			b = be.AppendUint16(b, uint16(len(t)))
			b = append(b, t...)
			b = be.AppendUint32(b, uint32(len(byTopic[t])))
			for _, p := range byTopic[t] {
				b = be.AppendUint32(b, uint32(p))
			}
		}
	}
	b = be.AppendUint64(b, uint64(tr.updateMs))
	return be.AppendUint64(b, uint64(tr.startMs))
}

var errShort = errors.New("record too short")

type reader struct{ b []byte }

func (r *reader) n(k int) ([]byte, error) {
	if len(r.b) < k {
		return nil, errShort
	}
	v := r.b[:k]
	r.b = r.b[k:]
	return v, nil
}

func (r *reader) u16() (uint16, error) {
	v, err := r.n(2)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint16(v), nil
}

func (r *reader) u32() (uint32, error) {
	v, err := r.n(4)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(v), nil
}

func (r *reader) u64() (uint64, error) {
	v, err := r.n(8)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(v), nil
}

func (r *reader) str() (string, error) {
	l, err := r.u16()
	if err != nil {
		return "", err
	}
	if int16(l) < 0 {
		return "", errors.New("null string")
	}
	v, err := r.n(int(l))
	return string(v), err
}

// decodeKey is TransactionLog.readTxnRecordKey.
func decodeKey(b []byte) (string, error) {
	r := &reader{b}
	v, err := r.u16()
	if err != nil {
		return "", fmt.Errorf("transaction log key: %w", err)
	}
	if v != 0 {
		return "", fmt.Errorf("transaction log key version %d unknown", v)
	}
	id, err := r.str()
	if err != nil {
		return "", fmt.Errorf("transaction log key: %w", err)
	}
	return id, nil
}

// decodeValue is TransactionLog.readTxnRecordValue; nil b is a tombstone
// (nil, nil).
func decodeValue(id string, b []byte) (*meta, error) {
	if b == nil {
		return nil, nil
	}
	r := &reader{b}
	m := &meta{id: id, lastProducerID: noProducerID, lastEpoch: noEpoch, partitions: map[TopicPartition]bool{}}
	fail := func(err error) (*meta, error) { return nil, fmt.Errorf("transaction log value of %s: %w", id, err) }
	v, err := r.u16()
	if err != nil {
		return fail(err)
	}
	if v != 0 {
		return fail(fmt.Errorf("version %d unknown", v))
	}
	pid, err := r.u64()
	if err != nil {
		return fail(err)
	}
	epoch, err := r.u16()
	if err != nil {
		return fail(err)
	}
	timeout, err := r.u32()
	if err != nil {
		return fail(err)
	}
	st, err := r.n(1)
	if err != nil {
		return fail(err)
	}
	m.producerID, m.producerEpoch, m.timeoutMs, m.state = int64(pid), int16(epoch), int32(timeout), State(st[0])
	if m.state < Empty || m.state > PrepareEpochFence {
		return fail(fmt.Errorf("state byte %d unknown", st[0]))
	}
	topics, err := r.u32()
	if err != nil {
		return fail(err)
	}
	if int32(topics) > 0 {
		for range topics {
			t, err := r.str()
			if err != nil {
				return fail(err)
			}
			n, err := r.u32()
			if err != nil {
				return fail(err)
			}
			for range n {
				p, err := r.u32()
				if err != nil {
					return fail(err)
				}
				if m.state != Empty {
					m.partitions[TopicPartition{t, int32(p)}] = true
				}
			}
		}
	}
	upd, err := r.u64()
	if err != nil {
		return fail(err)
	}
	start, err := r.u64()
	if err != nil {
		return fail(err)
	}
	m.updateMs, m.startMs = int64(upd), int64(start)
	return m, nil
}
