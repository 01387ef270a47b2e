package dataplane

import (
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
)

// The one-partition requests a follower sends its leader, built in one place
// for the fetcher and for the tests that play a follower or a consumer. A
// replica id of -1 is a consumer, -2 a debugging client.

// listOffsetsRequest asks for the offset of tp at timestamp ts (-1 latest,
// -2 earliest).
func listOffsetsRequest(replica int32, tp history.TopicPartition, ts int64, currentEpoch int32) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(5)
	req.ReplicaID = replica
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = tp.Partition, ts, currentEpoch
	req.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: tp.Topic, Partitions: []kmsg.ListOffsetsRequestTopicPartition{rp}}}
	return req
}

// offsetForLeaderEpochRequest asks for the end offset of leader epoch epoch
// on tp.
func offsetForLeaderEpochRequest(replica int32, tp history.TopicPartition, currentEpoch, epoch int32) *kmsg.OffsetForLeaderEpochRequest {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.SetVersion(3)
	req.ReplicaID = replica
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = tp.Partition, currentEpoch, epoch
	req.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: tp.Topic, Partitions: []kmsg.OffsetForLeaderEpochRequestTopicPartition{rp}}}
	return req
}

// fetchRequest asks (at version) for up to maxBytes of tp from offset; the
// fetcher sets the wait, the epochs and the session on top.
func fetchRequest(version int16, replica int32, tp history.TopicPartition, offset int64, maxBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.ReplicaID = replica
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = tp.Partition, offset, maxBytes
	req.Topics = []kmsg.FetchRequestTopic{{Topic: tp.Topic, Partitions: []kmsg.FetchRequestTopicPartition{rp}}}
	return req
}
