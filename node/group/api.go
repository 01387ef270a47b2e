package group

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Node is a broker endpoint.
type Node struct {
	ID   int32
	Host string
	Port int32
}

// Cluster is what the request handlers need from the rest of the broker.
type Cluster interface {
	// PartitionExists is MetadataCache.contains: OffsetCommit answers
	// UNKNOWN_TOPIC_OR_PARTITION for partitions it does not know.
	PartitionExists(topic string, partition int32) bool
	// OffsetsLeader is KafkaApis.getOrCreateInternalTopic plus the leader
	// lookup of handleFindCoordinatorRequest: the live leader of
	// __consumer_offsets partition p, creating the topic first if it does
	// not exist. ok false answers COORDINATOR_NOT_AVAILABLE.
	OffsetsLeader(ctx context.Context, p int32) (leader Node, ok bool)
}

// Route is one API the coordinator serves, at the versions Kafka 2.6.3
// advertises (ApiKeys), except OffsetCommit v0 and OffsetFetch v0, which
// Kafka serves from ZooKeeper and this package does not.
type Route struct {
	Key, Min, Max int16
}

// Routes lists what Handle serves, for wire.Server.Handle.
func Routes() []Route {
	return []Route{
		{kmsg.OffsetCommit.Int16(), 1, 8},
		{kmsg.OffsetFetch.Int16(), 1, 7},
		{kmsg.FindCoordinator.Int16(), 0, 3},
		{kmsg.JoinGroup.Int16(), 0, 7},
		{kmsg.Heartbeat.Int16(), 0, 4},
		{kmsg.LeaveGroup.Int16(), 0, 4},
		{kmsg.SyncGroup.Int16(), 0, 5},
		{kmsg.DescribeGroups.Int16(), 0, 5},
		{kmsg.ListGroups.Int16(), 0, 4},
		{kmsg.TxnOffsetCommit.Int16(), 0, 3},
	}
}

// Handlers answers the group APIs over kmsg types.
type Handlers struct {
	C       *Coordinator
	Cluster Cluster
}

// Handle answers one group request. clientID is the request header's;
// clientHost is the peer's address as KafkaApis prints it ("/10.0.0.3").
// JoinGroup and SyncGroup block until the rebalance answers them or ctx
// ends (then the error is ctx's and nothing should be sent).
func (h *Handlers) Handle(ctx context.Context, clientID, clientHost string, req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		return h.JoinGroup(ctx, clientID, clientHost, r)
	case *kmsg.SyncGroupRequest:
		return h.SyncGroup(ctx, r)
	case *kmsg.HeartbeatRequest:
		return h.Heartbeat(r), nil
	case *kmsg.LeaveGroupRequest:
		return h.LeaveGroup(r), nil
	case *kmsg.OffsetCommitRequest:
		return h.OffsetCommit(ctx, r)
	case *kmsg.OffsetFetchRequest:
		return h.OffsetFetch(r), nil
	case *kmsg.FindCoordinatorRequest:
		return h.FindCoordinator(ctx, r), nil
	case *kmsg.DescribeGroupsRequest:
		return h.DescribeGroups(r), nil
	case *kmsg.ListGroupsRequest:
		return h.ListGroups(r), nil
	case *kmsg.TxnOffsetCommitRequest:
		return h.TxnOffsetCommit(ctx, r)
	}
	return nil, fmt.Errorf("group coordinator: unexpected request %T", req)
}

