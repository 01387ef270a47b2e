package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/zkchaos/zkchaos/node/storage/checkpoint"
)

// PartitionDir is the directory of a partition's log inside a log
// directory: <dataDir>/<topic>-<partition>, Kafka's naming.
func PartitionDir(dataDir, topic string, partition int32) string {
	return filepath.Join(dataDir, fmt.Sprintf("%s-%d", topic, partition))
}

// ParsePartitionDir splits a partition directory name into topic and
// partition at the last '-' (topic names may contain '-').
func ParsePartitionDir(name string) (checkpoint.TopicPartition, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return checkpoint.TopicPartition{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != name[i+1:] {
		return checkpoint.TopicPartition{}, false
	}
	return checkpoint.TopicPartition{Topic: name[:i], Partition: int32(p)}, true
}

// ListPartitions returns the partitions that have a log directory in
// dataDir (the logs a broker finds on disk at start-up, Kafka's
// LogManager.loadLogs), sorted. Other entries are ignored; a missing
// dataDir yields none.
func ListPartitions(dataDir string) ([]checkpoint.TopicPartition, error) {
	ents, err := os.ReadDir(dataDir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("storage: list %s: %w", dataDir, err)
	}
	var out []checkpoint.TopicPartition
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if tp, ok := ParsePartitionDir(e.Name()); ok {
			out = append(out, tp)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}
