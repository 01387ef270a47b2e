package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/zkchaos/zkchaos/node/storage/checkpoint"
)

// Options tune a Log. Zero values take the defaults.
type Options struct {
	// SegmentBytes rolls a new segment when the next append would make the
	// active one larger (Kafka's segment.bytes). Default 64 MiB.
	SegmentBytes int64
	// IndexIntervalBytes is how many bytes of batches go between two sparse
	// index entries (Kafka's index.interval.bytes). Default 4096.
	IndexIntervalBytes int64
	// MaxBatchBytes bounds one batch (Kafka's message.max.bytes, whose
	// default 1048588 this copies). Default 1048588.
	MaxBatchBytes int
	// SyncOnAppend fsyncs the segment after every append. Kafka does not (it
	// relies on replication and flushes on roll and shutdown); the broker
	// decides.
	SyncOnAppend bool
	// RefuseMidLogDamage makes Open fail on damage anywhere but a torn tail
	// of the last segment, instead of cutting the log at the first invalid
	// batch as Kafka's recovery does.
	RefuseMidLogDamage bool
}

func (o Options) withDefaults() Options {
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = 64 << 20
	}
	if o.IndexIntervalBytes <= 0 {
		o.IndexIntervalBytes = 4096
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = 1048588
	}
	return o
}

// Sentinel errors for the broker to map onto Kafka error codes.
var (
	// ErrOffsetOutOfRange: Read below the log start or above the log end
	// offset (OFFSET_OUT_OF_RANGE, 1).
	ErrOffsetOutOfRange = errors.New("offset out of range")
	// ErrNonContiguous: a follower append whose first batch does not start at
	// the log end offset, or whose batches are not consecutive (Kafka's
	// UnexpectedAppendOffsetException / out-of-order offsets).
	ErrNonContiguous = errors.New("batches not contiguous with the log")
	// ErrClosed: the Log was closed.
	ErrClosed = errors.New("log closed")
)

// Warning describes data recovery removed from a segment at start-up, so
// the broker can put it in its event log: the segment cut at the first
// invalid batch, or a later segment deleted after such a cut.
type Warning struct {
	File         string
	Position     int64 // byte position the file was cut at
	Offset       int64 // log end offset after the cut
	DroppedBytes int64
	Reason       string
}

func (w Warning) String() string {
	return fmt.Sprintf("%s: cut at byte %d (log end offset now %d, %d bytes dropped): %s",
		w.File, w.Position, w.Offset, w.DroppedBytes, w.Reason)
}

// AppendInfo describes a successful append.
type AppendInfo struct {
	FirstOffset int64 // base offset of the first appended batch
	LastOffset  int64 // last offset appended; LogEndOffset is LastOffset+1
	Batches     int
	Bytes       int
	// Warnings are leader epoch assignments below the epoch cache's latest
	// entry, which dropped the entries they conflict with (Kafka logs these
	// and appends anyway).
	Warnings []string
	// Headers are the appended batches' headers as stored (offsets and
	// leader epoch stamped): the data plane rebuilds idempotent producer
	// state from them without parsing the batches again.
	Headers []BatchHeader
}

// Log is one partition's replica log in its own directory. Its methods are
// safe for concurrent use: reads share a lock, writes take it exclusively.
type Log struct {
	dir  string
	opts Options

	mu     sync.RWMutex
	segs   []*segment // by base offset; the last is the active segment
	epochs epochCache
	// failed is set when a write failed and could not be undone; the log then
	// refuses writes, as Kafka takes a failed log directory offline.
	failed error
	closed bool
	// durable is each segment file's fsynced length, by file name
	// (durable.go), persisted in history.DurableLengthsFile.
	durable map[string]int64
}

