package zkdial

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"
)

// A server that takes the connection and never answers the handshake (a
// ZooKeeper server stopped by a fault) holds a client's session attempt
// for the bound, not for go-zookeeper's ten read timeouts (66 s here).
func TestBoundedHandshakeLeavesASilentServer(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	// Two silent servers: the client moves to the second as soon as the
	// first handshake gives up, without go-zookeeper's pause between
	// rounds over the whole list.
	var accepts atomic.Int32
	held := make(chan net.Conn, 16)
	var addrs []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, ln.Addr().String())
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				accepts.Add(1)
				held <- c // never answered
			}
		}()
		t.Cleanup(func() { ln.Close() })
	}
	t.Cleanup(func() {
		for len(held) > 0 {
			(<-held).Close()
		}
	})
	conn, _, err := zk.Connect(addrs, 10*time.Second, zk.WithLogger(quiet{}), zk.WithDialer(BoundedHandshake(300*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The first attempt gives up after 0.3 s and the client tries the
	// other server.
	deadline := time.Now().Add(10 * time.Second)
	for accepts.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the client is still waiting on the silent server after 10 s (%d connection attempts)", accepts.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}
