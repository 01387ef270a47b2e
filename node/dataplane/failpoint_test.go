package dataplane

import (
	"sync"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/failpoint"
)

// follower-after-truncation holds a follower between its truncation and its
// first fetch: while held, its log stays truncated (shorter than the
// leader's); once released it fetches and catches up.
func TestFollowerAfterTruncationHoldsBeforeFetch(t *testing.T) {
	m1 := newManagerID(t, 1, t.TempDir(), nil, 1)
	m2 := newManagerID(t, 2, t.TempDir(), nil, 1)
	fp := failpoint.New()
	var mu sync.Mutex
	var phases []string
	fp.OnHit = func(h failpoint.Hit) {
		mu.Lock()
		phases = append(phases, h.Name+":"+h.Phase)
		mu.Unlock()
	}
	if err := fp.Arm(failpoint.FollowerAfterTruncation, failpoint.Action{Kind: failpoint.ActPause, Count: 1}); err != nil {
		t.Fatal(err)
	}
	m2.cfg.Failpoints = fp
	addr, _ := serve(t, m1)

	// n2 diverged as leader of epoch 0; n1 leads epoch 3 with two records.
	diverge(t, m2, 3)
	lead(t, m1, 0, 1)
	if r := produce(m1, 0, -1, time.Second, batch("a", "b")); r.ErrorCode != 0 {
		t.Fatalf("produce on n1: %d", r.ErrorCode)
	}
	follow(t, m2, addr, 1)
	l2 := m2.get(history.TP("t", 0))
	eventually(t, "the failpoint reached", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(phases) == 1
	})
	if got := l2.log.LogEndOffset(); got != 0 {
		t.Fatalf("held follower's log end offset %d, want 0 (truncated, not fetched)", got)
	}
	time.Sleep(100 * time.Millisecond) // several fetch periods: nothing may be fetched while held
	if got := l2.log.LogEndOffset(); got != 0 {
		t.Fatalf("follower fetched while held: log end offset %d", got)
	}
	if err := fp.Release(failpoint.FollowerAfterTruncation); err != nil {
		t.Fatal(err)
	}
	eventually(t, "follower caught up after release", func() bool { return l2.log.LogEndOffset() == 2 && l2.log.LatestEpoch() == 3 })
	mu.Lock()
	defer mu.Unlock()
	if len(phases) != 2 || phases[1] != failpoint.FollowerAfterTruncation+":stop" {
		t.Fatalf("failpoint phases %v", phases)
	}
}
