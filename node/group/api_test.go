package group

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	kerrNotLeader              error = kerr.NotLeaderForPartition
	kerrNotEnoughReplicas      error = kerr.NotEnoughReplicas
	kerrNotEnoughReplicasAfter error = kerr.NotEnoughReplicasAfterAppend
	kerrTimeout                error = context.DeadlineExceeded
	kerrMessageTooLarge        error = kerr.MessageTooLarge
)

func newOffsetCommit(group, member string, gen int32, topic string, p int32, off int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.MemberID, req.Generation = group, member, gen
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = topic
	pp := kmsg.NewOffsetCommitRequestTopicPartition()
	pp.Partition, pp.Offset = p, off
	t.Partitions = append(t.Partitions, pp)
	req.Topics = append(req.Topics, t)
	return req
}

type fakeCluster struct{}

func (fakeCluster) PartitionExists(topic string, _ int32) bool { return topic != "missing" }
func (fakeCluster) OffsetsLeader(_ context.Context, p int32) (Node, bool) {
	return Node{ID: p + 1, Host: "kafka", Port: 9092}, p != 3
}

// TestHandlersRealClock drives a two-member group through the kmsg
// handlers on the wall clock, the way a client's requests arrive.
func TestHandlersRealClock(t *testing.T) {
	log := newMemLog()
	c := New(Options{Config: Config{NumPartitions: testPartitions, NoInitialRebalanceDelay: true}, Log: log})
	defer c.Close()
	for p := int32(0); p < testPartitions; p++ {
		if err := c.Load(p, nil); err != nil {
			t.Fatal(err)
		}
	}
	h := &Handlers{C: c, Cluster: fakeCluster{}}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	join := func(member string) *kmsg.JoinGroupResponse {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = 5
		req.Group, req.MemberID, req.ProtocolType = "g", member, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 5000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", []byte{0}
		req.Protocols = append(req.Protocols, p)
		resp, err := h.JoinGroup(ctx, "client", "/127.0.0.1", req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first := join("")
	if first.ErrorCode != errMemberIDRequired || first.MemberID == "" || first.Protocol == nil || *first.Protocol != "" {
		t.Fatalf("first join: %+v", first)
	}
	r := join(first.MemberID)
	if r.ErrorCode != 0 || r.Generation != 1 || r.LeaderID != first.MemberID {
		t.Fatalf("join: %+v", r)
	}
	sreq := kmsg.NewPtrSyncGroupRequest()
	sreq.Version = 3
	sreq.Group, sreq.Generation, sreq.MemberID = "g", 1, r.MemberID
	a := kmsg.NewSyncGroupRequestGroupAssignment()
	a.MemberID, a.MemberAssignment = r.MemberID, []byte{7}
	sreq.GroupAssignment = append(sreq.GroupAssignment, a)
	sresp, err := h.SyncGroup(ctx, sreq)
	if err != nil || sresp.ErrorCode != 0 || len(sresp.MemberAssignment) != 1 {
		t.Fatalf("sync: %+v %v", sresp, err)
	}

	creq := newOffsetCommit("g", r.MemberID, 1, "t", 0, 42)
	mt := kmsg.NewOffsetCommitRequestTopic()
	mt.Topic = "missing"
	mt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{kmsg.NewOffsetCommitRequestTopicPartition()}
	creq.Topics = append(creq.Topics, mt)
	cresp, err := h.OffsetCommit(ctx, creq)
	if err != nil || cresp.Topics[0].Partitions[0].ErrorCode != 0 || cresp.Topics[1].Partitions[0].ErrorCode != errUnknownTopicOrPartition {
		t.Fatalf("commit: %+v %v", cresp, err)
	}

	for _, v := range []int16{1, 2, 7} {
		freq := kmsg.NewPtrOffsetFetchRequest()
		freq.Version, freq.Group = v, "g"
		ft := kmsg.NewOffsetFetchRequestTopic()
		ft.Topic, ft.Partitions = "t", []int32{0, 1}
		freq.Topics = append(freq.Topics, ft)
		fresp := h.OffsetFetch(freq)
		if fresp.ErrorCode != 0 || fresp.Topics[0].Partitions[0].Offset != 42 || fresp.Topics[0].Partitions[1].Offset != -1 {
			t.Fatalf("fetch v%d: %+v", v, fresp)
		}
	}

	hreq := kmsg.NewPtrHeartbeatRequest()
	hreq.Version, hreq.Group, hreq.Generation, hreq.MemberID = 4, "g", 1, r.MemberID
	if resp := h.Heartbeat(hreq); resp.ErrorCode != 0 {
		t.Fatalf("heartbeat: %d", resp.ErrorCode)
	}

	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Version, dreq.Groups = 5, []string{"g", "none"}
	dresp := h.DescribeGroups(dreq)
	if dresp.Groups[0].State != "Stable" || dresp.Groups[0].Protocol != "range" || len(dresp.Groups[0].Members) != 1 || dresp.Groups[1].State != "Dead" {
		t.Fatalf("describe: %+v", dresp)
	}
	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.Version = 4
	if lresp := h.ListGroups(lreq); len(lresp.Groups) != 1 || lresp.Groups[0].GroupState != "Stable" {
		t.Fatalf("list: %+v", lresp)
	}

	// LeaveGroup v1: one member, its error at the top level.
	for _, tc := range []struct {
		member string
		want   int16
	}{{"ghost", errUnknownMemberID}, {r.MemberID, 0}} {
		lg := kmsg.NewPtrLeaveGroupRequest()
		lg.Version, lg.Group, lg.MemberID = 1, "g", tc.member
		if resp := h.LeaveGroup(lg); resp.ErrorCode != tc.want || len(resp.Members) != 0 {
			t.Fatalf("leave %s: %+v", tc.member, resp)
		}
	}
}

func TestFindCoordinator(t *testing.T) {
	var events []Event
	c := New(Options{Config: Config{NumPartitions: testPartitions}, OnEvent: func(e Event) { events = append(events, e) }})
	defer c.Close()
	h := &Handlers{C: c, Cluster: fakeCluster{}}
	for _, tc := range []struct {
		key     string
		keyType int8
		want    int16
	}{
		{"hello", 0, 0},
		{"polygenelubricants", 0, 0},
		{"x", 1, errCoordinatorNotAvailable},
		{"x", 5, errInvalidRequest},
	} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKey, req.CoordinatorType = 2, tc.key, tc.keyType
		resp := h.FindCoordinator(t.Context(), req)
		if resp.ErrorCode != tc.want {
			t.Fatalf("%s/%d: error %d, want %d", tc.key, tc.keyType, resp.ErrorCode, tc.want)
		}
		if tc.want == 0 && resp.NodeID != c.PartitionFor(tc.key)+1 {
			t.Fatalf("%s: node %d", tc.key, resp.NodeID)
		}
		if tc.want != 0 && (resp.NodeID != -1 || resp.Port != -1) {
			t.Fatalf("%s: error answer names node %d:%d", tc.key, resp.NodeID, resp.Port)
		}
		if ev := events[len(events)-1]; ev.API != "FindCoordinator" || ev.Group != tc.key || ev.Error != tc.want || ev.Coordinator != resp.NodeID {
			t.Fatalf("%s: event %+v", tc.key, ev)
		}
	}
}

func TestOffsetFetchErrorByVersion(t *testing.T) {
	c := New(Options{Config: Config{NumPartitions: testPartitions}})
	defer c.Close()
	h := &Handlers{C: c}
	for _, tc := range []struct {
		v             int16
		top           int16
		partitionErrs bool
	}{{1, errNotCoordinator, true}, {2, errNotCoordinator, false}, {5, errNotCoordinator, false}} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group = tc.v, "g"
		ft := kmsg.NewOffsetFetchRequestTopic()
		ft.Topic, ft.Partitions = "t", []int32{0}
		req.Topics = append(req.Topics, ft)
		resp := h.OffsetFetch(req)
		gotPart := len(resp.Topics) == 1 && resp.Topics[0].Partitions[0].ErrorCode == tc.top
		if resp.ErrorCode != tc.top || gotPart != tc.partitionErrs {
			t.Fatalf("v%d: %+v", tc.v, resp)
		}
	}
}

