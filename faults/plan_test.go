package faults

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/schedule"
)

func TestPlanIsSeededAndBounded(t *testing.T) {
	tests := []struct {
		name            string
		seed            uint64
		total, min, max time.Duration
		kinds           []FaultKind
		wantSteps       bool
	}{
		{"normal", 1, 60 * time.Second, 2 * time.Second, 6 * time.Second, Catalogue, true},
		{"one kind", 7, 30 * time.Second, time.Second, 3 * time.Second, []FaultKind{PauseController}, true},
		{"too short for any fault", 3, time.Second, 2 * time.Second, 4 * time.Second, Catalogue, false},
		{"no kinds", 3, time.Minute, time.Second, 2 * time.Second, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Plan(tt.seed, full, tt.total, tt.min, tt.max, tt.kinds)
			b := Plan(tt.seed, full, tt.total, tt.min, tt.max, tt.kinds)
			if !reflect.DeepEqual(a, b) {
				t.Fatal("same seed gave different schedules")
			}
			if (len(a.Steps) > 0) != tt.wantSteps {
				t.Fatalf("got %d steps, want steps=%v", len(a.Steps), tt.wantSteps)
			}
			var end time.Duration
			for i, st := range a.Steps {
				if st.At < end {
					t.Errorf("step %d starts at %s before the previous ended at %s", i, st.At, end)
				}
				if !st.Opening && (st.Hold < tt.min || st.Hold > tt.max) {
					t.Errorf("step %d holds %s outside [%s,%s]", i, st.Hold, tt.min, tt.max)
				}
				end = st.At + st.Hold
				if end > tt.total {
					t.Errorf("step %d ends at %s after total %s", i, end, tt.total)
				}
			}
		})
	}
	if reflect.DeepEqual(Plan(1, full, time.Minute, time.Second, 5*time.Second, Catalogue), Plan(2, full, time.Minute, time.Second, 5*time.Second, Catalogue)) {
		t.Error("different seeds gave the same schedule")
	}
}

func TestParseKinds(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr string
	}{
		{"all", len(Catalogue), ""},
		{"", len(Catalogue), ""},
		{"pause-controller, bounce-node", 2, ""},
		{"pause-controller,nope", 0, `unknown fault "nope"`},
	}
	for _, tt := range tests {
		got, err := ParseKinds(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: err %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || len(got) != tt.want {
			t.Errorf("%q: got %d kinds, err %v; want %d", tt.in, len(got), err, tt.want)
		}
	}
}

func TestScheduleRoundTripAndBadFiles(t *testing.T) {
	dir := t.TempDir()
	s := Plan(42, full, time.Minute, time.Second, 4*time.Second, Catalogue)
	p := filepath.Join(dir, "schedule.json")
	if err := s.Save(p); err != nil {
		t.Fatal(err)
	}
	got, err := LoadSchedule(p)
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip: %v, equal=%v", err, reflect.DeepEqual(got, s))
	}
}

// The catalogue (one Fault per kind, in order) and the names schedule.json
// may hold are two lists; a kind added to one only would plan steps that
// no stored schedule loads back, or load steps no fault runs.
func TestCatalogueIsScheduleKinds(t *testing.T) {
	if !reflect.DeepEqual(Catalogue, schedule.Kinds) {
		t.Fatalf("faults catalogue %v, schedule.Kinds %v", Catalogue, schedule.Kinds)
	}
}

// full is a topology every fault applies to.
var full = Topology{Nodes: 3, ZKServers: 3}

func TestFaultAvailability(t *testing.T) {
	tests := []struct {
		kind FaultKind
		topo Topology
		want bool
	}{
		{PauseController, Topology{Nodes: 1, ZKServers: 1}, true},
		{PauseController, Topology{Nodes: 0, ZKServers: 3}, false},
		{PartitionHalves, Topology{Nodes: 1, ZKServers: 3}, false},
		{PartitionHalves, Topology{Nodes: 2, ZKServers: 1}, true},
		{IsolateZKLeader, Topology{Nodes: 3, ZKServers: 1}, false},
		{IsolateZKLeader, full, true},
		{PauseZKFollower, Topology{Nodes: 3, ZKServers: 1}, false},
		{SlowZKFollowerLink, Topology{Nodes: 3, ZKServers: 1}, false},
		{SlowZKFollowerLink, full, true},
		{KillLaggingLeader, Topology{Nodes: 1, ZKServers: 3}, false},
		{KillLaggingLeader, Topology{Nodes: 2, ZKServers: 1}, true},
		{CrashLoseUnflushed, Topology{Nodes: 0, ZKServers: 3}, false},
		{CrashLoseUnflushed, Topology{Nodes: 1, ZKServers: 1}, true},
		{DeleteRecreateTopic, Topology{Nodes: 2, ZKServers: 3}, false},
		{DeleteRecreateTopic, Topology{Nodes: 3, ZKServers: 1}, true},
		{StallZKSessionServer, Topology{Nodes: 0, ZKServers: 3}, false},
		{StallZKSessionServer, Topology{Nodes: 1, ZKServers: 1}, true},
	}
	for _, tt := range tests {
		f, ok := Lookup(tt.kind)
		if !ok {
			t.Fatalf("%s not in the catalogue", tt.kind)
		}
		err := f.Available(tt.topo)
		if (err == nil) != tt.want {
			t.Errorf("%s on %+v: available=%v (%v), want %v", tt.kind, tt.topo, err == nil, err, tt.want)
		}
		if err != nil && !strings.Contains(err.Error(), string(tt.kind)) {
			t.Errorf("%s: error %q does not name the fault", tt.kind, err)
		}
	}
	for _, k := range Catalogue {
		f, _ := Lookup(k)
		if f.Name() != k || f.Doc() == "" || f.Available(full) != nil {
			t.Errorf("%s: name %q, doc %q, available on %+v: %v", k, f.Name(), f.Doc(), full, f.Available(full))
		}
	}
}

