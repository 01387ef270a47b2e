package zkutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/history"
)

func TestOutcome(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, history.ZKOK},
		{zk.ErrBadVersion, history.ZKBadVersion},
		{fmt.Errorf("controller moved: %w", zk.ErrBadVersion), history.ZKBadVersion},
		{zk.ErrNoNode, history.ZKNoNode},
		{zk.ErrNodeExists, history.ZKNodeExists},
		{ErrTimeout, history.ZKConnectionLoss},
		{zk.ErrConnectionClosed, history.ZKConnectionLoss},
		{zk.ErrSessionExpired, history.ZKConnectionLoss},
		{errors.New("other"), history.ZKError},
	}
	for _, tt := range tests {
		if got := Outcome(tt.err); got != tt.want {
			t.Errorf("Outcome(%v) = %s, want %s", tt.err, got, tt.want)
		}
	}
}

func TestMultiFailure(t *testing.T) {
	i, err := MultiFailure([]zk.MultiResponse{{Error: zk.ErrBadVersion}, {Error: zk.ErrAPIError}}, zk.ErrBadVersion)
	if i != 0 || !errors.Is(err, zk.ErrBadVersion) {
		t.Fatalf("check failed: %d %v", i, err)
	}
	i, err = MultiFailure([]zk.MultiResponse{{}, {Error: zk.ErrNoNode}}, zk.ErrNoNode)
	if i != 1 || !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("op failed: %d %v", i, err)
	}
	if i, err = MultiFailure(nil, zk.ErrConnectionClosed); i != -1 || !errors.Is(err, zk.ErrConnectionClosed) {
		t.Fatalf("lost: %d %v", i, err)
	}
	if i, err = MultiFailure([]zk.MultiResponse{{}, {}}, nil); i != -1 || err != nil {
		t.Fatalf("ok: %d %v", i, err)
	}
}

// A resumed zombie controller's first read hits the socket its expired
// session left behind; go-zookeeper returns the raw write error. It must be
// retried like any connection loss, and a ZooKeeper verdict must not be.
func TestRetriable(t *testing.T) {
	brokenPipe := fmt.Errorf("children of /brokers/ids: %w", &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)})
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"connection closed", zk.ErrConnectionClosed, true},
		{"session expired", zk.ErrSessionExpired, true},
		{"broken pipe", brokenPipe, true},
		{"reset", syscall.ECONNRESET, true},
		{"eof", fmt.Errorf("read: %w", io.EOF), true},
		{"bad version", zk.ErrBadVersion, false},
		{"no node", zk.ErrNoNode, false},
		{"timeout", ErrTimeout, false},
		{"other", errors.New("other"), false},
	}
	for _, tt := range tests {
		if got := Retriable(tt.err); got != tt.want {
			t.Errorf("%s: Retriable(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

// Before the first session no round over the servers ends in the library's
// one-second wait (Next never reports a round's end); after it, the end of
// every round is reported again.
func TestStartProviderPausesOnlyBeforeTheFirstSession(t *testing.T) {
	tests := []struct {
		name      string
		connected bool
		want      int // rounds' ends reported over three rounds
	}{
		{"before the first session", false, 0},
		{"after it", true, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newStartProvider(time.Millisecond)
			if err := p.Init([]string{"127.0.0.1:2181", "127.0.0.2:2181"}); err != nil {
				t.Fatal(err)
			}
			if tt.connected {
				p.Next()
				p.Connected()
			}
			got := 0
			for range 3 * p.Len() {
				if _, retryStart := p.Next(); retryStart {
					got++
				}
			}
			if got != tt.want {
				t.Fatalf("rounds' ends reported: %d, want %d", got, tt.want)
			}
		})
	}
}

// fakeConn is a connection whose state and session a test script changes.
type fakeConn struct {
	mu    sync.Mutex
	state zk.State
	sid   int64
}

func (f *fakeConn) State() zk.State  { f.mu.Lock(); defer f.mu.Unlock(); return f.state }
func (f *fakeConn) SessionID() int64 { f.mu.Lock(); defer f.mu.Unlock(); return f.sid }
func (f *fakeConn) set(s zk.State, sid int64) {
	f.mu.Lock()
	f.state, f.sid = s, sid
	f.mu.Unlock()
}

// UntilConnected is retryRequestsUntilConnected: a connection loss is
// re-issued once the session is back, however long that takes; an expiry
// ends it (unless acrossSessions, the pre-2.0 ZkClient); a ZooKeeper verdict
// is returned as it is.
func TestUntilConnected(t *testing.T) {
	tests := []struct {
		name           string
		acrossSessions bool
		answers        []error // one per attempt; the connection drops after a loss
		newSession     bool    // the connection comes back with another session
		wantAttempts   int
		wantErr        error
	}{
		{"answered", false, []error{nil}, false, 1, nil},
		{"verdict", false, []error{zk.ErrBadVersion}, false, 1, zk.ErrBadVersion},
		{"loss, same session", false, []error{zk.ErrConnectionClosed, io.EOF, nil}, false, 3, nil},
		{"loss, session replaced", false, []error{zk.ErrConnectionClosed, nil}, true, 1, zk.ErrSessionExpired},
		{"expired", false, []error{zk.ErrSessionExpired, nil}, false, 1, zk.ErrSessionExpired},
		{"expired, across sessions", true, []error{zk.ErrSessionExpired, nil}, true, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &fakeConn{state: zk.StateHasSession, sid: 1}
			var wg sync.WaitGroup
			_, attempts, err := UntilConnected(context.Background(), c, tt.acrossSessions, func(c *fakeConn, attempt int) (int, error) {
				e := tt.answers[attempt-1]
				if e != nil {
					// The connection drops and comes back later than
					// any request timeout would have waited.
					c.set(zk.StateConnecting, 1)
					wg.Add(1)
					go func() {
						defer wg.Done()
						time.Sleep(100 * time.Millisecond)
						sid := int64(1)
						if tt.newSession {
							sid = 2
						}
						c.set(zk.StateHasSession, sid)
					}()
				}
				return attempt, e
			})
			wg.Wait()
			if attempts != tt.wantAttempts || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("attempts %d err %v, want %d %v", attempts, err, tt.wantAttempts, tt.wantErr)
			}
		})
	}
}

