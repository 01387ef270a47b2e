package dataplane

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/storage"
)

// Internal topics (Kafka's Topic.isInternal): clients may not produce to
// them, Metadata marks them internal, and the broker's coordinators are the
// only writers.
const (
	GroupMetadataTopic    = "__consumer_offsets"
	TransactionStateTopic = "__transaction_state"
)

// IsInternal reports an internal topic.
func IsInternal(topic string) bool {
	return topic == GroupMetadataTopic || topic == TransactionStateTopic
}

// AppendAsCoordinator is ReplicaManager.appendRecords as the group
// coordinator calls it (internalTopicsAllowed, requiredAcks = -1): the
// batch is appended to tp's local log now, as leader, and committed waits
// as DelayedProduce does until the high watermark passes the batch. The
// errors keep Kafka's codes as *kerr.Error: NOT_LEADER_OR_FOLLOWER (not the
// leader, or leadership lost before the commit), NOT_ENOUGH_REPLICAS (ISR
// below min.insync.replicas before the append),
// NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT (ctx ended first).
// It does not block: the caller may hold its own lock.
func (m *Manager) AppendAsCoordinator(tp history.TopicPartition, batch []byte) (base int64, committed func(ctx context.Context) error, err error) {
	return m.appendAsCoordinator(tp, batch, nil)
}

func (m *Manager) appendAsCoordinator(tp history.TopicPartition, batch []byte, seen *ProducerView) (base int64, committed func(ctx context.Context) error, err error) {
	p := m.get(tp)
	if p == nil {
		return -1, nil, kerr.NotLeaderForPartition
	}
	code, info, epoch, gen := p.appendAsLeader(batch, -1, true, nil, seen)
	if code != 0 {
		return -1, nil, kerr.ErrorForCode(code)
	}
	committed = func(ctx context.Context) error {
		deadline, ok := ctx.Deadline()
		if !ok {
			deadline = time.Now().Add(time.Hour)
		}
		code := p.waitCommitted(ctx, gen, info.LastOffset, deadline)
		if code != 0 {
			return kerr.ErrorForCode(code)
		}
		m.logAck(p, info.FirstOffset, info.LastOffset, epoch, -1)
		return nil
	}
	return info.FirstOffset, committed, nil
}

// ReadLocalLog returns every record of tp's local log from its start to its
// end offset as it is now, as GroupMetadataManager.doLoadGroupsAndOffsets
// reads a partition it has just become leader of (2.6.3 reads to the log
// end offset, not the high watermark). Control batches are left out.
func (m *Manager) ReadLocalLog(tp history.TopicPartition) ([]storage.LoggedRecord, error) {
	batches, err := m.ReadLocalBatches(tp)
	var out []storage.LoggedRecord
	for _, b := range batches {
		out = append(out, b.Records...)
	}
	return out, err
}

// ReadLocalBatches is ReadLocalLog batch by batch, control batches
// included, for a load that must see transactional writes and markers.
func (m *Manager) ReadLocalBatches(tp history.TopicPartition) ([]storage.LoggedBatch, error) {
	p := m.get(tp)
	if p == nil {
		return nil, fmt.Errorf("read %s: no local log", tp)
	}
	from, end := p.log.LogStartOffset(), p.log.LogEndOffset()
	var out []storage.LoggedBatch
	for from < end {
		b, err := p.log.Read(from, 1<<20, end)
		if err != nil {
			return out, fmt.Errorf("read %s at %d: %w", tp, from, err)
		}
		if len(b) == 0 {
			break
		}
		batches, err := storage.ReadBatches(b)
		if err != nil {
			return out, fmt.Errorf("read %s at %d: %w", tp, from, err)
		}
		if len(batches) == 0 {
			return out, fmt.Errorf("read %s at %d: no complete batch", tp, from)
		}
		out = append(out, batches...)
		from = batches[len(batches)-1].Header.LastOffset() + 1
	}
	return out, nil
}

// AppendMarker is handleWriteTxnMarkersRequest's append of one transaction
// marker to tp: UNKNOWN_TOPIC_OR_PARTITION if this broker has no log for
// it (ReplicaManager.getMagic), else AppendAsCoordinator of the control
// batch, which the leader checks against the producer's epoch and the
// coordinator epoch of its last marker. seen is what the producer state
// held for the marker's producer when the leader checked it (Known false:
// no state, or the marker refused before the check).
func (m *Manager) AppendMarker(tp history.TopicPartition, mk storage.Marker) (base int64, committed func(ctx context.Context) error, seen ProducerView, err error) {
	if m.get(tp) == nil {
		return -1, nil, seen, kerr.UnknownTopicOrPartition
	}
	base, committed, err = m.appendAsCoordinator(tp, storage.EncodeMarker(mk, time.Now().UnixMilli()), &seen)
	return base, committed, seen, err
}

// ProducerView is what a partition's producer state held for one producer
// id: its epoch and the coordinator epoch of its last marker (-1: none).
// Known is false when the partition had no state for it.
type ProducerView struct {
	Known            bool
	Epoch            int16
	CoordinatorEpoch int32
}
