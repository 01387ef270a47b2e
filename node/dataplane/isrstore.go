package dataplane

import (
	"context"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/node/zkutil"
)

// isrStore is where a leader writes its ISR (Kafka's PartitionStateStore,
// ZkPartitionStateStore in production): the partition state znode and the
// ISR change notification. Tests put a stand-in here to hold a write open
// and watch what the leader does meanwhile.
type isrStore interface {
	// set writes path only if its version is ver (one attempt).
	set(ctx context.Context, path string, data []byte, ver int32) (*zk.Stat, error)
	get(ctx context.Context, path string) ([]byte, *zk.Stat, error)
	// createSequential creates path with a sequence suffix; it returns
	// the name created.
	createSequential(ctx context.Context, path string, data []byte) (string, error)
	// requestTimeout bounds one call; the write's retries are bounded in
	// multiples of it (isrWriteLimit).
	requestTimeout() time.Duration
}

// zkISRStore is isrStore on the broker's ZooKeeper session.
type zkISRStore struct{ sess *zkutil.Session }

func (s zkISRStore) set(ctx context.Context, path string, data []byte, ver int32) (*zk.Stat, error) {
	return zkutil.Call(ctx, s.sess, func(c *zk.Conn) (*zk.Stat, error) { return c.Set(path, data, ver) })
}

func (s zkISRStore) get(ctx context.Context, path string) ([]byte, *zk.Stat, error) {
	return getZNode(ctx, s.sess, path)
}

func (s zkISRStore) createSequential(ctx context.Context, path string, data []byte) (string, error) {
	return zkutil.Call(ctx, s.sess, func(c *zk.Conn) (string, error) {
		return c.Create(path, data, zk.FlagSequence, zk.WorldACL(zk.PermAll))
	})
}

func (s zkISRStore) requestTimeout() time.Duration { return s.sess.RequestTimeout }

// isrStore returns the store ISR writes go to, or nil while the broker has
// no ZooKeeper session (then no ISR change is made).
func (m *Manager) isrStore() isrStore {
	if m.testISRStore != nil {
		return m.testISRStore
	}
	if sess := m.session(); sess != nil {
		return zkISRStore{sess}
	}
	return nil
}
