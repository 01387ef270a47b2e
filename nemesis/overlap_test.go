package nemesis

import (
	"context"
	"errors"
	"slices"
	"sync"
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

// RunOverlapping holds faults together: the second starts before the first
// is healed, each heal comes at its own step's end, and a failed step does
// not stop the others.
func TestRunOverlappingHoldsFaultsTogether(t *testing.T) {
	ms := time.Millisecond
	s := Schedule{Total: 200 * ms, Steps: []Step{
		{At: 0, Kind: PauseController, Hold: 120 * ms},
		{At: 40 * ms, Kind: BounceNode, Hold: 40 * ms},
		{At: 60 * ms, Kind: KillNode, Hold: 10 * ms},
	}}
	var mu sync.Mutex
	var got []string
	note := func(s string) { mu.Lock(); got = append(got, s); mu.Unlock() }
	err := RunOverlapping(t.Context(), s, func(_ context.Context, st Step) (func(context.Context) error, error) {
		if st.Kind == KillNode {
			return nil, errors.New("no target")
		}
		note("start " + string(st.Kind))
		return func(context.Context) error { note("heal " + string(st.Kind)); return nil }, nil
	})
	if err == nil {
		t.Fatal("the failed step's error was not returned")
	}
	want := []string{"start pause-controller", "start bounce-node", "heal bounce-node", "heal pause-controller"}
	if !slices.Equal(got, want) {
		t.Fatalf("order %q, want %q", got, want)
	}
}

// Cancelling the run heals every fault in force at once.
func TestRunOverlappingHealsOnCancel(t *testing.T) {
	s := Schedule{Total: time.Hour, Steps: []Step{{At: 0, Kind: PauseController, Hold: time.Hour}, {At: 0, Kind: PauseNode, Hold: time.Hour}}}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	var mu sync.Mutex
	healed := 0
	start := time.Now()
	RunOverlapping(ctx, s, func(context.Context, Step) (func(context.Context) error, error) {
		return func(context.Context) error { mu.Lock(); healed++; mu.Unlock(); return nil }, nil
	})
	if healed != 2 || time.Since(start) > 5*time.Second {
		t.Fatalf("healed %d after %s", healed, time.Since(start))
	}
}

// A partition stays held while any fault holding it is in force, and a
// release counts once however often it is called.
func TestHoldPartition(t *testing.T) {
	n := New(nil, nil)
	if n.HoldsPartition("chaos", 1) {
		t.Fatal("held before any fault")
	}
	r1 := n.holdPartition("chaos", 1)
	r2 := n.holdPartition("chaos", 1)
	if !n.HoldsPartition("chaos", 1) || n.HoldsPartition("chaos", 2) || n.HoldsPartition("other", 1) {
		t.Fatal("holds the wrong partitions")
	}
	r1()
	r1()
	if !n.HoldsPartition("chaos", 1) {
		t.Fatal("released by one of two faults, twice: no longer held")
	}
	r2()
	if n.HoldsPartition("chaos", 1) {
		t.Fatal("held after every release")
	}
}
