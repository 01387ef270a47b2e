package harness

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/zkcall"
	"github.com/zkchaos/zkchaos/zklayout"
	"github.com/zkchaos/zkchaos/zklayout/zkio"
)

// failpointWorld is the run's world with what the composite faults
// (faults.Env) need on top: the nodes' admin ports (arm, disarm), their
// event logs (was the window reached, BADVERSION retries) and partition
// roles from ZooKeeper.
type failpointWorld struct {
	*world
	admin      *Live // only its admin-port helper is used
	runDir     string
	topic      string
	partitions int32
	spread     string // the spread topic, "" when the run has none
	session    time.Duration
	replicaLag time.Duration
	logs       nodeLogs
}

var (
	_ faults.Partitions        = (*failpointWorld)(nil)
	_ faults.Failpoints        = (*failpointWorld)(nil)
	_ faults.BadVersionCounter = (*failpointWorld)(nil)
	_ faults.Leaders           = (*failpointWorld)(nil)
)

// newFailpointWorld extends w for the failpoint fault of a run configured by
// cfg (its topic, partitions and session timeout; defaults applied).
func newFailpointWorld(w *world, c *cluster.Cluster, runDir string, cfg RunConfig) *failpointWorld {
	return &failpointWorld{world: w, admin: &Live{Cluster: c}, runDir: runDir,
		topic: cfg.Topic, partitions: cfg.Partitions, session: cfg.ZKSessionTimeout, replicaLag: replicaLagOf(cfg.NodeFlags),
		logs: nodeLogs{keep: nemesisKinds}, spread: spreadOf(cfg)}
}

// spreadOf is the spread topic cfg's set-up creates, "" for none.
func spreadOf(cfg RunConfig) string {
	if ls := cfg.layouts(); len(ls) > 1 {
		return ls[1].topic
	}
	return ""
}

// env is what the run's faults may use: everything this world offers.
func (f *failpointWorld) env() faults.Env {
	return faults.Env{Partitions: f, Failpoints: f, Session: f.session, ReplicaLag: f.replicaLag,
		Elector: f.world, StateVia: f.world, BadVersions: f, Resigner: f.world, Disks: f, Leaders: f, Topics: f}
}

// nemesisKinds: the node event kinds the nemesis's questions read (failpoint
// reached, BADVERSION retries).
func nemesisKinds(k history.Kind) bool {
	return k == history.KindFaultStart || k == history.KindZKWrite
}

// RunReplicaLag is the --replica-lag-time-max every run starts its nodes
// with, before the run's own --node-flag (which may override it). Kafka's
// default is 30 s; under it a follower cut off from its leader leaves the
// ISR only once it lacks records for that long (isFollowerOutOfSync), which
// a 60 s run of six openings cannot wait for: the lagging-leader and
// lagging-ZooKeeper openings need a shrink within their holds.
const RunReplicaLag = 5 * time.Second

// replicaLagOf reads --replica-lag-time-max from the nodes' flags (the last
// one wins, as with the flag package), or the run's default.
func replicaLagOf(flags []string) time.Duration {
	lag := RunReplicaLag
	for i, f := range flags {
		name, v, hasValue := strings.Cut(strings.TrimLeft(f, "-"), "=")
		if name != "replica-lag-time-max" || !strings.HasPrefix(f, "-") {
			continue
		}
		if !hasValue && i+1 < len(flags) {
			v = flags[i+1]
		}
		if d, err := time.ParseDuration(v); err == nil {
			lag = d
		}
	}
	return lag
}

func (f *failpointWorld) ArmFailpoint(ctx context.Context, node int, name, action string) error {
	return f.admin.ArmFailpoint(ctx, node, name, action)
}

// failpointsOnceFile is node/failpoint.OnceFile, in the data directory
// nodeArgs gives every node (--data-dir=/node/data, the node's Dir on the
// host).
const failpointsOnceFile = "data/failpoints.once"

// ArmAtStart writes the failpoint for the node's next start into its data
// directory, which the node reads and deletes when it starts.
func (f *failpointWorld) ArmAtStart(_ context.Context, node int, name, action string) error {
	n := f.admin.Cluster.Node(node)
	if n == nil {
		return fmt.Errorf("no node %d", node)
	}
	p := filepath.Join(n.Dir, failpointsOnceFile)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("arm %s on n%d at start: %w", name, node, err)
	}
	if err := os.WriteFile(p, []byte(name+"="+action+"\n"), 0o644); err != nil {
		return fmt.Errorf("arm %s on n%d at start: %w", name, node, err)
	}
	return nil
}

func (f *failpointWorld) ReleaseFailpoint(ctx context.Context, node int, name string) error {
	return f.admin.ReleaseFailpoint(ctx, node, name)
}

