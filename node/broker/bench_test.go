package broker

import (
	"context"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/wire"
)

// BenchmarkLeaderAndIsrOverLoopback: one controller-style client sending
// LeaderAndIsr v4 (100 partitions, rising leader epochs so every partition
// is applied) to a broker behind the wire server, one request at a time as a
// controller send thread does. No event log (nil), so this is framing,
// decoding, the fencing checks and the partition map.
func BenchmarkLeaderAndIsrOverLoopback(b *testing.B) {
	br := New(1, config.Bugs{}, nil)
	br.SetEpoch(10)
	s := wire.NewServer()
	s.Handle(4, 0, 4, func(_ context.Context, _ *wire.ConnInfo, h wire.RequestHeader, r kmsg.Request) (kmsg.Response, error) {
		return br.HandleLeaderAndIsr(h, r.(*kmsg.LeaderAndISRRequest)), nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go s.Serve(ln)
	defer s.Close()
	c := wire.NewClient(ln.Addr().String(), "bench")
	defer c.Close()
	req := kmsg.NewPtrLeaderAndISRRequest()
	req.SetVersion(4)
	req.ControllerEpoch, req.BrokerEpoch = 1, 10
	ts := kmsg.NewLeaderAndISRRequestTopicState()
	ts.Topic = "t"
	for p := int32(0); p < 100; p++ {
		ps := kmsg.NewLeaderAndISRRequestTopicPartition()
		ps.Partition, ps.Leader, ps.ISR, ps.Replicas = p, 1, []int32{1, 2, 3}, []int32{1, 2, 3}
		ts.PartitionStates = append(ts.PartitionStates, ps)
	}
	req.TopicStates = []kmsg.LeaderAndISRRequestTopicState{ts}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range req.TopicStates[0].PartitionStates {
			req.TopicStates[0].PartitionStates[j].LeaderEpoch = int32(i)
		}
		resp, err := c.Request(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if r := resp.(*kmsg.LeaderAndISRResponse); r.ErrorCode != 0 || r.Partitions[99].ErrorCode != 0 {
			b.Fatalf("rejected: %+v", r.Partitions[99])
		}
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "partitions/s")
}
