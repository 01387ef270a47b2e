package dataplane

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

// fakeISRStore stands in for ZooKeeper's partition state znode: every
// conditional write at the current version succeeds. With hold set, a
// write waits until hold is closed, as a slow ZooKeeper would make it.
type fakeISRStore struct {
	hold    chan struct{}
	entered chan struct{} // gets one value per write begun

	mu      sync.Mutex
	ver     int32
	writes  [][]int32 // the ISRs written, in order
	notes   []string  // the ISR change notifications created, in order
	noteErr error     // when set, creating a notification fails with it
	// duringCreate, when set, runs inside each notification create, before
	// its answer: what happens while ZooKeeper holds the request.
	duringCreate func()
}

func newFakeISRStore(hold bool) *fakeISRStore {
	s := &fakeISRStore{entered: make(chan struct{}, 16)}
	if hold {
		s.hold = make(chan struct{})
	}
	return s
}

func (s *fakeISRStore) set(ctx context.Context, path string, data []byte, ver int32) (*zk.Stat, error) {
	s.entered <- struct{}{}
	if s.hold != nil {
		select {
		case <-s.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	st, err := zkdata.DecodePartitionState("t", 0, data)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ver != s.ver {
		return nil, zk.ErrBadVersion
	}
	s.ver++
	s.writes = append(s.writes, st.ISR)
	return &zk.Stat{Version: s.ver}, nil
}

func (s *fakeISRStore) get(context.Context, string) ([]byte, *zk.Stat, error) {
	return nil, nil, zk.ErrNoNode
}

func (s *fakeISRStore) createSequential(_ context.Context, path string, data []byte) (string, error) {
	if s.duringCreate != nil {
		s.duringCreate()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.noteErr != nil {
		return "", s.noteErr
	}
	s.notes = append(s.notes, string(data))
	return fmt.Sprintf("%s%010d", path, len(s.notes)-1), nil
}

func (s *fakeISRStore) notifications() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.notes)
}

func (s *fakeISRStore) requestTimeout() time.Duration { return time.Second }

// sessionID and waitSession: the fake is always connected, in one session.
func (s *fakeISRStore) sessionID() int64 { return 1 }

func (s *fakeISRStore) waitSession(context.Context) error { return nil }

func (s *fakeISRStore) written() [][]int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.writes)
}

// Partition.maybeIncrementLeaderHW (2.6.3): the high watermark is the
// smallest log end offset among the replicas that are in the ISR or caught
// up within replica.lag.time.max.ms, so a follower about to join holds it
// back; one that stopped fetching lets it go after the lag time.
func TestHWCountsCaughtUpFollowers(t *testing.T) {
	tests := []struct {
		name    string
		idle    time.Duration // between the follower's fetch and the produce
		fetchAt int64         // the follower's fetch after the produce, -1: none
		wantHW  int64
	}{
		{"caught-up follower outside the ISR holds the HW", 0, -1, 0},
		{"it moves the HW when it fetches on", 0, 1, 1},
		{"a follower idle past the lag time no longer holds it", 300 * time.Millisecond, -1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newManager(t, t.TempDir(), nil, 1)
			m.cfg.LagTime = 200 * time.Millisecond
			lead(t, m, 0, 1) // replicas 1, 2, 3; ISR [1]; no ZooKeeper, so no expand
			if f := fetch(m, 2, 0, 0); f.ErrorCode != 0 {
				t.Fatalf("fetch: %d", f.ErrorCode)
			}
			time.Sleep(tt.idle)
			if r := produce(m, 0, 1, time.Second, batch("a")); r.ErrorCode != 0 {
				t.Fatalf("produce: %d", r.ErrorCode)
			}
			if tt.fetchAt >= 0 {
				fetch(m, 2, 0, tt.fetchAt)
			}
			p := m.get(history.TP("t", 0))
			p.mu.Lock()
			hw := p.hw
			p.mu.Unlock()
			if hw != tt.wantHW {
				t.Fatalf("HW %d, want %d", hw, tt.wantHW)
			}
		})
	}
}

// Partition.maybeExpandIsr (2.6.3) writes the new ISR to ZooKeeper holding
// leaderIsrUpdateLock for writing: no append and no HW move happens until
// ZooKeeper answers. Otherwise the HW passes what the joining follower has
// while the write is on its way, and ZooKeeper then names an ISR member
// that lacks committed records: elected, it loses them.
func TestISRExpandHoldsAppendsUntilZooKeeperAnswers(t *testing.T) {
	m := newManager(t, t.TempDir(), nil, 1)
	store := newFakeISRStore(true)
	m.testISRStore = store
	lead(t, m, 0, 1)
	fetched := make(chan struct{})
	go func() {
		defer close(fetched)
		fetch(m, 2, 0, 0) // at the leader's LEO: follower 2 joins
	}()
	<-store.entered
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		produce(m, 0, 1, time.Second, batch("a"))
	}()
	time.Sleep(200 * time.Millisecond) // the ZooKeeper write is slow
	close(store.hold)
	<-fetched
	<-produced
	p := m.get(history.TP("t", 0))
	eventually(t, "ISR [1 2] in ZooKeeper and at the leader", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return slices.Equal(p.isr, []int32{1, 2})
	})
	if w := store.written(); len(w) != 1 || !slices.Equal(w[0], []int32{1, 2}) {
		t.Fatalf("ISR writes %v, want [[1 2]]", w)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if f := p.followers[2]; p.hw > f.leo {
		t.Fatalf("HW %d passed ISR member 2's log end %d: ZooKeeper names a replica without committed records", p.hw, f.leo)
	}
}

// Partition.getOutOfSyncReplicas / isFollowerOutOfSync (2.6.3): a follower
// leaves the ISR only if its log end offset differs from the leader's AND it
// has not been caught up for replica.lag.time.max.ms; a caught-up follower
// with nothing to fetch stays however long it is quiet.
func TestISRShrinkSparesCaughtUpFollowers(t *testing.T) {
	tests := []struct {
		name       string
		appendN    int // records appended after the follower's last fetch
		wantShrunk bool
	}{
		{"caught up, idle past the lag time: kept", 0, false},
		{"behind, not caught up for the lag time: dropped", 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newManager(t, t.TempDir(), nil, 1)
			store := newFakeISRStore(false)
			m.testISRStore = store
			lead(t, m, 0, 1, 2)
			if f := fetch(m, 2, 0, 0); f.ErrorCode != 0 {
				t.Fatalf("fetch: %d", f.ErrorCode)
			}
			for range tt.appendN {
				produce(m, 0, 1, time.Second, batch("a"))
			}
			p := m.get(history.TP("t", 0))
			p.maybeShrinkISR(time.Now().Add(2 * m.cfg.LagTime))
			// The write may be made in the background: give it time.
			deadline := time.Now().Add(300 * time.Millisecond)
			for len(store.written()) == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			w := store.written()
			if shrunk := len(w) > 0; shrunk != tt.wantShrunk {
				t.Fatalf("ISR writes %v, want shrunk=%v", w, tt.wantShrunk)
			}
			if tt.wantShrunk && !slices.Equal(w[0], []int32{1}) {
				t.Fatalf("ISR written %v, want [1]", w[0])
			}
		})
	}
}
