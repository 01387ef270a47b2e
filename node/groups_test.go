package node

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/broker"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/dataplane"
	"github.com/zkchaos/zkchaos/node/eventlog"
	"github.com/zkchaos/zkchaos/node/wire"
)

func TestAssignReplicas(t *testing.T) {
	tests := []struct {
		name       string
		partitions int32
		rf         int
		brokers    []int32
		seed       int64
		want       map[int32][]int32
		wantErr    string
	}{
		// AdminUtils' own example: 5 brokers, start index 0, shift 0.
		{"Kafka's example", 10, 3, []int32{4, 0, 3, 1, 2}, 0, map[int32][]int32{
			0: {0, 1, 2}, 1: {1, 2, 3}, 2: {2, 3, 4}, 3: {3, 4, 0}, 4: {4, 0, 1},
			5: {0, 2, 3}, 6: {1, 3, 4}, 7: {2, 4, 0}, 8: {3, 0, 1}, 9: {4, 1, 2}}, ""},
		{"one broker", 3, 1, []int32{7}, 12345, map[int32][]int32{0: {7}, 1: {7}, 2: {7}}, ""},
		{"too few brokers", 3, 3, []int32{1, 2}, 0, nil, "larger than the 2 registered brokers"},
		{"no partitions", 0, 1, []int32{1}, 0, nil, "assign 0 partitions"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := assignReplicas(tc.partitions, tc.rf, tc.brokers, tc.seed)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for p, want := range tc.want {
				if !slices.Equal(got[p], want) {
					t.Errorf("partition %d: %v, want %v", p, got[p], want)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("%d partitions, want %d", len(got), len(tc.want))
			}
		})
	}
	// Every seed gives each partition rf distinct brokers.
	for seed := int64(0); seed < 50; seed++ {
		got, _ := assignReplicas(7, 3, []int32{1, 2, 3, 4}, seed)
		for p, rs := range got {
			s := slices.Clone(rs)
			slices.Sort(s)
			if len(slices.Compact(s)) != 3 {
				t.Fatalf("seed %d partition %d: replicas %v", seed, p, rs)
			}
		}
	}
}

// groupNode is a node with its data plane and group coordinator but no
// network or ZooKeeper: broker 1, live alone, topic t-0 in its metadata.
func groupNode(t *testing.T) (*Node, *bytes.Buffer) {
	t.Helper()
	var events bytes.Buffer
	cfg := &config.Config{BrokerID: 1, OffsetsTopicPartitions: 1, OffsetsTopicReplicationFactor: 1, OffsetsCommitTimeout: time.Second,
		GroupMinSessionTimeout: time.Second, GroupMaxSessionTimeout: time.Minute}
	n := &Node{cfg: cfg, log: eventlog.New(history.NewWriter(&events, "n1", 1), 1, nil)}
	n.broker = broker.New(1, nil, n.log)
	var err error
	n.data, err = dataplane.Open(dataplane.Config{BrokerID: 1, DataDir: t.TempDir(), CheckpointInterval: time.Hour}, n.log, n.broker.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.data.Close)
	n.groups = newGroups(n)
	t.Cleanup(n.groups.close)
	n.broker.Data = groupDataPlane{n.data, n.groups, nil}
	n.broker.SetEpoch(10)
	um := kmsg.NewPtrUpdateMetadataRequest()
	um.SetVersion(6)
	um.ControllerID, um.ControllerEpoch, um.BrokerEpoch = 1, 1, 10
	lb := kmsg.NewUpdateMetadataRequestLiveBroker()
	lb.ID, lb.Host, lb.Port = 1, "10.0.0.1", 9092
	um.LiveBrokers = append(um.LiveBrokers, lb)
	for _, topic := range []string{"t", dataplane.GroupMetadataTopic} {
		ts := kmsg.NewUpdateMetadataRequestTopicState()
		ts.Topic = topic
		ps := kmsg.NewUpdateMetadataRequestTopicPartition()
		ps.Leader, ps.ISR, ps.Replicas = 1, []int32{1}, []int32{1}
		ts.PartitionStates = append(ts.PartitionStates, ps)
		um.TopicStates = append(um.TopicStates, ts)
	}
	n.broker.HandleUpdateMetadata(wire.RequestHeader{}, um)
	return n, &events
}

func offsetsRole(t *testing.T, n *Node, leader, epoch int32) {
	t.Helper()
	req := kmsg.NewPtrLeaderAndISRRequest()
	req.SetVersion(4)
	req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = 1, 1, 10
	ts := kmsg.NewLeaderAndISRRequestTopicState()
	ts.Topic = dataplane.GroupMetadataTopic
	ps := kmsg.NewLeaderAndISRRequestTopicPartition()
	ps.Leader, ps.LeaderEpoch, ps.ISR, ps.Replicas = leader, epoch, []int32{leader}, []int32{1, 2}
	ts.PartitionStates = append(ts.PartitionStates, ps)
	req.TopicStates = append(req.TopicStates, ts)
	if leader == 2 {
		lb := kmsg.NewLeaderAndISRRequestLiveLeader()
		lb.BrokerID, lb.Host, lb.Port = 2, "127.0.0.1", 1
		req.LiveLeaders = append(req.LiveLeaders, lb)
		um := kmsg.NewPtrUpdateMetadataRequest()
		um.SetVersion(6)
		um.ControllerID, um.ControllerEpoch, um.BrokerEpoch = 1, 1, 10
		for _, id := range []int32{1, 2} {
			b := kmsg.NewUpdateMetadataRequestLiveBroker()
			b.ID = id
			um.LiveBrokers = append(um.LiveBrokers, b)
		}
		n.broker.HandleUpdateMetadata(wire.RequestHeader{}, um)
	}
	resp := n.broker.HandleLeaderAndIsr(wire.RequestHeader{}, req)
	if resp.ErrorCode != 0 || resp.Partitions[0].ErrorCode != 0 {
		t.Fatalf("LeaderAndIsr: %+v", resp)
	}
}

