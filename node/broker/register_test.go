package broker

import (
	"context"
	"errors"
	"github.com/go-zookeeper/zk"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/wire"
)

// A process that has not registered yet serves no control request (Kafka
// starts its request processors after registerBroker): the request waits,
// and is then judged against the new process's epoch, so one the controller
// queued for the previous process is refused. Random runs found the node
// accepting such a request while its own epoch was still unknown.
func TestControlRequestsWaitForRegistration(t *testing.T) {
	b := New(2, config.Bugs{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := b.AwaitRegistration(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("before registration: AwaitRegistration = %v, want it to wait until the deadline", err)
	}
	done := make(chan error, 1)
	go func() { done <- b.AwaitRegistration(context.Background()) }()
	b.SetEpoch(100)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after registration: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("AwaitRegistration still waiting after SetEpoch")
	}
	// A later registration (new session) must not panic on the closed channel.
	b.SetEpoch(120)
	if r := b.HandleLeaderAndIsr(wire.RequestHeader{}, lai(5, 50, 1, 2, 1)); r.ErrorCode != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("request meant for the previous process (epoch 50, own 120): error %d, want STALE_BROKER_EPOCH", r.ErrorCode)
	}
}

// regConn holds one znode, /brokers/ids/2, owned by owner (0: absent).
type regConn struct {
	mu      sync.Mutex
	session int64
	owner   int64
	czxid   int64
}

func (c *regConn) State() zk.State  { return zk.StateHasSession }
func (c *regConn) SessionID() int64 { return c.session }
func (c *regConn) Exists(string) (bool, *zk.Stat, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owner == 0 {
		return false, nil, nil
	}
	return true, &zk.Stat{EphemeralOwner: c.owner, Czxid: c.czxid}, nil
}
func (c *regConn) Create(p string, _ []byte, _ int32, _ []zk.ACL) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owner != 0 {
		return "", zk.ErrNodeExists
	}
	c.owner, c.czxid = c.session, c.czxid+1
	return p, nil
}

// A /brokers/ids/<id> still held by a previous process's session: Kafka's
// registerBroker throws NodeExists (KafkaZkClient.CheckedEphemeral, whose
// owner is not this process's session) and KafkaServer.startup exits; the
// node does the same with --exit-on-registration-conflict, and otherwise
// waits for the old session to go. A znode of our own session (a create
// re-issued after a connection loss) is ours either way.
func TestRegisterWithAnExistingZnode(t *testing.T) {
	tests := []struct {
		name      string
		owner     int64 // of the existing znode; 0: none
		exit      bool
		wantErr   error
		wantCzxid int64
	}{
		{"free", 0, true, nil, 11},
		{"our own session's", 0x10, true, nil, 10},
		{"another session's, exit", 0x9, true, ErrRegistrationConflict, -1},
		{"another session's, wait", 0x9, false, context.DeadlineExceeded, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &regConn{session: 0x10, owner: tt.owner, czxid: 10}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			czxid, err := register(ctx, c, 2, "h", 9092, tt.exit, func(string, ...any) {})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) || czxid != tt.wantCzxid {
				t.Fatalf("czxid %d err %v, want %d %v", czxid, err, tt.wantCzxid, tt.wantErr)
			}
		})
	}
}
