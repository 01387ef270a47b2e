package dataplane

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/broker"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/wire"
)

// A restarted broker has its logs on disk but hosts none until a
// LeaderAndIsr: Kafka 2.6.3's ReplicaManager.getPartitionOrError answers a
// client's or follower's request for such a partition NOT_LEADER_FOR_PARTITION
// when its metadata cache knows it and UNKNOWN_TOPIC_OR_PARTITION when not,
// whatever leader epoch the request carries. Only the debugging replica
// id's ListOffsets (the node's query-leo) reads the loaded log.
func TestUnhostedLogAfterRestart(t *testing.T) {
	tp := history.TP("t", 0)
	for _, tt := range []struct {
		name  string
		known bool // an UpdateMetadata named t-0
		want  int16
	}{
		{"metadata knows the partition", true, kerr.NotLeaderForPartition.Code},
		{"metadata does not", false, kerr.UnknownTopicOrPartition.Code},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			first := newManager(t, dir, nil, 1)
			lead(t, first, 0, 1)
			if r := produce(first, 0, -1, time.Second, batch("a", "b")); r.ErrorCode != 0 {
				t.Fatalf("produce before the restart: %d", r.ErrorCode)
			}
			first.Close()

			b := broker.New(1, nil, nil)
			m, err := Open(Config{BrokerID: 1, DataDir: dir, MinISR: 1, LagTime: time.Second, CheckpointInterval: time.Hour,
				FetchMaxWait: 50 * time.Millisecond, MaxMessageBytes: 4096, Bugs: config.Bugs(nil)}, nil, b.Metadata)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(m.Close)
			if tt.known {
				um := kmsg.NewPtrUpdateMetadataRequest()
				um.SetVersion(6)
				um.ControllerID, um.ControllerEpoch, um.BrokerEpoch = 2, 1, -1
				ts := kmsg.NewUpdateMetadataRequestTopicState()
				ts.Topic = "t"
				ps := kmsg.NewUpdateMetadataRequestTopicPartition()
				ps.Leader, ps.LeaderEpoch, ps.ISR, ps.Replicas = 2, 4, []int32{2}, []int32{1, 2, 3}
				ts.PartitionStates = append(ts.PartitionStates, ps)
				um.TopicStates = append(um.TopicStates, ts)
				if r := b.HandleUpdateMetadata(wire.RequestHeader{}, um); r.ErrorCode != 0 {
					t.Fatalf("UpdateMetadata: %d", r.ErrorCode)
				}
			}
			ctx := context.Background()
			fr := fetchRequest(12, -1, tp, 0, 1<<20)
			fr.Topics[0].Partitions[0].CurrentLeaderEpoch = 4
			got := map[string]int16{
				"consumer fetch": m.Fetch(ctx, fr).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode,
				"follower fetch": m.Fetch(ctx, fetchRequest(12, 3, tp, 0, 1<<20)).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode,
				"produce":        produce(m, 0, -1, time.Second, batch("c")).ErrorCode,
				"ListOffsets":    m.ListOffsets(listOffsetsRequest(-1, tp, -1, 4)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode,
				"OffsetForLeaderEpoch": m.OffsetForLeaderEpoch(offsetForLeaderEpochRequest(3, tp, 4, 3)).(*kmsg.OffsetForLeaderEpochResponse).
					Topics[0].Partitions[0].ErrorCode,
			}
			for req, code := range got {
				if code != tt.want {
					t.Errorf("%s: error %d, want %d", req, code, tt.want)
				}
			}
			dbg := m.ListOffsets(listOffsetsRequest(debuggingReplicaID, tp, -1, -1)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
			if dbg.ErrorCode != 0 || dbg.Offset != 2 {
				t.Errorf("debugging replica's ListOffsets: error %d offset %d, want the loaded log's end 2", dbg.ErrorCode, dbg.Offset)
			}
		})
	}
}
