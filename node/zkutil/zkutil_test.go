package zkutil

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
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