// Open opens (creating if needed) the partition log in dir and recovers it.
//
// Recovery reads every segment and validates every batch (length, magic,
// CRC, record framing, offsets contiguous across batches and segments) and
// rebuilds the sparse index. As Kafka's Log.recoverLog and
// LogSegment.recover do, the first invalid batch ends the log: its segment
// is cut there and every later segment deleted, each reported as a Warning.
// That is what a crash during a write leaves at the tail of the last
// segment; with opts.RefuseMidLogDamage any other damage (in an earlier
// segment, or followed by a valid batch) is instead an error naming the
// file, byte position and expected offset, so that acknowledged data is not
// silently dropped. An offset discontinuity is always an error (Kafka does
// not check; this log never writes one). The leader-epoch cache is read from
// leader-epoch-checkpoint (a malformed file is an error), completed from the
// epochs of the recovered batches (as Kafka's segment recovery re-assigns
// them, which also rebuilds a missing file) and truncated to the log end
// offset.
func Open(dir string, opts Options) (*Log, []Warning, error) {
	opts = opts.withDefaults()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("storage: create log dir: %w", err)
	}
	l := &Log{dir: dir, opts: opts, epochs: epochCache{path: filepath.Join(dir, checkpoint.LeaderEpochFile)}}
	warnings, err := l.load()
	if err != nil {
		l.closeFiles()
		return nil, nil, err
	}
	return l, warnings, nil
}

func (l *Log) load() ([]Warning, error) {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("storage: list log dir: %w", err)
	}
	var bases []int64
	for _, e := range ents {
		if base, ok := parseSegmentName(e.Name()); ok && e.Type().IsRegular() {
			bases = append(bases, base)
		} else if filepath.Ext(e.Name()) == segmentSuffix {
			return nil, fmt.Errorf("storage: %s: unexpected segment file name (want 20 digits + .log)", filepath.Join(l.dir, e.Name()))
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })

	entries, _, err := checkpoint.ReadEpochs(l.epochs.path)
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	l.epochs.entries = entries
	fileEntries := len(entries)

	if len(bases) == 0 {
		seg, err := openSegmentFile(l.dir, 0, true)
		if err != nil {
			return nil, err
		}
		l.segs = []*segment{seg}
		if err := checkpoint.SyncDir(l.dir); err != nil {
			return nil, err
		}
	}
	var warnings []Warning
	var transitions []checkpoint.EpochEntry
	cut := map[*segment]bool{} // segments recovery cut and fsynced
	for i, base := range bases {
		seg, err := openSegmentFile(l.dir, base, false)
		if err != nil {
			return nil, err
		}
		l.segs = append(l.segs, seg)
		if i > 0 {
			if prev := l.segs[i-1]; prev.next != base {
				return nil, fmt.Errorf("storage: %s: segment starts at offset %d but the previous segment %s ends at offset %d",
					seg.path, base, prev.path, prev.next)
			}
		}
		w, err := l.recoverSegment(seg, i == len(bases)-1, &transitions)
		if err != nil {
			return nil, err
		}
		if w != nil {
			warnings = append(warnings, *w)
			cut[seg] = true
			// Log.recoverLog: after a cut, delete all the remaining
			// segments, newest first so that a crash meanwhile leaves a
			// prefix of the log.
			rest := bases[i+1:]
			for j := len(rest) - 1; j >= 0; j-- {
				path := filepath.Join(l.dir, segmentName(rest[j]))
				st, err := os.Stat(path)
				if err != nil {
					return nil, fmt.Errorf("storage: %w", err)
				}
				if err := os.Remove(path); err != nil {
					return nil, fmt.Errorf("storage: delete segment after a cut: %w", err)
				}
				warnings = append(warnings, Warning{File: path, Offset: seg.next, DroppedBytes: st.Size(),
					Reason: fmt.Sprintf("deleted: follows the cut in %s", seg.path)})
			}
			if len(rest) > 0 {
				if err := checkpoint.SyncDir(l.dir); err != nil {
					return nil, err
				}
			}
			break
		}
	}

	changed := false
	for _, t := range transitions {
		// LogSegment.recover assigns only epochs above the latest cached.
		if last, ok := l.epochs.latest(); ok && t.Epoch <= last.Epoch {
			continue
		}
		if c, _ := l.epochs.assign(t.Epoch, t.StartOffset); c {
			changed = true
		}
	}
	if l.epochs.truncateFromEnd(l.logEndOffset()) {
		changed = true
	}
	if changed || len(l.epochs.entries) != fileEntries {
		if err := l.epochs.flush(); err != nil {
			return nil, err
		}
	}
	if err := l.loadDurable(cut); err != nil {
		return nil, err
	}
	return warnings, nil
}