// A caller's context ends the wait for a session.
func TestUntilConnectedStopsWithContext(t *testing.T) {
	c := &fakeConn{state: zk.StateConnecting, sid: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, _, err := UntilConnected(ctx, c, false, func(*fakeConn, int) (int, error) { return 0, nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the context's", err)
	}
}

// ZooKeeperClient.waitUntilConnected throws ZooKeeperClientExpiredException
// once the client is expired, and the controller's expiry handler holds
// go-zookeeper in StateExpired until the controller has resigned: a request
// that waits there for a session, or for an answer that can only come on
// the next session, must end instead, or the controller's event loop and
// the handler wait for each other. Before, both waited.
func TestUntilConnectedEndsOnAnExpiredSession(t *testing.T) {
	tests := []struct {
		name           string
		acrossSessions bool
		start          zk.State // the connection's state when the request is made
		hang           bool     // the request is never answered (queued while disconnected)
		wantErr        error
	}{
		{"waiting for a session", false, zk.StateExpired, false, ErrSessionLost},
		{"waiting for an answer", false, zk.StateHasSession, true, ErrSessionLost},
		{"waiting for a session, across sessions", true, zk.StateExpired, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &fakeConn{state: tt.start, sid: 1}
			unblock := make(chan struct{})
			defer close(unblock)
			if !tt.hang {
				// The handler lets go of the connection later: a new session.
				go func() {
					time.Sleep(100 * time.Millisecond)
					c.set(zk.StateHasSession, 2)
				}()
			}
			done := make(chan error, 1)
			go func() {
				_, _, err := UntilConnected(context.Background(), c, tt.acrossSessions, func(c *fakeConn, _ int) (int, error) {
					if tt.hang {
						c.set(zk.StateExpired, 0)
						<-unblock
					}
					return 0, nil
				})
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
					t.Fatalf("err %v, want %v", err, tt.wantErr)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("still waiting 2s after the session expired")
			}
		})
	}
}

// A broker whose server takes the connection and never answers the
// handshake (stopped by a fault) gives up after session timeout / servers,
// as a Kafka broker's Java client does, and tries again, not after
// go-zookeeper's ten read timeouts.
func TestConnectGivesUpOnASilentServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for range 2 {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // never answered
		}
	}()
	// A 600 ms session over one server: 600 ms (go-zookeeper alone: 4 s).
	s, err := Connect([]string{ln.Addr().String()}, 600*time.Millisecond, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Conn.Close()
	start := time.Now()
	for i := range 2 {
		select {
		case c := <-accepted:
			defer c.Close()
		case <-time.After(3 * time.Second):
			t.Fatalf("connection attempt %d not made within %v of the first", i+1, time.Since(start).Round(time.Millisecond))
		}
	}
}
