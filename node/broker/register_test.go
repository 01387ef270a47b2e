package broker

import (
	"context"
	"errors"
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
