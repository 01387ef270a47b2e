package dataplane

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkchaos/zkchaos/node/zkutil"
)

// A leader's ISR write goes on across connection losses until ZooKeeper
// answers, as KafkaZkClient.conditionalUpdatePath does through
// retryRequestUntilConnected: a leader paused past its session makes the
// write in its new session and meets BADVERSION there, instead of giving it
// up at the first broken connection.
func TestISRWriteRetriesUntilZooKeeperAnswers(t *testing.T) {
	tests := []struct {
		name    string
		answers []error // one per attempt; the last one is final
		want    error
	}{
		{"answered at once", []error{nil}, nil},
		{"connection lost, then badversion in a new session", []error{fmt.Errorf("write: %w", syscall.EPIPE), zk.ErrSessionExpired, zk.ErrBadVersion}, zk.ErrBadVersion},
		{"timed out while disconnected, then ok", []error{zkutil.ErrTimeout, nil}, nil},
		{"no node: not retried", []error{zk.ErrNoNode, nil}, zk.ErrNoNode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			_, err := setUntilConnected(t.Context(), func() (*zk.Stat, error) {
				err := tt.answers[calls]
				calls++
				return &zk.Stat{}, err
			})
			if !errors.Is(err, tt.want) && !(err == nil && tt.want == nil) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
			wantCalls := len(tt.answers)
			if errors.Is(tt.want, zk.ErrNoNode) {
				wantCalls = 1
			}
			if calls != wantCalls {
				t.Fatalf("%d attempts, want %d", calls, wantCalls)
			}
		})
	}
	// The write is given up when its time is up, however the connection fares.
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := setUntilConnected(ctx, func() (*zk.Stat, error) { return nil, zk.ErrConnectionClosed }); !errors.Is(err, zk.ErrConnectionClosed) {
		t.Fatalf("err %v after the deadline, want the last connection loss", err)
	}
}
