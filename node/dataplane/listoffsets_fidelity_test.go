package dataplane

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/broker"
)

// Kafka 2.6.3 KafkaApis.handleListOffsetRequestV1AndAbove asks
// Partition.fetchOffsetForTimestamp with fetchOnlyFromLeader for every
// replica id except the debugging id -2, and Partition.getLocalLog checks
// the current leader epoch for every caller. A follower handling an
// out-of-range fetch (ReplicaFetcherThread.fetchLatestOffsetFromLeader, with
// its current epoch) must therefore be refused by a broker that stopped
// leading, not handed that broker's LEO to truncate to.
// ReplicaManager.lastOffsetForLeaderEpoch serves OffsetForLeaderEpoch from
// the leader only, the debugging id included.
func TestListOffsetsServedByTheLeaderOnly(t *testing.T) {
	// n1 led epoch 3 and appended two records, then became a follower of
	// broker 2 at epoch 5.
	follower := newManager(t, t.TempDir(), nil, 1)
	lead(t, follower, 0, 1)
	if r := produce(follower, 0, 1, time.Second, batch("a", "b")); r.ErrorCode != 0 {
		t.Fatalf("produce: %d", r.ErrorCode)
	}
	if err := follower.BecomeFollower(broker.Partition{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 5, ISR: []int32{2}, Replicas: []int32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	// This leader of epoch 5 has two records and HW 0: ISR [1, 2], the
	// follower has not fetched yet.
	leader := newManager(t, t.TempDir(), nil, 1)
	if err := leader.BecomeLeader(broker.Partition{Topic: "t", Partition: 0, Leader: 1, LeaderEpoch: 5, ISR: []int32{1, 2}, Replicas: []int32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	if r := produce(leader, 0, 1, time.Second, batch("a", "b")); r.ErrorCode != 0 {
		t.Fatalf("produce: %d", r.ErrorCode)
	}
	for _, c := range []struct {
		name    string
		m       *Manager
		replica int32
		epoch   int32
		code    int16
		offset  int64
	}{
		{"follower asked by a replica at its epoch", follower, 3, 5, kerr.NotLeaderForPartition.Code, -1},
		{"follower asked by a replica without an epoch", follower, 3, -1, kerr.NotLeaderForPartition.Code, -1},
		{"follower asked by a replica behind its epoch", follower, 3, 4, kerr.FencedLeaderEpoch.Code, -1},
		{"follower asked by the debugging id", follower, -2, -1, 0, 2},
		{"follower asked by the debugging id behind its epoch", follower, -2, 4, kerr.FencedLeaderEpoch.Code, -1},
		{"follower asked by a consumer", follower, -1, -1, kerr.NotLeaderForPartition.Code, -1},
		{"leader asked by a replica at its epoch: the LEO", leader, 3, 5, 0, 2},
		{"leader asked by a replica behind its epoch", leader, 3, 4, kerr.FencedLeaderEpoch.Code, -1},
		{"leader asked by a replica ahead of its epoch", leader, 3, 6, kerr.UnknownLeaderEpoch.Code, -1},
		{"leader asked by a consumer: the HW", leader, -1, 5, 0, 0},
		{"leader asked by the debugging id", leader, -2, -1, 0, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.m.ListOffsets(listOffsetsRequest(c.replica, history.TP("t", 0), -1, c.epoch)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
			if got.ErrorCode != c.code || got.Offset != c.offset {
				t.Fatalf("ListOffsets latest: error %d offset %d, want error %d offset %d", got.ErrorCode, got.Offset, c.code, c.offset)
			}
		})
	}
	o := follower.OffsetForLeaderEpoch(offsetForLeaderEpochRequest(-2, history.TP("t", 0), -1, 3)).(*kmsg.OffsetForLeaderEpochResponse)
	if c := o.Topics[0].Partitions[0].ErrorCode; c != kerr.NotLeaderForPartition.Code {
		t.Fatalf("OffsetForLeaderEpoch with the debugging id at a follower: error %d, want NOT_LEADER_OR_FOLLOWER", c)
	}
}