func wait[T any](ctx context.Context, ch <-chan T) (T, error) {
	select {
	case v := <-ch:
		return v, nil
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// JoinGroup is KafkaApis.handleJoinGroupRequest.
func (h *Handlers) JoinGroup(ctx context.Context, clientID, clientHost string, req *kmsg.JoinGroupRequest) (*kmsg.JoinGroupResponse, error) {
	jr := JoinRequest{
		Group: req.Group, MemberID: req.MemberID, InstanceID: req.InstanceID,
		RequireKnownMemberID: req.Version >= 4 && req.InstanceID == nil,
		ClientID:             clientID, ClientHost: clientHost,
		RebalanceTimeoutMs: req.RebalanceTimeoutMillis, SessionTimeoutMs: req.SessionTimeoutMillis,
		ProtocolType: req.ProtocolType,
	}
	if req.Version == 0 {
		// JoinGroupRequest v0 has no rebalance timeout: the session timeout
		// stands in for it.
		jr.RebalanceTimeoutMs = req.SessionTimeoutMillis
	}
	for _, p := range req.Protocols {
		jr.Protocols = append(jr.Protocols, Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	h.C.run(func() {
		h.C.handleJoinGroup(jr, func(r JoinResult) {
			resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode = r.Err
			resp.Generation = r.Generation
			resp.ProtocolType = r.ProtocolType
			resp.Protocol = r.ProtocolName
			if req.Version < 7 && resp.Protocol == nil {
				resp.Protocol = strp("")
			}
			resp.LeaderID = r.LeaderID
			resp.MemberID = r.MemberID
			for _, m := range r.Members {
				rm := kmsg.NewJoinGroupResponseMember()
				rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = m.MemberID, m.InstanceID, m.Metadata
				resp.Members = append(resp.Members, rm)
			}
			h.C.emit(Event{API: "JoinGroup", Version: req.Version, Group: req.Group, Member: req.MemberID,
				InstanceID: req.InstanceID, AssignedMember: r.MemberID, GenerationCarried: -1, Error: r.Err})
			ch <- resp
		})
	})
	return wait(ctx, ch)
}

// SyncGroup is KafkaApis.handleSyncGroupRequest.
func (h *Handlers) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, error) {
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	var checked *MemberCheck
	reply := func(r SyncResult) {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = r.Err
		resp.ProtocolType, resp.Protocol = r.ProtocolType, r.ProtocolName
		resp.MemberAssignment = r.Assignment
		if resp.MemberAssignment == nil {
			resp.MemberAssignment = []byte{}
		}
		h.C.emit(Event{API: "SyncGroup", Version: req.Version, Group: req.Group, Member: req.MemberID,
			InstanceID: req.InstanceID, GenerationCarried: req.Generation, Error: r.Err, Checked: checked})
		ch <- resp
	}
	h.C.run(func() {
		if req.Version >= 5 && (req.ProtocolType == nil || req.Protocol == nil) {
			// SyncGroupRequest.areMandatoryProtocolTypeAndNamePresent.
			reply(SyncResult{Err: errInconsistentGroupProtocol})
			return
		}
		sr := SyncRequest{Group: req.Group, Generation: req.Generation, MemberID: req.MemberID,
			InstanceID: req.InstanceID, ProtocolType: req.ProtocolType, ProtocolName: req.Protocol,
			Assignments: map[string][]byte{}}
		for _, a := range req.GroupAssignment {
			sr.Assignments[a.MemberID] = a.MemberAssignment
		}
		checked = h.C.memberCheck(apiSync, req.Group, req.MemberID, req.InstanceID, req.Generation)
		h.C.handleSyncGroup(sr, reply)
	})
	return wait(ctx, ch)
}

// Heartbeat is KafkaApis.handleHeartbeatRequest.
func (h *Handlers) Heartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	h.C.run(func() {
		checked := h.C.memberCheck(apiHeartbeat, req.Group, req.MemberID, req.InstanceID, req.Generation)
		resp.ErrorCode = h.C.handleHeartbeat(HeartbeatRequest{Group: req.Group, MemberID: req.MemberID,
			InstanceID: req.InstanceID, Generation: req.Generation})
		h.C.emit(Event{API: "Heartbeat", Version: req.Version, Group: req.Group, Member: req.MemberID,
			InstanceID: req.InstanceID, GenerationCarried: req.Generation, Error: resp.ErrorCode, Checked: checked})
	})
	return resp
}

// LeaveGroup is KafkaApis.handleLeaveGroupRequest with LeaveGroupResponse's
// version rules: before v3 one member, and the first error at the top.
func (h *Handlers) LeaveGroup(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	var leaving []LeaveMember
	if req.Version <= 2 {
		leaving = []LeaveMember{{MemberID: req.MemberID}}
	} else {
		for _, m := range req.Members {
			leaving = append(leaving, LeaveMember{MemberID: m.MemberID, InstanceID: m.InstanceID})
		}
	}
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	h.C.run(func() {
		r := h.C.handleLeaveGroup(req.Group, leaving)
		if req.Version <= 2 {
			resp.ErrorCode = r.Err
			for _, m := range r.Members {
				if resp.ErrorCode == 0 {
					resp.ErrorCode = m.Err
				}
			}
		} else {
			resp.ErrorCode = r.Err
			for _, m := range r.Members {
				rm := kmsg.NewLeaveGroupResponseMember()
				rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, m.Err
				resp.Members = append(resp.Members, rm)
			}
		}
		member := req.MemberID
		if req.Version > 2 && len(req.Members) == 1 {
			member = req.Members[0].MemberID
		}
		h.C.emit(Event{API: "LeaveGroup", Version: req.Version, Group: req.Group, Member: member,
			GenerationCarried: -1, Error: r.Err, Members: r.Members})
	})
	return resp
}

// OffsetCommit is KafkaApis.handleOffsetCommitRequest for v1+.
func (h *Handlers) OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) (*kmsg.OffsetCommitResponse, error) {
	now := h.C.nowMs()
	errs := map[TopicPartition]int16{}
	offsets := map[TopicPartition]OffsetAndMetadata{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := TopicPartition{t.Topic, p.Partition}
			if h.Cluster != nil && !h.Cluster.PartitionExists(t.Topic, p.Partition) {
				errs[tp] = errUnknownTopicOrPartition
				continue
			}
			om := OffsetAndMetadata{Offset: p.Offset, LeaderEpoch: -1, Metadata: deref(p.Metadata), CommitTimestamp: now, ExpireTimestamp: -1}
			if req.Version >= 6 && p.LeaderEpoch >= 0 {
				om.LeaderEpoch = p.LeaderEpoch
			}
			if req.Version == 1 && p.Timestamp != -1 {
				om.CommitTimestamp = p.Timestamp
			}
			if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis != -1 {
				om.ExpireTimestamp = now + req.RetentionTimeMillis
			}
			offsets[tp] = om
		}
	}
	ch := make(chan map[TopicPartition]int16, 1)
	var checked *MemberCheck
	finish := func(status map[TopicPartition]int16) {
		for tp, code := range status {
			errs[tp] = code
		}
		ev := Event{API: "OffsetCommit", Version: req.Version, Group: req.Group, Member: req.MemberID,
			InstanceID: req.InstanceID, GenerationCarried: req.Generation, Checked: checked}
		for _, tp := range sortedTPs(errs) {
			ev.Offsets = append(ev.Offsets, EventOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: offsets[tp].Offset, Error: errs[tp]})
		}
		h.C.emit(ev)
		ch <- errs
	}
	h.C.run(func() {
		if len(offsets) == 0 {
			finish(nil)
			return
		}
		checked = h.C.memberCheck(apiCommit, req.Group, req.MemberID, req.InstanceID, req.Generation)
		h.C.handleCommitOffsets(CommitRequest{Group: req.Group, MemberID: req.MemberID, InstanceID: req.InstanceID,
			Generation: req.Generation, Offsets: offsets}, finish)
	})
	status, err := wait(ctx, ch)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = status[TopicPartition{t.Topic, p.Partition}]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// OffsetFetch is KafkaApis.handleOffsetFetchRequest for v1+, with
