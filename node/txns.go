package node

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/dataplane"
	"github.com/zkchaos/zkchaos/node/group"
	"github.com/zkchaos/zkchaos/node/storage"
	"github.com/zkchaos/zkchaos/node/txn"
	"github.com/zkchaos/zkchaos/node/wire"
	"github.com/zkchaos/zkchaos/node/zkutil"
)

// txns wires the transaction coordinator (package txn) into the broker,
// as KafkaServer and KafkaApis wire Kafka's TransactionCoordinator: its
// __transaction_state writes go through the data plane's acks=all append,
// FindCoordinator for a transactional id creates the topic on first use,
// LeaderAndIsr and StopReplica load and unload its partitions at their
// leader epoch (the coordinator epoch), its markers go to partition
// leaders as WriteTxnMarkers, and this broker's own WriteTxnMarkers
// handler appends the markers it receives. Every action goes to the event
// log as a txn_request, every marker appended or refused as a txn_marker.
type txns struct {
	n     *Node
	coord *txn.Coordinator
	h     *txn.Handlers

	sess atomic.Pointer[zkutil.Session]

	mu      sync.Mutex
	clients map[string]*wire.Client // marker connections by address
	// loads follows this broker's leadership of __transaction_state.
	loads *partitionLoads
}

func newTxns(n *Node, pids txn.ProducerIDs) *txns {
	t := &txns{n: n, clients: map[string]*wire.Client{}}
	cfg := n.cfg
	t.coord = txn.New(txn.Options{
		Config: txn.Config{NumPartitions: cfg.TransactionTopicPartitions, MaxTimeout: cfg.TransactionMaxTimeout,
			AbortInterval: cfg.TransactionAbortInterval},
		Log: txnLog{n.data}, PIDs: pids, Markers: t, OnEvent: t.emit,
	})
	t.h = &txn.Handlers{C: t.coord, Cluster: t}
	t.loads = newPartitionLoads(t.coord.BeginLoad, t.load, t.coord.Unload)
	return t
}

func (t *txns) close() {
	t.coord.Close()
	t.loads.close()
	t.mu.Lock()
	for _, c := range t.clients {
		c.Close()
	}
	t.clients = map[string]*wire.Client{}
	t.mu.Unlock()
}

// client is the connection cached under key, opened to addr on first use
// and named for its purpose and this broker; close ends them all.
func (t *txns) client(key, addr, purpose string) *wire.Client {
	t.mu.Lock()
	defer t.mu.Unlock()
	cl := t.clients[key]
	if cl == nil {
		cl = wire.NewClient(addr, fmt.Sprintf("%s-%d", purpose, t.n.cfg.BrokerID))
		t.clients[key] = cl
	}
	return cl
}

// routes registers the transaction APIs, InitProducerId (the data plane's
// for producers without a transactional id), WriteTxnMarkers, and
// FindCoordinator, whose transaction keys it answers and whose group keys
// it hands to the group coordinator. Call after groups.routes.
func (t *txns) routes(s *wire.Server, g *groups) {
	for _, r := range txn.Routes() {
		hi := r.Max
		if r.Key == kmsg.AddPartitionsToTxn.Int16() && !t.n.cfg.Bugs.On(config.BugKafka12671) {
			// Partition leaders' verifications (KIP-890), never
			// advertised: clients keep Kafka 2.6.3's versions.
			hi = txn.VerifyRoute
		}
		s.HandleUnadvertised(r.Key, r.Min, r.Max, hi, func(ctx context.Context, _ *wire.ConnInfo, _ wire.RequestHeader, req kmsg.Request) (kmsg.Response, error) {
			return t.h.Handle(ctx, req)
		})
	}
	// Kafka 2.6.3 serves InitProducerId v0-3; v3 (KIP-360) carries the
	// producer's id and epoch, which only a transactional id uses.
	s.Handle(kmsg.InitProducerID.Int16(), 0, 3, func(ctx context.Context, _ *wire.ConnInfo, _ wire.RequestHeader, req kmsg.Request) (kmsg.Response, error) {
		r := req.(*kmsg.InitProducerIDRequest)
		if r.TransactionalID == nil {
			return t.n.data.InitProducerID(ctx, r), nil
		}
		return t.h.InitProducerID(ctx, r), nil
	})
	s.Handle(kmsg.WriteTxnMarkers.Int16(), 0, 0, func(ctx context.Context, _ *wire.ConnInfo, _ wire.RequestHeader, req kmsg.Request) (kmsg.Response, error) {
		return t.writeMarkers(ctx, req.(*kmsg.WriteTxnMarkersRequest)), nil
	})
	s.Handle(kmsg.FindCoordinator.Int16(), 0, 3, func(ctx context.Context, info *wire.ConnInfo, hdr wire.RequestHeader, req kmsg.Request) (kmsg.Response, error) {
		r := req.(*kmsg.FindCoordinatorRequest)
		if r.CoordinatorType != 1 {
			return g.h.Handle(ctx, "", "", req)
		}
		return t.findCoordinator(ctx, r), nil
	})
}

