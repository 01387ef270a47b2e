package txn

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Cluster is what the request handlers need from the rest of the broker.
type Cluster interface {
	// PartitionExists is MetadataCache.contains.
	PartitionExists(topic string, partition int32) bool
	// OffsetsPartition is the __consumer_offsets partition of a group
	// (GroupCoordinator.partitionFor).
	OffsetsPartition(group string) TopicPartition
}

// Route is one API the coordinator serves, at Kafka 2.6.3's versions.
type Route struct {
	Key, Min, Max int16
}

// Routes lists what Handle serves. InitProducerId is the node's: it
// serves producers without a transactional id itself and hands the rest
// to InitProducerID.
func Routes() []Route {
	return []Route{
		{kmsg.AddPartitionsToTxn.Int16(), 0, 1},
		{kmsg.AddOffsetsToTxn.Int16(), 0, 1},
		{kmsg.EndTxn.Int16(), 0, 1},
	}
}

// Handlers answers the transaction APIs over kmsg types.
type Handlers struct {
	C       *Coordinator
	Cluster Cluster
}

// Handle answers one request of Routes, or an InitProducerId with a
// transactional id.
func (h *Handlers) Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *kmsg.InitProducerIDRequest:
		return h.InitProducerID(ctx, r), nil
	case *kmsg.AddPartitionsToTxnRequest:
		if r.Version >= VerifyRoute {
			return h.VerifyAddPartitions(r), nil
		}
		return h.AddPartitionsToTxn(ctx, r), nil
	case *kmsg.AddOffsetsToTxnRequest:
		return h.AddOffsetsToTxn(ctx, r), nil
	case *kmsg.EndTxnRequest:
		return h.EndTxn(ctx, r), nil
	}
	return nil, fmt.Errorf("transaction coordinator: unexpected request %T", req)
}

// InitProducerID is KafkaApis.handleInitProducerIdRequest for a
// transactional id (r.TransactionalID must be set).
func (h *Handlers) InitProducerID(ctx context.Context, r *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	var expected *ProducerIDAndEpoch
	switch {
	case r.ProducerID == -1 && r.ProducerEpoch == -1:
	case r.ProducerID == -1 || r.ProducerEpoch == -1:
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	default:
		expected = &ProducerIDAndEpoch{ID: r.ProducerID, Epoch: r.ProducerEpoch}
	}
	id := ""
	if r.TransactionalID != nil {
		id = *r.TransactionalID
	}
	res := h.C.InitProducerID(ctx, id, r.TransactionTimeoutMillis, expected)
	resp.ProducerID, resp.ProducerEpoch, resp.ErrorCode = res.ProducerID, res.ProducerEpoch, res.Error
	return resp
}

// AddPartitionsToTxn is KafkaApis.handleAddPartitionToTxnRequest: a
// partition the metadata cache does not know fails the whole request, the
// others answering OPERATION_NOT_ATTEMPTED.
func (h *Handlers) AddPartitionsToTxn(ctx context.Context, r *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	var parts []TopicPartition
	unknown := map[TopicPartition]bool{}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			tp := TopicPartition{t.Topic, p}
			parts = append(parts, tp)
			if h.Cluster != nil && !h.Cluster.PartitionExists(t.Topic, p) {
				unknown[tp] = true
			}
		}
	}
	answer := func(code func(TopicPartition) int16) {
		idx := map[string]int{}
		for _, tp := range parts {
			i, ok := idx[tp.Topic]
			if !ok {
				i = len(resp.Topics)
				idx[tp.Topic] = i
				t := kmsg.NewAddPartitionsToTxnResponseTopic()
				t.Topic = tp.Topic
				resp.Topics = append(resp.Topics, t)
			}
			p := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			p.Partition, p.ErrorCode = tp.Partition, code(tp)
			resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, p)
		}
	}
	if len(unknown) > 0 {
		answer(func(tp TopicPartition) int16 {
			if unknown[tp] {
				return kerr.UnknownTopicOrPartition.Code
			}
			return kerr.OperationNotAttempted.Code
		})
		h.C.mu.Lock()
		h.C.emitLocked(Event{API: "AddPartitionsToTxn", Version: r.Version, TransactionalID: r.TransactionalID, ProducerID: r.ProducerID,
			ProducerEpoch: r.ProducerEpoch, CoordinatorEpoch: -1, Partitions: parts, Error: kerr.UnknownTopicOrPartition.Code,
			AssignedProducerID: -1, AssignedEpoch: -1})
		h.C.mu.Unlock()
		return resp
	}
	code := h.C.AddPartitions(ctx, "AddPartitionsToTxn", r.Version, r.TransactionalID, r.ProducerID, r.ProducerEpoch, parts, "")
	answer(func(TopicPartition) int16 { return code })
	return resp
}

// AddOffsetsToTxn is KafkaApis.handleAddOffsetsToTxnRequest: the group's
// __consumer_offsets partition joins the transaction.
func (h *Handlers) AddOffsetsToTxn(ctx context.Context, r *kmsg.AddOffsetsToTxnRequest) *kmsg.AddOffsetsToTxnResponse {
	resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	tp := h.Cluster.OffsetsPartition(r.Group)
	resp.ErrorCode = h.C.AddPartitions(ctx, "AddOffsetsToTxn", r.Version, r.TransactionalID, r.ProducerID, r.ProducerEpoch, []TopicPartition{tp}, r.Group)
	return resp
}

// EndTxn is KafkaApis.handleEndTxnRequest.
func (h *Handlers) EndTxn(ctx context.Context, r *kmsg.EndTxnRequest) *kmsg.EndTxnResponse {
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ErrorCode = h.C.EndTxn(ctx, r.Version, r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit)
	return resp
}