// recoverSegment scans seg from the start, validating every batch and
// building its index, and appends each change of leader epoch to
// transitions. See Open for what is repaired and what is an error.
func (l *Log) recoverSegment(seg *segment, last bool, transitions *[]checkpoint.EpochEntry) (*Warning, error) {
	st, err := seg.f.Stat()
	if err != nil {
		return nil, fmt.Errorf("storage: stat %s: %w", seg.path, err)
	}
	fileSize := st.Size()
	r := io.NewSectionReader(seg.f, 0, fileSize)
	buf := make([]byte, 0, 64<<10)
	pos := int64(0)
	for pos < fileSize {
		expected := seg.next
		var prefix [logOverhead]byte
		var verr error
		var h BatchHeader
		if fileSize-pos < logOverhead {
			verr = fmt.Errorf("%d bytes left, less than a batch prefix", fileSize-pos)
		} else if _, err := r.ReadAt(prefix[:], pos); err != nil {
			return nil, fmt.Errorf("storage: read %s at %d: %w", seg.path, pos, err)
		} else {
			length := int64(int32(binary.BigEndian.Uint32(prefix[8:])))
			switch {
			case length < minBatchLength:
				verr = fmt.Errorf("batch length %d below minimum %d", length, minBatchLength)
			case pos+logOverhead+length > fileSize:
				verr = fmt.Errorf("batch of %d bytes runs past the end of the file (%d bytes left)", length+logOverhead, fileSize-pos)
			default:
				size := int(length + logOverhead)
				if cap(buf) < size {
					buf = make([]byte, 0, size)
				}
				b := buf[:size]
				if _, err := r.ReadAt(b, pos); err != nil {
					return nil, fmt.Errorf("storage: read %s at %d: %w", seg.path, pos, err)
				}
				h, verr = ValidateBatch(b)
			}
		}
		if verr == nil && h.BaseOffset != expected {
			// A valid batch at the wrong offset is not a torn write.
			return nil, fmt.Errorf("storage: %s: batch at byte %d has base offset %d, expected %d (offsets not contiguous)",
				seg.path, pos, h.BaseOffset, expected)
		}
		if verr != nil {
			if l.opts.RefuseMidLogDamage && !last {
				return nil, fmt.Errorf("storage: %s: corrupt batch at byte %d (expected offset %d) in a sealed segment: %w",
					seg.path, pos, expected, verr)
			}
			if l.opts.RefuseMidLogDamage {
				tail := make([]byte, fileSize-pos)
				if _, err := r.ReadAt(tail, pos); err != nil {
					return nil, fmt.Errorf("storage: read %s at %d: %w", seg.path, pos, err)
				}
				if at, ok := findValidBatch(tail[1:], expected); ok {
					return nil, fmt.Errorf("storage: %s: corrupt batch at byte %d (expected offset %d) followed by a valid batch at byte %d; refusing to drop it: %w",
						seg.path, pos, expected, pos+1+int64(at), verr)
				}
			}
			if err := seg.f.Truncate(pos); err != nil {
				return nil, fmt.Errorf("storage: truncate torn tail of %s at %d: %w", seg.path, pos, err)
			}
			if err := seg.f.Sync(); err != nil {
				return nil, fmt.Errorf("storage: fsync %s: %w", seg.path, err)
			}
			return &Warning{File: seg.path, Position: pos, Offset: expected, DroppedBytes: fileSize - pos, Reason: verr.Error()}, nil
		}
		if n := len(*transitions); n == 0 || (*transitions)[n-1].Epoch != h.PartitionLeaderEpoch {
			*transitions = append(*transitions, checkpoint.EpochEntry{Epoch: h.PartitionLeaderEpoch, StartOffset: h.BaseOffset})
		}
		seg.noteBatch(pos, h, l.opts.IndexIntervalBytes)
		pos += h.Size()
	}
	return nil, nil
}

// findValidBatch reports whether a complete, valid batch with a base offset
// >= minOffset starts anywhere in b, and where. Used to tell a torn tail (no)
// from corruption in the middle of a segment (yes).
func findValidBatch(b []byte, minOffset int64) (int, bool) {
	for i := 0; i+BatchHeaderSize <= len(b); i++ {
		if b[i+16] != magicV2 {
			continue
		}
		base := int64(binary.BigEndian.Uint64(b[i:]))
		if base < minOffset {
			continue
		}
		if _, _, err := NextBatch(b[i:]); err == nil {
			return i, true
		}
	}
	return 0, false
}

func (l *Log) active() *segment    { return l.segs[len(l.segs)-1] }
func (l *Log) logEndOffset() int64 { return l.active().next }

