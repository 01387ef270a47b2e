package broker

import (
	"bytes"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/zkchaos/zkchaos/node/eventlog"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/wire"
)

func lai(controllerEpoch int32, brokerEpoch int64, leaderEpoch int32, replicas ...int32) *kmsg.LeaderAndISRRequest {
	r := kmsg.NewPtrLeaderAndISRRequest()
	r.SetVersion(4)
	r.ControllerID, r.ControllerEpoch, r.BrokerEpoch = 9, controllerEpoch, brokerEpoch
	t := kmsg.NewLeaderAndISRRequestTopicState()
	t.Topic = "t"
	p := kmsg.NewLeaderAndISRRequestTopicPartition()
	p.Leader, p.LeaderEpoch, p.ISR, p.Replicas = replicas[0], leaderEpoch, replicas, replicas
	t.PartitionStates = append(t.PartitionStates, p)
	r.TopicStates = append(r.TopicStates, t)
	return r
}

// updateMetadata names live brokers, as the controller's UpdateMetadata does
// before it sends a broker any LeaderAndIsr (onControllerFailover,
// onBrokerStartup).
func updateMetadata(controllerEpoch int32, brokerEpoch int64, live ...int32) *kmsg.UpdateMetadataRequest {
	r := kmsg.NewPtrUpdateMetadataRequest()
	r.SetVersion(6)
	r.ControllerID, r.ControllerEpoch, r.BrokerEpoch = 9, controllerEpoch, brokerEpoch
	for _, id := range live {
		lb := kmsg.NewUpdateMetadataRequestLiveBroker()
		lb.ID = id
		r.LiveBrokers = append(r.LiveBrokers, lb)
	}
	return r
}

// The broker's state before each case: own epoch 100, known controller
// epoch 5, brokers 1 to 3 live in its metadata cache, t-0 at leader epoch 3.
func primed(t *testing.T, bugs string) *Broker {
	t.Helper()
	b, err := config.ParseBugs(bugs)
	if err != nil {
		t.Fatal(err)
	}
	br := New(1, b, nil)
	br.SetEpoch(100)
	if r := br.HandleUpdateMetadata(wire.RequestHeader{}, updateMetadata(5, 100, 1, 2, 3)); r.ErrorCode != 0 {
		t.Fatalf("priming metadata: %+v", r)
	}
	if r := br.HandleLeaderAndIsr(wire.RequestHeader{}, lai(5, 100, 3, 1, 2)); r.ErrorCode != 0 || r.Partitions[0].ErrorCode != 0 {
		t.Fatalf("priming: %+v", r)
	}
	return br
}

