package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/internal/ctxsleep"
	"github.com/zkchaos/zkchaos/internal/zkcall"
	"github.com/zkchaos/zkchaos/nemesis"
)

var _ nemesis.PreferredElector = (*world)(nil)

// preferredElectionPath is where an operator asks ZooKeeper-mode Kafka's
// controller for a preferred replica election; the controller deletes it
// once the election ran.
const preferredElectionPath = "/admin/preferred_replica_election"

// electWithin bounds one preferred election: waiting out an election
// already asked for (the admin workload's), the write, and the
// controller's deletion of the request.
const electWithin = 10 * time.Second

// ElectPreferred asks the controller to move the leadership of topic's
// partitions to their preferred replicas, as kafka-preferred-replica-election
// does, and returns once the controller deleted the request (it ran the
// election; a partition moves only if its preferred replica is alive and in
// its ISR).
func (w *world) ElectPreferred(ctx context.Context, topic string, partitions []int32) error {
	type tp struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
	}
	req := struct {
		Version    int  `json:"version"`
		Partitions []tp `json:"partitions"`
	}{Version: 1}
	for _, p := range partitions {
		req.Partitions = append(req.Partitions, tp{topic, p})
	}
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("preferred election of %s %v: %w", topic, partitions, err)
	}
	begin := time.Now()
	ctx, cancel := context.WithTimeout(ctx, electWithin)
	defer cancel()
	// Another request in the znode (the admin workload's) is waited out:
	// the controller takes one at a time.
	for {
		_, err := zkcall.Do(ctx, electWithin, func() (string, error) { return w.conn.Create(preferredElectionPath, body, 0, zk.WorldACL(zk.PermAll)) })
		if err == nil {
			break
		}
		if !errors.Is(err, zk.ErrNodeExists) || !ctxsleep.For(ctx, 100*time.Millisecond) {
			return fmt.Errorf("preferred election of %s %v: write %s: %w", topic, partitions, preferredElectionPath, err)
		}
	}
	for {
		there, err := zkcall.Do(ctx, electWithin, func() (bool, error) { ok, _, err := w.conn.Exists(preferredElectionPath); return ok, err })
		if err == nil && !there {
			return nil
		}
		if !ctxsleep.For(ctx, 100*time.Millisecond) {
			return fmt.Errorf("preferred election of %s %v: the controller had not taken %s %s after the write", topic, partitions, preferredElectionPath, time.Since(begin).Round(time.Millisecond))
		}
	}
}
