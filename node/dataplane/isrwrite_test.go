package dataplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkchaos/zkchaos/history"
)

// outageStore is a ZooKeeper that loses the leader's connection at its first
// write: the write fails with lost (a connection loss, or SESSIONEXPIRED),
// the client is disconnected for down, then connected again in session
// after (1: the same session, 2: a new one, the old having expired). Every
// write once connected goes to the fake znode.
type outageStore struct {
	*fakeISRStore
	lost  error
	down  time.Duration
	after int64

	mu       sync.Mutex
	attempts int
	back     time.Time // zero until the first write
}

func (s *outageStore) set(ctx context.Context, path string, data []byte, ver int32) (*zk.Stat, error) {
	s.mu.Lock()
	s.attempts++
	first := s.back.IsZero()
	if first {
		s.back = time.Now().Add(s.down)
	}
	connected := !time.Now().Before(s.back)
	s.mu.Unlock()
	if first {
		return nil, s.lost
	}
	if !connected {
		// go-zookeeper fails a request sent while disconnected.
		return nil, zk.ErrConnectionClosed
	}
	return s.fakeISRStore.set(ctx, path, data, ver)
}

func (s *outageStore) sessionID() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.back.IsZero() || time.Now().Before(s.back) {
		return 1
	}
	return s.after
}

func (s *outageStore) waitSession(ctx context.Context) error {
	s.mu.Lock()
	back := s.back
	s.mu.Unlock()
	select {
	case <-time.After(time.Until(back)):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// requestTimeout is short, so that an outage of a few of them is quick.
func (s *outageStore) requestTimeout() time.Duration { return 20 * time.Millisecond }

func (s *outageStore) tries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts
}

// The leader's ISR write across a ZooKeeper outage, as Kafka 2.6.3's
// KafkaZkClient.conditionalUpdatePath → retryRequestsUntilConnected makes
// it: CONNECTIONLOSS waits for the connection however long it takes and
// sends the write again in the same session; SESSIONEXPIRED, or a session
// found expired on reconnecting (ZooKeeperClient.waitUntilConnected throws),
// fails it, and Partition.shrinkIsr then leaves the ISR in memory as it was
// (maybeUpdateIsrAndVersion is not reached).
func TestISRWriteAcrossAZooKeeperOutage(t *testing.T) {
	tests := []struct {
		name      string
		lost      error
		down      time.Duration
		after     int64
		wantISR   []int32
		wantTries int
	}{
		{"connection lost, same session after ten request timeouts: resent and written",
			fmt.Errorf("write: %w", syscall.EPIPE), 200 * time.Millisecond, 1, []int32{1}, 2},
		{"connection lost, the session expired meanwhile: not resent, ISR kept",
			zk.ErrConnectionClosed, 50 * time.Millisecond, 2, []int32{1, 2}, 1},
		{"SESSIONEXPIRED answered: not resent, ISR kept",
			zk.ErrSessionExpired, 0, 2, []int32{1, 2}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newManager(t, t.TempDir(), nil, 1)
			store := &outageStore{fakeISRStore: newFakeISRStore(false), lost: tt.lost, down: tt.down, after: tt.after}
			m.testISRStore = store
			lead(t, m, 0, 1, 2)
			produce(m, 0, 1, time.Second, batch("a")) // follower 2 is behind
			p := m.get(history.TP("t", 0))
			p.maybeShrinkISR(time.Now().Add(2 * m.cfg.LagTime))
			p.mu.Lock()
			isr := slices.Clone(p.isr)
			p.mu.Unlock()
			if !slices.Equal(isr, tt.wantISR) {
				t.Errorf("ISR in memory %v, want %v", isr, tt.wantISR)
			}
			if n := store.tries(); n != tt.wantTries {
				t.Errorf("%d attempts, want %d", n, tt.wantTries)
			}
		})
	}
}

