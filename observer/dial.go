package observer

import (
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// boundedHandshake is a go-zookeeper dialer whose connections give the
// session handshake at most limit. go-zookeeper waits for a server's
// answer to its connect request for ten read timeouts (66 s at the
// watcher's 10 s session timeout): a server that took the connection and
// never answered (stopped or stalled by a fault) once kept the watcher
// blind for 67 s, while ZooKeeper's Java client gives up after the session
// timeout divided by the number of servers and tries the next.
func boundedHandshake(limit time.Duration) zk.Dialer {
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
