package history

import "fmt"

// SchemaVersion is the version this package writes and the newest it reads.
// Bump it only when old readers would misread new files; adding an optional
// field or a new kind does not need a bump (old readers reject unknown kinds,
// which is the safe failure).
const SchemaVersion = 1

// Kind says what an event records and which payload field carries it.
type Kind string

// Event kinds. The payload column names the Event field that must be set.
//
//	kind                  payload      written by
//	op                    Op           client workload (Jepsen invoke/ok/fail/info)
//	node_start            Process      node, first line of each process
//	node_stop             Process      node, clean exit (absent after a crash)
//	broker_registered     Registration node, after /brokers/ids/<id> is created
//	controller_elected    Controller   node, became controller
//	controller_resigned   Controller   node, resigned (controller moved, shutdown, session loss)
//	zk_write              ZKWrite      node, every controller (and ISR) ZooKeeper write with its outcome
//	control_sent          Control      node (controller), a control request handed to the network
//	control_request       Control      node (broker), a control request received and judged
//	controlled_shutdown   Shutdown     node (controller), a ControlledShutdown handled
//	role_change           Role         node, became leader / follower / stopped a replica
//	produce_append        Append       node (leader), records appended to the local log
//	produce_ack           Append       node (leader), a successful produce response sent
//	hw_advance            HW           node, high watermark moved
//	isr_change            ISR          node (leader), ISR shrink or expand
//	hw_checkpoint         Checkpoint   node, replication-offset-checkpoint written (with contents)
//	truncation            Truncation   node, log truncated
//	replica_fetch         ReplicaFetch node (leader side), a follower's fetch at a leader epoch other than the replica's
//	zk_watch              Watch        ZooKeeper watcher, an observed znode state
//	fault_start           Fault        nemesis, a fault began
//	fault_stop            Fault        nemesis, a fault was undone
//	phase                 Phase        harness, a phase started or ended (the heal phase's end: the brokers running)
//	group_request         Group        node (group coordinator), a group request answered, a transaction's pending offsets applied or dropped, or a __consumer_offsets partition loaded or unloaded
//	txn_request           Txn          node (transaction coordinator), a transaction request answered, a marker round, a completion, a __transaction_state load or unload
//	txn_marker            TxnMarker    node (partition leader), a WriteTxnMarkers marker appended or refused
//	produce_refused       Refusal      node (partition leader), a producer's batch refused by its producer epoch or by transaction verification
//	queue_op              Queue        queue workload (Jepsen's Kafka queue test: sends and polls; history/queue.go)
//	topic_deletion        Deletion     node: the controller began, halted or finished deleting a topic; a broker removed a deleted partition's log
//	list_offsets          Listed       node (a replica of the partition), a consumer's ListOffsets answered
const (
	KindOp                 Kind = "op"
	KindNodeStart          Kind = "node_start"
	KindNodeStop           Kind = "node_stop"
	KindBrokerRegistered   Kind = "broker_registered"
	KindControllerElected  Kind = "controller_elected"
	KindControllerResigned Kind = "controller_resigned"
	KindZKWrite            Kind = "zk_write"
	KindControlSent        Kind = "control_sent"
	KindControlRequest     Kind = "control_request"
	KindControlledShutdown Kind = "controlled_shutdown"
	KindRoleChange         Kind = "role_change"
	KindProduceAppend      Kind = "produce_append"
	KindProduceAck         Kind = "produce_ack"
	KindHWAdvance          Kind = "hw_advance"
	KindISRChange          Kind = "isr_change"
	KindHWCheckpoint       Kind = "hw_checkpoint"
	KindTruncation         Kind = "truncation"
	KindReplicaFetch       Kind = "replica_fetch"
	KindZKWatch            Kind = "zk_watch"
	KindFaultStart         Kind = "fault_start"
	KindFaultStop          Kind = "fault_stop"
	KindPhase              Kind = "phase"
	KindGroupRequest       Kind = "group_request"
	KindTxnRequest         Kind = "txn_request"
	KindTxnMarker          Kind = "txn_marker"
	KindTopicDeletion      Kind = "topic_deletion"
	KindProduceRefused     Kind = "produce_refused"
	KindListOffsets        Kind = "list_offsets"
)