func TestLeaderAndIsrChecksInKafkaOrder(t *testing.T) {
	tests := []struct {
		name          string
		bugs          string
		ctrlEpoch     int32
		brokerEpoch   int64
		leaderEpoch   int32
		replicas      []int32
		wantTop       int16
		wantPartition int16
		wantKnown     int32 // known controller epoch afterwards
	}{
		{"fresh", "", 5, 100, 4, []int32{1, 2}, 0, 0, 5},
		{"newer controller", "", 6, 100, 4, []int32{2, 1}, 0, 0, 6},
		{"not carried (-1)", "", 5, -1, 4, []int32{1}, 0, 0, 5},
		{"broker epoch newer than ours", "", 5, 101, 4, []int32{1}, 0, 0, 5},
		{"stale broker epoch", "", 5, 99, 4, []int32{1}, kerr.StaleBrokerEpoch.Code, kerr.StaleBrokerEpoch.Code, 5},
		{"stale broker epoch wins over stale controller", "", 4, 99, 4, []int32{1}, kerr.StaleBrokerEpoch.Code, kerr.StaleBrokerEpoch.Code, 5},
		{"stale controller epoch", "", 4, 100, 4, []int32{1}, kerr.StaleControllerEpoch.Code, kerr.StaleControllerEpoch.Code, 5},
		{"same leader epoch", "", 5, 100, 3, []int32{1}, 0, kerr.StaleControllerEpoch.Code, 5},
		{"older leader epoch", "", 6, 100, 2, []int32{1}, 0, kerr.StaleControllerEpoch.Code, 6},
		{"not a replica", "", 5, 100, 4, []int32{2, 3}, 0, kerr.UnknownTopicOrPartition.Code, 5},
		{"KAFKA-7235 accepts old generation", "KAFKA-7235", 5, 99, 4, []int32{1}, 0, 0, 5},
		{"KAFKA-532 accepts stale controller", "KAFKA-532", 4, 100, 4, []int32{1}, 0, 0, 5},
		{"KAFKA-532 keeps the leader epoch check", "KAFKA-532", 4, 100, 3, []int32{1}, 0, kerr.StaleControllerEpoch.Code, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := primed(t, tt.bugs)
			r := b.HandleLeaderAndIsr(wire.RequestHeader{APIVersion: 4}, lai(tt.ctrlEpoch, tt.brokerEpoch, tt.leaderEpoch, tt.replicas...))
			if r.ErrorCode != tt.wantTop || r.Partitions[0].ErrorCode != tt.wantPartition {
				t.Fatalf("errors top %d partition %d, want %d %d", r.ErrorCode, r.Partitions[0].ErrorCode, tt.wantTop, tt.wantPartition)
			}
			if got := b.KnownControllerEpoch(); got != tt.wantKnown {
				t.Fatalf("known controller epoch %d, want %d", got, tt.wantKnown)
			}
			p, _ := b.Replicas.Get(history.TP("t", 0))
			applied := tt.wantTop == 0 && tt.wantPartition == 0
			want := int32(3) // primed
			if applied {
				want = tt.leaderEpoch
			}
			if p.LeaderEpoch != want {
				t.Fatalf("applied=%v but partition at leader epoch %d, want %d", applied, p.LeaderEpoch, want)
			}
			if applied && (p.Role == history.RoleLeader) != (tt.replicas[0] == 1) {
				t.Fatalf("role %s with leader %d", p.Role, tt.replicas[0])
			}
		})
	}
}

// ReplicaManager.makeFollowers (Kafka 2.6.3) changes a partition only when
// its new leader is a live broker in the metadata cache: for a leader that
// is not, or -1, it answers NONE and leaves the replica as it was (leader
// epoch, role), so a later LeaderAndIsr at the same leader epoch, once the
// leader is known, still applies. Before, the node applied any leader.
func TestLeaderAndIsrWithAnUnavailableLeader(t *testing.T) {
	tests := []struct {
		name        string
		leader      int32
		live        []int32 // the metadata cache's live brokers
		wantApplied bool
	}{
		{"leader live in the cache", 2, []int32{1, 2}, true},
		{"leader not in the cache", 2, []int32{1, 3}, false},
		{"no leader (-1)", -1, []int32{1, 2}, false},
		{"this broker leads: makeLeaders has no such check", 1, []int32{3}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := primed(t, "")
			var logged bytes.Buffer
			b.Log = eventlog.New(history.NewWriter(&logged, "n1", 1), 1, nil)
			if r := b.HandleUpdateMetadata(wire.RequestHeader{}, updateMetadata(5, 100, tt.live...)); r.ErrorCode != 0 {
				t.Fatalf("UpdateMetadata: %+v", r)
			}
			req := lai(5, 100, 4, 1, 2)
			req.TopicStates[0].PartitionStates[0].Leader = tt.leader
			r := b.HandleLeaderAndIsr(wire.RequestHeader{APIVersion: 4}, req)
			if r.ErrorCode != 0 || r.Partitions[0].ErrorCode != 0 {
				t.Fatalf("errors top %d partition %d, want NONE", r.ErrorCode, r.Partitions[0].ErrorCode)
			}
			p, _ := b.Replicas.Get(history.TP("t", 0))
			want := int32(3) // primed, leader 1
			if tt.wantApplied {
				want = 4
			}
			if p.LeaderEpoch != want {
				t.Fatalf("partition at leader epoch %d (leader %d), want %d", p.LeaderEpoch, p.Leader, want)
			}
			evs, _, err := history.Decode(&logged, "n1.jsonl")
			if err != nil {
				t.Fatal(err)
			}
			last := evs[len(evs)-1]
			for _, e := range evs {
				if e.Kind == history.KindControlRequest {
					last = e
				}
			}
			if last.Control == nil || last.Control.Partitions[0].NotApplied == tt.wantApplied {
				t.Fatalf("logged %+v, want not_applied %v", last.Control, !tt.wantApplied)
			}
			if tt.wantApplied {
				return
			}
			// Once the leader is live in the cache, the same decision applies.
			if r := b.HandleUpdateMetadata(wire.RequestHeader{}, updateMetadata(5, 100, 1, 2)); r.ErrorCode != 0 {
				t.Fatalf("UpdateMetadata: %+v", r)
			}
			req = lai(5, 100, 4, 2, 1)
			if r := b.HandleLeaderAndIsr(wire.RequestHeader{APIVersion: 4}, req); r.Partitions[0].ErrorCode != 0 {
				t.Fatalf("the same leader epoch again: partition error %d, want NONE", r.Partitions[0].ErrorCode)
			}
			if p, _ := b.Replicas.Get(history.TP("t", 0)); p.LeaderEpoch != 4 || p.Leader != 2 {
				t.Fatalf("after the retry: leader %d epoch %d, want leader 2 epoch 4", p.Leader, p.LeaderEpoch)
			}
		})
	}
}

