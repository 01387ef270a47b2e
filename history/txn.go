package history

// Transaction coordinator actions (TxnRequest.API): the requests, and
// what the coordinator did on its own.
const (
	TxnAPIInitProducerID = "InitProducerId"
	TxnAPIAddPartitions  = "AddPartitionsToTxn"
	TxnAPIAddOffsets     = "AddOffsetsToTxn"
	TxnAPIEndTxn         = "EndTxn"
	// TxnAPIFindCoordinator is a FindCoordinator for a transactional id.
	TxnAPIFindCoordinator = "FindCoordinator"
	// TxnAPITimeout: the coordinator aborts a transaction, at a bumped
	// producer epoch, because it outlived its timeout or a new producer
	// of the id called InitProducerId while it was open.
	TxnAPITimeout = "TxnTimeout"
	// TxnAPIMarkers: one WriteTxnMarkers exchange of the coordinator with
	// a partition leader (Broker), with each partition's answer.
	TxnAPIMarkers = "WriteTxnMarkers"
	// TxnAPIComplete: the coordinator wrote CompleteCommit or
	// CompleteAbort (ErrorCode set if the write failed).
	TxnAPIComplete = "TxnComplete"
	// TxnLoadPartition and TxnUnloadPartition: a __transaction_state
	// partition loaded at a coordinator epoch, or given up.
	TxnLoadPartition   = "LoadPartition"
	TxnUnloadPartition = "UnloadPartition"
	// TxnAPIVerify: a partition leader asked whether partitions are in a
	// producer's ongoing transaction (KIP-890's verification, Kafka 3.6;
	// the node asks with the KAFKA-12671 switch off). Errors holds each
	// partition's answer when the coordinator could judge.
	TxnAPIVerify = "VerifyPartitionsInTxn"
)

// Transaction states (TxnRequest.State) the checkers read: an EndTxn or a
// coordinator's abort answered in one of these wrote it.
const (
	TxnStatePrepareCommit = "PrepareCommit"
	TxnStatePrepareAbort  = "PrepareAbort"
)

// Transaction error codes the checkers care about.
const (
	ErrInvalidProducerEpoch         int16 = 47
	ErrInvalidTxnState              int16 = 48
	ErrConcurrentTransactions       int16 = 51
	ErrTransactionCoordinatorFenced int16 = 52
	// ErrProducerFenced is what a coordinator answers a verification
	// (KIP-890) from a producer at an epoch other than its own; the
	// partition leader tells the client INVALID_PRODUCER_EPOCH, since
	// Kafka 2.6.3 clients know no other code for it.
	ErrProducerFenced int16 = 90
)

// TxnRequest is one action of a broker's transaction coordinator (kind
// txn_request): who asked (transactional id, the producer id and epoch the
// request carried), the coordinator epoch it acted at (its
// __transaction_state partition's leader epoch, -1 when it did not own the
// partition), the state then, and what it answered.
type TxnRequest struct {
	_ struct{}

	API             string `json:"api"`
	APIVersion      int16  `json:"api_version,omitempty"`
	TransactionalID string `json:"transactional_id,omitempty"`
	// Partition is the transactional id's __transaction_state partition.
	Partition     int32 `json:"partition"`
	ProducerID    int64 `json:"producer_id"`
	ProducerEpoch int16 `json:"producer_epoch"`
	// AssignedProducerID and AssignedEpoch are an InitProducerId's answer
	// (-1 on an error; absent on other APIs).
	AssignedProducerID *int64 `json:"assigned_producer_id,omitempty"`
	AssignedEpoch      *int16 `json:"assigned_epoch,omitempty"`
	CoordinatorEpoch   int32  `json:"coordinator_epoch"`
	State              string `json:"state,omitempty"`
	// Commit is the decision of an EndTxn, marker round or completion.
	Commit     bool             `json:"commit,omitempty"`
	Partitions []TopicPartition `json:"partitions,omitempty"`
	// Errors are the per-partition answers of a marker round.
	Errors []TxnPartitionError `json:"errors,omitempty"`
	// Broker is a marker round's destination, or the coordinator a
	// FindCoordinator named (-1: none).
	Broker    int32  `json:"broker,omitempty"`
	ErrorCode int16  `json:"error_code,omitempty"`
	Group     string `json:"group,omitempty"`
	// TransactionalIDs are those a load or unload moved.
	TransactionalIDs []string `json:"transactional_ids,omitempty"`
	Detail           string   `json:"detail,omitempty"`
	// KnownProducerEpoch is, on a client's AddPartitionsToTxn,
	// AddOffsetsToTxn or EndTxn and on a verification, the producer epoch
	// the coordinator's metadata held for the transactional id when it
	// compared the request's epoch with it (the producer id matched);
	// absent when the request was answered before that comparison and
	// from older writers. An EndTxn compares again once its PrepareCommit
	// or PrepareAbort is written; the field holds the epoch of the
	// comparison that answered.
	KnownProducerEpoch *int16 `json:"known_producer_epoch,omitempty"`
}

