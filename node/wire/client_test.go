package wire

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// silentPeer accepts connections and reads whatever arrives but never
// answers, like a broker whose process hangs or whose replies are dropped.
// got receives one value per connection once its first bytes arrived.
func silentPeer(t *testing.T) (addr string, got <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{}, 100)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				var b [1]byte
				if _, err := c.Read(b[:]); err == nil {
					ch <- struct{}{}
					io.Copy(io.Discard, c)
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String(), ch
}

// Close must not wait for a request in flight to a peer that does not
// answer: the controller closes a departed broker's client from its event
// loop. Before, Request held the client's mutex across the whole round trip,
// so Close waited for the request's own deadline.
func TestCloseInterruptsRequestInFlight(t *testing.T) {
	addr, got := silentPeer(t)
	c := NewClient(addr, "test")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := c.Request(ctx, kmsg.NewPtrUpdateMetadataRequest())
		errc <- err
	}()
	select {
	case <-got: // the request is written; the client now waits for a response
	case <-time.After(5 * time.Second):
		t.Fatal("request never reached the peer")
	}
	closed := make(chan struct{})
	start := time.Now()
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(time.Second):
		t.Fatal("Close blocked behind the request in flight")
	}
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("request succeeded against a silent peer")
		}
	case <-time.After(time.Second):
		t.Fatal("request in flight did not fail after Close")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Close took %s to interrupt the request", d)
	}
}

// Requests that time out against a silent peer fail promptly and leave the
// client usable. Under -race this also covers the deadline callback, which
// once read the client's connection field after Request had cleared it (a
// data race, and a nil dereference when it lost).
func TestTimedOutRequestsFailPromptly(t *testing.T) {
	addr, _ := silentPeer(t)
	c := NewClient(addr, "test")
	defer c.Close()
	for i := 0; i < 30; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		start := time.Now()
		_, err := c.Request(ctx, kmsg.NewPtrUpdateMetadataRequest())
		cancel()
		if err == nil {
			t.Fatal("request succeeded against a silent peer")
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("request %d took %s to time out", i, d)
		}
	}
}
