package faults

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// planner makes a schedule the way the harness does, one at a time or
// dense.
type planner func(seed uint64, total time.Duration, kinds []FaultKind) Schedule

var planners = []struct {
	name string
	plan planner
}{
	{"one at a time", func(seed uint64, total time.Duration, kinds []FaultKind) Schedule {
		return Plan(seed, full, total, 2*time.Second, 6*time.Second, kinds)
	}},
	{"dense", func(seed uint64, total time.Duration, kinds []FaultKind) Schedule {
		usable, _ := Usable(full, kinds)
		s, err := PlanDense(seed, total, 2*time.Second, 6*time.Second, usable, 1.5)
		if err != nil {
			panic(err)
		}
		return s
	}},
}

// Seeded schedules begin with the openings their kinds allow, in order,
// one at a time; nothing else starts until OpeningQuiet after the last.
func TestScheduleBeginsWithOpenings(t *testing.T) {
	tests := []struct {
		name  string
		total time.Duration
		kinds []FaultKind
		want  []string // the seed bugs of the openings, in order
	}{
		{"every kind", 2 * time.Minute, Catalogue, []string{"KAFKA-532", "KAFKA-532", "KAFKA-7235", "KAFKA-7235", "KAFKA-3861", "KAFKA-16667"}},
		// The nightly's and the power table's 60 s runs plan every opening.
		{"60 s run", time.Minute, Catalogue, []string{"KAFKA-532", "KAFKA-532", "KAFKA-7235", "KAFKA-7235", "KAFKA-3861", "KAFKA-16667"}},
		{"failpoint alone", 2 * time.Minute, []FaultKind{FailpointFault}, []string{"KAFKA-532", "KAFKA-532", "KAFKA-7235", "KAFKA-7235"}},
		{"lagging kinds", 2 * time.Minute, []FaultKind{KillLaggingLeader, FailoverOnLaggingZK, PauseNode}, []string{"KAFKA-3861", "KAFKA-16667"}},
		{"no targeted kind", 2 * time.Minute, []FaultKind{PauseController, BounceNode}, nil},
		// 20 s holds the two KAFKA-532 openings; the others do not fit.
		{"short run", 20 * time.Second, Catalogue, []string{"KAFKA-532", "KAFKA-532"}},
	}
	for _, p := range planners {
		for _, tt := range tests {
			t.Run(p.name+"/"+tt.name, func(t *testing.T) {
				s := p.plan(11, tt.total, tt.kinds)
				if again := p.plan(11, tt.total, tt.kinds); !slices.Equal(s.Steps, again.Steps) {
					t.Fatal("the same seed planned two schedules")
				}
				var got []string
				var end time.Duration
				for i, st := range s.Steps {
					if !st.Opening {
						if st.At < end+OpeningQuiet && len(got) > 0 {
							t.Errorf("step %d (%s) starts at %s, within %s of the openings' end %s", i, st.Kind, st.At, OpeningQuiet, end)
						}
						continue
					}
					if i != len(got) {
						t.Fatalf("opening at step %d after a non-opening step: %+v", i, s.Steps)
					}
					if st.At < end {
						t.Errorf("opening %d starts at %s before the previous ended at %s", i, st.At, end)
					}
					end = st.At + st.Hold
					if end > tt.total {
						t.Errorf("opening %d ends at %s after %s", i, end, tt.total)
					}
					got = append(got, OpeningBug(st))
				}
				if !slices.Equal(got, tt.want) {
					t.Fatalf("openings %q, want %q", got, tt.want)
				}
			})
		}
	}
	// Seeds differ in when the openings start and whom they pick.
	a, b := Plan(1, full, time.Minute, 2*time.Second, 6*time.Second, Catalogue), Plan(2, full, time.Minute, 2*time.Second, 6*time.Second, Catalogue)
	if a.Steps[0] == b.Steps[0] {
		t.Errorf("seeds 1 and 2 open with the same step %+v", a.Steps[0])
	}
}

// A schedule with openings, saved and loaded as --replay does, arms the
// same failpoints at the same offsets, openings first; guided mode leaves
// the openings as they were.
func TestOpeningsReplayAndSurviveGuidance(t *testing.T) {
	reached := map[string]int{"broker-after-register": 0}
	for _, w := range FailpointWindowNames() {
		if w != "broker-after-register" {
			reached[w] = 5
		}
	}
	for _, p := range planners {
		t.Run(p.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := p.plan(21, 3*time.Minute, []FaultKind{FailpointFault, PauseController})
				first, second := armsOf(t, s), armsOf(t, reloaded(t, s))
				if !slices.Equal(first, second) {
					t.Fatalf("replay armed\n%q\nthe run armed\n%q", second, first)
				}
				want := []string{"opening=true arm n1 controller-before-broker-change=1*pause", "opening=true arm n1 controller-before-send=2*sigstop", "opening=true arm n1 controller-after-zk-write=1*pause"}
				if len(first) < 3 || !strings.HasSuffix(first[0], want[0]) || !strings.HasSuffix(first[1], want[1]) {
					t.Fatalf("armed %q, want the openings %q first and a random failpoint after", first, want)
				}

				g := GuideFailpoints(s, reached)
				guided := 0
				for i, st := range g.Steps {
					switch {
					case st.Opening:
						if st != s.Steps[i] {
							t.Errorf("guidance moved opening %d: %+v → %+v", i, s.Steps[i], st)
						}
					case st.Kind == FailpointFault:
						guided++
						if w := PlanFailpoint(st.Pick).Window.Name; w != "broker-after-register" {
							t.Errorf("guided step %d arms %s, want broker-after-register", i, w)
						}
					}
				}
				if guided == 0 {
					t.Fatal("no failpoint step after the openings to guide")
				}
			})
		})
	}
}

