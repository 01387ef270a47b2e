package faults

import (
	"testing"
	"time"
)

// With every kind allowed, failpoint steps get FailpointShare of the draws
// in both schedule shapes, not one in len(Catalogue); without the failpoint
// fault, or with it alone, nothing changes.
func TestFailpointShare(t *testing.T) {
	topo := Topology{Nodes: 3, ZKServers: 3}
	count := func(s Schedule, k FaultKind) (n int) {
		for _, st := range s.Steps {
			if st.Kind == k {
				n++
			}
		}
		return n
	}
	dense, err := PlanDense(3, time.Hour, 2*time.Second, 6*time.Second, Catalogue, 1)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		s        Schedule
		min, max float64
	}{
		{"one at a time", Plan(3, topo, 2*time.Hour, 2*time.Second, 6*time.Second, Catalogue), 0.33, 0.47},
		{"dense", dense, 0.33, 0.47},
		{"failpoint alone", Plan(3, topo, time.Hour, 2*time.Second, 6*time.Second, []FaultKind{FailpointFault}), 1, 1},
		{"without failpoint", Plan(3, topo, time.Hour, 2*time.Second, 6*time.Second, []FaultKind{PauseNode, KillNode}), 0, 0},
	}
	for _, tt := range tests {
		share := float64(count(tt.s, FailpointFault)) / float64(len(tt.s.Steps))
		if share < tt.min || share > tt.max {
			t.Errorf("%s: failpoint share %.2f of %d steps, want [%.2f, %.2f]", tt.name, share, len(tt.s.Steps), tt.min, tt.max)
		}
	}
	// kill-lagging-leader has its own share beside the others.
	for _, tt := range tests[:2] {
		share := float64(count(tt.s, KillLaggingLeader)) / float64(len(tt.s.Steps))
		if share < LaggingLeaderShare-0.06 || share > LaggingLeaderShare+0.06 {
			t.Errorf("%s: kill-lagging-leader share %.2f of %d steps, want %.2f ± 0.06", tt.name, share, len(tt.s.Steps), LaggingLeaderShare)
		}
	}
	// The other kinds are still all drawn.
	s := Plan(3, topo, 2*time.Hour, 2*time.Second, 6*time.Second, Catalogue)
	for _, k := range Catalogue {
		if count(s, k) == 0 {
			t.Errorf("%s never drawn in two hours", k)
		}
	}
}
