package history

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// DurableLengthsFile is the sidecar file in each partition directory of a
// node's data directory that says how many bytes of each segment file were
// fsynced. The node program writes it after every fsync of a segment (and
// fsyncs it, written as a checkpoint file is), so it outlives a SIGKILL; the
// crash-lose-unflushed fault reads it while the node is down and cuts each
// segment to its durable length, dropping what only the page cache held. Its
// name and format are the contract between the two halves, so they live
// here, the one package both import.
//
// Format, like Kafka's checkpoint files: a version line (0), a count line,
// then one "<segment file name> <bytes>" line per segment. A segment file
// the sidecar does not list has no durable bytes: it was created after the
// last fsync the sidecar records.
const DurableLengthsFile = "durable-lengths"

// durableLengthsVersion is the format's version line.
const durableLengthsVersion = 0

// FormatDurableLengths renders lengths (segment file name → durable bytes)
// in the sidecar's format, names in order.
func FormatDurableLengths(lengths map[string]int64) []byte {
	names := make([]string, 0, len(lengths))
	for n := range lengths {
		names = append(names, n)
	}
	slices.Sort(names)
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", durableLengthsVersion, len(names))
	for _, n := range names {
		fmt.Fprintf(&b, "%s %d\n", n, lengths[n])
	}
	return b.Bytes()
}

// ParseDurableLengths reads a sidecar's content. It refuses an unknown
// version, a count that does not match the lines, a name that is not a
// plain file name, a repeated name and a negative or malformed length, so
// a damaged sidecar can never make the fault cut where no fsync was.
func ParseDurableLengths(data []byte) (map[string]int64, error) {
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) < 2 {
		return nil, fmt.Errorf("%s: %d lines, want a version and a count", DurableLengthsFile, len(lines))
	}
	if v, err := strconv.Atoi(lines[0]); err != nil || v != durableLengthsVersion {
		return nil, fmt.Errorf("%s: version %q, want %d", DurableLengthsFile, lines[0], durableLengthsVersion)
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n < 0 || n != len(lines)-2 {
		return nil, fmt.Errorf("%s: count %q does not match its %d entries", DurableLengthsFile, lines[1], len(lines)-2)
	}
	out := make(map[string]int64, n)
	for i, l := range lines[2:] {
		name, num, ok := strings.Cut(l, " ")
		if !ok || name == "" || strings.ContainsAny(name, "/\\ ") || name == "." || name == ".." {
			return nil, fmt.Errorf("%s: line %d: %q is not \"<file> <bytes>\"", DurableLengthsFile, i+3, l)
		}
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%s: line %d: length %q is not a byte count", DurableLengthsFile, i+3, num)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s: line %d: %s listed twice", DurableLengthsFile, i+3, name)
		}
		out[name] = v
	}
	return out, nil
}

// TruncationUnflushedLoss is the Reason of the truncation events the
// nemesis records for crash-lose-unflushed: one per partition whose
// unflushed suffix it dropped from a down broker's log, From the log end
// it cut from, To the first offset it dropped. The node's own event log
// cannot show that cut (it happened while no process ran), and the
// checkers that follow a replica's log need it: it is not a follower's
// decision and not start-up recovery.
const TruncationUnflushedLoss = "crash-lose-unflushed"