// The failpoint fault looks its role up again while the role has no
// holder, bounces only a broker no other fault holds, and a disarm refused
// by a node another fault killed is no error.
func TestFailpointRoleRetryHeldAndDown(t *testing.T) {
	tests := []struct {
		name       string
		noCtlFor   int // Controller fails this many times first
		held, down []string
		wantBounce string
		wantDisarm bool
	}{
		{"controller found at once", 0, nil, nil, "bounce n2", true},
		{"controller failing over", 3, nil, nil, "bounce n2", true},
		{"the leader is held", 0, []string{"n2"}, nil, "bounce n3", true},
		{"every other broker held", 0, []string{"n2", "n3"}, nil, "bounce n2", true},
		// Its failpoint died with its process: nothing to disarm, no error.
		{"controller killed meanwhile", 0, nil, []string{"n1"}, "bounce n2", false},
	}
	pick := pickFor(t, "controller-before-broker-change", FPPause)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := &noCtlWorld{fpWorld: fpWorld{armed: map[string]time.Time{}, reach: true, held: map[string]bool{}, down: map[string]bool{}}, fails: tt.noCtlFor}
				for _, n := range tt.held {
					w.held[n] = true
				}
				for _, n := range tt.down {
					w.down[n] = true
				}
				injectThenHeal(t, fpFault(w, nil, fpProcs{&w.fpWorld}), pick)
				w.mu.Lock()
				calls, claims := slices.Clone(w.calls), w.claims
				w.mu.Unlock()
				if !slices.Contains(calls, tt.wantBounce) {
					t.Fatalf("calls %q, want %q", calls, tt.wantBounce)
				}
				disarmed := slices.Contains(calls, "disarm n1 controller-before-broker-change")
				if disarmed != tt.wantDisarm || slices.ContainsFunc(calls, func(c string) bool { return strings.HasSuffix(c, "refused") }) {
					t.Fatalf("calls %q: disarmed %v, want %v, and none refused", calls, disarmed, tt.wantDisarm)
				}
				if claims != 0 {
					t.Fatalf("%d claims on the armed node left after heal", claims)
				}
			})
		})
	}
}

// noCtlWorld: ZooKeeper names no controller for the first fails lookups.
type noCtlWorld struct {
	fpWorld
	fails int
}

func (w *noCtlWorld) Controller(ctx context.Context) (int, error) {
	w.mu.Lock()
	if w.fails > 0 {
		w.fails--
		w.mu.Unlock()
		return -1, errors.New("no /controller")
	}
	w.mu.Unlock()
	return w.fpWorld.Controller(ctx)
}

// The KAFKA-7235 opening reaches its window by either provocation, each
// on a share of the seeds, and both are named as that opening.
func TestOpeningProvocationsAlternate(t *testing.T) {
	seen := map[string]int{}
	for seed := uint64(1); seed <= 40; seed++ {
		s := Plan(seed, full, time.Minute, 2*time.Second, 6*time.Second, Catalogue)
		for _, st := range s.Steps {
			if !st.Opening || st.Kind != FailpointFault {
				continue
			}
			p := PlanFailpoint(st.Pick)
			if p.Window.Name != "controller-after-zk-write" {
				continue
			}
			if got := OpeningBug(st); got != "KAFKA-7235" {
				t.Fatalf("seed %d: opening %s (%s) named %q, want KAFKA-7235", seed, p.Window.Name, p.Provoke, got)
			}
			seen[p.Provoke]++
		}
	}
	for _, pv := range []string{ProvokeBounceTwo, ProvokeShutdownRestart} {
		if seen[pv] < 10 {
			t.Errorf("the KAFKA-7235 opening provoked by %s on %d of 40 seeds, want at least 10 (all: %v)", pv, seen[pv], seen)
		}
	}
}

// Without openings every step is drawn and the first starts within the
// first hold, dense or one at a time; with them the same seed begins with
// its openings.
func TestPlanWithoutOpenings(t *testing.T) {
	topo := Topology{Nodes: 3, ZKServers: 3}
	with := Plan(7, topo, time.Minute, 2*time.Second, 6*time.Second, Catalogue)
	without := PlanWith(7, topo, time.Minute, 2*time.Second, 6*time.Second, Catalogue, Options{NoOpenings: true})
	dense, err := PlanDenseWith(7, time.Minute, 2*time.Second, 6*time.Second, Catalogue, 1.5, Options{NoOpenings: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(with.Steps) == 0 || !with.Steps[0].Opening {
		t.Fatalf("the default plan does not begin with openings: %+v", with.Steps)
	}
	for name, s := range map[string]Schedule{"one at a time": without, "dense": dense} {
		if len(s.Steps) < 5 {
			t.Fatalf("%s: %d steps in a minute", name, len(s.Steps))
		}
		if s.Steps[0].At > 6*time.Second {
			t.Errorf("%s: first step at %s, not within the first hold", name, s.Steps[0].At)
		}
		for _, st := range s.Steps {
			if st.Opening {
				t.Fatalf("%s: an opening without openings: %+v", name, st)
			}
		}
	}
}
