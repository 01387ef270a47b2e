package node

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/node/broker"
	"github.com/zkchaos/zkchaos/node/zkutil"
)

// The wait for another session's /brokers/ids/<id> stands for a supervisor
// restarting Kafka after each NodeExists exit, and every restart starts on
// a session of its own. So a session of ours that expires during start-up
// registration (the broker cut off from ZooKeeper past the session timeout)
// ends start-up only with --exit-on-registration-conflict, where Kafka's
// start-up exits on the SESSIONEXPIRED; otherwise registration starts again
// on the connection's next session. Before, the process exited: a
// coverage-guided power run (seed 1, every fix on, build 944380a) bounced
// broker 1 while its old znode stood, cut it from ZooKeeper during the
// wait, and the process ended for good, leaving the partitions whose ISR
// was [1] without a leader to the end.
func TestStartupRegistrationOutlivesAnExpiredSession(t *testing.T) {
	lost := fmt.Errorf("register /brokers/ids/1: %w", zkutil.ErrSessionLost)
	other := errors.New("register /brokers/ids/1: zk: not authenticated")
	tests := []struct {
		name      string
		exit      bool
		errs      []error // what each attempt returns; nil: registered
		wantErr   error
		wantCalls int
	}{
		{"expired twice, then registered", false, []error{lost, lost, nil}, nil, 3},
		{"expired, with --exit-on-registration-conflict", true, []error{lost, nil}, zkutil.ErrSessionLost, 1},
		{"a conflict with --exit-on-registration-conflict", true, []error{broker.ErrRegistrationConflict, nil}, broker.ErrRegistrationConflict, 1},
		{"another error", false, []error{other, nil}, other, 1},
		{"registered at once", false, []error{nil}, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			register := func() error {
				calls++
				if calls > len(tt.errs) {
					t.Fatalf("attempt %d after the last planned one", calls)
				}
				return tt.errs[calls-1]
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := registerAtStartup(ctx, tt.exit, time.Millisecond, register, func(string, ...any) {})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) || calls != tt.wantCalls {
				t.Fatalf("err %v after %d attempts, want %v after %d", err, calls, tt.wantErr, tt.wantCalls)
			}
		})
	}
}
