package history

// ListOffsets is a consumer's ListOffsets request a broker hosting the
// partition answered (kind list_offsets): the timestamp asked (-2 earliest,
// -1 latest), the current leader epoch the request carried (KIP-320, -1:
// none), the answering replica's leader epoch, the error code, and the
// offset answered (-1 with an error) with the replica's high watermark and
// log end then. A client that assigns a partition from an exact offset
// lists its bounds and moves the offset into them (franz-go, librdkafka): a
// latest offset below where it stood sends it back, and a checker that sees
// it read backwards must know which broker answered and at which epoch.
type ListOffsets struct {
	_ struct{}

	Topic              string `json:"topic"`
	Partition          int32  `json:"partition"`
	Timestamp          int64  `json:"timestamp"`
	CurrentLeaderEpoch int32  `json:"current_leader_epoch"`
	LeaderEpoch        int32  `json:"leader_epoch"`
	ErrorCode          int16  `json:"error_code,omitempty"`
	Offset             int64  `json:"offset"`
	HighWatermark      int64  `json:"high_watermark"`
	LogEndOffset       int64  `json:"log_end_offset"`
}

// TP returns the partition.
func (l *ListOffsets) TP() TopicPartition { return TP(l.Topic, l.Partition) }
