// Package zkdial bounds a go-zookeeper session handshake as ZooKeeper's
// Java client does. Both sides use it: the node program's brokers (whose
// Kafka counterparts run the Java client) and the harness's watcher. It
// owns the dialer and nothing else; it imports no project package.
package zkdial

import (
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// BoundedHandshake is a go-zookeeper dialer whose connections give the
// session handshake at most limit. go-zookeeper waits for a server's
// answer to its connect request for ten read timeouts (20 s at a 3 s
// session, 66 s at 10 s): a server that took the connection and never
// answered (stopped or stalled by a fault) once kept the harness's watcher
// blind for 67 s, and kept a broker from its session long after Kafka's
// would have moved on, while ZooKeeper's Java client gives up after the
// session timeout divided by the number of servers (ClientCnxn's
// connectTimeout) and tries the next. Handshake gives that limit.
func BoundedHandshake(limit time.Duration) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return &handshakeConn{Conn: c, limit: limit}, nil
	}
}

// handshakeConn caps the first write and the first read deadline set on
// it, which are the handshake's (go-zookeeper's authenticate sets them
// before any other); later deadlines, the read timeouts of an established
// session, pass as they are.
type handshakeConn struct {
	net.Conn
	limit time.Duration

	mu          sync.Mutex
	wrote, read bool
}

func (c *handshakeConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	if !t.IsZero() && !c.wrote {
		c.wrote = true
		t = earliest(t, time.Now().Add(c.limit))
	}
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

func (c *handshakeConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	if !t.IsZero() && !c.read {
		c.read = true
		t = earliest(t, time.Now().Add(c.limit))
	}
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Handshake is the Java client's connect timeout for a session of
// sessionTimeout over servers servers: sessionTimeout / servers.
func Handshake(sessionTimeout time.Duration, servers int) time.Duration {
	return sessionTimeout / time.Duration(max(servers, 1))
}