func (l *Log) writable() error {
	if l.closed {
		return fmt.Errorf("storage: %s: %w", l.dir, ErrClosed)
	}
	if l.failed != nil {
		return fmt.Errorf("storage: %s: log failed earlier: %w", l.dir, l.failed)
	}
	return nil
}

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

// LogStartOffset is the first offset in the log (the first segment's base;
// this package deletes no segments by retention).
func (l *Log) LogStartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.segs[0].base
}

// LogEndOffset (LEO) is the offset the next appended record will get.
func (l *Log) LogEndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.logEndOffset()
}

// AppendAsLeader validates one client batch (exactly one v2 batch, as Kafka
// requires of produce requests), stamps it with base offset = LEO and
// partition leader epoch = leaderEpoch (fields outside the CRC, so the
// client's CRC stays valid), and appends it. The caller's slice is not
// modified. Validation failures wrap ErrCorruptBatch or ErrBatchTooLarge.
// The epoch cache learns a new epoch before the data is written, as Kafka's
// Log.append does, so a crash can never leave batches of an epoch the cache
// does not know.
func (l *Log) AppendAsLeader(batch []byte, leaderEpoch int32) (AppendInfo, error) {
	if leaderEpoch < 0 {
		return AppendInfo{}, fmt.Errorf("storage: append as leader to %s: negative leader epoch %d", l.dir, leaderEpoch)
	}
	if len(batch) > l.opts.MaxBatchBytes {
		return AppendInfo{}, fmt.Errorf("storage: append as leader to %s: %w: %d bytes, limit %d",
			l.dir, ErrBatchTooLarge, len(batch), l.opts.MaxBatchBytes)
	}
	h, err := ValidateBatch(batch)
	if err != nil {
		return AppendInfo{}, fmt.Errorf("storage: append as leader to %s: %w", l.dir, err)
	}
	buf := make([]byte, len(batch))
	copy(buf, batch)

	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return AppendInfo{}, err
	}
	h.BaseOffset = l.logEndOffset()
	h.PartitionLeaderEpoch = leaderEpoch
	binary.BigEndian.PutUint64(buf[0:], uint64(h.BaseOffset))
	binary.BigEndian.PutUint32(buf[12:], uint32(leaderEpoch))
	return l.appendLocked(buf, []BatchHeader{h})
}

