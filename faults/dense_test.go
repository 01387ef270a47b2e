package faults

import (
	"slices"
	"testing"
	"time"
)

func TestPlanDenseDensityAndReplay(t *testing.T) {
	kinds := []FaultKind{PauseController, BounceNode, FailpointFault}
	tests := []struct {
		density    float64
		minOverlap int // the largest overlap must reach at least this
		maxOverlap int // and stay at most this
	}{
		// Poisson starts are bursty: even a sparse schedule sometimes holds
		// a few faults at once.
		{0.3, 1, 4},
		{1, 2, 7},
		{3, 4, 14},
	}
	for _, tt := range tests {
		s, err := PlanDense(9, 10*time.Minute, 2*time.Second, 6*time.Second, kinds, tt.density)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := PlanDense(9, 10*time.Minute, 2*time.Second, 6*time.Second, kinds, tt.density)
		if !slices.Equal(s.Steps, again.Steps) {
			t.Fatalf("density %.1f: the same seed planned two schedules", tt.density)
		}
		// Time-averaged number of faults in force ≈ density.
		var held time.Duration
		for i, st := range s.Steps {
			if st.At+st.Hold > s.Total || i > 0 && st.At < s.Steps[i-1].At {
				t.Fatalf("step %d %+v out of order or past the end", i, st)
			}
			held += st.Hold
		}
		mean := float64(held) / float64(s.Total)
		if mean < tt.density*0.6 || mean > tt.density*1.4 {
			t.Errorf("density %.1f: mean faults in force %.2f", tt.density, mean)
		}
		if o := s.MaxOverlap(); o < tt.minOverlap || o > tt.maxOverlap {
			t.Errorf("density %.1f: max overlap %d, want [%d, %d]", tt.density, o, tt.minOverlap, tt.maxOverlap)
		}
	}
	for _, bad := range []float64{0, -1, 9} {
		if _, err := PlanDense(1, time.Minute, time.Second, 2*time.Second, kinds, bad); err == nil {
			t.Errorf("density %.1f accepted", bad)
		}
	}
	if _, err := PlanDense(1, time.Minute, 2*time.Second, time.Second, kinds, 1); err == nil {
		t.Error("max hold below min hold accepted")
	}
}
