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

// assign records that epoch starts at startOffset, as Kafka's cache does on
// every appended batch and when a broker becomes leader. It changes nothing
// when the epoch is already the latest (its first offset is already known).
// An epoch lower than the latest is ignored and reported as a warning: Kafka
// logs and ignores it too. A new epoch first removes the entries starting at
// or after its start offset (later Kafka versions do the same): they describe
// offsets that were overwritten, or an epoch that never wrote a batch (a
// leader that was assigned its epoch at the LEO and appended nothing), and
// keeping them would make OffsetForLeaderEpoch name an epoch that holds no
// data.
// changed reports whether the file must be rewritten.
func (c *epochCache) assign(epoch int32, startOffset int64) (changed bool, warning string) {
	if epoch < 0 {
		return false, ""
	}
	if last, ok := c.latest(); ok {
		if epoch == last.Epoch {
			return false, ""
		}
		if epoch < last.Epoch {
			return false, fmt.Sprintf("leader epoch %d at offset %d is below the latest cached epoch %d (start %d); not cached",
				epoch, startOffset, last.Epoch, last.StartOffset)
		}
	}
	i := len(c.entries)
	for i > 0 && c.entries[i-1].StartOffset >= startOffset {
		i--
	}
	c.entries = append(c.entries[:i], checkpoint.EpochEntry{Epoch: epoch, StartOffset: startOffset})
	return true, ""
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
