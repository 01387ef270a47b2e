package dataplane

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/broker"
	"github.com/zkchaos/zkchaos/node/storage"
)

func leadOffsets(t *testing.T, m *Manager, isr ...int32) history.TopicPartition {
	t.Helper()
	if err := m.BecomeLeader(broker.Partition{Topic: GroupMetadataTopic, Partition: 2, Leader: 1, LeaderEpoch: 1, ISR: isr, Replicas: []int32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	return history.TP(GroupMetadataTopic, 2)
}

func coordinatorBatch(t *testing.T, kv ...string) []byte {
	t.Helper()
	var recs []storage.KeyValue
	for i := 0; i+1 < len(kv); i += 2 {
		recs = append(recs, storage.KeyValue{Key: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	b, err := storage.EncodeBatch(recs, 1)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The coordinator's append (requiredAcks = -1) answers only once the high
// watermark passes the batch: at once with the leader alone in the ISR, on
// a follower's fetch otherwise, and with Kafka's codes when it cannot.
func TestAppendAsCoordinator(t *testing.T) {
	tests := []struct {
		name    string
		isr     []int32
		minISR  int
		then    func(m *Manager) // after the append
		wantApp error            // from the append itself
		want    error            // from committed
	}{
		{"alone in the ISR", []int32{1}, 1, nil, nil, nil},
		{"follower catches up", []int32{1, 2}, 1, func(m *Manager) {
			m.Fetch(context.Background(), fetchRequest(12, 2, history.TP(GroupMetadataTopic, 2), 1, 1<<20))
		}, nil, nil},
		{"follower never fetches", []int32{1, 2}, 1, nil, nil, kerr.RequestTimedOut},
		{"leadership lost", []int32{1, 2}, 1, func(m *Manager) {
			m.BecomeFollower(broker.Partition{Topic: GroupMetadataTopic, Partition: 2, Leader: 2, LeaderEpoch: 2, ISR: []int32{2}, Replicas: []int32{1, 2}})
		}, nil, kerr.NotLeaderForPartition},
		{"ISR below min.insync.replicas", []int32{1}, 2, nil, kerr.NotEnoughReplicas, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t, t.TempDir(), nil, tc.minISR)
			tp := leadOffsets(t, m, tc.isr...)
			base, committed, err := m.AppendAsCoordinator(tp, coordinatorBatch(t, "k", "v"))
			if !errors.Is(err, tc.wantApp) {
				t.Fatalf("append: %v, want %v", err, tc.wantApp)
			}
			if err != nil {
				return
			}
			if base != 0 {
				t.Fatalf("base offset %d", base)
			}
			if tc.then != nil {
				go func() { time.Sleep(50 * time.Millisecond); tc.then(m) }()
			}
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			defer cancel()
			if err := committed(ctx); !errors.Is(err, tc.want) {
				t.Fatalf("committed: %v, want %v", err, tc.want)
			}
		})
	}
	m := newManager(t, t.TempDir(), nil, 1)
	if _, _, err := m.AppendAsCoordinator(history.TP(GroupMetadataTopic, 0), coordinatorBatch(t, "k", "v")); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("append to a partition not hosted: %v", err)
	}
}

// A load reads every record from the log start to the log end, committed
// or not, with each record's batch offset.
func TestReadLocalLog(t *testing.T) {
	m := newManager(t, t.TempDir(), nil, 1)
	tp := leadOffsets(t, m, 1, 2)
	for _, b := range [][]byte{coordinatorBatch(t, "a", "1", "b", "2"), coordinatorBatch(t, "c", "3")} {
		if _, _, err := m.AppendAsCoordinator(tp, b); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := m.ReadLocalLog(tp)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || recs[2].BatchOffset != 2 || string(recs[2].Key) != "c" || recs[1].BatchOffset != 0 || string(recs[1].Value) != "2" {
		t.Fatalf("records %+v", recs)
	}
	if _, err := m.ReadLocalLog(history.TP(GroupMetadataTopic, 9)); err == nil {
		t.Fatal("read a log that does not exist")
	}
}

// Clients may not produce to an internal topic, and Metadata marks it.
func TestInternalTopicForClients(t *testing.T) {
	m := newManager(t, t.TempDir(), nil, 1)
	tp := leadOffsets(t, m, 1)
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = 1, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = tp.Topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = tp.Partition, batch("x")
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := m.Produce(context.Background(), req).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidTopicException.Code {
		t.Fatalf("produce to %s: %d", tp.Topic, code)
	}
	if got := m.get(tp).log.LogEndOffset(); got != 0 {
		t.Fatalf("log end %d after a refused produce", got)
	}
}