// AppendAsFollower appends batches fetched from the leader, keeping their
// offsets and leader epochs. records is a Fetch response's records field: a
// partial batch at its end is ignored (not appended, not an error), as Kafka
// ignores one. Every complete batch is validated (ErrCorruptBatch), the
// first must start at the LEO and each next one right after its predecessor
// (ErrNonContiguous). An empty records field appends nothing.
func (l *Log) AppendAsFollower(records []byte) (AppendInfo, error) {
	headers, n, err := SplitBatches(records)
	if err != nil {
		return AppendInfo{}, fmt.Errorf("storage: append as follower to %s: %w", l.dir, err)
	}
	for _, h := range headers {
		if h.Size() > int64(l.opts.MaxBatchBytes) {
			return AppendInfo{}, fmt.Errorf("storage: append as follower to %s: %w: batch at offset %d is %d bytes, limit %d",
				l.dir, ErrBatchTooLarge, h.BaseOffset, h.Size(), l.opts.MaxBatchBytes)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return AppendInfo{}, err
	}
	if len(headers) == 0 {
		return AppendInfo{FirstOffset: l.logEndOffset(), LastOffset: l.logEndOffset() - 1}, nil
	}
	next := l.logEndOffset()
	for i, h := range headers {
		if h.BaseOffset != next {
			return AppendInfo{}, fmt.Errorf("storage: append as follower to %s: %w: batch %d has base offset %d, expected %d",
				l.dir, ErrNonContiguous, i, h.BaseOffset, next)
		}
		next = h.LastOffset() + 1
	}
	buf := make([]byte, n)
	copy(buf, records[:n])
	return l.appendLocked(buf, headers)
}

// appendLocked writes validated, stamped, contiguous batches (data holds
// exactly them) at the LEO, rolling segments by size. Caller holds l.mu.
func (l *Log) appendLocked(data []byte, headers []BatchHeader) (AppendInfo, error) {
	info := AppendInfo{FirstOffset: headers[0].BaseOffset, LastOffset: headers[len(headers)-1].LastOffset(),
		Batches: len(headers), Bytes: len(data), Headers: headers}
	changed := false
	for _, h := range headers {
		c, w := l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
		changed = changed || c
		if w != "" {
			info.Warnings = append(info.Warnings, w)
		}
	}
	if changed {
		if err := l.epochs.flush(); err != nil {
			// The cache in memory is ahead of its file; stop writing.
			l.failed = err
			return AppendInfo{}, fmt.Errorf("storage: append to %s: %w", l.dir, err)
		}
	}
	// Write runs of batches that fit in the active segment with one write each.
	start, off := 0, int64(0)
	for start < len(headers) {
		seg := l.active()
		if seg.size > 0 && seg.size+headers[start].Size() > l.opts.SegmentBytes {
			if err := l.roll(); err != nil {
				return AppendInfo{}, err
			}
			seg = l.active()
		}
		end, bytes := start, int64(0)
		for end < len(headers) && (end == start || seg.size+bytes+headers[end].Size() <= l.opts.SegmentBytes) {
			bytes += headers[end].Size()
			end++
		}
		if err := l.writeRun(seg, data[off:off+bytes], headers[start:end]); err != nil {
			return AppendInfo{}, err
		}
		start, off = end, off+bytes
	}
	if l.opts.SyncOnAppend {
		if err := l.active().f.Sync(); err != nil {
			l.failed = fmt.Errorf("fsync %s: %w", l.active().path, err)
			return AppendInfo{}, fmt.Errorf("storage: %w", l.failed)
		}
		l.synced(l.active())
		if err := l.saveDurable(); err != nil {
			return AppendInfo{}, err
		}
	}
	return info, nil
}

func (l *Log) writeRun(seg *segment, data []byte, headers []BatchHeader) error {
	if _, err := seg.f.WriteAt(data, seg.size); err != nil {
		// Undo a partial write so the file again ends at a batch boundary.
		if terr := seg.f.Truncate(seg.size); terr != nil {
			l.failed = fmt.Errorf("write %s: %v; undoing it failed: %w", seg.path, err, terr)
		}
		return fmt.Errorf("storage: write %s at %d: %w", seg.path, seg.size, err)
	}
	pos := seg.size
	for _, h := range headers {
		seg.noteBatch(pos, h, l.opts.IndexIntervalBytes)
		pos += h.Size()
	}
	return nil
}

// roll seals the active segment (fsync, as Kafka flushes a segment when it
// rolls: Log.roll schedules flush(newOffset)) and starts a new one at the
// LEO. The sealed segment's durable length is recorded before the new
// segment exists (durable.go says why).
func (l *Log) roll() error {
	old := l.active()
	if err := old.f.Sync(); err != nil {
		return fmt.Errorf("storage: fsync %s on roll: %w", old.path, err)
	}
	l.synced(old)
	if err := l.saveDurable(); err != nil {
		return err
	}
	seg, err := openSegmentFile(l.dir, old.next, true)
	if err != nil {
		return err
	}
	l.segs = append(l.segs, seg)
	return checkpoint.SyncDir(l.dir)
}

// Read returns whole batches, concatenated as in a Fetch response, starting
// with the batch that contains offset from (a consumer skips the records
// before from, as with Kafka). It returns at most maxBytes, except that the
// first batch is always returned whole even if larger (KIP-74), and only
// batches whose last offset is below maxOffset: pass the high watermark for
// a consumer fetch and -1 (meaning the LEO) for a replica fetch; a batch
// straddling maxOffset is held back. Batches come from one segment, as Kafka
// serves a fetch from one segment. from == LEO (or nothing below maxOffset)
// gives no bytes and no error; from outside [LogStartOffset, LEO] wraps
// ErrOffsetOutOfRange.
func (l *Log) Read(from int64, maxBytes int, maxOffset int64) ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, fmt.Errorf("storage: %s: %w", l.dir, ErrClosed)
	}
	leo := l.logEndOffset()
	if from < l.segs[0].base || from > leo {
		return nil, fmt.Errorf("storage: read %s: %w: offset %d, log has [%d, %d)", l.dir, ErrOffsetOutOfRange, from, l.segs[0].base, leo)
	}
	if maxOffset < 0 || maxOffset > leo {
		maxOffset = leo
	}
	if maxBytes < 0 {
		maxBytes = 0
	}
	if from >= maxOffset {
		return nil, nil
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > from }) - 1
	for ; i < len(l.segs); i++ {
		out, more, err := l.segs[i].read(from, maxBytes, maxOffset, l.opts.IndexIntervalBytes)
		if err != nil || !more {
			return out, err
		}
	}
	return nil, nil
}