// stopAndDelete is a StopReplica v3 of t-0 with delete. With delete a
// stopped replica leaves the partition map, so whether the request was
// applied shows (a leader stopped without delete keeps leading, as Kafka
// 2.6.3's does).
func stopAndDelete(ctrlEpoch int32, brokerEpoch int64, leaderEpoch int32) *kmsg.StopReplicaRequest {
	r := kmsg.NewPtrStopReplicaRequest()
	r.SetVersion(3)
	r.ControllerEpoch, r.BrokerEpoch = ctrlEpoch, brokerEpoch
	tp := kmsg.NewStopReplicaRequestTopic()
	tp.Topic = "t"
	ps := kmsg.NewStopReplicaRequestTopicPartitionState()
	ps.LeaderEpoch, ps.Delete = leaderEpoch, true
	tp.PartitionStates = append(tp.PartitionStates, ps)
	r.Topics = append(r.Topics, tp)
	return r
}

func TestStopReplicaLeaderEpochFencing(t *testing.T) {
	tests := []struct {
		name                 string
		bugs                 string
		ctrl                 int32
		brokerEpoch          int64
		leaderEpoch          int32
		wantTop, wantPartErr int16
	}{
		{"newer leader epoch", "", 5, 100, 4, 0, 0},
		{"no epoch (-1)", "", 5, 100, -1, 0, 0},
		{"during delete (-2)", "", 5, 100, -2, 0, 0},
		// Kafka 2.x refuses an equal epoch; only 3.5 (KAFKA-13972) accepts it.
		{"same leader epoch", "", 5, 100, 3, 0, kerr.FencedLeaderEpoch.Code},
		{"older leader epoch", "", 5, 100, 1, 0, kerr.FencedLeaderEpoch.Code},
		{"stale broker epoch", "", 5, 50, 4, kerr.StaleBrokerEpoch.Code, kerr.StaleBrokerEpoch.Code},
		{"stale controller epoch", "", 3, 100, 4, kerr.StaleControllerEpoch.Code, kerr.StaleControllerEpoch.Code},
		{"KAFKA-7235: previous generation stops the replica", "KAFKA-7235", 5, 50, 4, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := primed(t, tt.bugs)
			r := b.HandleStopReplica(wire.RequestHeader{APIVersion: 3}, stopAndDelete(tt.ctrl, tt.brokerEpoch, tt.leaderEpoch))
			if r.ErrorCode != tt.wantTop || r.Partitions[0].ErrorCode != tt.wantPartErr {
				t.Fatalf("errors %d/%d, want %d/%d", r.ErrorCode, r.Partitions[0].ErrorCode, tt.wantTop, tt.wantPartErr)
			}
			p, hosted := b.Replicas.Get(history.TP("t", 0))
			if applied := !hosted; applied != (tt.wantTop == 0 && tt.wantPartErr == 0) {
				t.Fatalf("hosted %v (role %s) after the request", hosted, p.Role)
			}
		})
	}
}

