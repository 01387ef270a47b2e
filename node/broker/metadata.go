package broker

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
)

// LiveBroker is a broker endpoint from UpdateMetadata.
type LiveBroker struct {
	ID   int32
	Host string
	Port int32
}

// MetadataCache is what UpdateMetadata tells a broker (MetadataCache.scala):
// live brokers and every partition's leader, for Metadata requests (part 2).
type MetadataCache struct {
	mu              sync.Mutex
	ControllerID    int32
	ControllerEpoch int32
	Brokers         map[int32]LiveBroker
	Partitions      map[history.TopicPartition]history.PartitionState
}

// leaderDuringDelete is LeaderAndIsr.LeaderDuringDelete.
const leaderDuringDelete int32 = -2

func newMetadataCache() *MetadataCache {
	return &MetadataCache{ControllerID: -1, Brokers: map[int32]LiveBroker{}, Partitions: map[history.TopicPartition]history.PartitionState{}}
}

func (m *MetadataCache) update(req *kmsg.UpdateMetadataRequest) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ControllerID, m.ControllerEpoch = req.ControllerID, req.ControllerEpoch
	m.Brokers = map[int32]LiveBroker{}
	for _, lb := range req.LiveBrokers {
		b := LiveBroker{ID: lb.ID, Host: lb.Host, Port: lb.Port}
		if len(lb.Endpoints) > 0 {
			b.Host, b.Port = lb.Endpoints[0].Host, lb.Endpoints[0].Port
		}
		m.Brokers[lb.ID] = b
	}
	add := func(topic string, p kmsg.UpdateMetadataRequestTopicPartition) {
		if p.Leader == leaderDuringDelete {
			// MetadataCache.updateMetadata: a partition whose topic is
			// being deleted leaves the cache, so Metadata stops naming it.
			delete(m.Partitions, history.TP(topic, p.Partition))
			return
		}
		m.Partitions[history.TP(topic, p.Partition)] = history.PartitionState{Topic: topic, Partition: p.Partition,
			Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, ControllerEpoch: p.ControllerEpoch, ISR: p.ISR, Replicas: p.Replicas}
	}
	for _, p := range req.PartitionStates {
		add(p.Topic, p)
	}
	for _, t := range req.TopicStates {
		for _, p := range t.PartitionStates {
			add(t.Topic, p)
		}
	}
}

// Snapshot returns copies of the cache's brokers and partitions.
func (m *MetadataCache) Snapshot() (map[int32]LiveBroker, map[history.TopicPartition]history.PartitionState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	bs := make(map[int32]LiveBroker, len(m.Brokers))
	for k, v := range m.Brokers {
		bs[k] = v
	}
	ps := make(map[history.TopicPartition]history.PartitionState, len(m.Partitions))
	for k, v := range m.Partitions {
		ps[k] = v
	}
	return bs, ps
}

// Controller is the controller id the last UpdateMetadata named (-1: none yet).
func (m *MetadataCache) Controller() int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ControllerID
}

// Broker returns a live broker's endpoint.
func (m *MetadataCache) Broker(id int32) (LiveBroker, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.Brokers[id]
	return b, ok
}

// Partition returns one partition's state, as MetadataCache.contains and
// getPartitionInfo answer it.
func (m *MetadataCache) Partition(tp history.TopicPartition) (history.PartitionState, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps, ok := m.Partitions[tp]
	return ps, ok
}
