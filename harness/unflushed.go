package harness

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/history"
)

var _ faults.Disks = (*failpointWorld)(nil)

// nodeDataDir is the node's --data-dir on the host (nodeArgs gives every
// node /node/data, the node's Dir bind-mounted at /node).
const nodeDataDir = "data"

// LoseUnflushed implements faults.Disks for crash-lose-unflushed: with
// the node down, every segment file of every partition directory is cut to
// the length the node's durable-lengths sidecar records (an unlisted
// segment to nothing). A partition directory without a sidecar is left
// alone: nothing says what it fsynced. Files written whole and fsynced
// (the epoch cache, the checkpoints) keep what they hold.
func (f *failpointWorld) LoseUnflushed(ctx context.Context, node int) ([]faults.UnflushedCut, error) {
	n := f.admin.Cluster.Node(node)
	if n == nil {
		return nil, fmt.Errorf("lose unflushed: no node %d", node)
	}
	return loseUnflushed(filepath.Join(n.Dir, nodeDataDir))
}

// loseUnflushed cuts the partition directories of dataDir (see
// LoseUnflushed), in name order.
func loseUnflushed(dataDir string) ([]faults.UnflushedCut, error) {
	ents, err := os.ReadDir(dataDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lose unflushed: %w", err)
	}
	var cuts []faults.UnflushedCut
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		c, err := loseUnflushedIn(filepath.Join(dataDir, e.Name()))
		if err != nil {
			return cuts, err
		}
		cuts = append(cuts, c...)
	}
	return cuts, nil
}

// loseUnflushedIn cuts one partition directory's segments.
func loseUnflushedIn(dir string) ([]faults.UnflushedCut, error) {
	topic, partition, ok := parsePartitionDir(filepath.Base(dir))
	if !ok {
		return nil, nil
	}
	data, err := os.ReadFile(filepath.Join(dir, history.DurableLengthsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lose unflushed: %w", err)
	}
	durable, err := history.ParseDurableLengths(data)
	if err != nil {
		return nil, fmt.Errorf("lose unflushed in %s: %w", dir, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("lose unflushed: %w", err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".log") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var cuts []faults.UnflushedCut
	for _, name := range names {
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		if err != nil {
			return cuts, fmt.Errorf("lose unflushed: %w", err)
		}
		keep := durable[name]
		if keep >= st.Size() {
			continue
		}
		first, end, err := droppedOffsets(p, keep)
		if err != nil {
			return cuts, err
		}
		if err := os.Truncate(p, keep); err != nil {
			return cuts, fmt.Errorf("lose unflushed: %w", err)
		}
		cuts = append(cuts, faults.UnflushedCut{Topic: topic, Partition: partition, File: name, Durable: keep, Size: st.Size(),
			FirstOffset: first, EndOffset: end})
	}
	return cuts, nil
}

// droppedOffsets reads the record batches a cut at byte from drops, by
// the batch format's header (base offset at 0, batch length at 8, last
// offset delta at 23): the first offset dropped and the offset after the
// last. A torn batch at the end is not counted.
func droppedOffsets(path string, from int64) (first, end int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("lose unflushed: %w", err)
	}
	defer f.Close()
	first, end = -1, -1
	var hdr [27]byte
	for pos := from; ; {
		if _, err := f.ReadAt(hdr[:], pos); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return 0, 0, fmt.Errorf("lose unflushed: read %s at %d: %w", path, pos, err)
		}
		base := int64(binary.BigEndian.Uint64(hdr[0:]))
		length := int64(int32(binary.BigEndian.Uint32(hdr[8:])))
		if length <= 0 {
			break
		}
		if first < 0 {
			first = base
		}
		end = base + int64(int32(binary.BigEndian.Uint32(hdr[23:]))) + 1
		pos += 12 + length
	}
	return first, end, nil
}

// parsePartitionDir splits a partition directory's name, <topic>-<partition>
// (Kafka's naming; a topic may contain '-').
func parsePartitionDir(name string) (string, int32, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return "", 0, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != name[i+1:] {
		return "", 0, false
	}
	return name[:i], int32(p), true
}
