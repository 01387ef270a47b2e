package dataplane

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/broker"
	"github.com/zkchaos/zkchaos/node/config"
)

// DelayedProduce (Kafka 2.6.3) answers a waiting acks=all produce with what
// Partition.checkEnoughReplicasReachOffset returns once the replica no
// longer leads: NOT_LEADER_OR_FOLLOWER, although the record was appended and
// may survive on the new leader. The ack-timeout-on-leader-loss proposal
// answers REQUEST_TIMED_OUT (outcome unknown) instead.
func TestAcksAllAfterLeadershipLoss(t *testing.T) {
	tests := []struct {
		name      string
		proposals config.Proposals
		how       string // follower, stop (with delete), stop-keep (without)
		want      int16  // -1: still waiting after 1 s
	}{
		{"Kafka 2.6.3, became follower", nil, "follower", kerr.NotLeaderForPartition.Code},
		{"Kafka 2.6.3, replica stopped and deleted", nil, "stop", kerr.NotLeaderForPartition.Code},
		{"proposal, became follower", config.Proposals{config.ProposalAckTimeoutOnLeaderLoss: true}, "follower", kerr.RequestTimedOut.Code},
		{"proposal, replica stopped and deleted", config.Proposals{config.ProposalAckTimeoutOnLeaderLoss: true}, "stop", kerr.RequestTimedOut.Code},
		// ReplicaManager.stopReplicas without delete removes fetchers only:
		// the leader keeps leading and the produce keeps waiting for its
		// follower.
		{"Kafka 2.6.3, leader stopped without delete", nil, "stop-keep", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newManager(t, t.TempDir(), nil, 1)
			m.cfg.Proposals = tt.proposals
			lead(t, m, 0, 1, 2) // follower 2 never fetches: the produce waits
			done := make(chan *kmsg.ProduceResponseTopicPartition)
			// A produce still waiting is judged at 1 s, then answered by
			// leadership going; the others are answered at once, never by
			// their 3 s timeout.
			go func() { done <- produce(m, 0, -1, 3*time.Second, batch("v")) }()
			p := m.get(history.TP("t", 0))
			eventually(t, "appended", func() bool { return p.log.LogEndOffset() == 1 })
			var err error
			switch tt.how {
			case "stop", "stop-keep":
				err = m.StopReplica(history.TP("t", 0), tt.how == "stop")
			default:
				err = m.BecomeFollower(broker.Partition{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 4, ISR: []int32{2}, Replicas: []int32{1, 2, 3}})
			}
			if err != nil {
				t.Fatal(err)
			}
			select {
			case r := <-done:
				if r.ErrorCode != tt.want {
					t.Fatalf("error %d, want %d", r.ErrorCode, tt.want)
				}
			case <-time.After(time.Second):
				if tt.want != -1 {
					t.Fatal("the produce was not answered when leadership went")
				}
				p.mu.Lock()
				role := p.role
				p.mu.Unlock()
				if role != history.RoleLeader {
					t.Fatalf("role %s after a StopReplica without delete, want leader", role)
				}
				// Leadership going now answers it, as it would have at once.
				if err := m.BecomeFollower(broker.Partition{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 4, ISR: []int32{2}, Replicas: []int32{1, 2, 3}}); err != nil {
					t.Fatal(err)
				}
				if r := <-done; r.ErrorCode != kerr.NotLeaderForPartition.Code {
					t.Fatalf("error %d after leadership went, want %d", r.ErrorCode, kerr.NotLeaderForPartition.Code)
				}
			}
		})
	}
}
