// Package storage is the on-disk replica log of the node program's broker:
// one directory per partition (<data-dir>/<topic>-<partition>/) holding
// Kafka-style segment files (00000000000000000000.log, named by base offset)
// of RecordBatch v2 bytes exactly as the producer sent them, stamped with the
// base offset and partition leader epoch the leader assigned, plus the
// partition's leader-epoch cache (leader-epoch-checkpoint) and the durable
// length of each segment, what its fsyncs made durable
// (history.DurableLengthsFile, durable.go: segments are fsynced where Kafka
// flushes, on roll and on close, and when truncated). Sub-package
// checkpoint owns the text checkpoint formats, including the per-log-dir
// replication-offset-checkpoint.
//
// What it owns: batch validation (ErrCorruptBatch, for CORRUPT_MESSAGE),
// append as leader and as follower, reads by offset through a sparse
// in-memory index, truncation (with the epoch cache), the OffsetForLeaderEpoch
// answer, the batches the broker writes itself (EncodeBatch: the group
// coordinator's records) and reading records back (ReadRecords), and
// start-up recovery (the log is cut at the first invalid batch
// and reported, as Kafka's log recovery does; with
// Options.RefuseMidLogDamage only a torn tail of the last segment is cut and
// any other damage is an error naming file and position).
//
// What it must not touch: it imports no other node/ package and knows
// nothing of replication, high watermarks, ISR, ZooKeeper or the bug
// switches. The broker decides what to append, where to truncate and which
// high watermarks go into the checkpoint; this package only stores what it
// is given. Nothing outside node/ may import it (the harness observes the
// node program through its event log and files, never its internals).
//
// Not modelled: retention and deletion of old segments (the log start offset
// only moves with TruncateFullyAndStartAt), compaction, transactions and
// producer state, time index, LogAppendTime, and the records inside
// compressed batches (their CRC is checked; the records are not
// decompressed and walked, so a compressed batch whose inner records are
// malformed but whose CRC matches is accepted). A crash inside
// TruncateFullyAndStartAt after the last segment was deleted and before the
// new one exists reopens as an empty log at offset 0 rather than at the
// requested offset; the follower's next fetch corrects it.
package storage
