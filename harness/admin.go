package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/workloads"
)

// controlledShutdownWait bounds a broker's controlled shutdown: past it the
// operator's script gives up waiting and kills the process, as
// kafka-server-stop.sh followed by a kill -9 would.
const controlledShutdownWait = 30 * time.Second

// newAdminWorkload is the control-plane workload of a run of cfg. Its
// broker stops and starts go through the run's nemesis: a start re-applies
// the network faults in force to the new process, and a broker the nemesis
// killed meanwhile is one the nemesis knows to start.
func newAdminWorkload(cfg RunConfig, c *cluster.Cluster, live *Live, open func(string) (*history.Writer, error)) (*workloads.Admin, error) {
	var ids []int
	for _, n := range c.Nodes() {
		ids = append(ids, n.ID)
	}
	stop := func(ctx context.Context, id int) error {
		t, err := live.Node(id)
		if err != nil {
			return err
		}
		// An operator stops a broker that is up: one the nemesis just
		// restarted may still show its previous process's registration
		// (an ephemeral znode outlives its process by the session
		// timeout), and a process stopped before it registered has no
		// broker epoch to send with its ControlledShutdown.
		if err := waitRegistered(ctx, live.RunDir, id, 10*time.Second); err != nil {
			return err
		}
		if err := t.Container.Signal(ctx, "SIGTERM"); err != nil {
			return fmt.Errorf("SIGTERM n%d: %w", id, err)
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), controlledShutdownWait)
		defer cancel()
		if err := t.Container.WaitExited(wctx); err != nil {
			// A shutdown held (by a fault, a failpoint) past the wait
			// ends the operator's way.
			if kerr := live.Nemesis.KillTarget(context.WithoutCancel(ctx), t); kerr != nil {
				return fmt.Errorf("n%d did not exit within %s of SIGTERM and could not be killed: %w", id, controlledShutdownWait, kerr)
			}
		}
		return nil
	}
	start := func(ctx context.Context, id int) error {
		t, err := live.Node(id)
		if err != nil {
			return err
		}
		return live.Nemesis.StartTarget(ctx, t)
	}
	return workloads.NewAdmin(workloads.AdminConfig{
		ZKServers: c.ZKConnect(), Topic: cfg.Topic, Partitions: cfg.Partitions, Brokers: ids,
		Seed: cfg.Seed, StopBroker: stop, StartBroker: start,
		// A broker a fault holds (a failpoint armed on it, a leader kept
		// down) is left alone: its restart would end the fault's window
		// (power KAFKA-7235 seed 4: the armed controller was shut down
		// while it held its LeaderAndIsr, which never went out).
		Held: func(id int) bool {
			t, err := live.Node(id)
			return err == nil && live.Nemesis.Holds(t)
		},
	}, open)
}

// waitRegistered waits until node id's event log shows its latest process
// registered (a broker_registered after its last node_start).
func waitRegistered(ctx context.Context, runDir string, id int, within time.Duration) error {
	p := filepath.Join(runDir, history.HistoryDir, fmt.Sprintf("n%d.jsonl", id))
	deadline := time.Now().Add(within)
	for {
		if f, err := os.Open(p); err == nil {
			evs, _, _ := history.Decode(f, p)
			f.Close()
			registered := false
			for i := range evs {
				switch evs[i].Kind {
				case history.KindNodeStart:
					registered = false
				case history.KindBrokerRegistered:
					registered = true
				}
			}
			if registered {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("n%d has not registered since its last start (waited %s)", id, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