// findCoordinator is handleFindCoordinatorRequest for CoordinatorType 1:
// the live leader of the id's __transaction_state partition, the topic
// created first if it does not exist.
func (t *txns) findCoordinator(ctx context.Context, r *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	p := t.coord.PartitionFor(r.CoordinatorKey)
	leader, ok := t.internalLeader(ctx, p)
	code := int16(0)
	if !ok {
		code = kerr.CoordinatorNotAvailable.Code
		leader = group.Node{ID: -1, Port: -1}
	}
	resp.ErrorCode, resp.NodeID, resp.Host, resp.Port = code, leader.ID, leader.Host, leader.Port
	msg := "NONE"
	if code != 0 {
		msg = kerr.CoordinatorNotAvailable.Description
	}
	resp.ErrorMessage = &msg
	t.n.log.Emit(history.Event{Kind: history.KindTxnRequest, Txn: &history.TxnRequest{API: history.TxnAPIFindCoordinator,
		APIVersion: r.Version, TransactionalID: r.CoordinatorKey, Partition: p, ProducerID: -1, ProducerEpoch: -1,
		CoordinatorEpoch: -1, Broker: leader.ID, ErrorCode: code}})
	return resp
}

func (t *txns) internalLeader(ctx context.Context, p int32) (group.Node, bool) {
	return internalTopicLeader(ctx, t.n, t.sess.Load(), "transaction coordinator", dataplane.TransactionStateTopic, p, t.n.cfg.TransactionTopicPartitions, t.n.cfg.TransactionTopicReplicationFactor)
}

// PartitionExists implements txn.Cluster.
func (t *txns) PartitionExists(topic string, p int32) bool {
	_, ok := t.n.broker.Metadata.Partition(history.TP(topic, p))
	return ok
}

// OffsetsPartition implements txn.Cluster.
func (t *txns) OffsetsPartition(g string) txn.TopicPartition {
	return txn.TopicPartition{Topic: dataplane.GroupMetadataTopic, Partition: group.PartitionFor(g, t.n.cfg.OffsetsTopicPartitions)}
}

// Leader implements txn.Markers from the metadata cache
// (getPartitionLeaderEndpoint): a partition without a live leader waits.
func (t *txns) Leader(tp txn.TopicPartition) (int32, bool) {
	brokers, parts := t.n.broker.Metadata.Snapshot()
	ps, ok := parts[history.TP(tp.Topic, tp.Partition)]
	if !ok || ps.Leader < 0 {
		return -1, false
	}
	_, live := brokers[ps.Leader]
	return ps.Leader, live
}

