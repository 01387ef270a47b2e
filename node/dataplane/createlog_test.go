package dataplane

import (
	"fmt"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/broker"
	"github.com/zkchaos/zkchaos/node/storage/checkpoint"
)

var _ broker.LogCreator = (*Manager)(nil)

// A partition whose LeaderAndIsr was answered but not applied (its leader
// unavailable) still has its log created and enters the in-memory map, as
// makeFollowers' createLogIfNotExists does, so the checkpoint task writes
// its high watermark; it takes no role.
func TestCreateLogPutsThePartitionInTheCheckpoint(t *testing.T) {
	tests := []struct {
		name   string
		create bool
		want   map[checkpoint.TopicPartition]int64
	}{
		{"created", true, map[checkpoint.TopicPartition]int64{{Topic: "t", Partition: 1}: 7}},
		{"not created: nothing in memory, nothing written", false, map[checkpoint.TopicPartition]int64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeLogs(t, dir, map[int32]int64{0: 5, 1: 7})
			if err := checkpoint.WriteReplicationOffsets(dir, map[checkpoint.TopicPartition]int64{{Topic: "t", Partition: 1}: 7}); err != nil {
				t.Fatal(err)
			}
			m := newManager(t, dir, nil, 1)
			if tt.create {
				if err := m.CreateLog(history.TP("t", 1)); err != nil {
					t.Fatal(err)
				}
				if p := m.get(history.TP("t", 1)); p == nil || p.role != "" || p.leaderEpoch != -1 {
					t.Fatalf("created partition took a role: %+v", p)
				}
			}
			if err := checkpoint.WriteReplicationOffsets(dir, map[checkpoint.TopicPartition]int64{}); err != nil {
				t.Fatal(err)
			}
			if got := writtenCheckpoint(t, m, dir); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("checkpoint %v, want %v", got, tt.want)
			}
		})
	}
}
