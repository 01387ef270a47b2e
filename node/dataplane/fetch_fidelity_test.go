package dataplane

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/broker"
	"github.com/zkchaos/zkchaos/node/eventlog"
)

// longPoll sends a consumer fetch of t-0 at offset with the client's
// current leader epoch that waits up to wait for one byte.
func longPoll(m *Manager, offset int64, epoch int32, wait time.Duration) *kmsg.FetchResponseTopicPartition {
	req := fetchRequest(12, -1, history.TP("t", 0), offset, 1<<20)
	req.MaxWaitMillis, req.MinBytes = int32(wait/time.Millisecond), 1
	req.Topics[0].Partitions[0].CurrentLeaderEpoch = epoch
	return &m.Fetch(context.Background(), req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
}

// DelayedFetch.tryComplete (Kafka 2.6.3) completes a waiting fetch at once
// when the partition's leadership or leader epoch changes under it, and
// ReplicaManager.readFromLocalLog then answers that partition with the
// error: a long poll does not return the records of a leadership the client
// did not ask about.
func TestLongPollAcrossLeaderChange(t *testing.T) {
	tests := []struct {
		name   string
		epoch  int32 // the fetch's current leader epoch
		change func(t *testing.T, m *Manager)
		want   int16
	}{
		{"became follower", 3, func(t *testing.T, m *Manager) {
			if err := m.BecomeFollower(broker.Partition{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 4, ISR: []int32{2}, Replicas: []int32{1, 2, 3}}); err != nil {
				t.Fatal(err)
			}
		}, kerr.FencedLeaderEpoch.Code},
		{"became follower, no epoch in the fetch", -1, func(t *testing.T, m *Manager) {
			if err := m.BecomeFollower(broker.Partition{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 4, ISR: []int32{2}, Replicas: []int32{1, 2, 3}}); err != nil {
				t.Fatal(err)
			}
		}, kerr.NotLeaderForPartition.Code},
		{"leads a new epoch, then appends", 3, func(t *testing.T, m *Manager) {
			if err := m.BecomeLeader(broker.Partition{Topic: "t", Partition: 0, Leader: 1, LeaderEpoch: 4, ISR: []int32{1}, Replicas: []int32{1, 2, 3}}); err != nil {
				t.Fatal(err)
			}
			produce(m, 0, 1, time.Second, batch("epoch 4"))
		}, kerr.FencedLeaderEpoch.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newManager(t, t.TempDir(), nil, 1)
			lead(t, m, 0, 1) // epoch 3, ISR [1]
			done := make(chan *kmsg.FetchResponseTopicPartition)
			start := time.Now()
			go func() { done <- longPoll(m, 0, tt.epoch, 3*time.Second) }()
			time.Sleep(100 * time.Millisecond) // the fetch waits
			tt.change(t, m)
			r := <-done
			if r.ErrorCode != tt.want || len(r.RecordBatches) != 0 {
				t.Fatalf("error %d with %d bytes, want error %d and no records", r.ErrorCode, len(r.RecordBatches), tt.want)
			}
			if waited := time.Since(start); waited > 2*time.Second {
				t.Fatalf("answered after %s: the change should complete the wait", waited)
			}
		})
	}
}

