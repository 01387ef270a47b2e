package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/workloads"
)

// controlledShutdownWait bounds a broker's controlled shutdown: past it the
// operator's script gives up waiting and kills the process, as
// kafka-server-stop.sh followed by a kill -9 would.
const controlledShutdownWait = 30 * time.Second

// newAdminWorkload is the control-plane workload of a run of cfg. Its
// broker stops and starts go through the run's nemesis: faults leave the
// broker alone from the stop until the start returns, a start re-applies
// the network faults in force to the new process, a broker the nemesis
// killed meanwhile is one the nemesis knows to start, and one the
// workload leaves stopped the nemesis's Heal starts.
func newAdminWorkload(cfg RunConfig, c *cluster.Cluster, live *Live, open func(string) (*history.Writer, error)) (*workloads.Admin, error) {
	var ids []int
	for _, n := range c.Nodes() {
		ids = append(ids, n.ID)
	}
	reg := &nodeLogs{keep: registrationKinds}
	stop := func(ctx context.Context, id int) error {
		t, err := live.Node(id)
		if err != nil {
			return err
		}
		return operatorStop(ctx, live.Nemesis, t, func(ctx context.Context) error {
			// An operator stops a broker that is up: one the nemesis
			// just restarted may still show its previous process's
			// registration (an ephemeral znode outlives its process by
			// the session timeout), and a process stopped before it
			// registered has no broker epoch to send with its
			// ControlledShutdown.
			return waitRegistered(ctx, reg, live.RunDir, id, 10*time.Second)
		}, live.Note)
	}
	start := func(ctx context.Context, id int) error {
		t, err := live.Node(id)
		if err != nil {
			return err
		}
		return live.Nemesis.StartTarget(ctx, t)
	}
	return workloads.NewAdmin(workloads.AdminConfig{
		ZKServers: c.ZKConnect(), Topic: cfg.Topic, Partitions: cfg.Partitions, SpreadTopic: cfg.SpreadTopic, Brokers: ids,
		Seed: cfg.Seed, StopBroker: stop, StartBroker: start,
		// A broker a fault holds (a failpoint armed on it, a leader kept
		// down) is left alone: its restart would end the fault's window
		// (power KAFKA-7235 seed 4: the armed controller was shut down
		// while it held its LeaderAndIsr, which never went out).
		Held: func(id int) bool {
			t, err := live.Node(id)
			return err == nil && live.Nemesis.Holds(t)
		},
		HeldPartition: func(p int32) bool { return live.Nemesis.HoldsPartition(cfg.Topic, p) },
	}, open)
}

// operatorProcs are the nemesis's calls an operator's stop makes; a fake
// in tests.
type operatorProcs interface {
	Claim(t nemesis.Target) (release func())
	StopTarget(ctx context.Context, t nemesis.Target, wait time.Duration) (nemesis.Stopped, error)
}

// operatorStop stops t as an operator does, once ready says it is up. t
// is claimed from the first moment, so a fault does not pick it while the
// operator waits for it (the workload found it free just before), and
// from its SIGTERM the nemesis holds it until it is started again
// (StopTarget). note tells the person watching about a SIGTERM whose call
// failed, or a process killed when it did not exit.
func operatorStop(ctx context.Context, procs operatorProcs, t nemesis.Target, ready func(context.Context) error, note func(string, ...any)) error {
	defer procs.Claim(t)()
	if err := ready(ctx); err != nil {
		return err
	}
	how, err := procs.StopTarget(ctx, t, controlledShutdownWait)
	if how.SignalErr != nil {
		note("controlled shutdown of %s: the SIGTERM call failed (%v); sent again, as it may have landed", t.Name, how.SignalErr)
	}
	if how.Killed {
		note("controlled shutdown of %s: no exit within %s of SIGTERM; killed", t.Name, controlledShutdownWait)
	}
	return err
}

// registrationKinds: the node event kinds that say whether a node's latest
// process has registered.
func registrationKinds(k history.Kind) bool {
	return k == history.KindNodeStart || k == history.KindBrokerRegistered
}

// waitRegistered waits until node id's event log shows its latest process
// registered (a broker_registered after its last node_start). logs keeps
// registrationKinds, so each poll reads only what the node wrote since the
// last one.
func waitRegistered(ctx context.Context, logs *nodeLogs, runDir string, id int, within time.Duration) error {
	p := filepath.Join(runDir, history.HistoryDir, fmt.Sprintf("n%d.jsonl", id))
	deadline := time.Now().Add(within)
	for {
		// An unreadable log (not written yet) is asked again until the
		// deadline, as a log without the registration is.
		if evs, err := logs.events(id, p); err == nil && len(evs) > 0 && evs[len(evs)-1].Kind == history.KindBrokerRegistered {
			return nil
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
