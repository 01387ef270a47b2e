package storage

import (
	"fmt"

	"github.com/zkchaos/zkchaos/node/storage/checkpoint"
)

// UndefinedEpoch and UndefinedOffset are Kafka's "no answer" values in an
// OffsetForLeaderEpoch response (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET).
const (
	UndefinedEpoch  int32 = -1
	UndefinedOffset int64 = -1
)

// epochCache is a partition's leader-epoch cache (Kafka's
// LeaderEpochFileCache): the start offset of every leader epoch, in
// increasing epoch order, persisted to leader-epoch-checkpoint on every
// change. It is not safe for concurrent use; Log guards it with its lock.
type epochCache struct {
	path    string
	entries []checkpoint.EpochEntry
}

// latest returns the newest entry, if any.
func (c *epochCache) latest() (checkpoint.EpochEntry, bool) {
	if len(c.entries) == 0 {
		return checkpoint.EpochEntry{}, false
	}
	return c.entries[len(c.entries)-1], true
}

// assign records that epoch starts at startOffset, as Kafka's
// LeaderEpochFileCache.assign (2.6.3) does on every appended batch and when
// a broker becomes leader. Nothing changes when epoch is the latest and
// startOffset not below its start. Otherwise the entry is added after
// removing every entry it conflicts with (an epoch not below it, or a start
// not below its start): the latest assignment is taken as the truth. That
// also drops an epoch that never wrote a batch (a leader assigned its epoch
// at the LEO that appended nothing). An epoch or start offset below the
// latest entry's is reported as a warning, as Kafka logs it; changed
// reports whether the file must be rewritten.
func (c *epochCache) assign(epoch int32, startOffset int64) (changed bool, warning string) {
	if epoch < 0 {
		return false, ""
	}
	if last, ok := c.latest(); ok {
		switch {
		case epoch == last.Epoch && startOffset >= last.StartOffset:
			return false, ""
		case epoch < last.Epoch:
			warning = fmt.Sprintf("leader epoch %d at offset %d is below the latest cached epoch %d (start %d): later entries dropped",
				epoch, startOffset, last.Epoch, last.StartOffset)
		case startOffset < last.StartOffset:
			warning = fmt.Sprintf("leader epoch %d starts at offset %d, below the start %d of the latest cached epoch %d: later entries dropped",
				epoch, startOffset, last.StartOffset, last.Epoch)
		}
	}
	kept := c.entries[:0]
	for _, e := range c.entries {
		if e.Epoch < epoch && e.StartOffset < startOffset {
			kept = append(kept, e)
		}
	}
	c.entries = append(kept, checkpoint.EpochEntry{Epoch: epoch, StartOffset: startOffset})
	return true, warning
}

// truncateFromEnd drops every entry starting at or after endOffset (Kafka's
// truncateFromEnd, run when the log is truncated to endOffset).
func (c *epochCache) truncateFromEnd(endOffset int64) bool {
	i := len(c.entries)
	for i > 0 && c.entries[i-1].StartOffset >= endOffset {
		i--
	}
	if i == len(c.entries) {
		return false
	}
	c.entries = c.entries[:i]
	return true
}

// endOffsetFor answers OffsetForLeaderEpoch (KIP-101, with KIP-279's epoch in
// the answer). For the latest epoch the end offset is the log end offset;
// for an older epoch it is the start offset of the first later epoch, and the
// returned epoch is the largest cached epoch <= requested (or requested
// itself when it predates every entry). An unknown future epoch, an
// undefined request or an empty cache give (UndefinedEpoch, UndefinedOffset).
func (c *epochCache) endOffsetFor(requested int32, logEndOffset int64) (int32, int64) {
	if requested == UndefinedEpoch || len(c.entries) == 0 {
		return UndefinedEpoch, UndefinedOffset
	}
	last := c.entries[len(c.entries)-1]
	if requested == last.Epoch {
		return last.Epoch, logEndOffset
	}
	// First entry with an epoch above the requested one.
	hi := -1
	for i, e := range c.entries {
		if e.Epoch > requested {
			hi = i
			break
		}
	}
	if hi < 0 {
		return UndefinedEpoch, UndefinedOffset
	}
	if hi == 0 {
		return requested, c.entries[0].StartOffset
	}
	return c.entries[hi-1].Epoch, c.entries[hi].StartOffset
}

func (c *epochCache) flush() error {
	if err := checkpoint.WriteEpochs(c.path, c.entries); err != nil {
		return fmt.Errorf("storage: leader epoch cache: %w", err)
	}
	return nil
}

func (c *epochCache) snapshot() []checkpoint.EpochEntry {
	return append([]checkpoint.EpochEntry(nil), c.entries...)
}
