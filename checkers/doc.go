// Package checkers owns the custom checkers that decide, from a run's history
// alone, whether epoch fencing held: controller fencing, broker fencing,
// leader uniqueness, durability, high-watermark checkpoints, ISR
// membership, availability, liveness, idempotence, recovery once faults
// healed, transactions, the linearizability check that wraps linearize,
// each layer's own promise (below), the queue workload's client promises
// (below), and the count of stale inputs each fence met (fences).
//
// # What Kafka promises a consumer, and what is checked
//
// The checkers hold the system to Kafka's documented guarantees and no more:
//   - a record a fetch returns is committed: it is never lost and never
//     changes (an offset holds one value for the life of the partition);
//   - an acks=all produce that was acknowledged is in the log at its offset;
//   - a fetch may return nothing at an offset that holds committed records
//     when the broker answering it is a new leader whose high watermark has
//     not caught up with its predecessor's (KAFKA-2334; KIP-207 fixed this
//     for ListOffsets only, never for Fetch), or when it is a deposed
//     leader that had not been told of the newer epoch when the fetch was
//     sent (a client whose own metadata is as old is not fenced: KIP-320
//     fences only a client that names a newer epoch). Only a role change
//     the broker logged before the read was invoked shows it knew: a
//     fetch is a long poll, checked for leadership when it arrives.
//
// Behaviour Kafka documents is a named known anomaly (KnownAnomaly), not a
// violation: "KAFKA-2334" (a stale empty read answered by a new leader whose
// HW lags), "deposed-leader-read" (one answered by a leader that had not yet
// learned of its successor), "deposed-leader-out-of-range" (a consumer
// sent back to the log start by such a leader's OFFSET_OUT_OF_RANGE for an
// offset above its shorter log), "deposed-leader-list-offsets" (a consumer
// assigned from an exact offset moved below it by such a leader's latest
// offset, its own high watermark), "deposed-coordinator-generation" (a group
// generation such a coordinator raised from memory and never stored, handed
// out again by its successor), "deposed-coordinator-offset-fetch" (an
// OffsetFetch such a coordinator answered from its cache, below a commit
// its successor acknowledged), "duplicate-append" (a non-idempotent
// producer's resend appended twice), "KAFKA-3861" (a partition left offline
// although a registered broker held every acknowledged record),
// "checkpoint-untold-partition" (a restarted process's checkpoint without a
// partition no LeaderAndIsr had told it about, the process ending before a
// controller acted in its reach for the grace: Kafka's
// checkpointHighWatermarks writes allPartitions only),
// "unclean-election" and "queued-controlled-shutdown" (see their
// constants). Known anomalies are listed by name and count and leave the
// verdict valid; strict modes report them as invalid, still by name:
// Config.StrictReads both kinds of stale read, Config.StrictAvailability
// KAFKA-3861, Config.StrictElections unclean-election. Every controller
// election must pick a leader inside the ISR ZooKeeper held, but one by a
// controller process running the unclean policy (election.go). A stale
// empty read that no leader change explains (the leader that acknowledged
// the records answers nothing) is a violation.
//
// # Each layer's own promise
//
// A slip in one layer of Kafka's ZooKeeper-era design often ends in lost
// records only if a second fault follows, which a short run rarely
// arranges. So besides the harm (durability, linearizable, availability)
// each layer is judged on its own promise, at the first event that breaks
// it. One row per rule: the layer, its promise, the Kafka 2.6.3 code that
// keeps it, the evidence in the node event logs and the watcher's history,
// and the checker that judges it. The files named hold the full rows and
// the exact rules.
//
//	layer                    | promise                                                        | Kafka 2.6.3 code                                                        | evidence                                               | checker (file)
//	broker registration      | every process registers a new znode with a larger czxid         | KafkaZkClient.registerBroker, checkedEphemeralCreate                     | broker_registered, /brokers/ids listings                | registration (promises_control.go)
//	controller election      | every election writes a new, higher controller epoch            | KafkaController.elect, registerControllerAndIncrementControllerEpoch    | controller_elected, /controller_epoch and /controller   | controller-epoch (promises_control.go)
//	controller channel       | a controller sends, writes and handles shutdowns only in tenure | onControllerResignation → ControllerChannelManager.shutdown              | control_sent, zk_write, controlled_shutdown vs tenure   | controller-tenure (promises_control.go)
//	controller context       | every act of a controller carries the epoch it was elected at   | ControllerContext.epoch, AbstractControllerBrokerRequestBatch            | control_sent, zk_write, controlled_shutdown             | controller-tenure (promises_control.go)
//	ZooKeeper writes         | what a node logs as written is what ZooKeeper holds             | TopicPartitionStateZNode, KafkaZkClient.updateLeaderAndIsr               | zk_write vs the watcher at the same zxid                 | zk-writes (promises_control.go)
//	leader ISR write         | a leader never advances its HW on the ISR its applied write replaced | Partition.shrinkIsr/expandIsr under leaderIsrUpdateLock, no deadline   | isr_change given up, the watcher's state, hw_advance    | zk-writes (promises_control.go)
//	ISR propagation          | a leader notifies every ISR change; the controller takes in what it deletes | ReplicaManager.maybePropagateIsrChanges, KafkaController.processIsrChangeNotification | isr_change, notification create and delete, later UpdateMetadata | isr-propagation (isr_propagation.go)
//	controller decisions     | every state a controller wrote and ZooKeeper applied reaches its leader | ZooKeeperClient.handleRequests (no deadline), ControllerBrokerRequestBatch | zk_write and the watcher's states vs control_sent LeaderAndIsr | decision-delivery (decision_delivery.go)
//	metadata propagation     | every such state reaches every broker the controller held live, in an UpdateMetadata, before a newer one | ControllerBrokerRequestBatch.addLeaderAndIsrRequestForBrokers → addUpdateMetadataRequestForBrokers | the same writes vs control_sent UpdateMetadata per broker | decision-delivery (decision_delivery.go)
//	controller fencing       | brokers refuse older controller epochs; zombie writes fail      | ReplicaManager.becomeLeaderOrFollower, checkedEphemeral epoch zkVersion  | control_request, zk_write, elections                   | controller-fencing (fencing.go)
//	broker fencing           | a request reaches only the process it was meant for             | KafkaApis.isBrokerEpochStale, KafkaController.onBrokerChange             | control_sent (meant epoch) paired with control_request | broker-fencing (fencing.go)
//	elections                | every election picks inside the ISR (unclean policy aside)      | Election.leaderForOffline/Reassign/PreferredReplica/ControlledShutdown   | partition-state writes vs the state they replaced      | isr (election.go)
//	offline partitions       | a partition gets a leader once a live ISR member registers      | onBrokerStartup → triggerOnlinePartitionStateChange                      | states, /brokers/ids, controller tenure, faults         | availability, in the run (availability.go)
//	follower fetcher         | a follower of a clean leader never truncates below its HW        | AbstractFetcherThread.truncateToEpochEndOffsets                         | truncation, the follower's hw_advance                   | truncation (promises_data.go)
//	start-up recovery        | a recovered log keeps what the broker acknowledged or checkpointed | Log.recover, LogSegment.recover                                     | truncation, produce_ack, hw_checkpoint, hw_advance LEO  | log-retention (promises_data.go)
//	leader high watermark    | the HW never passes an offset some ISR member lacks              | Partition.maybeIncrementLeaderHW                                        | leader hw_advance, ISR members' log ends                | hw-within-isr (promises_data_hw.go)
//	follower high watermark  | a follower's HW never passes its own log or its leader's HW      | ReplicaFetcherThread.processPartitionData                               | follower hw_advance (LEO), the leader's hw_advance      | follower-hw (promises_data_hw.go)
//	producer state           | a new leader continues the producer state of the old one         | ProducerStateManager, Log.analyzeAndValidateProducerState               | produce_append (producer id, sequences), client errors  | producer-state (promises_data_producer.go)
//	ISR membership           | no replica lacking acknowledged records joins the ISR            | Partition.maybeExpandIsr, PartitionStateMachine                         | isr_change (join), states, the logs' contents           | isr (isr.go)
//	checkpoints              | a checkpoint keeps every partition in memory, loses no HW, never exceeds it | ReplicaManager.checkpointHighWatermarks                      | hw_checkpoint, hw_advance, LeaderAndIsr, registrations, controller tenure, faults | hw-checkpoint (checkpoint.go)
//	recovery                 | once faults heal, every running broker registers, every ISR is full, a controller acts | onBrokerStartup, ReplicaStateMachine, elect              | the harness's running brokers, listings, states, roles  | recovery (recovery.go)
//	topic deletion           | a deleted partition is gone: no broker acts on it after deleting it, and the topic goes only once every replica deleted its log | TopicDeletionManager.completeDeleteTopic, ReplicaManager.stopReplicas (deletePartition) | topic_deletion, produce_append, hw_advance, role_change | topic-deletion (deletion.go)
//	consumer groups          | a member acts only in the group's current generation, a newer one is never undone | GroupCoordinator.handleSyncGroup/Heartbeat/CommitOffsets/TxnCommitOffsets | group_request (generation carried, the group's, answer) | group-generation (group.go)
//	transactions             | no marker of a deposed coordinator, no fenced producer's write, every decided transaction completes | ProducerAppendInfo.appendEndTxnMarker/checkProducerEpoch, TransactionCoordinator.handleEndTransaction, TransactionMarkerChannelManager | txn_request, txn_marker, produce_append's producer | txn-fencing (txn.go)
//	hanging transactions     | a partition has a transaction open only while its coordinator does (no hanging transaction holds the LSO) | Partition.appendRecordsToLeader (Kafka 3.6: AddPartitionsToTxnManager verification and the verification guard) | produce_append (transactional), txn_marker, hw_advance LSO, txn_request | lso (lso.go)
//
// # The queue workload's client promises
//
// A run of the queue workload (--workload queue; workloads/queue.go,
// Jepsen's Kafka queue test) is judged on what its clients saw, by six
// checkers that say valid without judging anything when the history has
// no queue operation. One row per rule: the client promise, the Kafka
// 2.6.3 code that keeps it, the evidence, the checker (file).
//
//	promise                                                          | Kafka 2.6.3 code                                          | evidence                                           | checker (file)
//	a value is at one offset (no duplicate)                          | ProducerStateManager (idempotent sequence check)          | sends' offsets, polls' records                     | queue-log (queue_values.go)
//	an offset holds one value (no inconsistent offsets)              | Log.append, truncation only above the HW                   | sends' offsets, polls' records                     | queue-log (queue_values.go)
//	a committed value is read (no lost write)                        | Partition.appendRecordsToLeader with acks=all, the HW      | committed sends, polls past them, the drain        | queue-lost-write (queue_values.go)
//	a consumer's offsets go forward in one assignment                | Fetcher positions, Log.read from the fetch offset          | each process's polls per assignment                | queue-poll (queue_poll.go)
//	a consumer skips no readable value, a member starts at the commit | GroupMetadataManager.storeOffsets / getOffsets            | polls, commits (ok and unknown), assignments       | queue-poll (queue_poll.go)
//	read_committed shows no aborted and no uncommitted value         | Log.collectAbortedTransactions, the last stable offset     | transactional sends, their commit request, polls   | queue-isolation (queue_values.go)
//	one member owns a partition in one generation                   | GroupCoordinator generations, the leader's assignment      | members' partitions and generation at each poll    | queue-group (queue_poll.go)
//	an acknowledged commit is fetched until a later one replaces it  | GroupMetadataManager.storeOffsets (acks=-1), getOffsets    | commits, coordinators' OffsetCommit and OffsetFetch answers | queue-commit (queue_commit.go)
//
// Each fence's input is counted too (fences.go, and fences_txn.go for the
// fences of groups and transactions: coordinator-generation, txn-producer-epoch,
// txn-coordinator-epoch, txn-verification): a green run proves a fence
// only if a stale input reached it, so results.json, the report and chaos
// power name the fences no run tested. A fence no traffic in the history
// could reach (a group or transaction fence in a log-workload run) is not
// applicable, not untested.
//
// Checkers read only a *history.History and return a Result; they never touch
// containers or the network, write no file but the linearizable checker's
// porcupine page when asked (Config.VisualizePath), and never modify the
// history (data flows one way: history → checkers → results). Each checker
// returns valid, invalid or unknown; unknown is not failure (an operation
// that timed out may or may not have happened), and no checker turns an
// unknown outcome into invalid.
package checkers
