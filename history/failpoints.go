package history

// The node program's failpoints: the windows a harness can arm over the
// node's admin port, by name. The names are part of the contract between
// the two halves (a saved schedule names them), so they live here, the one
// package both import; node/failpoint implements them and the nemesis
// plans over them. New windows are appended to FailpointNames.
// FailpointArmBeforeHeader is the header of an arm request over a node's
// admin port that names, in Unix nanoseconds, the instant the harness stops
// waiting for the answer. A node reads a request only when it runs: one
// stopped by another fault (SIGSTOP) reads the request after it resumes,
// when the harness has long recorded the arming as failed, and a failpoint
// armed then holds with nobody to end its hold. The node refuses an arm it
// reads after that instant.
const FailpointArmBeforeHeader = "Zkchaos-Arm-Before"

const (
	// FailpointControllerAfterZKWrite: the controller wrote a leader decision to
	// ZooKeeper and has not yet queued the LeaderAndIsr requests (KAFKA-532).
	// Every leader change passes here: new partitions, broker failure and
	// startup, controlled shutdown, preferred election, reassignment. A
	// fault here held past the session timeout lets another controller be
	// elected and decide; when this one goes on, its LeaderAndIsr carry the
	// old controller epoch, and only the brokers' controller-epoch check
	// stands between them and a zombie's decision taking effect.
	FailpointControllerAfterZKWrite = "controller-after-zk-write"
	// FailpointControllerBeforeBrokerChange: a BrokerChange watch fired and the
	// controller has not yet read /brokers/ids (KAFKA-7235). A broker that
	// bounces while the controller is held here is seen once, with its new
	// czxid: only the czxid comparison tells the controller it restarted.
	FailpointControllerBeforeBrokerChange = "controller-before-broker-change"
	// FailpointBrokerBeforeRegister: the broker connected to ZooKeeper and has not yet
	// created /brokers/ids/<id>. Reached only at process start (arm it with
	// --failpoints or KAFKANODE_FAILPOINTS).
	FailpointBrokerBeforeRegister = "broker-before-register"
	// FailpointBrokerControlledShutdown: the controller answered the broker's
	// ControlledShutdown and the broker has not yet left ZooKeeper. The
	// controller already counts it as shutting down (no leadership, out of
	// the ISR) while it still serves.
	FailpointBrokerControlledShutdown = "broker-during-controlled-shutdown"
	// FailpointBrokerAfterRegister: the broker created /brokers/ids/<id> (the
	// controller can see its new broker epoch) and has not yet handled a
	// control request of that registration. A fault here holds a restarted
	// broker registered but without partition state and without its HW
	// checkpoint started (that starts on the first LeaderAndIsr): when it
	// goes on, requests the controller queued for its previous process may
	// be the first it handles, and only the broker-epoch check stands
	// between them and the new process (KAFKA-7235). Held past the session
	// timeout, the registration expires under a broker that has not served
	// yet.
	FailpointBrokerAfterRegister = "broker-after-register"
	// FailpointFollowerAfterTruncation: a follower truncated its log on becoming
	// follower (OffsetForLeaderEpoch) and has not fetched since. A fault
	// here leaves it in the ISR with a log shorter than the leader's HW
	// says: if the leader dies or is cut off now and this follower is
	// elected, the records it truncated and had not fetched back are gone
	// (the KIP-101 / KAFKA-3861 shape), and only the election policy and the
	// HW it advertises stand between that and acknowledged writes lost.
	FailpointFollowerAfterTruncation = "follower-after-truncation"
	// FailpointControllerBeforeElect: a broker saw /controller gone (or started, or
	// got a new session) and has not yet tried to create it. A broker held
	// here stays out of the controller election, so the driver decides
	// which of the others wins.
	FailpointControllerBeforeElect = "controller-before-elect"
	// FailpointControllerAfterElected: the broker won /controller and
	// /controller_epoch and has not yet read the cluster state (KAFKA-16667).
	// Its reads are served by its session's server: a write another session
	// commits while it is held here is stale to it if that server lags the
	// ZooKeeper leader. Kafka 2.6.3 reads without a Sync, so the new
	// controller may cache a zkVersion that is already stale; the
	// --proposals=zk-sync-before-read proposal closes that window.
	FailpointControllerAfterElected = "controller-after-elected"
	// FailpointControllerBeforeSend: a controller's send thread has taken a request
	// for another broker off its queue and logged it as sent, and has not
	// yet written it to the connection (ControllerChannelManager's
	// RequestSendThread between queue.take() and sendAndReceive). A process
	// stopped here past its session resumes with a request built under
	// its old controller epoch already in hand; Kafka's send thread is not
	// interruptible, so it goes out while the event thread is still
	// learning that the session expired. Only the receiving broker's
	// controller-epoch check stands between it and a zombie's decision.
	FailpointControllerBeforeSend = "controller-before-send"
	// FailpointControllerBeforeControlledShutdown: the controller received a
	// broker's ControlledShutdown request and logged it, and has not yet
	// queued it for its event loop, where the broker-epoch check runs
	// (KafkaApis.handleControlledShutdownRequest before
	// KafkaController.controlledShutdown puts the ControlledShutdown event).
	// Only the request is held: the event loop goes on, so a restart of the
	// requesting broker meanwhile is seen (a bounce, a new broker epoch)
	// before the request is. When it goes on, the request carries the
	// previous process's broker epoch, and only the broker-epoch check
	// (KIP-380, KafkaController.doControlledShutdown) keeps the controller
	// from moving leadership away from, and shrinking the ISRs of, a broker
	// that is not shutting down.
	FailpointControllerBeforeControlledShutdown = "controller-before-controlled-shutdown"
	// FailpointLeaderBeforeTxnAppend: a partition leader took a produce
	// whose transactional batch starts its producer's transaction on the
	// partition, verified it with the coordinator when verification is on,
	// and has not yet appended it (ReplicaManager.appendRecords between
	// the verification callback and Partition.appendRecordsToLeader). A
	// produce held here while its transaction is aborted and the abort
	// marker written goes on after the marker: without verification
	// (KAFKA-12671) it opens a transaction no coordinator knows; with it,
	// the marker has cleared the verification the produce carries and the
	// append is refused (INVALID_TXN_STATE).
	FailpointLeaderBeforeTxnAppend = "leader-before-txn-append"
)

// FailpointNames lists every failpoint. New windows are appended, so
// indices into it (a replayed schedule's seeded pick) keep naming the same
// window.
var FailpointNames = []string{FailpointControllerAfterZKWrite, FailpointControllerBeforeBrokerChange, FailpointBrokerBeforeRegister, FailpointBrokerControlledShutdown,
	FailpointBrokerAfterRegister, FailpointFollowerAfterTruncation, FailpointControllerBeforeElect, FailpointControllerAfterElected, FailpointControllerBeforeSend,
	FailpointControllerBeforeControlledShutdown, FailpointLeaderBeforeTxnAppend}
