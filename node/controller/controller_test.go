package controller

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/node/wire"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

func TestRemoveFromISRNeverEmpties(t *testing.T) {
	tests := []struct{ isr, dead, want []int32 }{
		{[]int32{1, 2, 3}, []int32{2}, []int32{1, 3}},
		{[]int32{1, 2}, []int32{1, 2}, []int32{1, 2}},
		{[]int32{3}, []int32{3}, []int32{3}},
		{[]int32{1, 2}, nil, []int32{1, 2}},
	}
	for _, tt := range tests {
		if got := removeFromISR(tt.isr, tt.dead); !slices.Equal(got, tt.want) {
			t.Errorf("removeFromISR(%v, %v) = %v, want %v", tt.isr, tt.dead, got, tt.want)
		}
	}
}

func TestOfflineLeaderPolicies(t *testing.T) {
	tp := history.TP("t", 0)
	tests := []struct {
		name       string
		policy     string
		live       []int32
		isr        []int32
		leo        map[int32]int64 // nil: queries fail
		wantLeader int32
		wantISR    []int32
		wantOK     bool
	}{
		{"clean: first live ISR member in assignment order", config.PolicyOffline, []int32{2, 3}, []int32{1, 3, 2}, nil, 2, []int32{3, 2}, true},
		{"offline: no live ISR member", config.PolicyOffline, []int32{2, 3}, []int32{1}, nil, -1, nil, false},
		{"unclean: first live replica", config.PolicyUnclean, []int32{3, 2}, []int32{1}, nil, 2, []int32{2}, true},
		{"query-leo: all answer, largest wins", config.PolicyQueryLEO, []int32{1, 2, 3}, []int32{9}, map[int32]int64{1: 5, 2: 9, 3: 7}, 2, []int32{2}, true},
		{"query-leo: a replica does not answer", config.PolicyQueryLEO, []int32{1, 2, 3}, []int32{9}, map[int32]int64{1: 5, 3: 7}, -1, nil, false},
		{"query-leo: ISR below min.insync, its dead member excused", config.PolicyQueryLEO, []int32{2, 3}, []int32{1}, map[int32]int64{2: 7, 3: 9}, 3, []int32{3}, true},
		{"query-leo: ISR below min.insync, another replica down", config.PolicyQueryLEO, []int32{3}, []int32{1}, map[int32]int64{3: 9}, -1, nil, false},
		{"query-leo: ISR at min.insync, its dead members must answer", config.PolicyQueryLEO, []int32{3}, []int32{1, 2}, map[int32]int64{3: 9}, -1, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Controller{cfg: Config{OfflinePolicy: tt.policy, MinInsync: 2}, ctx: newContext()}
			c.ctx.assign[tp] = []int32{1, 2, 3}
			for _, id := range tt.live {
				c.ctx.live[id] = brokerInfo{ID: id}
			}
			if tt.leo != nil {
				c.cfg.LEOQuery = func(_ context.Context, b ReplicaEndpoint, _ history.TopicPartition) (int64, error) {
					if v, ok := tt.leo[b.ID]; ok {
						return v, nil
					}
					return 0, errors.New("no answer")
				}
			}
			l, isr, ok := c.offlineLeader(context.Background(), tp, zkdata.PartitionState{Leader: -1, ISR: tt.isr})
			if ok != tt.wantOK || l != tt.wantLeader || !slices.Equal(isr, tt.wantISR) {
				t.Fatalf("got leader %d isr %v ok %v, want %d %v %v", l, isr, ok, tt.wantLeader, tt.wantISR, tt.wantOK)
			}
		})
	}
}

func TestShuttingDownBrokerIsNotElected(t *testing.T) {
	tp := history.TP("t", 0)
	c := &Controller{cfg: Config{OfflinePolicy: config.PolicyOffline}, ctx: newContext()}
	c.ctx.assign[tp] = []int32{1, 2, 3}
	for _, id := range []int32{2, 3} {
		c.ctx.live[id] = brokerInfo{ID: id}
	}
	c.ctx.shuttingDown[2] = true
	l, _, ok := c.offlineLeader(context.Background(), tp, zkdata.PartitionState{Leader: -1, ISR: []int32{1, 2, 3}})
	if !ok || l != 3 {
		t.Fatalf("leader %d ok %v, want 3", l, ok)
	}
}

func TestQueueIsFIFOAndUnbounded(t *testing.T) {
	q := newQueue[int]()
	for i := 0; i < 10000; i++ {
		q.push(i)
	}
	for i := 0; i < 10000; i++ {
		if v, ok := q.pop(); !ok || v != i {
			t.Fatalf("pop %d: %d %v", i, v, ok)
		}
	}
	if _, ok := q.pop(); ok {
		t.Fatal("pop from empty queue")
	}
}