// OffsetFetchRequest.getErrorResponse's version rules for errors.
func (h *Handlers) OffsetFetch(req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	var tps []TopicPartition
	if req.Topics != nil || req.Version < 2 {
		tps = []TopicPartition{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				tps = append(tps, TopicPartition{t.Topic, p})
			}
		}
	}
	var code int16
	var fetched []FetchedOffset
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	h.C.run(func() {
		code, fetched = h.C.handleFetchOffsets(req.Group, req.RequireStable, tps)
		ev := Event{API: "OffsetFetch", Version: req.Version, Group: req.Group, GenerationCarried: -1, Error: code}
		for _, f := range fetched {
			ev.Offsets = append(ev.Offsets, EventOffset{Topic: f.TP.Topic, Partition: f.TP.Partition, Offset: f.Offset, Error: f.Err})
		}
		h.C.emit(ev)
	})
	if code != errNone {
		resp.ErrorCode = code
		if req.Version < 2 {
			for _, tp := range tps {
				fetched = append(fetched, FetchedOffset{TP: tp, Offset: -1, LeaderEpoch: -1, Err: code})
			}
		} else {
			return resp
		}
	}
	idx := map[string]int{}
	for _, f := range fetched {
		i, ok := idx[f.TP.Topic]
		if !ok {
			i = len(resp.Topics)
			idx[f.TP.Topic] = i
			t := kmsg.NewOffsetFetchResponseTopic()
			t.Topic = f.TP.Topic
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewOffsetFetchResponseTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = f.TP.Partition, f.Offset, f.LeaderEpoch, strp(f.Metadata), f.Err
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, p)
	}
	return resp
}