// A fault the topology cannot take is never planned, whatever the seed, and
// the schedule says why it was left out.
func TestPlanPicksOnlyAvailableFaults(t *testing.T) {
	topos := []Topology{{Nodes: 1, ZKServers: 1}, {Nodes: 3, ZKServers: 1}, {Nodes: 1, ZKServers: 3}, {Nodes: 0, ZKServers: 3}}
	for _, topo := range topos {
		for seed := uint64(0); seed < 50; seed++ {
			s := Plan(seed, topo, time.Minute, time.Second, 2*time.Second, Catalogue)
			for i, st := range s.Steps {
				f, _ := Lookup(st.Kind)
				if err := f.Available(topo); err != nil {
					t.Fatalf("%+v seed %d: step %d is %s, which is unavailable: %v", topo, seed, i, st.Kind, err)
				}
			}
			if len(s.Skipped) == 0 {
				t.Fatalf("%+v seed %d: nothing skipped", topo, seed)
			}
		}
	}
	if s := Plan(1, Topology{Nodes: 3, ZKServers: 1}, time.Minute, time.Second, 2*time.Second, []FaultKind{IsolateZKLeader}); len(s.Steps) != 0 || len(s.Skipped) != 1 {
		t.Errorf("only an unavailable kind: %d steps, skipped %q", len(s.Steps), s.Skipped)
	}
	// With every kind available the draw is the one a run had before faults
	// were values, so stored schedules and seeds keep their meaning.
	a := Plan(9, full, time.Minute, time.Second, 3*time.Second, Catalogue)
	if len(a.Skipped) != 0 {
		t.Errorf("full topology skipped %q", a.Skipped)
	}
}

// A replayed step whose fault the running cluster cannot take fails before
// touching anything, with the reason.
func TestApplyRefusesUnavailableFault(t *testing.T) {
	file := filepath.Join(t.TempDir(), "nemesis.jsonl")
	rec := nemesis.NewFileRecorder(file)
	n := setOn(t, fakeWorld{nodes: 1, zks: 1}, rec)
	refused := []Step{{Kind: PartitionHalves}, {Kind: IsolateZKLeader}, {Kind: PauseZKFollower, Opening: true}}
	for _, st := range refused {
		if _, err := n.Apply(t.Context(), st); err == nil || !strings.Contains(err.Error(), "needs") {
			t.Errorf("%s on one broker and one ZooKeeper server: err %v", st.Kind, err)
		}
	}
	if _, err := n.Apply(t.Context(), Step{Kind: "melt-cpu"}); err == nil {
		t.Error("unknown fault applied")
	}
	// Each refused step is in the history: a start and a stop with the
	// reason, an opening named as such.
	rec.Close()
	evs, _, err := history.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2*(len(refused)+1) {
		t.Fatalf("%d events for %d refused steps", len(evs), len(refused)+1)
	}
	for i, st := range refused {
		start, stop := evs[2*i].Fault, evs[2*i+1].Fault
		if start.Name != string(st.Kind) || stop.ID != start.ID || !strings.Contains(stop.Error, "needs") {
			t.Errorf("step %s recorded as %+v, %+v", st.Kind, start, stop)
		}
		if wantOpening := st.Opening; strings.HasPrefix(start.Detail, "opening") != wantOpening {
			t.Errorf("step %s (opening %v) recorded with detail %q", st.Kind, st.Opening, start.Detail)
		}
	}
}

// Schedules written before Skipped existed load and replay unchanged.
type fakeWorld struct{ nodes, zks int }

func (w fakeWorld) Nodes() []Target     { return make([]Target, w.nodes) }
func (w fakeWorld) ZKServers() []Target { return make([]Target, w.zks) }
func (fakeWorld) Controller(context.Context) (int, error) {
	return 0, errors.New("fake world has no controller")
}
func (fakeWorld) ZKLeader(context.Context) (int, error) {
	return 0, errors.New("fake world has no ZooKeeper leader")
}
func (fakeWorld) PartitionLeader(context.Context, string, int32) (int, error) {
	return 0, errors.New("fake world has no partitions")
}

