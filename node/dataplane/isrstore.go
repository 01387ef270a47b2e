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
	// set writes path only if its version is ver (one attempt). It has no
	// timeout of its own: Kafka's ZooKeeperClient.handleRequests waits for
	// the answer, which comes from ZooKeeper or from the client when the
	// connection is lost; only ctx cuts it short.
	set(ctx context.Context, path string, data []byte, ver int32) (*zk.Stat, error)
	// get reads path (one attempt), with no timeout of its own either.
	get(ctx context.Context, path string) ([]byte, *zk.Stat, error)
	// createSequential creates path with a sequence suffix; it returns
	// the name created.
	createSequential(ctx context.Context, path string, data []byte) (string, error)
	// sessionID is the client's current session (0 while it has none).
	sessionID() int64
	// waitSession waits until the client has a session again
	// (ZooKeeperClient.waitUntilConnected), without limit but ctx.
	waitSession(ctx context.Context) error
	// requestTimeout bounds one get or notification.
	requestTimeout() time.Duration
}

// zkISRStore is isrStore on the broker's ZooKeeper session.
type zkISRStore struct{ sess *zkutil.Session }

func (s zkISRStore) set(ctx context.Context, path string, data []byte, ver int32) (*zk.Stat, error) {
	return zkutil.Await(ctx, nil, func() (*zk.Stat, error) { return s.sess.Conn.Set(path, data, ver) })
}

func (s zkISRStore) get(ctx context.Context, path string) ([]byte, *zk.Stat, error) {
	type got struct {
		d  []byte
		st *zk.Stat
	}
	g, err := zkutil.Await(ctx, nil, func() (got, error) {
		d, st, err := s.sess.Conn.Get(path)
		return got{d, st}, err
	})
	return g.d, g.st, err
}

func (s zkISRStore) createSequential(ctx context.Context, path string, data []byte) (string, error) {
	return zkutil.Call(ctx, s.sess, func(c *zk.Conn) (string, error) {
		return c.Create(path, data, zk.FlagSequence, zk.WorldACL(zk.PermAll))
	})
}

func (s zkISRStore) sessionID() int64 { return s.sess.Conn.SessionID() }

func (s zkISRStore) waitSession(ctx context.Context) error { return s.sess.WaitSession(ctx) }

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