func TestUpdateMetadataFencing(t *testing.T) {
	um := func(ctrl int32, be int64) *kmsg.UpdateMetadataRequest {
		r := kmsg.NewPtrUpdateMetadataRequest()
		r.SetVersion(6)
		r.ControllerID, r.ControllerEpoch, r.BrokerEpoch = 2, ctrl, be
		return r
	}
	b := primed(t, "")
	for _, tt := range []struct {
		ctrl int32
		be   int64
		want int16
	}{{5, 100, 0}, {4, 100, kerr.StaleControllerEpoch.Code}, {5, 7, kerr.StaleBrokerEpoch.Code}, {7, 100, 0}} {
		if got := b.HandleUpdateMetadata(wire.RequestHeader{}, um(tt.ctrl, tt.be)).ErrorCode; got != tt.want {
			t.Errorf("controller epoch %d broker epoch %d: %d, want %d", tt.ctrl, tt.be, got, tt.want)
		}
	}
	if b.Metadata.ControllerEpoch != 7 {
		t.Fatalf("metadata cache controller epoch %d", b.Metadata.ControllerEpoch)
	}
}

func TestOldVersionsCarryNoBrokerEpoch(t *testing.T) {
	b := primed(t, "")
	r := kmsg.NewPtrLeaderAndISRRequest()
	r.SetVersion(1)
	r.ControllerEpoch, r.BrokerEpoch = 5, 1 // BrokerEpoch is not on the wire before v2
	p := kmsg.NewLeaderAndISRRequestTopicPartition()
	p.Topic, p.Leader, p.LeaderEpoch, p.ISR, p.Replicas = "u", 1, 0, []int32{1}, []int32{1}
	r.PartitionStates = append(r.PartitionStates, p)
	if resp := b.HandleLeaderAndIsr(wire.RequestHeader{APIVersion: 1}, r); resp.ErrorCode != 0 || resp.Partitions[0].ErrorCode != 0 {
		t.Fatalf("v1 request: %+v", resp)
	}
}

// A StopReplica without delete that reaches a leader (it missed the
// LeaderAndIsr that moved its leadership) leaves it leading at its epoch,
// as Kafka 2.6.3's ReplicaManager.stopReplicas does (it removes fetchers
// only): the partition keeps its role and no "stopped" role change is
// logged for it.
func TestStopReplicaWithoutDeleteLeavesALeaderLeading(t *testing.T) {
	b := primed(t, "")
	r := kmsg.NewPtrStopReplicaRequest()
	r.SetVersion(3)
	r.ControllerEpoch, r.BrokerEpoch = 5, 100
	tp := kmsg.NewStopReplicaRequestTopic()
	tp.Topic = "t"
	ps := kmsg.NewStopReplicaRequestTopicPartitionState()
	ps.LeaderEpoch = 4
	tp.PartitionStates = append(tp.PartitionStates, ps)
	r.Topics = append(r.Topics, tp)
	if resp := b.HandleStopReplica(wire.RequestHeader{APIVersion: 3}, r); resp.ErrorCode != 0 || resp.Partitions[0].ErrorCode != 0 {
		t.Fatalf("errors %d/%d", resp.ErrorCode, resp.Partitions[0].ErrorCode)
	}
	p, hosted := b.Replicas.Get(history.TP("t", 0))
	if !hosted || p.Role != history.RoleLeader {
		t.Fatalf("hosted %v, role %s; want a leader still", hosted, p.Role)
	}
}

