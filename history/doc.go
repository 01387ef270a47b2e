// Package history owns the one event schema that every source of a run writes
// (clients, nodes, the ZooKeeper watcher, the nemesis, the harness), the
// streaming JSONL Writer that appends it, the Reader that decodes it with
// file-and-line errors, and the merge of per-source files into one ordered
// History in which every event has a unique index.
//
// It must not import any other package of this module: the node program, the
// harness and the checkers all depend on it, never the other way round.
//
// # Schema
//
// Each line of a history file is one JSON object, an Event. The header fields
// are the same for every kind:
//
//	{"v":1,"ts":1764696000000000000,"src":"n2","seq":17,"node":2,"kind":"control_request","control":{...}}
//
// v is the schema version (SchemaVersion); ts is wall-clock Unix nanoseconds from
// the host clock (containers share the host kernel, so sources are comparable);
// src names the writer; seq counts lines per source from 0 and goes up by one
// per line, across restarts of the writing process (Create continues it);
// node is the broker id for node events (omitted for other sources). Exactly one payload object,
// named after the kind's family, carries the facts (see Kind for the table).
// The schema only grows: fields and kinds are added, never renamed or removed;
// a reader rejects a version newer than it knows.
//
// # Run directory layout
//
// A run directory keeps its history as one JSONL file per source:
//
//	RUN_DIR/history/<source>.jsonl
//
// for example client-0.jsonl, client-1.jsonl, n1.jsonl, n2.jsonl, n3.jsonl,
// zk.jsonl (the ZooKeeper watcher), nemesis.jsonl and harness.jsonl. Every
// *.jsonl file in that folder is read; other files are ignored. A file holds
// exactly one source, the one it is named after.
//
// ReadDir merges them into one History and numbers the events 0..n-1
// (Event.Index); checkers refer to events by that index. Within one source
// the file order is the true order: a writer appends in the order things
// happened, while its wall clock may step back (NTP, or goroutines stamping
// ts before taking the file's lock), so a source is never re-sorted and a
// step back is a Warning with its size and line. ts only orders events of
// different sources: the merge takes, at each step, the earliest next event
// of any source (ties by src), which is deterministic. Results of checking go
// to RUN_DIR/results.json (its format is rundir's, not this package's).
//
// # Reads on disk
//
// A read's records are nearly always consecutive, so they are written as the
// list of values from the first offset: {"f":"read","offset":4887,
// "values":["p6-3038","p6-3039"]} says offset 4887 held p6-3038 and 4888
// held p6-3039 ("from" gives the first offset when it differs from the fetch
// offset). Records with gaps are written as "records" [{"offset","value"}],
// as every read was before. Either way ClientOp.Records holds them.
//
// # What writers must record for the checkers to judge
//
//   - Every event: Time from the host wall clock (the Writer stamps it when
//     zero). A node writes node_start as the first line of each process;
//     checkers use it to tell one process of a broker from the next.
//   - Client ops: one invoke then exactly one ok / fail / info per Process;
//     fail only when the operation certainly did not take effect, info when
//     it may have (timeouts, lost connections). Produce values are unique per
//     partition. Acks is -1 (AcksAll) for acks=all produces; only those are
//     held to durability and linearizability. A read's ok lists the records
//     returned from the fetch offset, consecutively; Final marks the final
//     full reads after healing.
//   - queue_op (the queue workload): the same invoke-then-one-completion
//     rule per process; a send's completion carries its offset (-1 when
//     not acknowledged), a poll's the records per partition, a group
//     member's poll its group, member, generation and partitions; values
//     are unique integers.
//   - control_request: Verdict accepted or rejected (whole request), per
//     partition ErrorCode (and NotApplied for a LeaderAndIsr partition
//     answered NONE whose replica was left as it was),
//     KnownControllerEpoch as it was before this request, OwnBrokerEpoch
//     the czxid of the broker's live registration.
//     BrokerEpoch -1 means the request carried none.
//   - zk_write: Start (when issued), the writer's ControllerEpoch, Outcome,
//     and Zxid (the znode's mzxid after an ok write) when known; State for
//     partition-state writes. controller_elected: Zxid of /controller_epoch
//     when known. With zxids the checker uses ZooKeeper's own order.
//   - produce_append: only a leader appending a client's produce request,
//     never a follower's replication fetch (two brokers appending at one
//     leader epoch is what leader uniqueness hunts). produce_ack: one per
//     successful produce response, with its acks and the leader epoch it
//     was acknowledged under.
//   - hw_checkpoint: every entry written, and Hosted = the partitions whose
//     logs exist in the log directory at that moment (not the in-memory
//     map), so a dropped partition can be told from a deleted one.
//   - fault_start / fault_stop: one stop per start, with the same ID; a run
//     whose faults never stopped gets unknown availability and liveness.
//
// # Crashes and bad input
//
// A Writer issues one write per line, so after a crash a line is complete or
// absent, except that the very last line of a file may be cut short. The Reader
// therefore skips an unterminated, undecodable last line with a Warning and
// treats every other bad record as an error naming file and line: malformed
// JSON, unknown kind, missing payload, a version from the future, an empty
// file, a line that is not valid UTF-8 or escapes a lone UTF-16 surrogate
// (checked on the raw bytes: JSON decoders silently turn both into U+FFFD), a
// negative offset or high watermark, a src other than the file's source, a
// seq not above the previous line's ((src, seq) is unique and increasing),
// and a client op completion whose process has no invoke pending
// (ErrNoInvoke): pairing would have to drop it, and with it what it says,
// such as an acknowledged offset the durability checker must hold the log
// to. A wall clock stepping back within a source is no error: file order is
// kept and the reader returns a Warning with ClockStepBack set.
package history