// Kinds lists every kind this version knows, in the order of the table above.
var Kinds = []Kind{
	KindOp, KindNodeStart, KindNodeStop, KindBrokerRegistered,
	KindControllerElected, KindControllerResigned, KindZKWrite,
	KindControlSent, KindControlRequest, KindControlledShutdown,
	KindRoleChange, KindProduceAppend, KindProduceAck, KindHWAdvance,
	KindISRChange, KindHWCheckpoint, KindTruncation, KindZKWatch,
	KindFaultStart, KindFaultStop, KindPhase, KindReplicaFetch, KindGroupRequest,
	KindTxnRequest, KindTxnMarker, KindQueueOp, KindTopicDeletion, KindProduceRefused,
	KindListOffsets,
}

// Event is one line of a history file. The header fields are common to every
// kind; exactly one payload pointer, the one Kind names, is set.
//
// Writers fill Kind and the payload; Writer.Write stamps V, Time (if zero),
// Source, Seq and Node. Index is not written: it is assigned when per-source
// files are merged and is the event's identity in checker results.
type Event struct {
	_ struct{} // force keyed literals, so fields can be added safely

	V      int    `json:"v"`
	Time   int64  `json:"ts"`             // wall-clock Unix nanoseconds, host clock
	Source string `json:"src"`            // writer name, e.g. "client-0", "n2", "zk", "nemesis", "harness"
	Seq    uint64 `json:"seq"`            // per-source line counter from 0; breaks ties in Time
	Node   int32  `json:"node,omitempty"` // broker id of the writing node; 0 (omitted) for non-node sources
	Kind   Kind   `json:"kind"`

	// Index is the event's position in a merged History (0-based, unique).
	// It is not part of the file format.
	Index int `json:"-"`

	Op           *ClientOp       `json:"op,omitempty"`
	Process      *Process        `json:"process,omitempty"`
	Registration *Registration   `json:"registration,omitempty"`
	Controller   *ControllerRun  `json:"controller,omitempty"`
	ZKWrite      *ZKWrite        `json:"zk_write,omitempty"`
	Control      *Control        `json:"control,omitempty"`
	Shutdown     *Shutdown       `json:"shutdown,omitempty"`
	Role         *Role           `json:"role,omitempty"`
	Append       *Append         `json:"append,omitempty"`
	HW           *HWAdvance      `json:"hw,omitempty"`
	ISR          *ISRChange      `json:"isr,omitempty"`
	Checkpoint   *Checkpoint     `json:"checkpoint,omitempty"`
	Truncation   *Truncation     `json:"truncation,omitempty"`
	Watch        *Watch          `json:"watch,omitempty"`
	Fault        *Fault          `json:"fault,omitempty"`
	Phase        *Phase          `json:"phase,omitempty"`
	ReplicaFetch *ReplicaFetch   `json:"replica_fetch,omitempty"`
	Group        *GroupRequest   `json:"group,omitempty"`
	Txn          *TxnRequest     `json:"txn,omitempty"`
	TxnMarker    *TxnMarker      `json:"txn_marker,omitempty"`
	Queue        *QueueOp        `json:"queue,omitempty"`
	Deletion     *TopicDeletion  `json:"deletion,omitempty"`
	Refusal      *ProduceRefusal `json:"produce_refusal,omitempty"`
	Listed       *ListOffsets    `json:"list_offsets,omitempty"`
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// TP is a short constructor for TopicPartition.
func TP(topic string, partition int32) TopicPartition {
	return TopicPartition{Topic: topic, Partition: partition}
}

// ---- node process ------------------------------------------------------

// Process describes a node process start or clean stop. Incarnation should be
// unique per process of one node (the start time in Unix nanoseconds works).
type Process struct {
	_ struct{}

	Incarnation int64    `json:"incarnation"`
	Bugs        []string `json:"bugs,omitempty"` // bug switches on, e.g. "KAFKA-532"
	Policy      string   `json:"policy,omitempty"`
	Reason      string   `json:"reason,omitempty"`
}

// Registration records that the node created /brokers/ids/<id>. BrokerEpoch is
// the znode's czxid (KIP-380).
type Registration struct {
	_ struct{}

	BrokerID    int32  `json:"broker_id"`
	BrokerEpoch int64  `json:"broker_epoch"` // czxid
	Host        string `json:"host,omitempty"`
	Port        int32  `json:"port,omitempty"`
}

// ControllerRun records becoming or resigning controller. EpochZkVersion is the
// /controller_epoch znode version that fences this controller's writes; Zxid,
// when known, is the mzxid of /controller_epoch after the election.
type ControllerRun struct {
	_ struct{}

	Epoch          int32  `json:"epoch"`
	EpochZkVersion int32  `json:"epoch_zk_version"`
	Zxid           int64  `json:"zxid,omitempty"`
	Reason         string `json:"reason,omitempty"`
}

// ZK write outcomes (ZKWrite.Outcome).
const (
	ZKOK             = "ok"
	ZKBadVersion     = "badversion"
	ZKNoNode         = "nonode"
	ZKNodeExists     = "nodeexists"
	ZKConnectionLoss = "connectionloss" // outcome unknown
	ZKError          = "error"
)

// ZKWrite records one ZooKeeper write issued by a node (controller writes and
// leader ISR writes). Start is when it was issued (Unix ns); the event's Time
// is when the outcome was known. ControllerEpoch and EpochZkVersion are the
// writer's controller epoch and fencing version (0 for non-controller writes);
// Conditional says whether the write was guarded by CheckVersion on
// /controller_epoch. For partition-state writes, State holds what was written.
type ZKWrite struct {
	_ struct{}

	Start           int64           `json:"start,omitempty"`
	Path            string          `json:"path"`
	Op              string          `json:"op"` // create, set, delete, multi
	Conditional     bool            `json:"conditional"`
	ControllerEpoch int32           `json:"controller_epoch"`
	EpochZkVersion  int32           `json:"epoch_zk_version"`
	ExpectedVersion int32           `json:"expected_version"` // -1: any
	Outcome         string          `json:"outcome"`
	NewVersion      int32           `json:"new_version,omitempty"`
	Zxid            int64           `json:"zxid,omitempty"` // mzxid of the written znode, when ok
	Data            string          `json:"data,omitempty"`
	State           *PartitionState `json:"state,omitempty"`
	Error           string          `json:"error,omitempty"`
	Attempt         int             `json:"attempt,omitempty"` // 1 for the first try of a retried write
}

// PartitionState is the content of /brokers/topics/<t>/partitions/<p>/state.
type PartitionState struct {
	_ struct{}

	Topic           string  `json:"topic"`
	Partition       int32   `json:"partition"`
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	ControllerEpoch int32   `json:"controller_epoch"`
	ISR             []int32 `json:"isr"`
	Replicas        []int32 `json:"replicas,omitempty"`
}

// TP returns the state's partition.
func (s *PartitionState) TP() TopicPartition { return TP(s.Topic, s.Partition) }

// Control request APIs (Control.API).
const (
	APILeaderAndIsr       = "LeaderAndIsr"
	APIStopReplica        = "StopReplica"
	APIUpdateMetadata     = "UpdateMetadata"
	APIControlledShutdown = "ControlledShutdown"
)

// Verdicts (Control.Verdict, Shutdown.Verdict).
const (
	// VerdictAccepted: the request passed the whole-request checks (broker
	// epoch, controller epoch); per-partition errors may still reject some
	// partitions (ControlPartition.ErrorCode).
	VerdictAccepted = "accepted"
	// VerdictRejected: the whole request was refused with ErrorCode.
	VerdictRejected = "rejected"
	// VerdictSent (Shutdown only): the broker's own record that it sent
	// ControlledShutdown; the controller's record of handling it carries
	// accepted or rejected.
	VerdictSent = "sent"
)

// Kafka error codes the checkers care about.
const (
	ErrNone                  int16 = 0
	ErrOffsetOutOfRange      int16 = 1
	ErrStaleControllerEpoch  int16 = 11
	ErrNotEnoughReplicas     int16 = 19
	ErrNotEnoughReplicasAftr int16 = 20
	ErrFencedLeaderEpoch     int16 = 74
	ErrUnknownLeaderEpoch    int16 = 75
	ErrStaleBrokerEpoch      int16 = 77
)

// Control is a control request (LeaderAndIsr, StopReplica, UpdateMetadata) as
// received and judged by a broker (kind control_request) or as sent by the
// controller (kind control_sent; then Verdict and the broker-state fields are
// empty and TargetBroker is set).
type Control struct {
	_ struct{}

	API             string             `json:"api"`
	APIVersion      int16              `json:"api_version,omitempty"`
	CorrelationID   int32              `json:"correlation_id"`
	ControllerID    int32              `json:"controller_id"`
	ControllerEpoch int32              `json:"controller_epoch"`
	BrokerEpoch     int64              `json:"broker_epoch"` // -1: not carried
	DeletePartition bool               `json:"delete_partitions,omitempty"`
	Partitions      []ControlPartition `json:"partitions,omitempty"`
	TargetBroker    int32              `json:"target_broker,omitempty"`

	Verdict   string `json:"verdict,omitempty"`
	ErrorCode int16  `json:"error_code,omitempty"`
	// KnownControllerEpoch is the highest controller epoch the broker had
	// seen before this request; OwnBrokerEpoch is the broker's own current
	// broker epoch (czxid of its live registration), -1 if not registered.
	KnownControllerEpoch int32 `json:"known_controller_epoch"`
	OwnBrokerEpoch       int64 `json:"own_broker_epoch"`

	// MeantBrokerEpoch (control_sent) is the broker epoch the controller
	// queued the request for: the czxid it held for the target then, even
	// when the request carries none on the wire (BrokerEpoch -1, the
	// KAFKA-7235 switch). 0: not recorded (older histories). Attempt
	// (control_sent) numbers the sends of one queued request from 1; each
	// attempt is logged with the correlation id it goes out with, so a
	// broker's receipt pairs with exactly one send.
	MeantBrokerEpoch int64 `json:"meant_broker_epoch,omitempty"`
	Attempt          int   `json:"attempt,omitempty"`
	// Queued (control_sent) is when the controller queued the request, in
	// Unix nanoseconds: its contents are what the controller knew then,
	// while the send thread may hand it to the network much later (a
	// broker that does not answer holds its queue). 0: not recorded
	// (older histories).
	Queued int64 `json:"queued,omitempty"`
}

// ControlPartition is one partition of a control request, with the broker's
// per-partition verdict (ErrorCode 0 = applied, unless NotApplied).
type ControlPartition struct {
	_ struct{}

	Topic       string  `json:"topic"`
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	ISR         []int32 `json:"isr,omitempty"`
	Replicas    []int32 `json:"replicas,omitempty"`
	ZkVersion   int32   `json:"zk_version,omitempty"`
	IsNew       bool    `json:"is_new,omitempty"`
	ErrorCode   int16   `json:"error_code,omitempty"`
	// NotApplied (LeaderAndIsr, ErrorCode 0): the broker answered NONE but
	// left its replica as it was, because the new leader is -1 or not a
	// live broker in its metadata cache (ReplicaManager.makeFollowers then
	// only creates the log). The replica's leader epoch stays the one it
	// had, so a later LeaderAndIsr at this epoch is not stale for it.
	// Histories written before the field have it false.
	NotApplied bool `json:"not_applied,omitempty"`
}

// TP returns the partition.
func (p *ControlPartition) TP() TopicPartition { return TP(p.Topic, p.Partition) }

// Shutdown is a ControlledShutdown request as handled by the controller.
// BrokerEpoch is what the request carried; CachedBrokerEpoch is the epoch the
// controller held for that broker.
type Shutdown struct {
	_ struct{}

	BrokerID          int32  `json:"broker_id"`
	BrokerEpoch       int64  `json:"broker_epoch"`
	CachedBrokerEpoch int64  `json:"cached_broker_epoch"`
	ControllerEpoch   int32  `json:"controller_epoch"`
	CorrelationID     int32  `json:"correlation_id,omitempty"`
	Verdict           string `json:"verdict"`
	ErrorCode         int16  `json:"error_code,omitempty"`
	// MeantBrokerEpoch is, on the broker's own record of sending the
	// request (Verdict VerdictSent), the sending process's broker epoch,
	// written even when the KAFKA-7235 switch keeps it off the wire: it
	// says which process asked to shut down.
	MeantBrokerEpoch int64 `json:"meant_broker_epoch,omitempty"`
}

// Replica roles (Role.Role).
const (
	RoleLeader   = "leader"
	RoleFollower = "follower"
	RoleStopped  = "stopped"
)

// Role records a replica's transition for one partition.
type Role struct {
	_ struct{}

	Topic           string  `json:"topic"`
	Partition       int32   `json:"partition"`
	Role            string  `json:"role"`
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	ISR             []int32 `json:"isr,omitempty"`
	ControllerEpoch int32   `json:"controller_epoch,omitempty"`
}

// TP returns the partition.
func (r *Role) TP() TopicPartition { return TP(r.Topic, r.Partition) }

// Append records records written to a leader's log (produce_append) or a
// successful produce response (produce_ack) for offsets BaseOffset..LastOffset.
// Values, when present, are the record values in offset order.
type Append struct {
	_ struct{}

	Topic       string   `json:"topic"`
	Partition   int32    `json:"partition"`
	BaseOffset  int64    `json:"base_offset"`
	LastOffset  int64    `json:"last_offset"`
	LeaderEpoch int32    `json:"leader_epoch"`
	Acks        int      `json:"acks"`
	Values      []string `json:"values,omitempty"`
	// Producer, on a produce_append of an idempotent producer's batch
	// (KIP-98), is the batch's producer id, epoch and sequence range as the
	// leader appended them; absent for other batches and from older
	// writers.
	Producer *ProducerBatch `json:"producer,omitempty"`
}

// ProducerBatch is an idempotent batch's producer id, producer epoch and the
// sequence numbers of its first and last records.
type ProducerBatch struct {
	_ struct{}

	ID       int64 `json:"id"`
	Epoch    int16 `json:"epoch"`
	FirstSeq int32 `json:"first_seq"`
	LastSeq  int32 `json:"last_seq"`
	// Transactional: the batch was written inside a transaction (false
	// from older writers, which did not record it).
	Transactional bool `json:"transactional,omitempty"`
}

// TP returns the partition.
func (a *Append) TP() TopicPartition { return TP(a.Topic, a.Partition) }

// HWAdvance records a high watermark move on a replica.
type HWAdvance struct {
	_ struct{}

	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Old         int64  `json:"old"`
	New         int64  `json:"new"`
	LeaderEpoch int32  `json:"leader_epoch,omitempty"`
	// LEO is the replica's log end offset when the high watermark moved
	// (after the append or truncation that moved it); nil from older
	// writers. A follower's LEO is what the leader's view of it must never
	// exceed, so it is the evidence that an ISR member held what the
	// leader's high watermark covered.
	LEO *int64 `json:"leo,omitempty"`
	// LSO is the replica's last stable offset after the move (KIP-98: the
	// first offset of the oldest transaction not yet ended by a marker the
	// high watermark passed, at most the high watermark); nil from older
	// writers. A leader's LSO below its high watermark long after every
	// transaction should have ended is a hanging transaction.
	LSO *int64 `json:"lso,omitempty"`
}

// TP returns the partition.
func (h *HWAdvance) TP() TopicPartition { return TP(h.Topic, h.Partition) }

// ISR actions (ISRChange.Action).
const (
	ISRShrink = "shrink"
	ISRExpand = "expand"
)

// ISRChange records an ISR shrink or expand decided by a leader, with the
// outcome of its conditional ZooKeeper write.
type ISRChange struct {
	_ struct{}

	Topic       string  `json:"topic"`
	Partition   int32   `json:"partition"`
	Action      string  `json:"action"`
	Old         []int32 `json:"old"`
	New         []int32 `json:"new"`
	LeaderEpoch int32   `json:"leader_epoch"`
	ZkVersion   int32   `json:"zk_version,omitempty"`
	Outcome     string  `json:"outcome,omitempty"` // a ZK* outcome
	// Join, on an expand, is what the leader saw of the joining follower
	// when it decided; absent on shrinks and from older writers.
	Join *ISRJoin `json:"join,omitempty"`
}

// ISRJoin is the ground of a leader's ISR expand (Partition.maybeExpandIsr):
// the follower's fetch offset, which is its log end offset, as its fetch
// request carried it, and the leader's high watermark at that moment. Kafka
// takes a follower in only when FetchOffset >= HW, so that every ISR member
// holds every committed record.
type ISRJoin struct {
	_ struct{}

	Follower    int32 `json:"follower"`
	FetchOffset int64 `json:"fetch_offset"`
	HW          int64 `json:"hw"`
}

// TP returns the partition.
func (c *ISRChange) TP() TopicPartition { return TP(c.Topic, c.Partition) }

// Checkpoint records one write of replication-offset-checkpoint: the entries
// written and, optionally, the partitions the broker hosts (has a log for) at
// that moment, so a checker can tell a dropped partition from a deleted one.
type Checkpoint struct {
	_ struct{}

	Path    string            `json:"path,omitempty"`
	Entries []CheckpointEntry `json:"entries"`
	Hosted  []TopicPartition  `json:"hosted,omitempty"`
}

// CheckpointEntry is one "topic partition hw" line.
type CheckpointEntry struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	HW        int64  `json:"hw"`
}