// TruncateTo removes every batch containing an offset >= offset and returns
// the new LEO (Kafka's Log.truncateTo, used by a follower after
// OffsetForLeaderEpoch or, without epoch information, at its HW). Segments
// starting above offset are deleted and the last remaining one is cut at the
// first batch whose last offset is >= offset. If offset falls inside a
// batch, the whole batch goes and the new LEO is that batch's base offset
// (below offset): a partial batch cannot be kept without rewriting its CRC,
// and keeping it would keep records the caller asked to remove. The epoch
// cache drops every entry starting at or after the new LEO. offset >= LEO
// cuts no record but drops the epoch entries starting at the LEO; offset below the log start empties the log and restarts it
// at offset (Kafka's truncateFullyAndStartAt).
func (l *Log) TruncateTo(offset int64) (int64, error) {
	return l.TruncateToRecording(offset, nil)
}

// TruncateToRecording is TruncateTo that, when it will cut records, first
// calls record with the new LEO, before it changes anything on disk. A
// process killed while the cut is under way (it fsyncs the segment, the
// directory and two sidecar files) then has its record of the truncation
// already written, as Kafka's Log.truncateTo logs "Truncating to offset"
// before it cuts; recording afterwards would let such a kill leave a log
// shorter than its history says, with no truncation to explain it. record
// may be nil; it is called with l's lock held and must not use l.
func (l *Log) TruncateToRecording(offset int64, record func(newEnd int64)) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return 0, err
	}
	if offset >= l.logEndOffset() {
		// Log.truncateTo: no record is cut, but an epoch entry starting
		// at the LEO (an epoch led without an append) goes.
		if l.epochs.truncateFromEnd(l.logEndOffset()) {
			if err := l.epochs.flush(); err != nil {
				return 0, err
			}
		}
		return l.logEndOffset(), nil
	}
	if offset < l.segs[0].base {
		if record != nil {
			record(offset)
		}
		if err := l.truncateFullyLocked(offset); err != nil {
			return 0, err
		}
		return offset, nil
	}
	if record != nil {
		end, err := l.truncationEndLocked(offset)
		if err != nil {
			return 0, err
		}
		record(end)
	}
	// Delete whole segments from the newest down, so that a crash in the
	// middle leaves a prefix of the log (Open's contiguity check holds).
	for len(l.segs) > 1 && l.active().base > offset {
		seg := l.active()
		seg.f.Close()
		if err := os.Remove(seg.path); err != nil {
			l.failed = fmt.Errorf("remove %s: %w", seg.path, err)
			return 0, fmt.Errorf("storage: truncate %s: %w", l.dir, l.failed)
		}
		l.segs = l.segs[:len(l.segs)-1]
	}
	seg := l.active()
	var hbuf [headerPrefix]byte
	pos, err := seg.findBatch(offset, hbuf[:])
	if err != nil {
		return 0, err
	}
	newNext := seg.next
	if pos < seg.size {
		base, _, _, err := seg.readPrefix(pos, hbuf[:])
		if err != nil {
			return 0, err
		}
		newNext = base
	}
	if err := seg.f.Truncate(pos); err != nil {
		l.failed = fmt.Errorf("truncate %s at %d: %w", seg.path, pos, err)
		return 0, fmt.Errorf("storage: %w", l.failed)
	}
	if err := seg.f.Sync(); err != nil {
		l.failed = fmt.Errorf("fsync %s: %w", seg.path, err)
		return 0, fmt.Errorf("storage: %w", l.failed)
	}
	if err := checkpoint.SyncDir(l.dir); err != nil {
		return 0, err
	}
	seg.size, seg.next = pos, newNext
	seg.truncateIndex(pos)
	l.synced(seg)
	if err := l.saveDurable(); err != nil {
		return 0, err
	}
	if l.epochs.truncateFromEnd(newNext) {
		if err := l.epochs.flush(); err != nil {
			return 0, err
		}
	}
	return newNext, nil
}

