package dataplane

import (
	"github.com/zkchaos/zkchaos/history"
)

// CreateLog implements broker.LogCreator: Partition.createLogIfNotExists
// alone, as ReplicaManager.makeFollowers calls it for a partition whose new
// leader is unavailable. The log is opened (created if absent) and the
// partition enters the in-memory map with its high watermark from the
// checkpoint, so the checkpoint task writes it (KAFKA-1647); its role,
// leader and leader epoch stay as they were.
func (m *Manager) CreateLog(tp history.TopicPartition) error {
	p, err := m.getOrCreate(tp)
	if err != nil {
		return err
	}
	m.enterMemory(p)
	return nil
}
