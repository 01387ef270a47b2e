package dataplane

import (
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
)

// KIP-966's rule, which the query-leo election relies on: a leader alone in
// an ISR below min.insync.replicas does not expose what no follower has.
func TestHWHeldBelowMinISR(t *testing.T) {
	tests := []struct {
		name   string
		hold   bool
		wantHW int64
	}{
		{"Kafka's rule: HW follows the lone leader's LEO", false, 1},
		{"KIP-966: HW held below min.insync.replicas", true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newManager(t, t.TempDir(), nil, 2)
			m.cfg.HWNeedsMinISR = tt.hold
			lead(t, m, 0, 1, 2)
			// Appended, not acknowledged: follower 2 never fetches it.
			produce(m, 0, -1, 50*time.Millisecond, batch("unacked"))
			p := m.get(history.TP("t", 0))
			p.mu.Lock()
			// Shrunk: follower 2 fell behind, longer ago than the lag
			// time (else, caught up, it would still hold the HW).
			p.isr = []int32{1}
			p.followers[2].lastCaughtUp = time.Now().Add(-2 * m.cfg.LagTime)
			p.maybeIncrementHWLocked()
			hw := p.hw
			p.mu.Unlock()
			if hw != tt.wantHW {
				t.Fatalf("HW %d, want %d", hw, tt.wantHW)
			}
		})
	}
}