// Send implements txn.Markers: one WriteTxnMarkers v0 to broker, over a
// connection kept per address (the marker channel's NetworkClient).
func (t *txns) Send(ctx context.Context, broker int32, m txn.Marker) (map[txn.TopicPartition]int16, error) {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.SetVersion(0)
	rm := kmsg.NewWriteTxnMarkersRequestMarker()
	rm.ProducerID, rm.ProducerEpoch, rm.Committed, rm.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
	idx := map[string]int{}
	for _, tp := range m.Partitions {
		i, ok := idx[tp.Topic]
		if !ok {
			i = len(rm.Topics)
			idx[tp.Topic] = i
			rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			rt.Topic = tp.Topic
			rm.Topics = append(rm.Topics, rt)
		}
		rm.Topics[i].Partitions = append(rm.Topics[i].Partitions, tp.Partition)
	}
	req.Markers = append(req.Markers, rm)
	var resp *kmsg.WriteTxnMarkersResponse
	if broker == t.n.cfg.BrokerID {
		resp = t.writeMarkers(ctx, req)
	} else {
		brokers, _ := t.n.broker.Metadata.Snapshot()
		b, ok := brokers[broker]
		if !ok {
			return nil, fmt.Errorf("broker %d is not live", broker)
		}
		addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		cl := t.client(addr, addr, "txn-markers")
		r, err := cl.Request(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("WriteTxnMarkers to broker %d at %s: %w", broker, addr, err)
		}
		resp = r.(*kmsg.WriteTxnMarkersResponse)
	}
	out := map[txn.TopicPartition]int16{}
	for _, pm := range resp.Markers {
		if pm.ProducerID != m.ProducerID {
			continue
		}
		for _, rt := range pm.Topics {
			for _, rp := range rt.Partitions {
				out[txn.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = rp.ErrorCode
			}
		}
	}
	return out, nil
}

// writeMarkers is KafkaApis.handleWriteTxnMarkersRequest: each marker is
// appended as a control batch to each of its partitions with acks=all (the
// leader refuses an older coordinator or producer epoch), and the answer
// waits until every append is committed or failed.
func (t *txns) writeMarkers(ctx context.Context, req *kmsg.WriteTxnMarkersRequest) *kmsg.WriteTxnMarkersResponse {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	type pending struct {
		out       *kmsg.WriteTxnMarkersResponseMarkerTopicPartition
		ev        *history.TxnMarker
		committed func(context.Context) error
	}
	var waits []pending
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		mk := storage.Marker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Committed, CoordinatorEpoch: m.CoordinatorEpoch}
		for _, mt := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = mt.Topic
			rt.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(mt.Partitions))
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
		last := &resp.Markers[len(resp.Markers)-1]
		for ti, mt := range m.Topics {
			for pi, p := range mt.Partitions {
				out := &last.Topics[ti].Partitions[pi]
				*out = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				out.Partition = p
				ev := &history.TxnMarker{Topic: mt.Topic, Partition: p, ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
					CoordinatorEpoch: m.CoordinatorEpoch, Commit: m.Committed, Offset: -1}
				base, committed, seen, err := t.n.data.AppendMarker(history.TP(mt.Topic, p), mk)
				if seen.Known {
					pe, ce := seen.Epoch, seen.CoordinatorEpoch
					ev.KnownProducerEpoch, ev.KnownCoordinatorEpoch = &pe, &ce
				}
				if err != nil {
					out.ErrorCode = markerErr(err)
					ev.ErrorCode = out.ErrorCode
					t.n.log.Emit(history.Event{Kind: history.KindTxnMarker, TxnMarker: ev})
					continue
				}
				ev.Offset = base
				waits = append(waits, pending{out, ev, committed})
			}
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	type done struct {
		pid    int64
		commit bool
	}
	offsets := map[done][]int32{}
	for _, w := range waits {
		if err := w.committed(wctx); err != nil {
			w.out.ErrorCode = markerErr(err)
			w.ev.ErrorCode = w.out.ErrorCode
		} else if w.ev.Topic == dataplane.GroupMetadataTopic {
			k := done{w.ev.ProducerID, w.ev.Commit}
			offsets[k] = append(offsets[k], w.ev.Partition)
		}
		t.n.log.Emit(history.Event{Kind: history.KindTxnMarker, TxnMarker: w.ev})
	}
	// As soon as a marker is committed to a __consumer_offsets partition,
	// the group coordinator applies the producer's pending offsets there
	// (scheduleHandleTxnCompletion), before the coordinator is answered.
	if g := t.n.groups; g != nil {
		for k, ps := range offsets {
			g.coord.HandleTxnCompletion(k.pid, ps, k.commit)
		}
	}
	return resp
}