// FindCoordinator is KafkaApis.handleFindCoordinatorRequest for group keys.
// A transaction key (CoordinatorType 1) answers COORDINATOR_NOT_AVAILABLE
// here: the node answers those itself (node/txns.go) before they reach
// this handler.
func (h *Handlers) FindCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	set := func(code int16, n Node) {
		h.C.run(func() {
			h.C.emit(Event{API: "FindCoordinator", Version: req.Version, Group: req.CoordinatorKey,
				GenerationCarried: -1, Error: code, Coordinator: n.ID})
		})
		resp.ErrorCode, resp.NodeID, resp.Host, resp.Port = code, n.ID, n.Host, n.Port
		msg := "NONE"
		if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && code != 0 {
			msg = e.Description
		}
		resp.ErrorMessage = &msg
	}
	noNode := Node{ID: -1, Port: -1}
	switch req.CoordinatorType {
	case 0:
	case 1:
		set(errCoordinatorNotAvailable, noNode)
		return resp
	default:
		set(errInvalidRequest, noNode)
		return resp
	}
	if h.Cluster == nil {
		set(errCoordinatorNotAvailable, noNode)
		return resp
	}
	leader, ok := h.Cluster.OffsetsLeader(ctx, h.C.PartitionFor(req.CoordinatorKey))
	if !ok {
		set(errCoordinatorNotAvailable, noNode)
		return resp
	}
	set(errNone, leader)
	return resp
}

// DescribeGroups is KafkaApis.handleDescribeGroupRequest (no authorizer).
func (h *Handlers) DescribeGroups(req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	h.C.run(func() {
		for _, id := range req.Groups {
			code, s := h.C.handleDescribeGroup(id)
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.ErrorCode, g.Group, g.State, g.ProtocolType, g.Protocol = code, id, s.State, s.ProtocolType, s.Protocol
			if req.Version >= 3 && code == errNone && req.IncludeAuthorizedOperations {
				g.AuthorizedOperations = groupOperationsNoAuthorizer
			}
			for _, m := range s.Members {
				gm := kmsg.NewDescribeGroupsResponseGroupMember()
				gm.MemberID, gm.InstanceID, gm.ClientID, gm.ClientHost = m.MemberID, m.InstanceID, m.ClientID, m.ClientHost
				gm.ProtocolMetadata, gm.MemberAssignment = m.Metadata, m.Assignment
				g.Members = append(g.Members, gm)
			}
			resp.Groups = append(resp.Groups, g)
			h.C.emit(Event{API: "DescribeGroups", Version: req.Version, Group: id, GenerationCarried: -1, Error: code})
		}
	})
	return resp
}

// groupOperationsNoAuthorizer is what KafkaApis.authorizedOperations gives
// a group with no authorizer configured: every operation a group supports
// (READ, DELETE, DESCRIBE) as a bit field of AclOperation codes.
const groupOperationsNoAuthorizer = 1<<3 | 1<<6 | 1<<8

// ListGroups is KafkaApis.handleListGroupsRequest (no authorizer).
func (h *Handlers) ListGroups(req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	h.C.run(func() {
		code, groups := h.C.handleListGroups(req.StatesFilter)
		resp.ErrorCode = code
		h.C.emit(Event{API: "ListGroups", Version: req.Version, GenerationCarried: -1, Error: code})
		for _, g := range groups {
			lg := kmsg.NewListGroupsResponseGroup()
			lg.Group, lg.ProtocolType, lg.GroupState = g.GroupID, g.ProtocolType, g.State
			resp.Groups = append(resp.Groups, lg)
		}
	})
	return resp
}
