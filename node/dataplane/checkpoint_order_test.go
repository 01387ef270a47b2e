package dataplane

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/broker"
)

// A LeaderAndIsr that puts a hosted partition into the in-memory map while
// a checkpoint write is between reading the map and logging its event
// waits for that event: the broker logs the request's role changes after
// applying it, so a write logged after the role change must hold the
// partition (the hw-checkpoint checker reads a write that leaves out a
// partition its process was told about as a dropped high watermark). The
// write itself still leaves the partition out, as Kafka's does when
// becomeLeaderOrFollower adds it after checkpointHighWatermarks read
// allPartitions.
func TestCheckpointIsLoggedInOrderWithAPartitionEnteringMemory(t *testing.T) {
	tests := []struct {
		name   string
		become func(m *Manager, bp broker.Partition) error
	}{
		{"follower", (*Manager).BecomeFollower},
		{"leader", (*Manager).BecomeLeader},
		{"log created, leader unavailable", func(m *Manager, bp broker.Partition) error { return m.CreateLog(bp.TP()) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeLogs(t, dir, map[int32]int64{0: 5, 1: 7})
			m, logged := openLogged(t, dir)
			lead(t, m, 0, 1) // t-0 in memory: the write is not empty
			snapped, release := make(chan struct{}), make(chan struct{})
			m.afterCkptSnapshot = func() {
				close(snapped)
				<-release
			}
			wrote := make(chan error)
			go func() { wrote <- m.WriteCheckpoint() }()
			<-snapped
			m.afterCkptSnapshot = nil
			// t-1 enters memory as a follower of broker 2 (no address:
			// no fetcher), and the broker logs the role change after.
			entered := make(chan error)
			go func() {
				bp := broker.Partition{Topic: "t", Partition: 1, Leader: 2, LeaderEpoch: 4, ISR: []int32{1, 2}, Replicas: []int32{1, 2}}
				if tt.name == "leader" {
					bp.Leader = 1
				}
				err := tt.become(m, bp)
				m.log.Emit(history.Event{Kind: history.KindRoleChange, Role: &history.Role{Topic: "t", Partition: 1, Role: history.RoleFollower, Leader: bp.Leader, LeaderEpoch: 4}})
				entered <- err
			}()
			select {
			case err := <-entered:
				// Entered before the write was logged: the write
				// below is judged after it.
				close(release)
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(200 * time.Millisecond):
				close(release)
				if err := <-entered; err != nil {
					t.Fatal(err)
				}
			}
			if err := <-wrote; err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, line := range strings.Split(strings.TrimSpace(logged.String()), "\n") {
				var e history.Event
				if json.Unmarshal([]byte(line), &e) != nil {
					continue
				}
				switch {
				case e.Kind == history.KindRoleChange && e.Role.Partition == 1:
					kinds = append(kinds, "role_change t-1")
				case e.Kind == history.KindHWCheckpoint:
					has := slices.ContainsFunc(e.Checkpoint.Entries, func(x history.CheckpointEntry) bool { return x.Partition == 1 })
					kinds = append(kinds, map[bool]string{true: "checkpoint with t-1", false: "checkpoint without t-1"}[has])
				}
			}
			if want := []string{"checkpoint without t-1", "role_change t-1"}; !slices.Equal(kinds, want) {
				t.Errorf("logged %q, want %q", kinds, want)
			}
		})
	}
}
