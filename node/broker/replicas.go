package broker

import (
	"sort"
	"sync"

	"github.com/zkchaos/zkchaos/history"
)

// Partition is the broker's in-memory state of one hosted partition, as
// ReplicaManager.allPartitions holds it.
type Partition struct {
	Topic           string
	Partition       int32
	Role            string // history.RoleLeader, RoleFollower
	Leader          int32
	LeaderEpoch     int32
	ISR             []int32
	Replicas        []int32
	ZkVersion       int32
	ControllerEpoch int32
	// LeaderAddr is the leader's host:port from the request's LiveLeaders
	// ("" if absent), where a follower's fetcher connects.
	LeaderAddr string `json:",omitempty"`
}

// TP returns the partition's name.
func (p *Partition) TP() history.TopicPartition { return history.TP(p.Topic, p.Partition) }

// DataPlane is what the replica log and replication (package dataplane)
// plug in: the control plane tells it about role changes after the fencing
// checks passed.
// Calls come one request at a time, in request order.
type DataPlane interface {
	BecomeLeader(p Partition) error
	BecomeFollower(p Partition) error
	StopReplica(tp history.TopicPartition, delete bool) error
	// StartHWCheckpoint is called once, on the first LeaderAndIsr the
	// process handles (KAFKA-7235 depends on exactly that timing).
	StartHWCheckpoint()
}

// LogCreator is implemented by a data plane that can create a partition's
// log without changing its replica (Partition.createLogIfNotExists):
// makeFollowers does that for a partition whose new leader is unavailable,
// so its high watermark is in the checkpoint file (KAFKA-1647). A data
// plane without it creates nothing then.
type LogCreator interface {
	CreateLog(tp history.TopicPartition) error
}

// NoDataPlane does nothing (unit tests of the control plane alone).
type NoDataPlane struct{}

func (NoDataPlane) BecomeLeader(Partition) error                   { return nil }
func (NoDataPlane) BecomeFollower(Partition) error                 { return nil }
func (NoDataPlane) StopReplica(history.TopicPartition, bool) error { return nil }
func (NoDataPlane) StartHWCheckpoint()                             {}

// ReplicaManager is the broker's partition map as the control plane sees it;
// the data plane keeps its own per-partition state (HW, followers, logs).
type ReplicaManager struct {
	mu         sync.Mutex
	partitions map[history.TopicPartition]*Partition
	hwStarted  bool
}

func newReplicaManager() *ReplicaManager {
	return &ReplicaManager{partitions: map[history.TopicPartition]*Partition{}}
}

// Get returns a copy of a partition's state.
func (r *ReplicaManager) Get(tp history.TopicPartition) (Partition, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.partitions[tp]
	if !ok {
		return Partition{}, false
	}
	return *p, true
}

// All returns copies of every hosted partition, sorted.
func (r *ReplicaManager) All() []Partition {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Partition, 0, len(r.partitions))
	for _, p := range r.partitions {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// leaderEpoch is the current leader epoch of tp, -1 if not hosted (Kafka's
// Partition starts at LeaderAndIsr.InitialLeaderEpoch - 1).
func (r *ReplicaManager) leaderEpoch(tp history.TopicPartition) int32 {
	if p, ok := r.partitions[tp]; ok {
		return p.LeaderEpoch
	}
	return -1
}