// A write waiting for a connection that never comes back ends when the
// broker stops: Close does not wait on it forever.
func TestISRWriteEndsWhenTheBrokerStops(t *testing.T) {
	m := newManager(t, t.TempDir(), nil, 1)
	store := &outageStore{fakeISRStore: newFakeISRStore(false), lost: zk.ErrConnectionClosed, down: time.Hour, after: 1}
	m.testISRStore = store
	lead(t, m, 0, 1, 2)
	produce(m, 0, 1, time.Second, batch("a"))
	p := m.get(history.TP("t", 0))
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.maybeShrinkISR(time.Now().Add(2 * m.cfg.LagTime))
	}()
	time.Sleep(100 * time.Millisecond)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		m.Close()
	}()
	for _, c := range []struct {
		what string
		ch   chan struct{}
	}{{"the write", done}, {"Close", closed}} {
		select {
		case <-c.ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s still waiting 5s after Close", c.what)
		}
	}
	if n := store.tries(); n != 1 {
		t.Fatalf("%d attempts while disconnected, want 1", n)
	}
}

// setUntilConnected's answers without a partition: what is final and what
// is sent again.
func TestSetUntilConnected(t *testing.T) {
	tests := []struct {
		name    string
		answers []error // one per attempt; the last one is final
		want    error
	}{
		{"answered at once", []error{nil}, nil},
		{"connection lost twice, then badversion", []error{zk.ErrConnectionClosed, fmt.Errorf("write: %w", syscall.EPIPE), zk.ErrBadVersion}, zk.ErrBadVersion},
		{"no node: not retried", []error{zk.ErrNoNode}, zk.ErrNoNode},
		{"session expired: not retried", []error{zk.ErrSessionExpired}, zk.ErrSessionExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			_, err := setUntilConnected(t.Context(), newFakeISRStore(false), func() (*zk.Stat, error) {
				err := tt.answers[calls]
				calls++
				return &zk.Stat{}, err
			})
			if !errors.Is(err, tt.want) && !(err == nil && tt.want == nil) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
			if calls != len(tt.answers) {
				t.Fatalf("%d attempts, want %d", calls, len(tt.answers))
			}
		})
	}
}

// slowStore is a ZooKeeper whose server holds the leader's ISR write for
// hold before it applies and answers it, as a stalled server does: the
// request is applied when the server runs again, whether or not the
// caller still waits (go-zookeeper has no way to take a sent request back).
type slowStore struct {
	*fakeISRStore
	hold time.Duration
}

func (s *slowStore) set(ctx context.Context, path string, data []byte, ver int32) (*zk.Stat, error) {
	type answer struct {
		st  *zk.Stat
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		time.Sleep(s.hold)
		st, err := s.fakeISRStore.set(context.WithoutCancel(ctx), path, data, ver)
		ch <- answer{st, err}
	}()
	select {
	case a := <-ch:
		return a.st, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A leader's ISR write that ZooKeeper answers late is waited for, however
// late: Kafka 2.6.3's Partition.shrinkIsr holds leaderIsrUpdateLock through
// ZkPartitionStateStore's write, whose ZooKeeperClient.handleRequests has
// no deadline. A leader that gave the write up would go on computing its
// high watermark from the ISR its own write replaced in ZooKeeper, the one
// the controller elects from.
func TestSlowISRWriteIsWaitedFor(t *testing.T) {
	tests := []struct {
		name string
		hold time.Duration
	}{
		{"answered at once", 0},
		{"held a second, then answered", time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newManager(t, t.TempDir(), nil, 1)
			store := &slowStore{fakeISRStore: newFakeISRStore(false), hold: tt.hold}
			m.testISRStore = store
			lead(t, m, 0, 1, 2)
			produce(m, 0, 1, time.Second, batch("a")) // follower 2 is behind
			p := m.get(history.TP("t", 0))
			p.maybeShrinkISR(time.Now().Add(2 * m.cfg.LagTime))
			time.Sleep(tt.hold + 100*time.Millisecond) // a given-up write still lands
			store.mu.Lock()
			written := slices.Clone(store.writes)
			store.mu.Unlock()
			p.mu.Lock()
			isr := slices.Clone(p.isr)
			p.mu.Unlock()
			if len(written) != 1 || !slices.Equal(written[0], []int32{1}) {
				t.Fatalf("ZooKeeper got the ISR writes %v, want [[1]]", written)
			}
			if !slices.Equal(isr, []int32{1}) {
				t.Fatalf("ISR in memory %v while ZooKeeper holds [1]", isr)
			}
		})
	}
}
