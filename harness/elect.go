package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/internal/ctxsleep"
	"github.com/zkchaos/zkchaos/internal/zkcall"
	"github.com/zkchaos/zkchaos/zklayout"
	"github.com/zkchaos/zkchaos/zklayout/zkio"
)

var _ faults.PreferredElector = (*world)(nil)

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
	begin := time.Now()
	ctx, cancel := context.WithTimeout(ctx, electWithin)
	defer cancel()
	// Another request in the znode (the admin workload's) is waited out:
	// the controller takes one at a time.
	for {
		_, err := zkcall.Do(ctx, electWithin, func() (struct{}, error) {
			return struct{}{}, zkio.RequestPreferredElection(w.conn, topic, partitions)
		})
		if err == nil {
			break
		}
		if !errors.Is(err, zk.ErrNodeExists) || !ctxsleep.For(ctx, 100*time.Millisecond) {
			return fmt.Errorf("preferred election of %s %v: %w", topic, partitions, err)
		}
	}
	for {
		there, err := zkcall.Do(ctx, electWithin, func() (bool, error) { ok, _, err := w.conn.Exists(zklayout.PreferredElectionPath); return ok, err })
		if err == nil && !there {
			return nil
		}
		if !ctxsleep.For(ctx, 100*time.Millisecond) {
			return fmt.Errorf("preferred election of %s %v: the controller had not taken %s %s after the write", topic, partitions, zklayout.PreferredElectionPath, time.Since(begin).Round(time.Millisecond))
		}
	}
}