func TestListOffsetsLEO(t *testing.T) {
	s := wire.NewServer()
	s.Handle(2, 0, 5, func(_ context.Context, _ *wire.ConnInfo, _ wire.RequestHeader, r kmsg.Request) (kmsg.Response, error) {
		req := r.(*kmsg.ListOffsetsRequest)
		resp := kmsg.NewPtrListOffsetsResponse()
		if req.ReplicaID != -2 || req.Topics[0].Partitions[0].Timestamp != -1 {
			return nil, errors.New("not a debug LEO query")
		}
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = req.Topics[0].Topic
		rp := kmsg.NewListOffsetsResponseTopicPartition()
		rp.Partition, rp.Offset = req.Topics[0].Partitions[0].Partition, 42
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	defer s.Close()
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	q := ListOffsetsLEO("test")
	leo, err := q(context.Background(), ReplicaEndpoint{ID: 1, Host: "127.0.0.1", Port: port}, history.TP("t", 3))
	if err != nil || leo != 42 {
		t.Fatalf("LEO %d, %v", leo, err)
	}
	// A broker without ListOffsets (part 1) closes the connection: an error.
	s2 := wire.NewServer()
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	go s2.Serve(ln2)
	defer s2.Close()
	if _, err := q(context.Background(), ReplicaEndpoint{ID: 2, Host: "127.0.0.1", Port: int32(ln2.Addr().(*net.TCPAddr).Port)}, history.TP("t", 3)); err == nil {
		t.Fatal("want an error from a broker that does not serve ListOffsets")
	}
}

// A dead broker that was in no ISR and led nothing (a replica that had not
// caught up) changes no partition state, but the surviving replicas still
// get a LeaderAndIsr, as Kafka's OfflineReplica transition sends one for
// every partition of the dead replica. Before, the controller then queued no
// LeaderAndIsr at all (the KAFKA-7235 scenario waited for one in vain).
func TestBrokerFailureTellsSurvivingReplicasEvenWithoutStateChange(t *testing.T) {
	c := &Controller{cfg: Config{OfflinePolicy: config.PolicyOffline}, ctx: newContext(), active: true, epoch: 1}
	c.chans = newChannelManager(c)
	for _, id := range []int32{1, 2} {
		c.ctx.live[id] = brokerInfo{ID: id, Epoch: int64(100 + id)}
		// Queues without send threads: the test reads what was queued.
		c.chans.queues[id] = &sendQueue{broker: c.ctx.live[id], q: newQueue[queued]()}
	}
	tp0, tp1 := history.TP("t", 0), history.TP("t", 1)
	c.ctx.assign[tp0] = []int32{1, 2, 3}
	c.ctx.assign[tp1] = []int32{2, 3, 1}
	c.ctx.state[tp0] = &partState{st: zkdata.PartitionState{Leader: 1, LeaderEpoch: 4, ControllerEpoch: 1, ISR: []int32{1, 2}}}
	c.ctx.state[tp1] = &partState{st: zkdata.PartitionState{Leader: 2, LeaderEpoch: 5, ControllerEpoch: 1, ISR: []int32{2, 1}}}
	// ZooKeeper holds the same states: the OfflineReplica transition reads
	// them (doRemoveReplicasFromIsr) and finds nothing to write.
	f := newFakeZK()
	for _, tp := range []history.TopicPartition{tp0, tp1} {
		f.put(zkdata.PartitionStatePath(tp.Topic, tp.Partition), zkdata.EncodePartitionState(c.ctx.state[tp].st))
	}
	c.zk = f
	// Broker 3 is gone (onBrokerChange removed it from live); no state
	// changes, so nothing is written.
	if err := c.onBrokerFailure(context.Background(), []int32{3}); err != nil {
		t.Fatal(err)
	}
	if n := f.count("multi "); n != 0 {
		t.Fatalf("%d writes, want none", n)
	}
	for _, id := range []int32{1, 2} {
		var lai *kmsg.LeaderAndISRRequest
		um := false
		for _, q := range c.chans.queues[id].q.drain() {
			if q.meant != int64(100+id) {
				t.Errorf("broker %d: request queued for broker epoch %d", id, q.meant)
			}
			switch r := q.req.(type) {
			case *kmsg.LeaderAndISRRequest:
				lai = r
			case *kmsg.UpdateMetadataRequest:
				um = true
			}
		}
		if lai == nil {
			t.Fatalf("broker %d got no LeaderAndIsr after broker 3 died", id)
		}
		if lai.BrokerEpoch != int64(100+id) {
			t.Errorf("broker %d: LeaderAndIsr with broker epoch %d", id, lai.BrokerEpoch)
		}
		var got []int32
		for _, ts := range lai.TopicStates {
			for _, p := range ts.PartitionStates {
				got = append(got, p.Partition)
				want := c.ctx.state[history.TP(ts.Topic, p.Partition)].st
				if p.Leader != want.Leader || p.LeaderEpoch != want.LeaderEpoch || !slices.Equal(p.ISR, want.ISR) {
					t.Errorf("broker %d: %s-%d sent as leader %d epoch %d ISR %v, state is %+v", id, ts.Topic, p.Partition, p.Leader, p.LeaderEpoch, p.ISR, want)
				}
			}
		}
		if !slices.Equal(got, []int32{0, 1}) {
			t.Errorf("broker %d: LeaderAndIsr for partitions %v, want [0 1]", id, got)
		}
		if !um {
			t.Errorf("broker %d got no UpdateMetadata", id)
		}
	}
}
