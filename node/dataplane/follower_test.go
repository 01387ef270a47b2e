package dataplane

import (
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
)

// The leader credits a follower with the offset it fetched from (its log
// end offset), not with the leader's own: the high watermark is the
// smallest such offset in the ISR (Partition.maybeIncrementLeaderHW), and a
// follower outside the ISR rejoins only once it reaches the high watermark
// (Partition.maybeExpandIsr).
func TestLeaderTracksFollowerFetchOffsets(t *testing.T) {
	m := newManager(t, t.TempDir(), nil, 1)
	lead(t, m, 0, 1, 2) // broker 3 is a replica outside the ISR
	if r := produce(m, 0, 1, time.Second, batch("a", "b", "c")); r.ErrorCode != 0 {
		t.Fatalf("produce: %+v", r)
	}
	p := m.get(history.TP("t", 0))
	for _, c := range []struct {
		replica int32
		offset  int64
		wantLEO int64 // the leader's view of the replica's log end
		wantHW  int64
	}{
		{2, 0, 0, 0}, // the ISR member has nothing yet: nothing is committed
		{3, 1, 1, 0}, // outside the ISR: its fetch does not move the HW
		{2, 2, 2, 2},
		{3, 2, 2, 2},
		{2, 3, 3, 3},
	} {
		f := fetch(m, c.replica, 0, c.offset)
		if f.ErrorCode != 0 {
			t.Fatalf("replica %d fetch from %d: error %d", c.replica, c.offset, f.ErrorCode)
		}
		p.mu.Lock()
		leo, hw := p.followers[c.replica].leo, p.hw
		p.mu.Unlock()
		if leo != c.wantLEO || hw != c.wantHW {
			t.Errorf("replica %d fetched from %d: leader sees its log end at %d and HW %d, want %d and %d",
				c.replica, c.offset, leo, hw, c.wantLEO, c.wantHW)
		}
	}
}