func commit(t *testing.T, n *Node, offset int64) int16 {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(2)
	req.Group, req.Generation, req.RetentionTimeMillis = "g", -1, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Offset = offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := n.groups.h.Handle(t.Context(), "c", "/127.0.0.1", req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

// fetched is the group's committed offset of t-0 and the answer's error.
func fetched(t *testing.T, n *Node) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(5)
	req.Group = "g"
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = "t", []int32{0}
	req.Topics = append(req.Topics, rt)
	resp, err := n.groups.h.Handle(context.Background(), "c", "/127.0.0.1", req)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.(*kmsg.OffsetFetchResponse)
	if r.ErrorCode != 0 || len(r.Topics) == 0 {
		return -1, r.ErrorCode
	}
	return r.Topics[0].Partitions[0].Offset, r.Topics[0].Partitions[0].ErrorCode
}

// LeaderAndIsr drives the coordinator: leading __consumer_offsets loads
// its groups, a commit lands in the log with acks=all, becoming follower
// unloads (NOT_COORDINATOR), and leading again reads the commit back from
// the log. Every answer is a group_request event.
func TestLeadershipLoadsAndUnloadsGroups(t *testing.T) {
	n, events := groupNode(t)
	if code := commit(t, n, 5); code != kerr.NotCoordinator.Code {
		t.Fatalf("commit before leading: %d", code)
	}
	offsetsRole(t, n, 1, 1)
	waitFetch := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			off, code := fetched(t, n)
			if code == 0 && off == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("fetched %d (error %d), want %d", off, code, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFetch(-1)
	if code := commit(t, n, 7); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	waitFetch(7)
	offsetsRole(t, n, 2, 2)
	if _, code := fetched(t, n); code != kerr.NotCoordinator.Code {
		t.Fatalf("fetch after becoming follower: %d", code)
	}
	offsetsRole(t, n, 1, 3)
	waitFetch(7)

	evs, _, err := history.Decode(bytes.NewReader(events.Bytes()), "n1.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	apis := map[string]int{}
	for _, e := range evs {
		if e.Kind == history.KindGroupRequest {
			apis[e.Group.API]++
			if e.Group.API == history.GroupAPIOffsetCommit && e.Group.ErrorCode == 0 && (len(e.Group.Offsets) != 1 || e.Group.Offsets[0].Offset != 7) {
				t.Errorf("commit event %+v", e.Group)
			}
		}
	}
	if apis[history.GroupLoadPartition] != 2 || apis[history.GroupUnloadPartition] != 1 || apis[history.GroupAPIOffsetCommit] != 2 || apis[history.GroupAPIOffsetFetch] == 0 {
		t.Fatalf("group events %v", apis)
	}
}

// FindCoordinator answers COORDINATOR_NOT_AVAILABLE until __consumer_offsets
// has a live leader for the group's partition (creating the topic is
// refused while fewer brokers are live than its replication factor), then
// names that leader.
func TestFindCoordinator(t *testing.T) {
	tests := []struct {
		name      string
		rf        int
		noOffsets bool // __consumer_offsets not in the metadata cache
		want      int16
		node      int32
	}{
		{"led", 1, false, 0, 1},
		{"topic missing, too few brokers", 3, true, kerr.CoordinatorNotAvailable.Code, -1},
		{"topic missing, no ZooKeeper session", 1, true, kerr.CoordinatorNotAvailable.Code, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, events := groupNode(t)
			n.cfg.OffsetsTopicReplicationFactor = tc.rf
			if tc.noOffsets {
				n.broker.Metadata.Partitions = map[history.TopicPartition]history.PartitionState{}
			}
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.SetVersion(2)
			req.CoordinatorKey = "g"
			resp, err := n.groups.h.Handle(t.Context(), "c", "/127.0.0.1", req)
			if err != nil {
				t.Fatal(err)
			}
			r := resp.(*kmsg.FindCoordinatorResponse)
			if r.ErrorCode != tc.want || r.NodeID != tc.node {
				t.Fatalf("FindCoordinator: error %d node %d, want %d node %d", r.ErrorCode, r.NodeID, tc.want, tc.node)
			}
			if tc.node > 0 && (r.Host != "10.0.0.1" || r.Port != 9092) {
				t.Fatalf("coordinator at %s:%d", r.Host, r.Port)
			}
			evs, _, err := history.Decode(bytes.NewReader(events.Bytes()), "n1.jsonl")
			if err != nil {
				t.Fatal(err)
			}
			last := evs[len(evs)-1]
			if last.Kind != history.KindGroupRequest || last.Group.API != history.GroupAPIFindCoordinator ||
				last.Group.Coordinator != tc.node || last.Group.ErrorCode != tc.want {
				t.Fatalf("last event %+v", last.Group)
			}
		})
	}
}
