package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/history"
)

// In-container paths of a node. The harness reads the same files on the host
// under Node.Dir.
const (
	NodeBinaryPath = "/usr/local/bin/node-program"
	NodeDir        = "/node" // bind mount of Node.Dir
	// NodeHistoryDir is RUN_DIR/history, shared by every node, so a node's
	// event log lands where history.ReadDir finds it and survives a crash.
	NodeHistoryDir = "/history"
	NodeKafkaPort  = 9092
	NodeAdminPort  = 9093
)

// NodeSpec says how to run one node-program container.
type NodeSpec struct {
	ID     int    // broker id, >= 1
	Binary string // host path of a static binary, mounted read-only
	// Args are passed to the binary. They may name NodeDir paths, e.g.
	// --data-dir=/node/data.
	Args []string
	Env  map[string]string
}

// Node is one node-program container.
type Node struct {
	ID        int
	IP        netip.Addr
	Dir       string // host directory mounted at NodeDir
	Container *docker.Container
}

// KafkaAddr is the node's Kafka listener as seen from the host.
func (n *Node) KafkaAddr() string { return fmt.Sprintf("%s:%d", n.IP, NodeKafkaPort) }

// AdminAddr is the node's admin HTTP listener as seen from the host.
func (n *Node) AdminAddr() string { return fmt.Sprintf("%s:%d", n.IP, NodeAdminPort) }

// NodeIP is where node id lives (.101, .102, ...), known before it starts so
// flags can name peers.
func (c *Cluster) NodeIP(id int) netip.Addr { return c.Network.Host(100 + id) }

// NodeFlags are the node program's flags that place node id in this
// cluster: its id, the ensemble, its listeners at its static address, its
// data directory and its event log in the shared history folder. Callers
// add the session timeout, bug switches and the rest.
func (c *Cluster) NodeFlags(id int) []string {
	return []string{
		fmt.Sprintf("--id=%d", id),
		"--zk=" + strings.Join(c.ZKConnect(), ","),
		fmt.Sprintf("--listen=0.0.0.0:%d", NodeKafkaPort),
		fmt.Sprintf("--advertised=%s:%d", c.NodeIP(id), NodeKafkaPort),
		fmt.Sprintf("--admin-listen=%s:%d", c.NodeIP(id), NodeAdminPort),
		"--data-dir=" + NodeDir + "/data",
		fmt.Sprintf("--event-log=%s/n%d.jsonl", NodeHistoryDir, id),
	}
}

// StartNode starts a node container. The program runs as PID 1 so signals
// sent to the container reach it.
func (c *Cluster) StartNode(ctx context.Context, s NodeSpec) (*Node, error) {
	if s.ID < 1 || s.ID > 150 {
		return nil, fmt.Errorf("cluster: node id %d out of range 1..150", s.ID)
	}
	if _, err := os.Stat(s.Binary); err != nil {
		return nil, fmt.Errorf("cluster: node binary: %w", err)
	}
	dir := filepath.Join(c.RunDir, "nodes", fmt.Sprintf("n%d", s.ID))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	hist := filepath.Join(c.RunDir, history.HistoryDir)
	if err := os.MkdirAll(hist, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	n := &Node{ID: s.ID, IP: c.NodeIP(s.ID), Dir: dir}
	ct, err := c.eng.StartContainer(ctx, docker.ContainerSpec{
		RunID: c.RunID, Role: "node", Name: c.containerName(fmt.Sprintf("n%d", s.ID)),
		Image: c.Image, Network: c.Network, IP: n.IP,
		Cmd:   append([]string{NodeBinaryPath}, s.Args...),
		Env:   s.Env,
		Binds: []string{s.Binary + ":" + NodeBinaryPath + ":ro", dir + ":" + NodeDir, hist + ":" + NodeHistoryDir},
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: node %d: %w", s.ID, err)
	}
	n.Container = ct
	c.mu.Lock()
	c.node[s.ID] = n
	c.mu.Unlock()
	return n, nil
}
