package nemesis

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkchaos/zkchaos/schedule"
)

// RunOverlapping holds faults together: the second starts before the first
// is healed, each heal comes at its own step's end, and a failed step does
// not stop the others.
func TestRunOverlappingHoldsFaultsTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := time.Millisecond
		s := Schedule{Total: 200 * ms, Steps: []Step{
			{At: 0, Kind: schedule.PauseController, Hold: 120 * ms},
			{At: 40 * ms, Kind: schedule.BounceNode, Hold: 40 * ms},
			{At: 60 * ms, Kind: schedule.KillNode, Hold: 10 * ms},
		}}
		var mu sync.Mutex
		var got []string
		note := func(s string) { mu.Lock(); got = append(got, s); mu.Unlock() }
		err := RunOverlapping(t.Context(), s, func(_ context.Context, st Step) (func(context.Context) error, error) {
			if st.Kind == schedule.KillNode {
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
	})
}

// Cancelling the run heals every fault in force at once.
func TestRunOverlappingHealsOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := Schedule{Total: time.Hour, Steps: []Step{{At: 0, Kind: schedule.PauseController, Hold: time.Hour}, {At: 0, Kind: schedule.PauseNode, Hold: time.Hour}}}
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
	})
}

// A partition stays held while any fault holding it is in force, and a
// release counts once however often it is called.
func TestHoldPartition(t *testing.T) {
	n := New(nil, nil)
	if n.HoldsPartition("chaos", 1) {
		t.Fatal("held before any fault")
	}
	r1 := n.HoldPartition("chaos", 1)
	r2 := n.HoldPartition("chaos", 1)
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
