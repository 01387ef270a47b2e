// Package checkpoint reads and writes the two small text checkpoint files of
// a ZooKeeper-mode Kafka log directory, in Kafka's own format so a real
// broker's files and ours can be read by the same checker:
//
//   - replication-offset-checkpoint (one per log directory): the high
//     watermark of every partition the broker chose to write;
//   - leader-epoch-checkpoint (one per partition directory): the leader-epoch
//     cache, a list of (epoch, start offset) pairs.
//
// Both share Kafka's CheckpointFile layout: a version line ("0"), a count
// line, then exactly that many entry lines whose fields are separated by one
// space. Writes are atomic (temporary file, fsync, rename, fsync of the
// directory), as Kafka's CheckpointFile does, so a crash leaves either the old
// or the new file, never a torn one. Parsers never panic; every error names
// the file and the 1-based line.
//
// This package owns only the file formats. It decides nothing about which
// partitions belong in a file: callers (the broker) pass the exact contents.
// It must not import other node/ packages.
package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Version is the only checkpoint file version Kafka (2.x, 3.x ZK mode) writes
// and accepts for both files.
const Version = 0

// File names Kafka uses inside a log directory and a partition directory.
const (
	ReplicationOffsetFile = "replication-offset-checkpoint"
	LeaderEpochFile       = "leader-epoch-checkpoint"
)

// ErrMalformed is wrapped by every parse error, so callers can tell a corrupt
// file from an I/O failure with errors.Is.
var ErrMalformed = errors.New("malformed checkpoint file")

// ParseError locates a malformed line. Line is 1-based; 0 means the file as a
// whole (for example a missing final newline or too few lines).
type ParseError struct {
	File   string
	Line   int
	Reason string
}

func (e *ParseError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Reason)
	}
	return fmt.Sprintf("%s: line %d: %s", e.File, e.Line, e.Reason)
}

// Unwrap lets errors.Is(err, ErrMalformed) match.
func (e *ParseError) Unwrap() error { return ErrMalformed }

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// EpochEntry is one line of a leader-epoch-checkpoint: the first offset that
// a leader with this epoch wrote (or the log end offset when it became
// leader).
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// parseLines splits data into its entry lines after checking the version and
// count lines. fields is the number of space-separated fields per entry.
// The file must end with a newline (Kafka writes one after every line); a
// file cut short by a torn write without the atomic rename would fail here.
func parseLines(name string, data []byte, fields int) ([][]string, error) {
	perr := func(line int, format string, args ...any) error {
		return &ParseError{File: name, Line: line, Reason: fmt.Sprintf(format, args...)}
	}
	if len(data) == 0 {
		return nil, perr(0, "empty file (expected version line %d)", Version)
	}
	if data[len(data)-1] != '\n' {
		return nil, perr(0, "file does not end with a newline (truncated?)")
	}
	lines := strings.Split(string(data[:len(data)-1]), "\n")
	if len(lines) < 2 {
		return nil, perr(0, "too short: want a version line and a count line, have %d line(s)", len(lines))
	}
	v, err := strconv.Atoi(lines[0])
	if err != nil {
		return nil, perr(1, "version %q is not a number", lines[0])
	}
	if v != Version {
		return nil, perr(1, "unsupported version %d (want %d)", v, Version)
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n < 0 {
		return nil, perr(2, "entry count %q is not a non-negative number", lines[1])
	}
	if have := len(lines) - 2; have != n {
		return nil, perr(0, "count line says %d entries, file has %d entry line(s)", n, have)
	}
	out := make([][]string, n)
	for i := 0; i < n; i++ {
		f := strings.Split(lines[i+2], " ")
		if len(f) != fields {
			return nil, perr(i+3, "want %d space-separated fields, have %d in %q", fields, len(f), lines[i+2])
		}
		out[i] = f
	}
	return out, nil
}

// validTopic applies Kafka's topic name rule (Topic.validate: 1 to 249
// characters of [a-zA-Z0-9._-]), so names never contain the separators of
// the file format.
func validTopic(t string) error {
	if t == "" || len(t) > 249 {
		return fmt.Errorf("topic name %q: length must be 1 to 249", t)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic name %q: illegal character %q", t, c)
		}
	}
	return nil
}

// lineParser parses the numeric fields of one line of file name, keeping
// the first error.
type lineParser struct {
	name string
	line int
	err  error
}

// nonNegative parses field, the line's what, as a non-negative integer of
// bits bits (0 after an error).
func (lp *lineParser) nonNegative(what, field string, bits int) int64 {
	if lp.err != nil {
		return 0
	}
	v, err := strconv.ParseInt(field, 10, bits)
	if err != nil || v < 0 {
		lp.err = &ParseError{File: lp.name, Line: lp.line, Reason: fmt.Sprintf("%s %q is not a non-negative int%d", what, field, bits)}
		return 0
	}
	return v
}

// ParseReplicationOffsets parses the contents of a
// replication-offset-checkpoint file; name is used in errors only.
// Duplicate partitions, negative partitions or offsets, and non-numeric
// fields are errors (Kafka would silently keep the last duplicate; a chaos
// harness prefers to hear about it).
func ParseReplicationOffsets(name string, data []byte) (map[TopicPartition]int64, error) {
	lines, err := parseLines(name, data, 3)
	if err != nil {
		return nil, err
	}
	out := make(map[TopicPartition]int64, len(lines))
	for i, f := range lines {
		line := i + 3
		if err := validTopic(f[0]); err != nil {
			return nil, &ParseError{File: name, Line: line, Reason: err.Error()}
		}
		lp := lineParser{name: name, line: line}
		p, hw := lp.nonNegative("partition", f[1], 32), lp.nonNegative("offset", f[2], 64)
		if lp.err != nil {
			return nil, lp.err
		}
		tp := TopicPartition{Topic: f[0], Partition: int32(p)}
		if _, dup := out[tp]; dup {
			return nil, &ParseError{File: name, Line: line, Reason: fmt.Sprintf("duplicate entry for %s", tp)}
		}
		out[tp] = hw
	}
	return out, nil
}