// Truncation records a log truncation on a replica: the log end offset went
// from From to To.
type Truncation struct {
	_ struct{}

	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	From        int64  `json:"from"`
	To          int64  `json:"to"`
	Reason      string `json:"reason,omitempty"` // e.g. "leader-epoch", "high-watermark"
	LeaderEpoch int32  `json:"leader_epoch,omitempty"`
}

// TP returns the partition.
func (t *Truncation) TP() TopicPartition { return TP(t.Topic, t.Partition) }

// ReplicaFetch is a follower's fetch whose current leader epoch (KIP-320)
// was not the epoch of the replica that received it: the input of the
// leader's epoch check (Partition.checkCurrentLeaderEpoch), answered
// FENCED_LEADER_EPOCH when older and UNKNOWN_LEADER_EPOCH when newer.
// Fetches at the replica's own epoch are not logged: there are hundreds a
// second and the check has nothing to judge in them.
type ReplicaFetch struct {
	_ struct{}

	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Replica is the fetching follower's broker id; -1 for a consumer,
	// logged only when the leader answered its fetch OFFSET_OUT_OF_RANGE
	// (the answer that makes a consumer reset its position).
	Replica int32 `json:"replica"`
	// CurrentLeaderEpoch is the epoch the fetch carried; LeaderEpoch the
	// receiving replica's when it judged it.
	CurrentLeaderEpoch int32 `json:"current_leader_epoch"`
	LeaderEpoch        int32 `json:"leader_epoch"`
	ErrorCode          int16 `json:"error_code"`
	// FetchOffset, LogStartOffset and LogEndOffset are the offset a
	// consumer's refused fetch asked for and the answering replica's log
	// bounds then (consumer fetches only).
	FetchOffset    int64 `json:"fetch_offset,omitempty"`
	LogStartOffset int64 `json:"log_start_offset,omitempty"`
	LogEndOffset   int64 `json:"log_end_offset,omitempty"`
}

