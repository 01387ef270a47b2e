package checkers

import "github.com/zkchaos/zkchaos/history"

// replicaTracker follows each partition's replica set, the controller's
// assignment: the replicas of the LeaderAndIsr of the highest leader epoch
// since the partition's topic was last deleted. A request logged later can
// be an older one sent again or delivered late (a send thread retrying, a
// broker slow to answer); a reassignment's last request has the highest
// epoch. A topic deleted and created again is a new partition whose leader
// epochs count from 0 again, so a completed deletion forgets its sets.
// Which LeaderAndIsr events count (sent, received, accepted) is the
// caller's choice.
type replicaTracker struct {
	sets map[history.TopicPartition]epochReplicas
}

// epochReplicas is a replica set with the leader epoch of the request that
// carried it.
type epochReplicas struct {
	epoch    int32
	replicas []int32
}

func newReplicaTracker() *replicaTracker {
	return &replicaTracker{sets: map[history.TopicPartition]epochReplicas{}}
}

// leaderAndIsr takes in the replica sets of a LeaderAndIsr's partitions: a
// set at a leader epoch at least the one held replaces it; a partition
// without replicas (an older writer's) says nothing.
func (t *replicaTracker) leaderAndIsr(c *history.Control) {
	for j := range c.Partitions {
		p := &c.Partitions[j]
		if cur, ok := t.sets[p.TP()]; len(p.Replicas) > 0 && (!ok || p.LeaderEpoch >= cur.epoch) {
			t.sets[p.TP()] = epochReplicas{p.LeaderEpoch, p.Replicas}
		}
	}
}

// deleted forgets the partitions of a completed topic deletion.
func (t *replicaTracker) deleted(d *history.TopicDeletion) {
	if d == nil || d.Step != history.DeletionCompleted {
		return
	}
	for _, p := range d.Partitions {
		delete(t.sets, history.TP(d.Topic, p))
	}
}

// of returns tp's replica set, nil when no LeaderAndIsr carried one.
func (t *replicaTracker) of(tp history.TopicPartition) []int32 { return t.sets[tp].replicas }

// all returns every partition's replica set.
func (t *replicaTracker) all() map[history.TopicPartition][]int32 {
	out := make(map[history.TopicPartition][]int32, len(t.sets))
	for tp, s := range t.sets {
		out[tp] = s.replicas
	}
	return out
}
