package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/nodecover"
)

// buildNode builds the node program (cmd/kafkanode) from this checkout,
// instrumented for coverage when cover is set.
func buildNode(ctx context.Context, cover bool) (string, error) {
	if cover {
		return docker.BuildGoBinary(ctx, "./cmd/kafkanode", "kafkanode-cover", nodecover.BuildFlags()...)
	}
	return docker.BuildGoBinary(ctx, "./cmd/kafkanode", "kafkanode")
}

// nodeArgs are a node's flags: placement (which node, where; for a
// container, cluster.NodeFlags, whose event log goes straight into the
// run's history folder) and then the run's own.
func nodeArgs(placement []string, cfg RunConfig) []string {
	args := append(slices.Clone(placement),
		"--zk-session-timeout="+cfg.ZKSessionTimeout.String(),
		// Brokers start while the ensemble elects its leader; on a loaded
		// machine that can take as long as the set-up's own wait for it.
		"--zk-connect-timeout=60s",
		"--replica-lag-time-max="+RunReplicaLag.String(),
		// Kafka's offsets.topic.replication.factor is 3; a smaller cluster
		// could never create __consumer_offsets, so a group client through
		// `chaos up` with one or two brokers would never find a
		// coordinator.
		fmt.Sprintf("--offsets-topic-replication-factor=%d", max(1, min(3, cfg.Nodes))))
	if len(cfg.Bugs) > 0 {
		args = append(args, "--bugs="+strings.Join(cfg.Bugs, ","))
	}
	return append(args, cfg.NodeFlags...)
}

func brokerAddrs(c *cluster.Cluster) []string {
	var out []string
	for _, n := range c.Nodes() {
		out = append(out, n.KafkaAddr())
	}
	return out
}

// collectLogs saves every container's output under dir before the
// containers are removed.
func collectLogs(c *cluster.Cluster, dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	save := func(name string, ct *docker.Container) {
		if ct == nil {
			return
		}
		if logs, err := ct.Logs(ctx, 100000); err == nil {
			os.WriteFile(filepath.Join(dir, name+".log"), []byte(logs+"\n"), 0o644)
		}
	}
	// Side by side: the verdict waits for the teardown.
	var wg sync.WaitGroup
	for _, s := range c.ZKServers() {
		wg.Add(1)
		go func() { defer wg.Done(); save(fmt.Sprintf("zk%d", s.ID), s.Container) }()
	}
	for _, n := range c.Nodes() {
		wg.Add(1)
		go func() { defer wg.Done(); save(fmt.Sprintf("n%d", n.ID), n.Container) }()
	}
	wg.Wait()
}

// stopNodes kills every broker's process and waits until each container
// has stopped, so no event log grows after Run returns. The containers stay
// for their logs to be saved.
func stopNodes(c *cluster.Cluster) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes := c.Nodes()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		if n.Container == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A broker the nemesis left stopped has no process to signal.
			if err := n.Container.Signal(ctx, "SIGKILL"); err != nil && !docker.IsNotRunning(err) {
				errs[i] = err
				return
			}
			errs[i] = n.Container.WaitExited(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stop brokers before the check: %w", err)
	}
	return nil
}

// startNodes starts every broker's container side by side (each start is a
// round of engine calls, 0.3–1 s on a loaded machine); nodesAlive checks
// that none refused its flags.
func startNodes(ctx context.Context, c *cluster.Cluster, cfg RunConfig, bin string) error {
	errs := make([]error, cfg.Nodes)
	var wg sync.WaitGroup
	for id := 1; id <= cfg.Nodes; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			spec := cluster.NodeSpec{ID: id, Binary: bin, Args: nodeArgs(c.NodeFlags(id), cfg)}
			if cfg.Cover {
				if errs[id-1] = nodecover.Prepare(filepath.Join(c.RunDir, "nodes", fmt.Sprintf("n%d", id))); errs[id-1] != nil {
					return
				}
				spec.Env = nodecover.Env(cluster.NodeDir)
			}
			_, errs[id-1] = c.StartNode(ctx, spec)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// nodesAlive catches a node program that refused its flags (an unknown bug
// switch, a bad failpoint spec): it exits at once with status 2, and its own
// message says what was wrong.
func nodesAlive(ctx context.Context, c *cluster.Cluster) error {
	time.Sleep(300 * time.Millisecond)
	for _, n := range c.Nodes() {
		st, err := n.Container.State(ctx)
		if err != nil {
			return err
		}
		if !st.Running {
			logs, _ := n.Container.Logs(ctx, 10)
			return fmt.Errorf("node %d exited with status %d at start-up:\n%s", n.ID, st.ExitCode, logs)
		}
	}
	return nil
}

// runningBrokers returns the ids of the brokers whose containers run and
// are not paused, or nil when the engine did not answer for one of them.
func runningBrokers(ctx context.Context, c *cluster.Cluster) *history.RunningBrokers {
	r := &history.RunningBrokers{IDs: []int32{}}
	for _, n := range c.Nodes() {
		st, err := n.Container.State(ctx)
		if err != nil {
			return nil
		}
		if st.Running && !st.Paused {
			r.IDs = append(r.IDs, int32(n.ID))
		}
	}
	return r
}

func nodeLogTails(ctx context.Context, c *cluster.Cluster) string {
	var b strings.Builder
	for _, n := range c.Nodes() {
		if l, err := n.Container.Logs(ctx, 10); err == nil {
			fmt.Fprintf(&b, "\n--- last log lines of n%d:\n%s", n.ID, l)
		}
	}
	return b.String()
}
