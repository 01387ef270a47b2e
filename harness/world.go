package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/internal/zkcall"
	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/zklayout/zkio"
)

// world tells the nemesis who is who, from the cluster's containers and
// ZooKeeper's view of the roles. It reads ZooKeeper after Sync, so a fault
// aimed at "the controller" hits the controller ZooKeeper's leader knows.
type world struct {
	c    *cluster.Cluster
	conn *zk.Conn

	mu  sync.Mutex
	via map[int]*zk.Conn // sessions pinned to one server, for PartitionStateVia
}

var (
	_ nemesis.World      = (*world)(nil)
	_ faults.StateReader = (*world)(nil)
	_ faults.Resigner    = (*world)(nil)
)

func newWorld(c *cluster.Cluster) (*world, error) {
	conn, _, err := zk.Connect(c.ZKConnect(), 10*time.Second, zk.WithLogger(quietZK{}))
	if err != nil {
		return nil, fmt.Errorf("world: connect zookeeper: %w", err)
	}
	return &world{c: c, conn: conn}, nil
}

func (w *world) close() {
	w.conn.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.via {
		c.Close()
	}
}

// viaConn is a session on ZooKeeper server id alone, opened on first use
// and kept for the run.
func (w *world) viaConn(id int) (*zk.Conn, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.via[id]; c != nil {
		return c, nil
	}
	s := w.c.ZKServer(id)
	if s == nil {
		return nil, fmt.Errorf("no ZooKeeper server %d", id)
	}
	c, _, err := zk.Connect([]string{s.ClientAddr()}, 10*time.Second, zk.WithLogger(quietZK{}))
	if err != nil {
		return nil, fmt.Errorf("connect zk%d: %w", id, err)
	}
	if w.via == nil {
		w.via = map[int]*zk.Conn{}
	}
	w.via[id] = c
	return c, nil
}

// PartitionStateVia reads a partition's state znode through ZooKeeper
// server zk alone, without Sync: what that server has applied, with the
// zxid of the state's last change. Through the leader that is every
// committed write.
func (w *world) PartitionStateVia(ctx context.Context, zkID int, topic string, partition int32) (faults.PartitionState, error) {
	c, err := w.viaConn(zkID)
	if err != nil {
		return faults.PartitionState{}, err
	}
	st, stat, err := zkio.ReadPartitionState(bounded{ctx, c, false, 2 * time.Second}, topic, partition)
	if err != nil {
		return faults.PartitionState{}, fmt.Errorf("through zk%d: %w", zkID, err)
	}
	return faults.PartitionState{PartitionState: st, Mzxid: stat.Mzxid}, nil
}

// bounded is a zkio.Getter over conn whose every read is getWithin's.
type bounded struct {
	ctx    context.Context
	conn   *zk.Conn
	sync   bool
	within time.Duration
}

func (b bounded) Get(p string) ([]byte, *zk.Stat, error) {
	return getWithin(b.ctx, b.conn, p, b.sync, b.within)
}

// getWithin reads znode p through conn (after a Sync when sync is set, so
// the read sees every committed write) and gives up after within or when
// ctx ends: go-zookeeper's calls take no context, and a call on a session
// cut off by a fault would hold a nemesis step.
func getWithin(ctx context.Context, conn *zk.Conn, p string, sync bool, within time.Duration) ([]byte, *zk.Stat, error) {
	type got struct {
		b  []byte
		st *zk.Stat
	}
	r, err := zkcall.Do(ctx, within, func() (got, error) {
		if sync {
			if _, err := conn.Sync(p); err != nil {
				return got{}, err
			}
		}
		b, st, err := conn.Get(p)
		return got{b, st}, err
	})
	if err != nil {
		// Unwrapped: zklayout's readers name the znode.
		return nil, nil, err
	}
	return r.b, r.st, nil
}

func (w *world) Nodes() []nemesis.Target {
	var out []nemesis.Target
	for _, n := range w.c.Nodes() {
		out = append(out, nemesis.Target{Name: fmt.Sprintf("n%d", n.ID), Container: n.Container})
	}
	return out
}

func (w *world) ZKServers() []nemesis.Target {
	var out []nemesis.Target
	for _, s := range w.c.ZKServers() {
		out = append(out, nemesis.Target{Name: fmt.Sprintf("zk%d", s.ID), Container: s.Container})
	}
	return out
}

// synced reads after Sync, bounded in time: go-zookeeper has no per-call
// timeout and a partitioned session would otherwise block a fault forever.
func (w *world) synced(ctx context.Context) bounded {
	return bounded{ctx, w.conn, true, 5 * time.Second}
}

func (w *world) Controller(ctx context.Context) (int, error) {
	return zkio.ReadController(w.synced(ctx))
}

// ResignController deletes /controller while it names broker id (the
// failpoint fault's forced election; zkio.ResignController says how), with
// the read after a Sync and the whole bounded by 5 s.
func (w *world) ResignController(ctx context.Context, id int) error {
	_, err := zkcall.Do(ctx, 5*time.Second, func() (struct{}, error) {
		return struct{}{}, zkio.ResignController(syncedConn{w.conn}, id)
	})
	return err
}

// syncedConn reads after a Sync and deletes through conn.
type syncedConn struct{ *zk.Conn }

func (c syncedConn) Get(p string) ([]byte, *zk.Stat, error) {
	if _, err := c.Sync(p); err != nil {
		return nil, nil, err
	}
	return c.Conn.Get(p)
}

func (w *world) ZKLeader(ctx context.Context) (int, error) {
	return w.c.ZKLeaderNow(ctx)
}

func (w *world) PartitionLeader(ctx context.Context, topic string, partition int32) (int, error) {
	st, _, err := zkio.ReadPartitionState(w.synced(ctx), topic, partition)
	if err != nil {
		return 0, err
	}
	return st.Leader, nil
}

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}