// FormatReplicationOffsets renders hws in Kafka's format, entries sorted by
// topic then partition so equal maps give equal files. It rejects what the
// parser would reject (so a written file always reads back): topic names that
// are empty or contain whitespace, negative partitions or offsets.
func FormatReplicationOffsets(hws map[TopicPartition]int64) ([]byte, error) {
	tps := make([]TopicPartition, 0, len(hws))
	for tp, hw := range hws {
		if err := validTopic(tp.Topic); err != nil {
			return nil, fmt.Errorf("checkpoint: cannot write: %w", err)
		}
		if tp.Partition < 0 {
			return nil, fmt.Errorf("checkpoint: %s: negative partition", tp)
		}
		if hw < 0 {
			return nil, fmt.Errorf("checkpoint: %s: negative offset %d", tp, hw)
		}
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", Version, len(tps))
	for _, tp := range tps {
		fmt.Fprintf(&b, "%s %d %d\n", tp.Topic, tp.Partition, hws[tp])
	}
	return b.Bytes(), nil
}

// WriteReplicationOffsets atomically replaces dir/replication-offset-checkpoint
// with exactly the entries of hws — no more, no fewer. Whoever calls it decides
// what is hosted: with the KAFKA-7235 bug switch on, the broker passes only
// the partitions in its in-memory map and the others lose their high
// watermark, exactly as in Kafka; this package does not second-guess that.
func WriteReplicationOffsets(dir string, hws map[TopicPartition]int64) error {
	data, err := FormatReplicationOffsets(hws)
	if err != nil {
		return err
	}
	return WriteAtomic(filepath.Join(dir, ReplicationOffsetFile), data)
}

// ReadReplicationOffsets reads dir/replication-offset-checkpoint. A missing
// file is not an error: it yields an empty map and exists=false (Kafka treats
// a missing file as empty; a log with no checkpointed HW starts at its log
// start offset). A malformed file is an error naming file and line.
func ReadReplicationOffsets(dir string) (hws map[TopicPartition]int64, exists bool, err error) {
	path := filepath.Join(dir, ReplicationOffsetFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[TopicPartition]int64{}, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("checkpoint: read %s: %w", path, err)
	}
	hws, err = ParseReplicationOffsets(path, data)
	return hws, true, err
}

// ParseEpochs parses a leader-epoch-checkpoint. Beyond the format, it requires
// what the leader-epoch cache guarantees: epochs non-negative and strictly
// increasing, start offsets non-negative and non-decreasing. A file breaking
// that was not written by a correct cache, so it is reported, not repaired.
func ParseEpochs(name string, data []byte) ([]EpochEntry, error) {
	lines, err := parseLines(name, data, 2)
	if err != nil {
		return nil, err
	}
	out := make([]EpochEntry, 0, len(lines))
	for i, f := range lines {
		line := i + 3
		lp := lineParser{name: name, line: line}
		e, off := lp.nonNegative("epoch", f[0], 32), lp.nonNegative("start offset", f[1], 64)
		if lp.err != nil {
			return nil, lp.err
		}
		ent := EpochEntry{Epoch: int32(e), StartOffset: off}
		if n := len(out); n > 0 {
			prev := out[n-1]
			if ent.Epoch <= prev.Epoch {
				return nil, &ParseError{File: name, Line: line, Reason: fmt.Sprintf("epoch %d not greater than previous epoch %d", ent.Epoch, prev.Epoch)}
			}
			if ent.StartOffset < prev.StartOffset {
				return nil, &ParseError{File: name, Line: line, Reason: fmt.Sprintf("start offset %d below previous start offset %d", ent.StartOffset, prev.StartOffset)}
			}
		}
		out = append(out, ent)
	}
	return out, nil
}

// FormatEpochs renders entries in Kafka's leader-epoch-checkpoint format.
func FormatEpochs(entries []EpochEntry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", Version, len(entries))
	for _, e := range entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return b.Bytes()
}

// ReadEpochs reads a leader-epoch-checkpoint file; a missing file yields
// exists=false and no error.
func ReadEpochs(path string) (entries []EpochEntry, exists bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("checkpoint: read %s: %w", path, err)
	}
	entries, err = ParseEpochs(path, data)
	return entries, true, err
}

// WriteEpochs atomically replaces the leader-epoch-checkpoint at path.
func WriteEpochs(path string, entries []EpochEntry) error {
	return WriteAtomic(path, FormatEpochs(entries))
}

// WriteAtomic replaces path with data so that after a crash the file holds
// either its old or its new contents: write path.tmp, fsync it, rename it over
// path, fsync the directory (the rename is durable only once the directory
// entry is). Kafka's CheckpointFile.write does the same steps.
func WriteAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("checkpoint: create %s: %w", tmp, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("checkpoint: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("checkpoint: fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("checkpoint: close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("checkpoint: rename %s to %s: %w", tmp, path, err)
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir fsyncs a directory so that entries created, renamed or removed in it
// survive a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("checkpoint: open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("checkpoint: fsync dir %s: %w", dir, err)
	}
	return nil
}
