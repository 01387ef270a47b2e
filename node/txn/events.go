package txn

// Event APIs that are not requests.
const (
	// APITimeout: the coordinator began aborting a transaction that
	// outlived its timeout (abortTimedOutTransactions).
	APITimeout = "TxnTimeout"
	// APIMarkers: one WriteTxnMarkers exchange with a partition leader.
	APIMarkers = "WriteTxnMarkers"
	// APIComplete: CompleteCommit or CompleteAbort was written (or failed).
	APIComplete = "TxnComplete"
	// APILoad and APIUnload: a __transaction_state partition loaded at a
	// coordinator epoch, or given up.
	APILoad   = "LoadPartition"
	APIUnload = "UnloadPartition"
	// APILog carries a message worth the human log (Detail) only.
	APILog = "Log"
)

// Event reports one thing the coordinator did, for the node's event log.
type Event struct {
	// API is the request's name (InitProducerId, AddPartitionsToTxn,
	// AddOffsetsToTxn, EndTxn) or one of the API constants above.
	API     string
	Version int16
	// TransactionalID is the request's; Partition its __transaction_state
	// partition.
	TransactionalID string
	Partition       int32
	// ProducerID and ProducerEpoch are what the request carried (-1:
	// none); for an InitProducerId, Assigned* are what it answered.
	ProducerID, AssignedProducerID int64
	ProducerEpoch, AssignedEpoch   int16
	// CoordinatorEpoch is the partition's coordinator epoch the action ran
	// at (-1: the coordinator does not own it).
	CoordinatorEpoch int32
	// State is the transaction's state when answered ("" if none).
	State string
	// Commit, for EndTxn, markers and completions: the decision.
	Commit bool
	// Partitions are the request's partitions (AddPartitionsToTxn, a
	// marker round) or the transaction's (EndTxn).
	Partitions []TopicPartition
	// Errors are the per-partition answers of a marker round.
	Errors []PartitionError
	// Broker is the destination of a marker round.
	Broker int32
	Error  int16
	// Group is the AddOffsetsToTxn group; IDs the transactional ids of a
	// load or unload.
	Group  string
	IDs    []string
	Detail string
	// KnownEpoch is, on a client's AddPartitionsToTxn, AddOffsetsToTxn or
	// EndTxn and on a verification, the producer epoch the id's metadata
	// held when the request's epoch was compared with it (nil: answered
	// before the comparison). An EndTxn compares again once its prepare
	// is written; KnownEpoch is then that comparison's.
	KnownEpoch *int16
}

// known is a copy of the epoch for KnownEpoch: the metadata changes after
// the event is built.
func known(epoch int16) *int16 { return &epoch }

// PartitionError is one partition's answer.
type PartitionError struct {
	TP    TopicPartition
	Error int16
}

// emitLocked fills in the transaction's facts and hands ev to the hook.
func (c *Coordinator) emitLocked(ev Event) {
	if c.onEvent == nil {
		return
	}
	if ev.TransactionalID != "" {
		ev.Partition = c.PartitionFor(ev.TransactionalID)
		if m := c.txns[ev.TransactionalID]; m != nil && ev.State == "" {
			if _, owned := c.owned[ev.Partition]; owned {
				ev.State = m.state.String()
			}
		}
	}
	c.onEvent(ev)
}