// TxnOffsetCommit through the kmsg handler: a partition the metadata does
// not know answers UNKNOWN_TOPIC_OR_PARTITION, the rest the coordinator's
// code; while the group's partition loads, v0-1 answer
// COORDINATOR_NOT_AVAILABLE where v2+ answer COORDINATOR_LOAD_IN_PROGRESS;
// generation and member count only from v3.
func TestTxnOffsetCommitHandler(t *testing.T) {
	log := newMemLog()
	c := New(Options{Config: Config{NumPartitions: testPartitions}, Log: log})
	defer c.Close()
	h := &Handlers{C: c, Cluster: fakeCluster{}}
	send := func(v int16, gen int32, member string) map[string]int16 {
		t.Helper()
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version, req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = v, "tx", "g", 9, 0
		req.Generation, req.MemberID = gen, member
		for _, topic := range []string{"t", "missing"} {
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = 0, 5
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := h.TxnOffsetCommit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int16{}
		for _, rt := range resp.Topics {
			out[rt.Topic] = rt.Partitions[0].ErrorCode
		}
		return out
	}
	p := c.PartitionFor("g")
	c.BeginLoad(p)
	for v, want := range map[int16]int16{1: errCoordinatorNotAvailable, 2: errCoordinatorLoadInProgress} {
		if got := send(v, -1, ""); got["t"] != want || got["missing"] != errUnknownTopicOrPartition {
			t.Errorf("v%d while loading: %v, want t %d and missing UNKNOWN_TOPIC_OR_PARTITION", v, got, want)
		}
	}
	if err := c.FinishLoad(p, nil); err != nil {
		t.Fatal(err)
	}
	if got := send(2, 4, "nobody"); got["t"] != errNone {
		t.Errorf("v2 carries no member or generation: %v", got)
	}
	if got := send(3, 4, "nobody"); got["t"] != errUnknownMemberID {
		t.Errorf("v3 from an unknown member: %v, want UNKNOWN_MEMBER_ID", got)
	}
	recs := log.records(p)
	if len(recs) != 1 || !recs[0].Transactional || recs[0].ProducerID != 9 {
		t.Errorf("log holds %+v, want the one transactional batch of producer 9", recs)
	}
}
