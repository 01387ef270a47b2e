package dataplane

import (
	"reflect"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/broker"
	"github.com/zkchaos/zkchaos/node/storage/checkpoint"
)

// leadEpochs makes m, broker id, lead t-0 alone at each epoch in turn and
// append n[i] one-record batches in epoch epochs[i]: a log with that epoch
// history.
func leadEpochs(t *testing.T, m *Manager, id int32, epochs []int32, n []int) {
	t.Helper()
	for i, e := range epochs {
		if err := m.BecomeLeader(broker.Partition{Topic: "t", Partition: 0, Leader: id, LeaderEpoch: e, ISR: []int32{id}, Replicas: []int32{1, 2}}); err != nil {
			t.Fatal(err)
		}
		for range n[i] {
			if r := produce(m, 0, 1, time.Second, batch("x")); r.ErrorCode != 0 {
				t.Fatalf("produce at epoch %d: %d", e, r.ErrorCode)
			}
		}
	}
}

// KIP-279 (AbstractFetcherThread.getOffsetTruncationState, 2.6.3): when the
// leader answers OffsetsForLeaderEpoch with an epoch the follower does not
// have, the follower truncates to its own end offset for the largest epoch
// below it and asks again, until the leader's epoch is one it has; only
// then is truncation complete. Stopped after one round, a follower that
// missed several leader changes keeps records of epochs the leader never
// had.
func TestFollowerTruncationRepeatsUntilEpochsAgree(t *testing.T) {
	tests := []struct {
		name           string
		leader, follow [2][]int32 // epochs, and one-record batches in each
		wantEpochs     []checkpoint.EpochEntry
	}{
		{
			// Follower asks 4, leader answers (3, 9): truncate to 8 (end of the
			// follower's epoch 2); asks 2, answered (1, 6): truncate to 5;
			// asks 0, answered (0, 3): truncate to 3 — then fetches the rest.
			name:       "three rounds",
			leader:     [2][]int32{{0, 1, 3, 5}, {3, 3, 3, 1}},
			follow:     [2][]int32{{0, 2, 4}, {5, 3, 2}},
			wantEpochs: []checkpoint.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 1, StartOffset: 3}, {Epoch: 3, StartOffset: 6}, {Epoch: 5, StartOffset: 9}},
		},
		{
			name:       "one round: the leader knows the follower's epoch",
			leader:     [2][]int32{{0, 2, 5}, {4, 2, 2}},
			follow:     [2][]int32{{0, 2}, {4, 5}},
			wantEpochs: []checkpoint.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 4}, {Epoch: 5, StartOffset: 6}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m1 := newManagerID(t, 1, t.TempDir(), nil, 1)
			m2 := newManagerID(t, 2, t.TempDir(), nil, 1)
			addr, _ := serve(t, m1)
			leadEpochs(t, m1, 1, tt.leader[0], ints(tt.leader[1]))
			leadEpochs(t, m2, 2, tt.follow[0], ints(tt.follow[1]))
			last := tt.leader[0][len(tt.leader[0])-1]
			if err := m2.BecomeFollower(broker.Partition{Topic: "t", Partition: 0, Leader: 1, LeaderEpoch: last, ISR: []int32{1}, Replicas: []int32{1, 2}, LeaderAddr: addr}); err != nil {
				t.Fatal(err)
			}
			l1, l2 := m1.get(history.TP("t", 0)), m2.get(history.TP("t", 0))
			eventually(t, "follower caught up", func() bool {
				return l2.log.LogEndOffset() == l1.log.LogEndOffset() && l2.log.LatestEpoch() == last
			})
			if got := l2.log.Epochs(); !reflect.DeepEqual(got, tt.wantEpochs) {
				t.Fatalf("follower's epochs %v, want the leader's %v (leader has %v)", got, tt.wantEpochs, l1.log.Epochs())
			}
		})
	}
}

func ints(ns []int32) []int {
	out := make([]int, len(ns))
	for i, n := range ns {
		out[i] = int(n)
	}
	return out
}
