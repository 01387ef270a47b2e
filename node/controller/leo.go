package controller

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/wire"
)

// ListOffsetsLEO returns a LEOQuery that asks a replica for its log end
// offset with ListOffsets (latest, ReplicaID -2: Kafka's debugging consumer
// id, which any replica answers, not only the leader). A broker that does
// not serve ListOffsets (part 1) closes the connection: the query fails and
// query-leo leaves the partition offline, which is the policy's rule when a
// replica does not answer.
func ListOffsetsLEO(clientID string) func(ctx context.Context, r ReplicaEndpoint, tp history.TopicPartition) (int64, error) {
	return func(ctx context.Context, r ReplicaEndpoint, tp history.TopicPartition) (int64, error) {
		cl := wire.NewClient(net.JoinHostPort(r.Host, strconv.Itoa(int(r.Port))), clientID)
		defer cl.Close()
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(5)
		req.ReplicaID = -2
		t := kmsg.NewListOffsetsRequestTopic()
		t.Topic = tp.Topic
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition, p.Timestamp, p.CurrentLeaderEpoch = tp.Partition, -1, -1
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		resp, err := cl.Request(ctx, req)
		if err != nil {
			return 0, fmt.Errorf("ListOffsets %s from broker %d: %w", tp, r.ID, err)
		}
		lr := resp.(*kmsg.ListOffsetsResponse)
		for _, rt := range lr.Topics {
			for _, rp := range rt.Partitions {
				if rt.Topic == tp.Topic && rp.Partition == tp.Partition {
					if rp.ErrorCode != 0 {
						return 0, fmt.Errorf("ListOffsets %s from broker %d: error %d", tp, r.ID, rp.ErrorCode)
					}
					return rp.Offset, nil
				}
			}
		}
		return 0, fmt.Errorf("ListOffsets %s from broker %d: partition missing in response", tp, r.ID)
	}
}