// Partition.getLocalLog (Kafka 2.6.3, KIP-320) checks the client's current
// leader epoch before whether this replica leads: a follower tells a client
// behind its epoch FENCED_LEADER_EPOCH and one ahead UNKNOWN_LEADER_EPOCH,
// and NOT_LEADER_OR_FOLLOWER only when the epochs agree or none was sent.
func TestEpochCheckedBeforeLeadership(t *testing.T) {
	m := newManager(t, t.TempDir(), nil, 1)
	if err := m.BecomeFollower(broker.Partition{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 5, ISR: []int32{2}, Replicas: []int32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		epoch int32
		want  int16
	}{
		{4, kerr.FencedLeaderEpoch.Code},
		{6, kerr.UnknownLeaderEpoch.Code},
		{5, kerr.NotLeaderForPartition.Code},
		{-1, kerr.NotLeaderForPartition.Code},
	}
	for _, tt := range tests {
		if r := longPoll(m, 0, tt.epoch, 0); r.ErrorCode != tt.want {
			t.Errorf("fetch with epoch %d at a follower of epoch 5: error %d, want %d", tt.epoch, r.ErrorCode, tt.want)
		}
		o := m.OffsetForLeaderEpoch(offsetForLeaderEpochRequest(-1, history.TP("t", 0), tt.epoch, 5)).(*kmsg.OffsetForLeaderEpochResponse)
		if c := o.Topics[0].Partitions[0].ErrorCode; c != tt.want {
			t.Errorf("OffsetForLeaderEpoch with epoch %d at a follower of epoch 5: error %d, want %d", tt.epoch, c, tt.want)
		}
	}
}

// A follower's fetch at an epoch other than the leader's is logged as a
// replica_fetch with the answer (the harness counts the older ones as the
// KIP-320 fence's inputs); one at the leader's own epoch is not.
func TestReplicaFetchAtAnotherEpochIsLogged(t *testing.T) {
	m, logged := openLogged(t, t.TempDir())
	lead(t, m, 0, 1, 2, 3) // leader epoch 3
	tests := []struct {
		epoch int32
		want  int16 // the logged answer; -1: nothing logged
	}{
		{2, kerr.FencedLeaderEpoch.Code},
		{4, kerr.UnknownLeaderEpoch.Code},
		{3, -1},
		{-1, -1},
	}
	for _, tt := range tests {
		logged.Reset()
		req := fetchRequest(12, 2, history.TP("t", 0), 0, 1<<20)
		req.Topics[0].Partitions[0].CurrentLeaderEpoch = tt.epoch
		m.Fetch(context.Background(), req)
		var got []history.ReplicaFetch
		for _, e := range loggedEvents(logged, history.KindReplicaFetch) {
			got = append(got, *e.ReplicaFetch)
		}
		switch {
		case tt.want < 0 && len(got) > 0:
			t.Errorf("fetch at epoch %d, the leader's own or none: logged %+v", tt.epoch, got)
		case tt.want >= 0 && (len(got) != 1 || got[0].ErrorCode != tt.want || got[0].CurrentLeaderEpoch != tt.epoch || got[0].LeaderEpoch != 3 || got[0].Replica != 2):
			t.Errorf("fetch at epoch %d of a leader at 3: logged %+v, want one with error %d", tt.epoch, got, tt.want)
		}
	}
}

// A consumer's fetch above the leader's log end is answered
// OFFSET_OUT_OF_RANGE and logged with the offset and the log's bounds (the
// consumer resets its position on it, and the harness must know who sent
// it back); a consumer's fetch in range is not logged.
func TestConsumerOutOfRangeFetchIsLogged(t *testing.T) {
	m, logged := openLogged(t, t.TempDir())
	lead(t, m, 0, 1, 2, 3) // leader epoch 3, empty log
	for _, tt := range []struct {
		offset int64
		logged bool
	}{{0, false}, {5, true}} {
		logged.Reset()
		req := fetchRequest(12, -1, history.TP("t", 0), tt.offset, 1<<20)
		resp := m.Fetch(context.Background(), req).(*kmsg.FetchResponse)
		var got []history.ReplicaFetch
		for _, e := range loggedEvents(logged, history.KindReplicaFetch) {
			got = append(got, *e.ReplicaFetch)
		}
		code := resp.Topics[0].Partitions[0].ErrorCode
		switch {
		case !tt.logged && len(got) > 0:
			t.Errorf("consumer fetch at %d, in range (answer %d): logged %+v", tt.offset, code, got)
		case tt.logged && (code != kerr.OffsetOutOfRange.Code || len(got) != 1 || got[0].Replica != -1 || got[0].FetchOffset != tt.offset ||
			got[0].LogEndOffset != 0 || got[0].LeaderEpoch != 3 || got[0].ErrorCode != kerr.OffsetOutOfRange.Code):
			t.Errorf("consumer fetch at %d above the log end: answer %d, logged %+v", tt.offset, code, got)
		}
	}
}

// A consumer's ListOffsets is logged with the answer, the replica's leader
// epoch and its HW and log end (a client assigned from an exact offset
// moves it down to a listed latest below it, and the harness must know who
// answered); a follower's is not.
func TestConsumerListOffsetsIsLogged(t *testing.T) {
	m, logged := openLogged(t, t.TempDir())
	lead(t, m, 0, 1, 2, 3) // leader epoch 3, ISR [1, 2, 3]: the HW stays 0
	if r := produce(m, 0, 1, time.Second, batch("a", "b")); r.ErrorCode != 0 {
		t.Fatalf("produce: %d", r.ErrorCode)
	}
	for _, tt := range []struct {
		replica, epoch int32
		want           *history.ListOffsets
	}{
		{-1, 3, &history.ListOffsets{Topic: "t", Partition: 0, Timestamp: -1, CurrentLeaderEpoch: 3, LeaderEpoch: 3, Offset: 0, HighWatermark: 0, LogEndOffset: 2}},
		{-1, 2, &history.ListOffsets{Topic: "t", Partition: 0, Timestamp: -1, CurrentLeaderEpoch: 2, LeaderEpoch: 3, ErrorCode: kerr.FencedLeaderEpoch.Code, Offset: -1, HighWatermark: 0, LogEndOffset: 2}},
		{2, 3, nil},
	} {
		logged.Reset()
		m.ListOffsets(listOffsetsRequest(tt.replica, history.TP("t", 0), -1, tt.epoch))
		var got []history.ListOffsets
		for _, e := range loggedEvents(logged, history.KindListOffsets) {
			got = append(got, *e.Listed)
		}
		switch {
		case tt.want == nil && len(got) > 0:
			t.Errorf("replica %d's ListOffsets: logged %+v", tt.replica, got)
		case tt.want != nil && (len(got) != 1 || got[0] != *tt.want):
			t.Errorf("consumer's ListOffsets at epoch %d: logged %+v, want %+v", tt.epoch, got, *tt.want)
		}
	}
}

// openLogged opens a manager on dir whose event log goes to the returned
// buffer, so a test reads what the broker logged.
func openLogged(t *testing.T, dir string) (*Manager, *bytes.Buffer) {
	t.Helper()
	logged := &bytes.Buffer{}
	m, err := Open(Config{BrokerID: 1, DataDir: dir, MinISR: 1, LagTime: time.Second,
		CheckpointInterval: time.Hour, FetchMaxWait: 50 * time.Millisecond, MaxMessageBytes: 4096},
		eventlog.New(history.NewWriter(logged, "n1", 1), 1, nil), broker.New(1, nil, nil).Metadata)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m, logged
}

// loggedEvents returns the events of kind in a buffer openLogged returned.
func loggedEvents(logged *bytes.Buffer, kind history.Kind) []history.Event {
	var out []history.Event
	for _, line := range strings.Split(strings.TrimSpace(logged.String()), "\n") {
		var e history.Event
		if line != "" && json.Unmarshal([]byte(line), &e) == nil && e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}