// TP returns the partition.
func (f *ReplicaFetch) TP() TopicPartition { return TP(f.Topic, f.Partition) }

// Watch types (Watch.Type).
const (
	WatchCreated  = "created"
	WatchChanged  = "changed"
	WatchDeleted  = "deleted"
	WatchChildren = "children"
	WatchState    = "state" // the watcher's own session state
	// WatchServerMode: a ZooKeeper server's role as its `srvr` answer
	// gave it (Server, Mode); Mode is empty while it does not answer
	// (paused, cut off, out of quorum).
	WatchServerMode = "server_mode"
)

// Watch is a znode state observed by the harness's ZooKeeper watcher. Path is
// the znode; the parsed fields that apply to it are set:
// /controller → ControllerID; /controller_epoch → ControllerEpoch;
// /brokers/ids → Brokers (with czxids); a partition state → State.
type Watch struct {
	_ struct{}

	Path            string          `json:"path"`
	Type            string          `json:"type"`
	Data            string          `json:"data,omitempty"`
	Czxid           int64           `json:"czxid,omitempty"`
	Mzxid           int64           `json:"mzxid,omitempty"`
	Version         int32           `json:"version,omitempty"`
	ControllerID    *int32          `json:"controller_id,omitempty"`
	ControllerEpoch *int32          `json:"controller_epoch,omitempty"`
	Brokers         []BrokerZnode   `json:"brokers,omitempty"`
	State           *PartitionState `json:"state,omitempty"`
	SessionState    string          `json:"session_state,omitempty"`
	Server          string          `json:"server,omitempty"` // WatchServerMode: "zk1"…
	Mode            string          `json:"mode,omitempty"`   // WatchServerMode: leader, follower, standalone, or empty
}

// BrokerZnode is one live /brokers/ids child with its czxid (broker epoch).
type BrokerZnode struct {
	ID    int32 `json:"id"`
	Czxid int64 `json:"czxid"`
}

// Phase marks (Phase.Mark).
const (
	PhaseBegin = "begin"
	PhaseEnd   = "end"
)

// Harness phase names (Phase.Name), in run order.
const (
	PhaseSetup      = "setup"
	PhaseWorkload   = "workload"
	PhaseHeal       = "heal"
	PhaseFinalReads = "final-reads"
	PhaseCollect    = "collect"
)

// Phase is a harness phase marker.
type Phase struct {
	_ struct{}

	Name string `json:"name"`
	Mark string `json:"mark"`
	// Running, when set (on the heal phase's end), is what the harness saw
	// of the broker containers once the healed cluster had had its time:
	// the ids of those running and not paused. Nil: not recorded (an older
	// history, or the engine did not answer for every container).
	Running *RunningBrokers `json:"running,omitempty"`
}

// RunningBrokers lists broker ids whose processes the harness saw running.
type RunningBrokers struct {
	_ struct{}

	IDs []int32 `json:"ids"`
}