// setOn is the faults of a run on w; w's BADVERSION counts, when it has
// them, say whether the controller is stuck.
func setOn(t *testing.T, w nemesis.World, rec *nemesis.Recorder) *Set {
	t.Helper()
	fp := &fpWorld{armed: map[string]time.Time{}}
	env := Env{Partitions: fp, Failpoints: fp, Session: time.Second}
	if bv, ok := w.(BadVersionCounter); ok {
		env.BadVersions = bv
	}
	s, err := New(nemesis.New(w, rec), env)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stuckWorld is fakeWorld whose controller n2 failed bad conditional writes
// with BADVERSION within the last zkfStuckWithin.
type stuckWorld struct {
	fakeWorld
	bad int
}

func (stuckWorld) Controller(context.Context) (int, error) { return 2, nil }
func (w stuckWorld) BadVersions(_ context.Context, node int, since time.Time) (int, error) {
	if node != 2 || time.Since(since) > zkfStuckWithin+time.Second {
		return 0, nil
	}
	return w.bad, nil
}

// While the controller retries a write that keeps failing, a random step
// is recorded as left alone and does nothing (a fault would end the stuck
// state before liveness judges it); an opening, or a controller that
// failed once and re-read, goes through as drawn.
func TestApplyLeavesAStuckControllerAlone(t *testing.T) {
	for _, tt := range []struct {
		name     string
		bad      int
		opening  bool
		wantLeft bool
	}{
		{"stuck, random step", zkfStuckCount, false, true},
		{"stuck, opening", zkfStuckCount, true, false},
		{"one BADVERSION", 1, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				file := filepath.Join(t.TempDir(), "nemesis.jsonl")
				rec := nemesis.NewFileRecorder(file)
				// One broker: partition-halves needs two, so a step that
				// reaches the fault is refused with "needs".
				w := stuckWorld{fakeWorld{nodes: 1, zks: 1}, tt.bad}
				n := setOn(t, w, rec)
				heal, err := n.Apply(t.Context(), Step{Kind: PartitionHalves, Opening: tt.opening})
				rec.Close()
				evs, _, rerr := history.ReadFile(file)
				if rerr != nil || len(evs) != 2 {
					t.Fatalf("history: %d events, %v", len(evs), rerr)
				}
				stop := evs[1].Fault
				if tt.wantLeft {
					if err != nil || heal == nil || heal(t.Context()) != nil {
						t.Fatalf("left alone: heal %v, err %v", heal != nil, err)
					}
					want := "left alone: controller n2 is retrying a failed conditional write (3 BADVERSION in the last 3s)"
					if !strings.HasPrefix(stop.Detail, want) || !reflect.DeepEqual(stop.Targets, []string{"n2"}) {
						t.Fatalf("fault_stop %+v, want %q on n2", stop, want)
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), "needs") || !strings.Contains(stop.Error, "needs") {
					t.Fatalf("applied as drawn: err %v, fault_stop %+v", err, stop)
				}
			})
		})
	}
}

// slowZKWorld is stuckWorld whose controller read waits until it is given
// up (ZooKeeper cut off by a fault in force).
type slowZKWorld struct{ stuckWorld }

func (slowZKWorld) Controller(ctx context.Context) (int, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

// The stuck-controller question does not hold a step up when ZooKeeper
// does not answer: the step goes ahead as drawn within stuckAskWithin.
func TestApplyDoesNotWaitOnASilentZooKeeper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := setOn(t, slowZKWorld{stuckWorld{fakeWorld{nodes: 1, zks: 1}, zkfStuckCount}}, nil)
		begin := time.Now()
		_, err := n.Apply(t.Context(), Step{Kind: PartitionHalves})
		if took := time.Since(begin); took > stuckAskWithin+time.Second {
			t.Fatalf("step held up %s", took)
		}
		if err == nil || !strings.Contains(err.Error(), "needs") {
			t.Fatalf("step not applied as drawn: %v", err)
		}
	})
}

// Holds below MinHold are raised to it, so a zero or nanosecond hold plans a
// bounded schedule instead of filling memory with steps.
func TestPlanRaisesTinyHolds(t *testing.T) {
	for _, hold := range []time.Duration{0, time.Nanosecond, -time.Second} {
		s := Plan(1, Topology{Nodes: 3, ZKServers: 3}, 10*time.Second, hold, hold, []FaultKind{PauseNode})
		if n := len(s.Steps); n == 0 || n > int(10*time.Second/MinHold) {
			t.Fatalf("hold %s: %d steps", hold, n)
		}
		for _, st := range s.Steps {
			if st.Hold < MinHold {
				t.Fatalf("hold %s: step %s held %s, below MinHold", hold, st.Kind, st.Hold)
			}
		}
	}
}
