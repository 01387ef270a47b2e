package shrink

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/schedule"
)

func sched(kinds ...nemesis.FaultKind) nemesis.Schedule {
	s := nemesis.Schedule{Seed: 7, Total: time.Duration(len(kinds)*10+10) * time.Second}
	for i, k := range kinds {
		s.Steps = append(s.Steps, nemesis.Step{At: time.Duration(i*10+2) * time.Second, Kind: k, Hold: 8 * time.Second, Pick: i})
	}
	return s
}

// has reports whether s holds a step of kind held at least minHold.
func has(s nemesis.Schedule, kind nemesis.FaultKind, minHold time.Duration) bool {
	return slices.ContainsFunc(s.Steps, func(st nemesis.Step) bool { return st.Kind == kind && st.Hold >= minHold })
}

func kinds(s nemesis.Schedule) []nemesis.FaultKind {
	var out []nemesis.FaultKind
	for _, st := range s.Steps {
		out = append(out, st.Kind)
	}
	return out
}

func TestShrink(t *testing.T) {
	const (
		pc = schedule.PauseController
		bn = schedule.BounceNode
		iz = schedule.IsolateZKLeader
		pn = schedule.PauseNode
		sz = schedule.SlowZKFollowerLink
	)
	tests := []struct {
		name      string
		start     nemesis.Schedule
		fails     func(nemesis.Schedule) bool
		budget    int
		wantKinds []nemesis.FaultKind
		wantHold  time.Duration // of every kept step, when set
		wantTotal time.Duration
		maxRuns   int
		exhausted bool
	}{
		{
			name:  "one needed fault among eight, held at least 3s",
			start: sched(bn, iz, pn, pc, sz, bn, iz, pn),
			fails: func(s nemesis.Schedule) bool { return has(s, pc, 3*time.Second) },
			// 8s → 4s still fails, 2s does not.
			wantKinds: []nemesis.FaultKind{pc}, wantHold: 4 * time.Second,
			wantTotal: 32*time.Second + 4*time.Second + 5*time.Second, maxRuns: 20,
		},
		{
			name:      "two faults needed together",
			start:     sched(bn, iz, pn, pc, sz, bn),
			fails:     func(s nemesis.Schedule) bool { return has(s, pc, 8*time.Second) && has(s, sz, 8*time.Second) },
			wantKinds: []nemesis.FaultKind{pc, sz}, wantHold: 8 * time.Second, maxRuns: 20,
		},
		{
			name:      "fails without any fault",
			start:     sched(bn, iz, pn),
			fails:     func(nemesis.Schedule) bool { return true },
			wantKinds: nil, wantTotal: 5 * time.Second, maxRuns: 6,
		},
		{
			name:      "budget runs out",
			start:     sched(bn, iz, pn, pc, sz, bn, iz, pn),
			fails:     func(s nemesis.Schedule) bool { return has(s, pc, 3*time.Second) },
			budget:    2,
			maxRuns:   2,
			exhausted: true,
		},
		{
			name:      "a single fault that must stay whole",
			start:     sched(pc),
			fails:     func(s nemesis.Schedule) bool { return has(s, pc, 8*time.Second) && s.Total >= 20*time.Second },
			wantKinds: []nemesis.FaultKind{pc}, wantHold: 8 * time.Second, wantTotal: 20 * time.Second, maxRuns: 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.fails(tt.start) {
				t.Fatal("the starting schedule must fail")
			}
			var calls int
			run := func(_ context.Context, s nemesis.Schedule) (bool, error) {
				calls++
				if s.Seed != tt.start.Seed {
					t.Errorf("replay with seed %d, want the run's seed %d", s.Seed, tt.start.Seed)
				}
				return tt.fails(s), nil
			}
			res, err := Shrink(context.Background(), tt.start, run, Options{Budget: tt.budget})
			if err != nil {
				t.Fatal(err)
			}
			if res.Runs != calls || res.Runs > tt.maxRuns {
				t.Errorf("runs = %d (runner called %d times), want at most %d", res.Runs, calls, tt.maxRuns)
			}
			if res.Exhausted != tt.exhausted {
				t.Errorf("exhausted = %v, want %v", res.Exhausted, tt.exhausted)
			}
			if !tt.fails(res.Schedule) {
				t.Fatalf("the kept schedule %s does not fail", Describe(res.Schedule))
			}
			if tt.exhausted {
				return
			}
			if got := kinds(res.Schedule); !slices.Equal(got, tt.wantKinds) {
				t.Errorf("kept %v, want %v (%s)", got, tt.wantKinds, Describe(res.Schedule))
			}
			for _, st := range res.Schedule.Steps {
				if tt.wantHold != 0 && st.Hold != tt.wantHold {
					t.Errorf("step %s held %s, want %s", st.Kind, st.Hold, tt.wantHold)
				}
				orig := tt.start.Steps[st.Pick]
				if st.At != orig.At || st.Kind != orig.Kind {
					t.Errorf("step %+v moved from %+v", st, orig)
				}
			}
			if tt.wantTotal != 0 && res.Schedule.Total != tt.wantTotal {
				t.Errorf("total %s, want %s", res.Schedule.Total, tt.wantTotal)
			}
		})
	}
}

func TestShrinkStopsOnRunnerError(t *testing.T) {
	boom := errors.New("docker went away")
	_, err := Shrink(context.Background(), sched(schedule.PauseController, schedule.BounceNode),
		func(context.Context, nemesis.Schedule) (bool, error) { return false, boom }, Options{})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "replay 1") {
		t.Fatalf("err = %v, want the runner's error naming the replay", err)
	}
}

func TestShrinkNeverReplaysASchedule(t *testing.T) {
	seen := map[string]bool{}
	start := sched(schedule.BounceNode, schedule.PauseController, schedule.IsolateNode, schedule.PauseNode)
	seen[key(start)] = true
	_, err := Shrink(context.Background(), start, func(_ context.Context, s nemesis.Schedule) (bool, error) {
		if seen[key(s)] {
			t.Errorf("replayed %s twice", Describe(s))
		}
		seen[key(s)] = true
		return has(s, schedule.PauseController, time.Second), nil
	}, Options{Budget: 50})
	if err != nil {
		t.Fatal(err)
	}
}

// A failure that shows only on some replays (here every third one that has
// the pause): with Tries >= 3 each candidate with the pause fails within its
// tries, so the needed fault is found exactly.
func TestShrinkWithTriesOnAFlakyFailure(t *testing.T) {
	start := sched(schedule.BounceNode, schedule.PauseController, schedule.IsolateNode, schedule.PauseNode)
	for _, tt := range []struct {
		tries     int
		wantSteps int
	}{{3, 1}, {6, 1}} {
		n := 0
		// Fails on every third replay that holds the controller pause.
		run := func(_ context.Context, s nemesis.Schedule) (bool, error) {
			if !has(s, schedule.PauseController, time.Second) {
				return false, nil
			}
			n++
			return n%3 == 0, nil
		}
		res, err := Shrink(context.Background(), start, run, Options{Budget: 40, Tries: tt.tries})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Schedule.Steps) != tt.wantSteps || !has(res.Schedule, schedule.PauseController, time.Second) {
			t.Errorf("tries %d: kept %s, want %d steps with the pause", tt.tries, Describe(res.Schedule), tt.wantSteps)
		}
	}
}
