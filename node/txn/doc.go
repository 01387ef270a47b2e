// Package txn is the node program's transaction coordinator: Kafka 2.6.3's
// TransactionCoordinator, TransactionMetadata, the cache and record format
// of TransactionStateManager (TransactionLog key v0 / value v0) and the
// marker sending of TransactionMarkerChannelManager.
//
// It owns each transactional id's producer id and epoch, its state (Empty,
// Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort,
// PrepareEpochFence) and partitions, the transaction timeout, the
// coordinator epoch of each __transaction_state partition it leads (that
// partition's leader epoch), and the WriteTxnMarkers a decided transaction
// sends to its partitions' leaders.
//
// It must not touch the rest of the node. Log appends a record to a
// __transaction_state partition with acks=all; ProducerIDs hands out
// producer ids; Markers finds partition leaders and sends WriteTxnMarkers.
// The broker tells it which partitions it leads: BeginLoad/FinishLoad with
// the partition's records and leader epoch when it becomes leader, Unload
// when it stops. Every answered request is reported through
// Options.OnEvent; the node maps Event onto the history schema.
//
// Not modelled: transactional id expiration (transactional.id.expiration.ms
// and its tombstones), authorizers, the coordinator's lastProducerId and
// lastProducerEpoch across a load (TransactionLog value v0 does not carry
// them in 2.6.3 either).
package txn