func markerErr(err error) int16 {
	if ke, ok := err.(*kerr.Error); ok {
		return ke.Code
	}
	return kerr.RequestTimedOut.Code
}

// emit maps a coordinator event onto the history schema; it runs under the
// coordinator's lock.
func (t *txns) emit(e txn.Event) {
	if e.API == txn.APILog {
		t.n.log.Printf("transaction coordinator: %s", e.Detail)
		return
	}
	tr := &history.TxnRequest{API: e.API, APIVersion: e.Version, TransactionalID: e.TransactionalID, Partition: e.Partition,
		ProducerID: e.ProducerID, ProducerEpoch: e.ProducerEpoch, CoordinatorEpoch: e.CoordinatorEpoch, State: e.State,
		Commit: e.Commit, Broker: e.Broker, ErrorCode: e.Error, Group: e.Group, TransactionalIDs: e.IDs, Detail: e.Detail}
	if e.KnownEpoch != nil {
		k := *e.KnownEpoch
		tr.KnownProducerEpoch = &k
	}
	if e.API == history.TxnAPIInitProducerID {
		pid, epoch := e.AssignedProducerID, e.AssignedEpoch
		tr.AssignedProducerID, tr.AssignedEpoch = &pid, &epoch
	}
	for _, tp := range e.Partitions {
		tr.Partitions = append(tr.Partitions, history.TP(tp.Topic, tp.Partition))
	}
	for _, pe := range e.Errors {
		tr.Errors = append(tr.Errors, history.TxnPartitionError{Topic: pe.TP.Topic, Partition: pe.TP.Partition, ErrorCode: pe.Error})
	}
	t.n.log.Emit(history.Event{Kind: history.KindTxnRequest, Txn: tr})
}

// elected is TransactionCoordinator.onElection at the partition's leader
// epoch; a broker that already leads p does not load again.
func (t *txns) elected(p, epoch int32) { t.loads.elected(p, epoch) }

// resigned is onResignation.
func (t *txns) resigned(p int32) { t.loads.resigned(p) }

// load is loadTransactionMetadata: the partition from its start to its end.
func (t *txns) load(p, epoch int32) {
	tp := history.TP(dataplane.TransactionStateTopic, p)
	recs, err := t.n.data.ReadLocalLog(tp)
	if err != nil {
		t.n.log.Printf("transaction coordinator: load %s: %v", tp, err)
	}
	loaded := make([]txn.Record, 0, len(recs))
	for _, r := range recs {
		loaded = append(loaded, txn.Record{Key: r.Key, Value: r.Value})
	}
	if err := t.coord.FinishLoad(p, epoch, loaded); err != nil {
		t.n.log.Printf("transaction coordinator: load %s: %v", tp, err)
	}
	t.n.log.Printf("transaction coordinator: loaded %s (%d records) at coordinator epoch %d", tp, len(loaded), epoch)
}

// txnLog implements txn.Log over the data plane.
type txnLog struct{ data *dataplane.Manager }

func (l txnLog) Append(p int32, key, value []byte) (int64, func(context.Context) error, error) {
	batch, err := storage.EncodeBatch([]storage.KeyValue{{Key: key, Value: value}}, time.Now().UnixMilli())
	if err != nil {
		return -1, nil, err
	}
	return l.data.AppendAsCoordinator(history.TP(dataplane.TransactionStateTopic, p), batch)
}
