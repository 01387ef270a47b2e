// Package group is the node program's group coordinator: Kafka 2.6.3's
// GroupCoordinator, GroupMetadata, MemberMetadata, the group cache and
// record formats of GroupMetadataManager, and the KafkaApis handlers of
// FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
// OffsetCommit, OffsetFetch, DescribeGroups, ListGroups and TxnOffsetCommit.
//
// It owns group membership (states Empty, PreparingRebalance,
// CompletingRebalance, Stable, Dead; member ids, generations, protocol
// selection, the leader, static members), the session and rebalance timers
// (on an injected Clock), committed offsets, the offsets pending in a
// producer's transaction until its marker (HandleTxnCompletion), and the
// bytes of the
// __consumer_offsets records (offset commit key v1 / value v3, group
// metadata key v2 / value v3).
//
// It must not touch the rest of the node. Everything it needs comes through
// small interfaces: Log appends records to a __consumer_offsets partition
// and returns once they are committed; Cluster answers partition existence
// and the leader of a __consumer_offsets partition. The broker tells it
// which partitions it leads: BeginLoad/FinishLoad (or Load) with the
// partition's records when it becomes leader, Unload when it stops. Every
// answered request is reported through Options.OnEvent; mapping Event onto
// the history schema is the node's job.
//
// Not modelled: DeleteGroups, OffsetDelete,
// offset expiry (offsets.retention.minutes), OffsetCommit/OffsetFetch v0
// (ZooKeeper-stored offsets), authorizers.
package group
