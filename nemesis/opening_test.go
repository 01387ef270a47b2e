package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkchaos/zkchaos/schedule"
)

// Tests of the runners run in a synctest bubble: the steps' offsets and
// holds pass on its fake clock.

// The runners hold each opening until its heal returns (its window over)
// before starting the next, and start the other steps only after the
// openings, moved by their overrun.
func TestRunnersWaitForOpenings(t *testing.T) {
	s := Schedule{Total: 400 * time.Millisecond, Density: 1, Steps: []Step{
		{At: 0, Kind: schedule.FailpointFault, Hold: time.Millisecond, Opening: true},
		{At: 2 * time.Millisecond, Kind: schedule.KillLaggingLeader, Hold: time.Millisecond, Opening: true},
		{At: 10 * time.Millisecond, Kind: schedule.PauseNode, Hold: time.Millisecond},
		{At: 11 * time.Millisecond, Kind: schedule.BounceNode, Hold: time.Millisecond},
	}}
	tests := []struct {
		name    string
		healErr error
		wantErr string
	}{
		{"heals", nil, ""},
		{"a heal fails", errors.New("resume n1: no such container"), "heal failpoint started at 0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var (
					mu     sync.Mutex
					events []string
				)
				logf := func(f string, a ...any) {
					mu.Lock()
					events = append(events, fmt.Sprintf(f, a...))
					mu.Unlock()
				}
				start := time.Now()
				err := RunOverlapping(t.Context(), s, func(_ context.Context, st Step) (func(context.Context) error, error) {
					logf("start %s", st.Kind)
					return func(context.Context) error {
						if st.Opening {
							// The window outlasts the planned hold.
							time.Sleep(30 * time.Millisecond)
						}
						logf("end %s", st.Kind)
						if st.Kind == schedule.FailpointFault {
							return tt.healErr
						}
						return nil
					}, nil
				})
				if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				mu.Lock()
				got := slices.Clone(events)
				mu.Unlock()
				want := []string{"start failpoint", "end failpoint", "start kill-lagging-leader", "end kill-lagging-leader"}
				if len(got) != 8 || !slices.Equal(got[:4], want) {
					t.Fatalf("events %q, want %q then the other steps", got, want)
				}
				if since := time.Since(start); since < 60*time.Millisecond {
					t.Fatalf("run returned after %s, before both openings' heals", since)
				}
			})
		})
	}
}

// An opening refused by a passing state is tried again (up to openingTries
// times, openingRetryAfter apart) and then held for its whole hold; one
// refused every time is given up after the last try, and the run goes on.
func TestOpeningTriedAgain(t *testing.T) {
	for _, tt := range []struct {
		name      string
		failures  int
		wantTries int
		wantHeld  bool
	}{
		{"second try", 1, 2, true},
		{"refused every time", 10, openingTries, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				steps := []Step{{At: 0, Kind: schedule.KillLaggingLeader, Hold: 50 * time.Millisecond, Opening: true}, {At: time.Second, Kind: schedule.PauseNode}}
				tries := 0
				var injected, healed time.Time
				rest, _, err := runOpenings(t.Context(), time.Now(), steps, func(context.Context, Step) (func(context.Context) error, error) {
					if tries++; tries <= tt.failures {
						return nil, errors.New("n2 is not running; its network namespace is gone")
					}
					injected = time.Now()
					return func(context.Context) error { healed = time.Now(); return nil }, nil
				})
				if tries != tt.wantTries || len(rest) != 1 || rest[0].Kind != schedule.PauseNode {
					t.Fatalf("%d tries, rest %v; want %d tries, the pause after", tries, rest, tt.wantTries)
				}
				if err == nil || !strings.Contains(err.Error(), "try 1 of 3") {
					t.Fatalf("err %v: want the refused tries named", err)
				}
				if tt.wantHeld && healed.Sub(injected) < 45*time.Millisecond {
					t.Fatalf("held %s after a late start, want the whole 50ms hold", healed.Sub(injected))
				}
			})
		})
	}
}