// PartitionLeaders reads the leader of every partition of every topic
// from its state znode (the topics and their partitions listed, each state
// read after a Sync), the whole bounded by 5 s. A topic whose partitions
// the controller has not created yet is left out.
func (f *failpointWorld) PartitionLeaders(ctx context.Context) (map[history.TopicPartition]int, error) {
	return zkcall.Do(ctx, 5*time.Second, func() (map[history.TopicPartition]int, error) {
		topics, _, err := f.conn.Children(zklayout.TopicsPath)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", zklayout.TopicsPath, err)
		}
		out := map[history.TopicPartition]int{}
		for _, t := range topics {
			parts, _, err := f.conn.Children(zklayout.TopicPath(t) + "/partitions")
			if err != nil {
				continue
			}
			for _, p := range parts {
				n, err := strconv.ParseInt(p, 10, 32)
				if err != nil {
					continue
				}
				if st, _, err := zkio.ReadPartitionState(syncedConn{f.conn}, t, int32(n)); err == nil {
					out[history.TP(t, int32(n))] = st.Leader
				}
			}
		}
		return out, nil
	})
}

// StateWritesBefore reads node's own event log: the partition states it
// wrote (outcome ok) at or after since and before its latest fault_start
// of failpoint name.
func (f *failpointWorld) StateWritesBefore(_ context.Context, node int, name string, since time.Time) ([]history.PartitionState, error) {
	evs, err := f.nodeEvents(node)
	if err != nil {
		return nil, fmt.Errorf("state writes of n%d before %s: %w", node, name, err)
	}
	hit := -1
	for i := len(evs) - 1; i >= 0 && evs[i].Time >= since.UnixNano(); i-- {
		if e := &evs[i]; e.Kind == history.KindFaultStart && e.Fault != nil && e.Fault.Failpoint == name {
			hit = i
			break
		}
	}
	var out []history.PartitionState
	for i := hit - 1; i >= 0 && evs[i].Time >= since.UnixNano(); i-- {
		if zw := evs[i].ZKWrite; evs[i].Kind == history.KindZKWrite && zw != nil && zw.State != nil && zw.Outcome == history.ZKOK {
			out = append(out, *zw.State)
		}
	}
	return out, nil
}

func (f *failpointWorld) DisarmFailpoint(ctx context.Context, node int, name string) error {
	return f.admin.admin(ctx, node, http.MethodDelete, "/failpoints/"+name, "")
}

// FailpointReached reads node's own event log only: its fault_start for the
// failpoint (written and synced before the action begins).
func (f *failpointWorld) FailpointReached(ctx context.Context, node int, name string, since time.Time) (bool, error) {
	evs, err := f.nodeEvents(node)
	if err != nil {
		return false, fmt.Errorf("failpoint %s on n%d: %w", name, node, err)
	}
	for i := len(evs) - 1; i >= 0; i-- {
		e := &evs[i]
		if e.Time < since.UnixNano() {
			break
		}
		if e.Kind == history.KindFaultStart && e.Fault != nil && e.Fault.Failpoint == name {
			return true, nil
		}
	}
	return false, nil
}

// nodeEvents reads node's own event log as it stands (its fault starts and
// ZooKeeper writes); a last line still being written is left out.
func (f *failpointWorld) nodeEvents(node int) ([]history.Event, error) {
	return f.logs.events(node, filepath.Join(f.runDir, history.HistoryDir, fmt.Sprintf("n%d.jsonl", node)))
}

// BadVersions counts node's conditional ZooKeeper writes that failed with
// BADVERSION at or after since, from its own event log.
func (f *failpointWorld) BadVersions(ctx context.Context, node int, since time.Time) (int, error) {
	evs, err := f.nodeEvents(node)
	if err != nil {
		return 0, fmt.Errorf("BADVERSION writes of n%d: %w", node, err)
	}
	n := 0
	for i := len(evs) - 1; i >= 0 && evs[i].Time >= since.UnixNano(); i-- {
		if e := &evs[i]; e.Kind == history.KindZKWrite && e.ZKWrite != nil && e.ZKWrite.Outcome == history.ZKBadVersion {
			n++
		}
	}
	return n, nil
}

func (f *failpointWorld) PartitionISR(ctx context.Context, topic string, partition int32) (int, []int, error) {
	st, _, err := zkio.ReadPartitionState(f.synced(ctx), topic, partition)
	if err != nil {
		return -1, nil, err
	}
	return st.Leader, st.ISR, nil
}

// PartitionReplicas reads topic's assignment znode, as the admin tools
// did.
func (f *failpointWorld) PartitionReplicas(ctx context.Context, topic string) (map[int32][]int, error) {
	return zkio.ReadAssignment(f.synced(ctx), topic)
}

func (f *failpointWorld) WorkloadTopic() (string, int32) { return f.topic, f.partitions }
func (f *failpointWorld) SessionTimeout() time.Duration  { return f.session }
func (f *failpointWorld) ReplicaLagTime() time.Duration  { return f.replicaLag }