// truncationEndLocked returns the LEO that cutting the log at offset
// (log start <= offset < LEO) leaves, without cutting: the base offset of
// the batch holding offset, in the last segment starting at or below it.
func (l *Log) truncationEndLocked(offset int64) (int64, error) {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	seg := l.segs[i]
	var hbuf [headerPrefix]byte
	pos, err := seg.findBatch(offset, hbuf[:])
	if err != nil {
		return 0, err
	}
	if pos == seg.size {
		return seg.next, nil
	}
	base, _, _, err := seg.readPrefix(pos, hbuf[:])
	return base, err
}

// TruncateFullyAndStartAt deletes every segment and the epoch cache's
// entries and restarts the log, empty, at offset (Kafka's
// truncateFullyAndStartAt, used when a follower is behind the leader's log
// start).
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	return l.truncateFullyLocked(offset)
}

func (l *Log) truncateFullyLocked(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("storage: truncate %s fully: negative offset %d", l.dir, offset)
	}
	l.epochs.entries = nil
	if err := l.epochs.flush(); err != nil {
		return err
	}
	for len(l.segs) > 0 {
		seg := l.active()
		seg.f.Close()
		if err := os.Remove(seg.path); err != nil {
			l.failed = fmt.Errorf("remove %s: %w", seg.path, err)
			return fmt.Errorf("storage: %w", l.failed)
		}
		l.segs = l.segs[:len(l.segs)-1]
	}
	seg, err := openSegmentFile(l.dir, offset, true)
	if err != nil {
		l.failed = err
		return err
	}
	l.segs = []*segment{seg}
	if err := checkpoint.SyncDir(l.dir); err != nil {
		return err
	}
	l.synced(seg)
	return l.saveDurable()
}

// AssignEpoch records that leaderEpoch starts at the current LEO, as Kafka's
// Partition.makeLeader does, so that OffsetForLeaderEpoch answers correctly
// for the previous epoch before the new leader has appended anything. It
// returns the cache's warning if the epoch is below the latest one.
func (l *Log) AssignEpoch(leaderEpoch int32) (warning string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return "", err
	}
	changed, w := l.epochs.assign(leaderEpoch, l.logEndOffset())
	if changed {
		if err := l.epochs.flush(); err != nil {
			return w, err
		}
	}
	return w, nil
}

// EndOffsetFor answers OffsetForLeaderEpoch for this replica (KIP-101 and
// KIP-279): for the latest cached epoch, (that epoch, LEO); for an older
// one, (largest cached epoch <= requested, start offset of the first cached
// epoch > requested); (UndefinedEpoch, UndefinedOffset) for a future or
// undefined epoch or an empty cache.
func (l *Log) EndOffsetFor(leaderEpoch int32) (epoch int32, endOffset int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.endOffsetFor(leaderEpoch, l.logEndOffset())
}

// LatestEpoch is the newest cached leader epoch, or UndefinedEpoch.
func (l *Log) LatestEpoch() int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if e, ok := l.epochs.latest(); ok {
		return e.Epoch
	}
	return UndefinedEpoch
}

// Epochs returns a copy of the leader-epoch cache.
func (l *Log) Epochs() []checkpoint.EpochEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.snapshot()
}

// Sync fsyncs the active segment (earlier ones were fsynced when rolled)
// and records its durable length.
func (l *Log) Sync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("storage: %s: %w", l.dir, ErrClosed)
	}
	if err := l.active().f.Sync(); err != nil {
		return fmt.Errorf("storage: fsync %s: %w", l.active().path, err)
	}
	l.synced(l.active())
	return l.saveDurable()
}

// Close fsyncs and closes the segment files. Further calls fail with
// ErrClosed; closing twice is a no-op.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	var err error
	if len(l.segs) > 0 {
		if serr := l.active().f.Sync(); serr != nil {
			err = fmt.Errorf("storage: fsync %s: %w", l.active().path, serr)
		} else {
			l.synced(l.active())
			err = l.saveDurable()
		}
	}
	if cerr := l.closeFiles(); err == nil {
		err = cerr
	}
	return err
}

func (l *Log) closeFiles() error {
	var first error
	for _, s := range l.segs {
		if err := s.f.Close(); err != nil && first == nil {
			first = fmt.Errorf("storage: close %s: %w", s.path, err)
		}
	}
	return first
}
