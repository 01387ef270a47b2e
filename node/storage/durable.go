package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/storage/checkpoint"
)

// The durable lengths: how many bytes of each segment file an fsync has
// made durable, kept in memory by the Log and persisted in the partition
// directory's history.DurableLengthsFile after every fsync of a segment
// (roll, truncation, Sync, Close, a recovery cut, SyncOnAppend). The node
// does not need them itself: they are what a machine crash would leave, for
// the harness's crash-lose-unflushed fault, which cuts each segment to its
// durable length while the node is down (Jepsen's lazyfs drops the page
// cache the same way). The sidecar is written as a checkpoint file is
// (temporary file, fsync, rename, directory fsync), so it outlives the
// SIGKILL that ends the process.
//
// It is written after the fsync it records, never before, so it never
// claims more than is durable. A crash between the two leaves it claiming
// less: the fault then cuts bytes that were fsynced a moment before, a
// slightly harsher crash than the machine's. roll records the sealed
// segment before it creates the next one, so a sidecar can never list a
// sealed segment short while a later segment exists (a log with a gap
// would not open).

// durablePath is the sidecar's path.
func (l *Log) durablePath() string { return filepath.Join(l.dir, history.DurableLengthsFile) }

// loadDurable sets the durable lengths at Open from the sidecar, once the
// segments are recovered: a listed segment keeps its length (at most its
// size), an unlisted one has nothing durable, and a segment recovery cut
// (and fsynced) is durable whole. A log without a sidecar was written
// before lengths were tracked (or is new and empty): all of it counts as
// durable. A restart makes nothing durable by itself, as in Kafka, whose
// Log.recoverLog moves the recovery point to the log end without a flush.
func (l *Log) loadDurable(synced map[*segment]bool) error {
	data, err := os.ReadFile(l.durablePath())
	var stored map[string]int64
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("storage: read %s: %w", l.durablePath(), err)
	default:
		if stored, err = history.ParseDurableLengths(data); err != nil {
			return fmt.Errorf("storage: %s: %w", l.durablePath(), err)
		}
	}
	l.durable = make(map[string]int64, len(l.segs))
	for _, s := range l.segs {
		name := filepath.Base(s.path)
		switch n, ok := stored[name]; {
		case stored == nil || synced[s]:
			l.durable[name] = s.size
		case ok:
			l.durable[name] = min(n, s.size)
		default:
			l.durable[name] = 0
		}
	}
	if stored != nil && len(stored) == len(l.durable) {
		same := true
		for k, v := range l.durable {
			if w, ok := stored[k]; !ok || w != v {
				same = false
				break
			}
		}
		if same {
			return nil
		}
	}
	return l.saveDurable()
}

// synced records that seg was just fsynced at its current size.
func (l *Log) synced(seg *segment) { l.durable[filepath.Base(seg.path)] = seg.size }

// saveDurable persists the durable lengths of the log's segments (and only
// those: a deleted segment leaves the map with its file).
func (l *Log) saveDurable() error {
	keep := make(map[string]int64, len(l.segs))
	for _, s := range l.segs {
		name := filepath.Base(s.path)
		keep[name] = l.durable[name]
	}
	l.durable = keep
	if err := checkpoint.WriteAtomic(l.durablePath(), history.FormatDurableLengths(keep)); err != nil {
		return fmt.Errorf("storage: record durable lengths: %w", err)
	}
	return nil
}

// DurableLengths returns a copy of the durable length of each segment file,
// by file name.
func (l *Log) DurableLengths() map[string]int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make(map[string]int64, len(l.durable))
	for k, v := range l.durable {
		out[k] = v
	}
	return out
}