// ReplicaManager.stopReplicas with deletePartition and EpochDuringDelete
// (TopicDeletionManager's ReplicaDeletionStarted): the log goes and the
// broker records which partition it deleted and the epoch its replica had;
// MetadataCache.updateMetadata drops a partition whose leader is
// LeaderDuringDelete.
func TestStopReplicaDeleteIsLoggedAndMetadataDropsDeletedPartitions(t *testing.T) {
	b := primed(t, "")
	var logged bytes.Buffer
	b.Log = eventlog.New(history.NewWriter(&logged, "n1", 1), 1, nil)
	um := updateMetadataOf(kmsg.UpdateMetadataRequestTopicPartition{Leader: 1, LeaderEpoch: 3})
	b.HandleUpdateMetadata(wire.RequestHeader{}, um)
	if _, ok := b.Metadata.Partition(history.TP("t", 0)); !ok {
		t.Fatal("t-0 not in the metadata cache")
	}
	um.TopicStates[0].PartitionStates[0].Leader = leaderDuringDelete
	b.HandleUpdateMetadata(wire.RequestHeader{}, um)
	if ps, ok := b.Metadata.Partition(history.TP("t", 0)); ok {
		t.Fatalf("t-0 still in the metadata cache after an UpdateMetadata with leader -2: %+v", ps)
	}

	if resp := b.HandleStopReplica(wire.RequestHeader{APIVersion: 3}, stopAndDelete(5, 100, EpochDuringDelete)); resp.ErrorCode != 0 || resp.Partitions[0].ErrorCode != 0 {
		t.Fatalf("StopReplica answered %+v", resp)
	}
	evs, _, err := history.Decode(&logged, "n1.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []history.Kind
	var del *history.TopicDeletion
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
		if e.Kind == history.KindTopicDeletion {
			del = e.Deletion
		}
	}
	if del == nil || kinds[len(kinds)-1] != history.KindTopicDeletion {
		t.Fatalf("kinds logged %v, want the deletion last", kinds)
	}
	if del.Topic != "t" || del.Step != history.PartitionDeleted || len(del.Partitions) != 1 || del.Partitions[0] != 0 || del.LeaderEpoch != 3 {
		t.Fatalf("logged %+v, want t-0 deleted at leader epoch 3", del)
	}
}

// The broker logs the partition states an UpdateMetadata carried, as the
// controller logs them sent: broker-fencing pairs a receipt with its send
// by what both say, and the states are what the metadata cache then holds.
func TestUpdateMetadataIsLoggedWithItsPartitions(t *testing.T) {
	b := primed(t, "")
	var logged bytes.Buffer
	b.Log = eventlog.New(history.NewWriter(&logged, "n1", 1), 1, nil)
	um := updateMetadataOf(kmsg.UpdateMetadataRequestTopicPartition{Partition: 1, Leader: 2, LeaderEpoch: 7, ISR: []int32{2, 1}, ZKVersion: 9, Replicas: []int32{2, 1}})
	b.HandleUpdateMetadata(wire.RequestHeader{}, um)
	evs, _, err := history.Decode(&logged, "n1.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Kind != history.KindControlRequest || evs[0].Control.API != history.APIUpdateMetadata {
		t.Fatalf("logged %+v, want one UpdateMetadata control_request", evs)
	}
	got := evs[0].Control.Partitions
	want := history.ControlPartition{Topic: "t", Partition: 1, Leader: 2, LeaderEpoch: 7, ISR: []int32{2, 1}, Replicas: []int32{2, 1}, ZkVersion: 9}
	if len(got) != 1 || got[0].TP() != want.TP() || got[0].Leader != 2 || got[0].LeaderEpoch != 7 || got[0].ZkVersion != 9 || !slices.Equal(got[0].ISR, want.ISR) {
		t.Fatalf("logged partitions %+v, want [%+v]", got, want)
	}
}

// updateMetadataOf is controller 5's UpdateMetadata for broker epoch 100
// (brokers 1 and 2 live) carrying partition state p of topic t.
func updateMetadataOf(p kmsg.UpdateMetadataRequestTopicPartition) *kmsg.UpdateMetadataRequest {
	um := updateMetadata(5, 100, 1, 2)
	ts := kmsg.NewUpdateMetadataRequestTopicState()
	ts.Topic = "t"
	p.Topic = "t"
	ts.PartitionStates = append(ts.PartitionStates, p)
	um.TopicStates = append(um.TopicStates, ts)
	return um
}