// TxnPartitionError is one partition's answer to a marker round.
type TxnPartitionError struct {
	_ struct{}

	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	ErrorCode int16  `json:"error_code,omitempty"`
}

// TxnMarker is a partition leader's handling of one transaction marker of
// a WriteTxnMarkers (kind txn_marker): the producer id and epoch, the
// coordinator epoch the marker carried, the decision, and the offset it
// was appended at (-1 with ErrorCode when refused:
// TRANSACTION_COORDINATOR_FENCED for a coordinator epoch older than the
// producer's last marker's, INVALID_PRODUCER_EPOCH for an older producer
// epoch).
type TxnMarker struct {
	_ struct{}

	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	ProducerID       int64  `json:"producer_id"`
	ProducerEpoch    int16  `json:"producer_epoch"`
	CoordinatorEpoch int32  `json:"coordinator_epoch"`
	Commit           bool   `json:"commit,omitempty"`
	Offset           int64  `json:"offset"`
	ErrorCode        int16  `json:"error_code,omitempty"`
	// KnownProducerEpoch and KnownCoordinatorEpoch are what the leader's
	// producer state held for the producer when it checked the marker: its
	// epoch, and the coordinator epoch of its last marker (-1: none).
	// Absent when the partition had no state for the producer (nothing to
	// compare: the marker is appended), when the marker was refused before
	// the check, and from older writers.
	KnownProducerEpoch    *int16 `json:"known_producer_epoch,omitempty"`
	KnownCoordinatorEpoch *int32 `json:"known_coordinator_epoch,omitempty"`
}

// Checks a partition leader refuses a producer's batch by
// (ProduceRefusal.Check).
const (
	// RefusedProducerEpoch: the batch's producer epoch is older than the
	// partition's producer state holds for its producer id
	// (ProducerAppendInfo.checkProducerEpoch; INVALID_PRODUCER_EPOCH).
	RefusedProducerEpoch = "producer-epoch"
	// RefusedVerification: a transactional batch that would start its
	// producer's transaction on the partition was not verified (KIP-890,
	// the node's behaviour with the KAFKA-12671 switch off): the
	// coordinator said the partition is not in the producer's ongoing
	// transaction, or a marker of the producer ended the verification
	// before the append (the verification guard).
	RefusedVerification = "verification"
)

// ProduceRefusal is a partition leader's refusal of one producer's batch
// of a Produce (kind produce_refused), by one of the checks above: the
// batch's producer id and epoch, what the leader held, and the answer.
// Refusals for other reasons (not leader, too few replicas, a sequence
// gap) are not logged.
type ProduceRefusal struct {
	_ struct{}

	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	ProducerID    int64  `json:"producer_id"`
	ProducerEpoch int16  `json:"producer_epoch"`
	Transactional bool   `json:"transactional,omitempty"`
	Check         string `json:"check"`
	// KnownProducerEpoch is, on a producer-epoch refusal, the epoch the
	// partition's producer state held for the producer id.
	KnownProducerEpoch int16 `json:"known_producer_epoch,omitempty"`
	// VerifyError is, on a verification refusal, the coordinator's answer
	// (0: it said yes, and the guard refused the append).
	VerifyError int16  `json:"verify_error,omitempty"`
	ErrorCode   int16  `json:"error_code"`
	Detail      string `json:"detail,omitempty"`
}

// TP returns the partition.
func (r *ProduceRefusal) TP() TopicPartition { return TP(r.Topic, r.Partition) }
