package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkchaos/zkchaos/history"

	"github.com/zkchaos/zkchaos/internal/wanttext"
	"github.com/zkchaos/zkchaos/nemesis"
)

// Tests whose faults wait (sessions, holds, polls of a fake world) run in
// a synctest bubble: the waits pass on its fake clock, so a test takes no
// wall time and the durations it asserts are exact.

// fpWorld is a cluster of three brokers as the failpoint fault sees it: n1
// controller, chaos-0 led by n2 with ISR [2 3 1]. It records what it is
// asked and says a window is reached once armed and provoked.
type fpWorld struct {
	callLog
	armed    map[string]time.Time // "n2 name" → when
	provoked bool
	reach    bool // report armed windows as reached once provoked
	// reachDelay: an armed window is reached this long after the
	// provocation (a bounced broker's session expiring first).
	reachDelay time.Duration
	provokedAt time.Time
	// successorAt: from then on ZooKeeper names n2 the controller.
	successorAt time.Time
	// held: brokers another fault holds; down: brokers not running, whose
	// admin port refuses a disarm.
	held, down map[string]bool
	claims     int // claims not yet released
	// session is the ZooKeeper session timeout the fake reports (0: 10 ms).
	session time.Duration
	// armErr: what ArmFailpoint answers after recording the arm (the
	// admin port's answer lost while the node armed it).
	armErr error
}

// callLog records what a fake world was asked, in order; mu also guards
// the fake's other fields.
type callLog struct {
	mu    sync.Mutex
	calls []string
	// batches: the state writes before each firing, in order, that
	// StateWritesBefore answers (the last one repeats; none: no writes).
	batches [][]history.PartitionState
	asked   int
}

// StateWritesBefore answers the next batch of l.batches.
func (l *callLog) StateWritesBefore(context.Context, int, string, time.Time) ([]history.PartitionState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.batches) == 0 {
		return nil, nil
	}
	b := l.batches[min(l.asked, len(l.batches)-1)]
	l.asked++
	return b, nil
}

// DisarmFailpoint records the disarm; the fakes' windows need nothing more.
func (l *callLog) DisarmFailpoint(_ context.Context, node int, name string) error {
	l.log("disarm n%d %s", node, name)
	return nil
}

// DisarmFailpoint fails on a broker that is down, as the admin port of a
// killed process does.
func (w *fpWorld) DisarmFailpoint(ctx context.Context, node int, name string) error {
	w.mu.Lock()
	down := w.down[fmt.Sprintf("n%d", node)]
	w.mu.Unlock()
	if down {
		w.log("disarm n%d %s refused", node, name)
		return fmt.Errorf("n%d: connection refused", node)
	}
	return w.callLog.DisarmFailpoint(ctx, node, name)
}

// ReleaseFailpoint records the release; the fakes' windows need nothing
// more.
func (l *callLog) ReleaseFailpoint(_ context.Context, node int, name string) error {
	l.log("release n%d %s", node, name)
	return nil
}

func (l *callLog) log(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, fmt.Sprintf(format, args...))
}

func (w *fpWorld) Nodes() []Target {
	return []Target{{Name: "n1"}, {Name: "n2"}, {Name: "n3"}}
}
func (w *fpWorld) ZKServers() []Target { return []Target{{Name: "zk1"}} }
func (w *fpWorld) Controller(context.Context) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.successorAt.IsZero() && time.Now().After(w.successorAt) {
		return 2, nil
	}
	return 1, nil
}
func (w *fpWorld) ZKLeader(context.Context) (int, error)                       { return 1, nil }
func (w *fpWorld) PartitionLeader(context.Context, string, int32) (int, error) { return 2, nil }
func (w *fpWorld) PartitionISR(_ context.Context, topic string, p int32) (int, []int, error) {
	return 2, []int{2, 3, 1}, nil
}
func (w *fpWorld) WorkloadTopic() (string, int32) { return "chaos", 3 }
func (w *fpWorld) PartitionReplicas(context.Context, string) (map[int32][]int, error) {
	return map[int32][]int{0: {1, 2, 3}, 1: {2, 3, 1}, 2: {3, 1, 2}}, nil
}
func (w *fpWorld) SessionTimeout() time.Duration {
	if w.session > 0 {
		return w.session
	}
	return 10 * time.Millisecond
}
func (w *fpWorld) ArmFailpoint(_ context.Context, node int, name, action string) error {
	w.arm("arm", node, name, action)
	return w.armErr
}
func (w *fpWorld) ArmAtStart(_ context.Context, node int, name, action string) error {
	w.arm("arm-at-start", node, name, action)
	return nil
}
func (w *fpWorld) arm(how string, node int, name, action string) {
	w.log("%s n%d %s=%s", how, node, name, action)
	w.mu.Lock()
	w.armed[fmt.Sprintf("n%d %s", node, name)] = time.Now()
	w.mu.Unlock()
}
func (w *fpWorld) FailpointReached(_ context.Context, node int, name string, since time.Time) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.armed[fmt.Sprintf("n%d %s", node, name)]
	return ok && w.provoked && w.reach && time.Since(w.provokedAt) >= w.reachDelay, nil
}

type fpProcs struct{ w *fpWorld }

// provoke logs what a process operation did and records that the node was
// provoked (which a reached failpoint needs).
func (p fpProcs) provoke(what string, t Target) error {
	p.w.log("%s %s", what, t.Name)
	p.w.mu.Lock()
	if !p.w.provoked {
		p.w.provokedAt = time.Now()
	}
	p.w.provoked = true
	p.w.mu.Unlock()
	return nil
}
func (p fpProcs) bounce(_ context.Context, t Target) error    { return p.provoke("bounce", t) }
func (p fpProcs) start(_ context.Context, t Target) error     { return p.provoke("start", t) }
func (p fpProcs) kill(_ context.Context, t Target) error      { p.w.log("kill %s", t.Name); return nil }
func (p fpProcs) terminate(_ context.Context, t Target) error { return p.provoke("terminate", t) }
func (p fpProcs) waitExited(_ context.Context, t Target) error {
	p.w.log("exited %s", t.Name)
	return nil
}
func (p fpProcs) pause(_ context.Context, t Target) error { p.w.log("sigstop %s", t.Name); return nil }
func (p fpProcs) down(_ context.Context, t Target) bool {
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	return p.w.down[t.Name]
}
func (p fpProcs) held(t Target) bool {
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	return p.w.held[t.Name]
}
func (p fpProcs) claim(t Target) func() {
	p.w.mu.Lock()
	p.w.claims++
	p.w.mu.Unlock()
	return func() {
		p.w.mu.Lock()
		p.w.claims--
		p.w.mu.Unlock()
	}
}
func (p fpProcs) cutOff(_ context.Context, _ string, a, b []Target) (nemesis.Heal, error) {
	p.w.log("cut %s from %d server(s)", a[0].Name, len(b))
	return func(context.Context) error { p.w.log("heal cut %s", a[0].Name); return nil }, nil
}
func (p fpProcs) resume(_ context.Context, t Target) error {
	c, _ := p.w.Controller(context.Background())
	p.w.log("sigcont %s (controller n%d)", t.Name, c)
	return nil
}

// ResignController forces an election: from now on ZooKeeper names n2
// the controller.
func (w *fpWorld) ResignController(_ context.Context, id int) error {
	w.log("delete /controller (n%d)", id)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.successorAt.IsZero() {
		w.successorAt = time.Now()
	}
	return nil
}

// fpTestWorld is what the fakes offer the failpoint fault.
type fpTestWorld interface {
	nemesis.World
	Partitions
	Failpoints
	Resigner
	SessionTimeout() time.Duration
}

// fpFault builds the failpoint fault on w as New would.
func fpFault(w fpTestWorld, rec *nemesis.Recorder, pr procs) *failpointFault {
	return newFailpoint(w, Env{Partitions: w, Failpoints: w, Session: w.SessionTimeout(), Resigner: w}, rec, pr)
}

// The window table names the node's failpoints (history.FailpointNames,
// the contract both halves share) in their order, every one but the two
// that only scenarios arm (keeping a broker out of an election, holding a
// new controller).
func TestFPWindowsAreTheNodeWindows(t *testing.T) {
	var want []string
	for _, n := range history.FailpointNames {
		if n != history.FailpointControllerBeforeElect && n != history.FailpointControllerAfterElected {
			want = append(want, n)
		}
	}
	if !slices.Equal(FailpointWindowNames(), want) {
		t.Fatalf("windows %v, want %v", FailpointWindowNames(), want)
	}
}

// A schedule.json saved before the window table grew holds picks of an
// older generation; they plan what they planned when it was saved (the
// plans below were printed by the builds of their day).
func TestLegacyPicksPlanAsSaved(t *testing.T) {
	tests := []struct {
		pick                    int
		window, action, provoke string
		partition               int32
		candidate               int
	}{
		{0, "controller-before-broker-change", "sigstop", "bounce-other", 854, 45657},
		{1, "broker-after-register", "pause", "restart-target", 741, 39615},
		{2, "broker-before-register", "error", "restart-target", 151, 60361},
		{5, "controller-after-zk-write", "sigstop", "terminate-other-then-restart", 944, 61951},
		{7, "broker-during-controlled-shutdown", "error", "terminate", 195, 5560},
		{8, "follower-after-truncation", "pause", "bounce-leader", 732, 58805},
		{12345, "broker-during-controlled-shutdown", "pause", "terminate", 554, 36861},
		{65535, "broker-before-register", "pause", "restart-target", 70, 6320},
		// The second generation, saved when the table had seven windows
		// (printed by the build of 2026-12-06 that added the send window).
		{65536, "controller-after-zk-write", "sigstop", "bounce-other", 456, 11310},
		{86403, "controller-before-send", "sigstop", "bounce-other", 365, 30604},
		{88019, "controller-before-broker-change", "sigstop", "bounce-other", 102, 4404},
		{110952, "controller-after-zk-write", "pause", "terminate-other-then-restart", 601, 52648},
		{131071, "broker-before-register", "error", "restart-target", 837, 22244},
		// The third generation, saved when the table had eight windows and
		// the broker-change window no forced election (printed by the
		// build of 2026-12-06 at 209d3b9).
		{133026, "broker-after-register", "sigstop", "restart-target", 497, 6204},
		{134980, "controller-before-broker-change", "pause", "bounce-other-then-third", 589, 26525},
		{135957, "controller-before-controlled-shutdown", "pause", "terminate-other-then-restart", 520, 21121},
		{136934, "controller-before-broker-change", "sigstop", "bounce-other-then-third", 690, 59843},
		{138888, "controller-before-send", "sigstop", "bounce-other", 236, 44542},
		{141819, "controller-before-broker-change", "pause", "bounce-other-then-third", 922, 3821},
		{147681, "broker-during-controlled-shutdown", "pause", "terminate", 648, 6989},
	}
	for _, tt := range tests {
		p := PlanFailpoint(tt.pick)
		if p.Window.Name != tt.window || p.Action != tt.action || p.Provoke != tt.provoke || p.Partition != tt.partition || p.Pick != tt.candidate {
			t.Errorf("pick %d plans %s %s %s %d %d, saved as %s %s %s %d %d", tt.pick,
				p.Window.Name, p.Action, p.Provoke, p.Partition, p.Pick, tt.window, tt.action, tt.provoke, tt.partition, tt.candidate)
		}
	}
	for pick := range PickGeneration {
		if w := PlanFailpoint(pick).Window.Name; w == "controller-before-send" {
			t.Fatalf("legacy pick %d plans %s, a window added after picks were saved", pick, w)
		}
	}
}

// Over many picks every window, role, action and provocation is drawn.
func TestPlanFailpointCoversEverything(t *testing.T) {
	seen := map[string]bool{}
	for i := range 2000 {
		pick := (len(windowGenerations)-1)*PickGeneration + i
		p := PlanFailpoint(pick)
		if q := PlanFailpoint(pick); q.Window.Name != p.Window.Name || q.Action != p.Action || q.Provoke != p.Provoke || q.Partition != p.Partition || q.Pick != p.Pick {
			t.Fatalf("pick %d planned twice differently", pick)
		}
		seen["w:"+p.Window.Name] = true
		seen["r:"+p.Window.Role] = true
		seen["a:"+p.Action] = true
		seen["p:"+p.Provoke] = true
		if !slices.Contains(provocations(p.Window, len(windowGenerations)-1), p.Provoke) {
			t.Fatalf("pick %d: provocation %s is not one of %s's", pick, p.Provoke, p.Window.Name)
		}
		if a, ok := provokeAction[p.Provoke]; ok && p.Action != a {
			t.Fatalf("pick %d: provocation %s with action %s, it works with %s only", pick, p.Provoke, p.Action, a)
		}
	}
	for _, w := range FPWindows {
		if !seen["w:"+w.Name] {
			t.Errorf("window %s never drawn", w.Name)
		}
	}
	for _, k := range []string{"r:" + RoleController, "r:" + RoleLeader, "r:" + RoleFollower, "r:" + RoleRestarted,
		"a:" + FPSigstop, "a:" + FPPause, "a:" + FPError,
		"p:" + ProvokeBounceOther, "p:" + ProvokeBounceLead, "p:" + ProvokeTerminate, "p:" + ProvokeRestart, "p:" + ProvokeBounceTwo, "p:" + ProvokeShutdownRestart, "p:" + ProvokeDeleteController} {
		if !seen[k] {
			t.Errorf("%s never drawn", k)
		}
	}
}

// pickFor finds a pick whose plan has window name and action (and the
// provocation the window's first, when it has several).
func pickFor(t *testing.T, name, action string) int {
	t.Helper()
	return pickWhere(t, name+" with "+action, func(p FPPlan) bool {
		return p.Window.Name == name && p.Action == action && p.Provoke == p.Window.Provoke[0]
	})
}

// Each window is armed on the node holding its role and provoked the way
// its table says; a sigstop outlasts the session before SIGCONT; the
// history says which window was armed and whether it was reached.
func TestInjectFailpointArmsRoleAndProvokes(t *testing.T) {
	tests := []struct {
		window, action string
		reach          bool
		want           []string // calls, in order
	}{
		{"controller-before-broker-change", FPSigstop, true,
			[]string{"arm n1 controller-before-broker-change=1*sigstop", "bounce n", "sigstop n1", "sigcont n1", "disarm n1 controller-before-broker-change"}},
		{"controller-after-zk-write", FPPause, false,
			[]string{"arm n1 controller-after-zk-write=1*pause", "bounce n", "disarm n1 controller-after-zk-write"}},
		{"broker-during-controlled-shutdown", FPError, true,
			[]string{"arm n2 broker-during-controlled-shutdown=1*error", "terminate n2", "disarm n2 broker-during-controlled-shutdown", "exited n2", "start n2"}},
		{"broker-after-register", FPPause, true,
			[]string{"kill n", "arm-at-start n", "start n", "start n", "disarm n"}},
		{"follower-after-truncation", FPError, true,
			[]string{"arm n", "bounce n2", "disarm n"}},
	}
	for _, tt := range tests {
		t.Run(tt.window+"/"+tt.action, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := &fpWorld{armed: map[string]time.Time{}, reach: tt.reach}
				dir := t.TempDir()
				rec := nemesis.NewFileRecorder(filepath.Join(dir, "nemesis.jsonl"))
				heal, err := fpFault(w, rec, fpProcs{w}).inject(t.Context(), pickFor(t, tt.window, tt.action))
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(250 * time.Millisecond) // the fault's hold: the watcher sees the window
				if err := heal(t.Context()); err != nil {
					t.Fatal(err)
				}
				rec.Close()
				w.mu.Lock()
				calls := slices.Clone(w.calls)
				w.mu.Unlock()
				if len(calls) != len(tt.want) {
					t.Fatalf("calls %q, want %q", calls, tt.want)
				}
				for i := range calls {
					if !strings.HasPrefix(calls[i], tt.want[i]) {
						t.Fatalf("calls %q, want %q", calls, tt.want)
					}
				}
				if tt.window == "follower-after-truncation" && (calls[0] == "arm n2 follower-after-truncation=1*error") {
					t.Fatalf("armed the leader n2, not a follower: %q", calls)
				}
				start, stop := lastFaultEvents(t, filepath.Join(dir, "nemesis.jsonl"))
				if start == nil || stop == nil || start.Failpoint != tt.window || stop.Failpoint != tt.window || start.Name != string(FailpointFault) {
					t.Fatalf("fault events %+v / %+v, want both naming %s", start, stop, tt.window)
				}
				wantStop := "window not reached"
				if tt.reach {
					wantStop = "window reached"
				}
				if stop.Detail != wantStop {
					t.Fatalf("fault_stop detail %q, want %q", stop.Detail, wantStop)
				}
			})
		})
	}
}

// A schedule of failpoint steps, saved and loaded again, arms the same
// windows with the same actions on the same roles at the same offsets.
func TestFailpointScheduleReplays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := Plan(42, Topology{Nodes: 3, ZKServers: 3}, 2*time.Minute, 5*time.Second, 10*time.Second, []FaultKind{FailpointFault})
		if len(s.Steps) < 4 {
			t.Fatalf("plan has %d steps", len(s.Steps))
		}
		first, second := armsOf(t, s), armsOf(t, reloaded(t, s))
		if len(first) != len(s.Steps) || !slices.Equal(first, second) {
			t.Fatalf("replay armed %q, the run armed %q", second, first)
		}
		if other := armsOf(t, Plan(43, Topology{Nodes: 3, ZKServers: 3}, 2*time.Minute, 5*time.Second, 10*time.Second, []FaultKind{FailpointFault})); slices.Equal(other, first) {
			t.Fatal("another seed armed exactly the same failpoints")
		}
		t.Logf("seed 42 arms: %q", first)
	})
}

// A run's faults are built with what the run offers: a composite fault
// whose capabilities are missing is missing from the Set when it is built
// (Missing says what it lacks), and a step of its kind fails with that
// without touching anything.
func TestNewChecksCapabilities(t *testing.T) {
	w := &fpWorld{armed: map[string]time.Time{}}
	for _, tt := range []struct {
		name    string
		env     Env
		missing []FaultKind
		wantErr []string
	}{
		{"everything", Env{Partitions: w, Failpoints: w, Session: time.Second, Disks: &crashWorld{}, Topics: &topicsWorld{}}, nil, nil},
		{"no disks", Env{Partitions: w, Failpoints: w, Session: time.Second, Topics: &topicsWorld{}}, []FaultKind{CrashLoseUnflushed},
			[]string{"crash-lose-unflushed: the run has no node data directories (Env.Disks)"}},
		{"no topic admin", Env{Partitions: w, Failpoints: w, Session: time.Second, Disks: &crashWorld{}}, []FaultKind{DeleteRecreateTopic},
			[]string{"delete-recreate-topic: the run has no topic admin (Env.Topics)"}},
		{"no failpoints", Env{Partitions: w, Session: time.Second, Disks: &crashWorld{}, Topics: &topicsWorld{}}, []FaultKind{FailpointFault, FailoverOnLaggingZK},
			[]string{"failpoint: the run has no failpoints (Env.Failpoints)", "failover-on-lagging-zk: the run has no failpoints"}},
		{"nothing", Env{}, []FaultKind{FailpointFault, KillLaggingLeader, FailoverOnLaggingZK, CrashLoseUnflushed, DeleteRecreateTopic, StallZKSessionServer},
			[]string{"kill-lagging-leader: the run has no partition roles (Env.Partitions), no session timeout (Env.Session is 0s)",
				"stall-zk-session-server: the run has no session timeout (Env.Session is 0s)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(nemesis.New(w, nil), tt.env)
			if err != nil {
				t.Fatal(err)
			}
			err = s.Missing()
			if (err == nil) != (len(tt.wantErr) == 0) {
				t.Fatalf("Missing: %v, want %q", err, tt.wantErr)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Missing: %v, want %q", err, want)
				}
			}
			for _, k := range tt.missing {
				if _, err := s.Inject(t.Context(), k, 0); err == nil || !strings.Contains(err.Error(), "the run has no") {
					t.Errorf("%s injected: %v", k, err)
				}
			}
			w.mu.Lock()
			calls := slices.Clone(w.calls)
			w.mu.Unlock()
			if len(calls) > 0 {
				t.Errorf("a missing fault acted: %q", calls)
			}
		})
	}
	if _, err := New(nemesis.New(nil, nil), Env{}); err == nil {
		t.Error("New without a world: no error")
	}
	if FailpointAvailable(1) == nil || FailpointAvailable(3) != nil {
		t.Fatal("FailpointAvailable: wants 2 brokers")
	}
}

// Guided schedules aim their failpoint steps at the least-reached windows,
// leave other steps alone and stay seeded.
func TestGuideFailpoints(t *testing.T) {
	s := Plan(7, Topology{Nodes: 3, ZKServers: 3}, 5*time.Minute, 5*time.Second, 10*time.Second, []FaultKind{FailpointFault, PauseController})
	reached := map[string]int{}
	for _, w := range FailpointWindowNames() {
		reached[w] = 3
	}
	reached["broker-after-register"] = 0
	reached["follower-after-truncation"] = 1
	g := GuideFailpoints(s, reached)
	nfp := 0
	for i, st := range g.Steps {
		if st.Kind != FailpointFault || st.Opening {
			if st != s.Steps[i] {
				t.Fatalf("step %d (%s) changed: %+v → %+v", i, st.Kind, s.Steps[i], st)
			}
			continue
		}
		nfp++
		if w := PlanFailpoint(st.Pick).Window.Name; w != "broker-after-register" {
			t.Fatalf("step %d arms %s, want the never-reached broker-after-register", i, w)
		}
		if st.At != s.Steps[i].At || st.Hold != s.Steps[i].Hold {
			t.Fatalf("step %d moved", i)
		}
	}
	if nfp == 0 {
		t.Fatal("plan has no failpoint step")
	}
	if again := GuideFailpoints(s, reached); !slices.Equal(again.Steps, g.Steps) {
		t.Fatal("guiding the same schedule twice gave two schedules")
	}
	// With every window reached equally, steps spread over all of them.
	even := GuideFailpoints(Plan(8, Topology{Nodes: 3, ZKServers: 3}, 30*time.Minute, 5*time.Second, 10*time.Second, []FaultKind{FailpointFault}), nil)
	seen := map[string]bool{}
	for _, st := range even.Steps {
		seen[PlanFailpoint(st.Pick).Window.Name] = true
	}
	for _, w := range FPWindows {
		if !seen[w.Name] && !TxnWindow(w.Name) {
			t.Fatalf("unguided-equal schedule armed only %v", seen)
		}
		if seen[w.Name] && TxnWindow(w.Name) {
			t.Fatalf("a schedule of a run without transactional producers was guided to %s", w.Name)
		}
	}
}

// bounce-other-then-third: the controller is armed, a second broker
// bounces to reach the window, and only once the controller holds there
// does the third broker bounce; a window never reached leaves the third
// alone.
func TestFailpointBounceTwo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pick := pickWhere(t, "controller-after-zk-write, pause, bounce-other-then-third", func(pl FPPlan) bool {
			return pl.Window.Name == "controller-after-zk-write" && pl.Action == FPPause && pl.Provoke == ProvokeBounceTwo
		})
		for _, reach := range []bool{true, false} {
			w := &fpWorld{armed: map[string]time.Time{}, reach: reach}
			injectThenHeal(t, fpFault(w, nil, fpProcs{w}), pick)
			var bounced []string
			for _, c := range w.calls {
				if n, ok := strings.CutPrefix(c, "bounce "); ok {
					bounced = append(bounced, n)
				}
			}
			if w.calls[0] != "arm n1 controller-after-zk-write=1*pause" {
				t.Fatalf("reach %v: calls %q", reach, w.calls)
			}
			want := 1
			if reach {
				want = 2
			}
			if len(bounced) != want || slices.Contains(bounced, "n1") || len(bounced) == 2 && bounced[0] == bounced[1] {
				t.Fatalf("reach %v: bounced %q, want %d distinct brokers other than the controller n1", reach, bounced, want)
			}
		}
	})
}

// bounce-other-then-delete-controller: the controller is armed, a broker
// that leads a partition bounces to reach the window, and only once the
// controller holds there are the others armed to hold after winning and
// /controller deleted; the held controller is let go once ZooKeeper names
// its successor, before the successor's failover, so its write meets the
// newer controller epoch on a state only it would change. A window never reached deletes nothing; a run without
// a Resigner fails the step and says what it lacks.
func TestFailpointDeleteController(t *testing.T) {
	pick := -1
	for p := 3 * PickGeneration; p < 4*PickGeneration; p++ {
		if pl := PlanFailpoint(p); pl.Provoke == ProvokeDeleteController {
			pick = p
			break
		}
	}
	if pick < 0 {
		t.Fatal("no pick plans bounce-other-then-delete-controller")
	}
	if pl := PlanFailpoint(pick); pl.Window.Name != "controller-before-broker-change" || pl.Action != FPPause {
		t.Fatalf("plan %s %s, want controller-before-broker-change with pause", pl.Window.Name, pl.Action)
	}
	for _, tc := range []struct {
		name  string
		reach bool
		want  []string
	}{
		// The others hold right after winning; the held controller goes
		// first, its successor a second later; heal disarms again.
		{"reached", true, []string{"arm n1 controller-before-broker-change=1*pause", "bounce n2",
			"arm n2 controller-after-elected=1*pause", "arm n3 controller-after-elected=1*pause", "delete /controller (n1)",
			"disarm n1 controller-before-broker-change", "disarm n2 controller-after-elected", "disarm n3 controller-after-elected",
			"disarm n1 controller-before-broker-change"}},
		{"not reached", false, []string{"arm n1 controller-before-broker-change=1*pause", "bounce n2", "disarm n1 controller-before-broker-change"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := &fpWorld{armed: map[string]time.Time{}, reach: tc.reach}
				heal, err := fpFault(w, nil, fpProcs{w}).inject(t.Context(), pick)
				if err != nil {
					t.Fatal(err)
				}
				if err := heal(t.Context()); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(w.calls, tc.want) {
					t.Fatalf("calls %q, want %q", w.calls, tc.want)
				}
				if c, _ := w.Controller(t.Context()); tc.reach != (c == 2) {
					t.Fatalf("controller n%d after heal, reached %v", c, tc.reach)
				}
			})
		})
	}
	t.Run("no resigner", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := &fpWorld{armed: map[string]time.Time{}, reach: true}
			f := newFailpoint(w, Env{Partitions: w, Failpoints: w, Session: w.SessionTimeout()}, nil, fpProcs{w})
			if _, err := f.inject(t.Context(), pick); err == nil || !strings.Contains(err.Error(), "Env.Resigner") {
				t.Fatalf("inject without a Resigner: %v", err)
			}
			if slices.Contains(w.calls, "bounce n2") {
				t.Fatalf("calls %q: provoked although the plan cannot be carried out", w.calls)
			}
		})
	})
}

// A controller window that a bounce reaches only after the step's hold
// (the bounced broker's session must expire first) is still caught: heal
// waits for it, then resumes the stopped controller only once ZooKeeper
// names its successor, so its late requests meet brokers that obey a newer
// controller (KAFKA-532's window). The bounced broker is one that leads a
// partition (n2 in fpWorld), which moves leadership.
func TestFailpointHealWaitsForWindowAndSuccessor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &fpWorld{armed: map[string]time.Time{}, reach: true, reachDelay: 25 * time.Millisecond}
		heal, err := fpFault(w, nil, fpProcs{w}).inject(t.Context(), pickFor(t, "controller-before-broker-change", FPSigstop))
		if err != nil {
			t.Fatal(err)
		}
		// Heal at once: the hold ended before the window was reached. The
		// successor appears well after the session timeout (10 ms) plus one
		// second, so resuming must wait for it.
		w.mu.Lock()
		w.successorAt = time.Now().Add(1500 * time.Millisecond)
		w.mu.Unlock()
		if err := heal(t.Context()); err != nil {
			t.Fatal(err)
		}
		wantCalls(t, w, "arm n1 controller-before-broker-change=1*sigstop", "bounce n2", "sigstop n1", "sigcont n1 (controller n2)", "disarm n1")
	})
}

// wantCalls fails t unless w's calls so far begin, one by one, with want.
func wantCalls(t *testing.T, w *fpWorld, want ...string) {
	t.Helper()
	w.mu.Lock()
	calls := slices.Clone(w.calls)
	w.mu.Unlock()
	if len(calls) != len(want) {
		t.Fatalf("calls %q, want %q", calls, want)
	}
	for i := range calls {
		if !strings.HasPrefix(calls[i], want[i]) {
			t.Fatalf("calls %q, want %q", calls, want)
		}
	}
}

// A controller stopped in its send path resumes cut off from ZooKeeper, so
// the request in hand goes out before news of its expired session can make
// it resign (which stops the send threads); the cut ends a moment later.
// Other windows resume in reach of ZooKeeper: a held ZooKeeper write must
// meet the epoch fence, not a lost connection.
func TestFailpointResumesSendPathZombieOutOfZKReach(t *testing.T) {
	for _, tc := range []struct {
		window string
		want   []string
	}{
		{"controller-before-send", []string{"arm n1 controller-before-send=2*sigstop", "bounce n2", "sigstop n1", "cut n1 from", "sigcont n1 (controller n2)", "heal cut n1", "disarm n1"}},
		{"controller-before-broker-change", []string{"arm n1 controller-before-broker-change=1*sigstop", "bounce n2", "sigstop n1", "sigcont n1 (controller n2)", "disarm n1"}},
	} {
		t.Run(tc.window, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := &fpWorld{armed: map[string]time.Time{}, reach: true, reachDelay: 25 * time.Millisecond}
				heal, err := fpFault(w, nil, fpProcs{w}).inject(t.Context(), pickFor(t, tc.window, FPSigstop))
				if err != nil {
					t.Fatal(err)
				}
				w.mu.Lock()
				w.successorAt = time.Now().Add(100 * time.Millisecond)
				w.mu.Unlock()
				if err := heal(t.Context()); err != nil {
					t.Fatal(err)
				}
				wantCalls(t, w, tc.want...)
			})
		})
	}
}

// A controller that loses the role before reaching its window (an
// operator's controlled shutdown restarted it, another fault failed it
// over) takes the failpoint with it: the fault disarms it, ends that
// attempt in the history saying why, and arms the new controller once,
// which then reaches the window. Without the re-arm the fault would watch
// a node that can no longer reach it.
func TestFailpointReArmsOnNewController(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A 200 ms session: the watch looks for the window for 800 ms after
		// each arming, past the controller change at 30 ms and the window at
		// 400 ms.
		w := &fpWorld{armed: map[string]time.Time{}, reach: true, reachDelay: 400 * time.Millisecond, session: 200 * time.Millisecond}
		w.successorAt = time.Now().Add(30 * time.Millisecond)
		dir := t.TempDir()
		rec := nemesis.NewFileRecorder(filepath.Join(dir, "nemesis.jsonl"))
		heal, err := fpFault(w, rec, fpProcs{w}).inject(t.Context(), pickFor(t, "controller-before-broker-change", FPSigstop))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(700 * time.Millisecond)
		if err := heal(t.Context()); err != nil {
			t.Fatal(err)
		}
		rec.Close()
		w.mu.Lock()
		calls := strings.Join(w.calls, "; ")
		w.mu.Unlock()
		wanttext.Contains(t, "calls", calls,
			"arm n1 controller-before-broker-change=1*sigstop",
			"disarm n1 controller-before-broker-change",
			"arm n2 controller-before-broker-change=1*sigstop",
			"sigstop n2")
		if strings.Contains(calls, "sigstop n1") {
			t.Fatalf("stopped the old controller: %q", calls)
		}
		b, err := os.ReadFile(filepath.Join(dir, "nemesis.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		wanttext.Contains(t, "history", string(b),
			"n1 stopped being the controller (n2 is) before reaching it; re-armed on n2",
			"(re-armed: n1 lost the controller role first)",
			"window reached")
	})
}

// terminate-other-then-restart: the controller is armed, a broker that
// follows a partition (n3: n2 leads, n1 is the controller) is sent SIGTERM,
// and once the controller holds in the window that broker is bounced, and
// the hold lasts until its new process can have registered; a window never
// reached lets the broker finish its shutdown, and it is started again.
func TestFailpointShutdownRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pick := pickWhere(t, "controller-after-zk-write, pause, terminate-other-then-restart", func(pl FPPlan) bool {
			return pl.Window.Name == "controller-after-zk-write" && pl.Action == FPPause && pl.Provoke == ProvokeShutdownRestart
		})
		for _, reach := range []bool{true, false} {
			w := &fpWorld{armed: map[string]time.Time{}, reach: reach, session: 100 * time.Millisecond}
			heal, err := fpFault(w, nil, fpProcs{w}).inject(t.Context(), pick)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := heal(t.Context()); err != nil {
				t.Fatal(err)
			}
			held := time.Since(start)
			w.mu.Lock()
			calls := slices.Clone(w.calls)
			w.mu.Unlock()
			want := []string{"arm n1 controller-after-zk-write=1*pause", "terminate n3", "exited n3", "start n3", "disarm n1 controller-after-zk-write"}
			if reach {
				want = []string{"arm n1 controller-after-zk-write=1*pause", "terminate n3", "bounce n3", "disarm n1 controller-after-zk-write"}
				if held < 150*time.Millisecond {
					t.Errorf("released %s after the bounce; want a hold until two session timeouts (200 ms) after the kill", held)
				}
			}
			if !slices.Equal(calls, want) {
				t.Fatalf("reach %v: calls %q, want %q", reach, calls, want)
			}
		}
	})
}

// While a failpoint fault is in force it claims the armed node and the
// broker its provocation bounces, and a window reached once per other
// broker claims every broker, since each holds a request for it: the
// control-plane workload, which leaves claimed brokers alone, must not shut
// down a receiver whose held request is the fence's only input.
func TestFailpointPerBrokerWindowClaimsEveryReceiver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		deleteCtl := -1
		for p := 3 * PickGeneration; p < 4*PickGeneration && deleteCtl < 0; p++ {
			if PlanFailpoint(p).Provoke == ProvokeDeleteController {
				deleteCtl = p
			}
		}
		for _, tc := range []struct {
			window, action string
			pick           int // -1: pickFor(window, action)
			claims         int
		}{
			{"controller-before-send", FPSigstop, -1, 3},
			{"controller-before-broker-change", FPSigstop, -1, 2},
			// The forced election claims the third broker too: the
			// control-plane workload's controlled shutdown of it would have
			// the controller rewrite its states before the hold.
			{"controller-before-broker-change", FPPause, deleteCtl, 3},
		} {
			pick := tc.pick
			if pick < 0 {
				pick = pickFor(t, tc.window, tc.action)
			}
			w := &fpWorld{armed: map[string]time.Time{}, reach: true}
			heal, err := fpFault(w, nil, fpProcs{w}).inject(t.Context(), pick)
			if err != nil {
				t.Fatal(err)
			}
			w.mu.Lock()
			during := w.claims
			w.mu.Unlock()
			if err := heal(t.Context()); err != nil {
				t.Fatal(err)
			}
			if during != tc.claims || w.claims != 0 {
				t.Errorf("%s: %d brokers claimed while in force, %d after heal; want %d, then 0", tc.window, during, w.claims, tc.claims)
			}
		}
	})
}

// Each generation of picks sees the window table of its day, the newest
// sees all of it, and NewPick draws only from the newest.
func TestPickGenerations(t *testing.T) {
	if n := windowGenerations[len(windowGenerations)-1]; n != len(FPWindows) {
		t.Fatalf("the newest generation sees %d windows, the table has %d: a window added without a generation", n, len(FPWindows))
	}
	for g, n := range windowGenerations {
		// A generation adds windows or provocations.
		added := slices.ContainsFunc(laterProvocations, func(l struct {
			since   int
			window  string
			provoke string
		}) bool {
			return l.since == g
		})
		if g > 0 && n <= windowGenerations[g-1] && !added {
			t.Fatalf("generation %d sees %d windows, not more than generation %d's %d, and no new provocation", g, n, g-1, windowGenerations[g-1])
		}
		seen := map[string]bool{}
		for i := range 4000 {
			p := PlanFailpoint(g*PickGeneration + i)
			seen[p.Window.Name] = true
			seen[p.Window.Name+" "+p.Provoke] = true
		}
		for _, l := range laterProvocations {
			if seen[l.window+" "+l.provoke] != (g >= l.since) {
				t.Errorf("generation %d: %s provoked by %s drawn %v, want %v", g, l.window, l.provoke, seen[l.window+" "+l.provoke], g >= l.since)
			}
		}
		for i, w := range FPWindows {
			if seen[w.Name] != (i < n) {
				t.Errorf("generation %d: window %s drawn %v, want %v", g, w.Name, seen[w.Name], i < n)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		if p := NewPick(r); p/PickGeneration != len(windowGenerations)-1 {
			t.Fatalf("NewPick drew %d, outside the newest generation", p)
		}
	}
}

// A pause at controller-after-zk-write lasts until the provoked broker's
// leaders have shrunk it out of their ISRs (replica.lag.time.max and half
// of it after it stopped fetching, and half a second): their shrink then
// meets the zkVersion the held controller wrote. Without a known lag, or
// at another window, the hold is as before.
func TestFailpointHoldOutlastsLeaderShrink(t *testing.T) {
	afterWrite := pickWhere(t, "controller-after-zk-write, pause, bounce-other-then-third", func(p FPPlan) bool {
		return p.Window.Name == "controller-after-zk-write" && p.Action == FPPause && p.Provoke == ProvokeBounceTwo
	})
	beforeChange := pickWhere(t, "controller-before-broker-change, pause, bounce-other", func(p FPPlan) bool {
		return p.Window.Name == "controller-before-broker-change" && p.Action == FPPause && p.Provoke == ProvokeBounceOther
	})
	for _, tc := range []struct {
		name    string
		pick    int
		lag     time.Duration
		atLeast time.Duration
	}{
		{"after the write, lag 2s", afterWrite, 2 * time.Second, 3500 * time.Millisecond},
		{"after the write, lag unknown", afterWrite, 0, 0},
		{"another window", beforeChange, 2 * time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := &fpWorld{armed: map[string]time.Time{}, reach: true}
				f := newFailpoint(w, Env{Partitions: w, Failpoints: w, Session: w.SessionTimeout(), ReplicaLag: tc.lag}, nil, fpProcs{w})
				start := time.Now()
				heal, err := f.inject(t.Context(), tc.pick)
				if err != nil {
					t.Fatal(err)
				}
				if err := heal(t.Context()); err != nil {
					t.Fatal(err)
				}
				took := time.Since(start)
				if took < tc.atLeast || (tc.atLeast == 0 && took >= time.Second) {
					t.Fatalf("held %s, want at least %s (and under a second without the rule)", took, tc.atLeast)
				}
			})
		})
	}
}

// leadersNow is a fake Leaders.
type leadersNow map[history.TopicPartition]int

func (l leadersNow) PartitionLeaders(context.Context) (map[history.TopicPartition]int, error) {
	return l, nil
}

// A pause after the controller's write is armed for several firings and
// holds at the first that follows the stopped broker's removal from the
// ISR of a partition whose leader stays: the elections of the partitions
// it led and an operator's topic creation are let go.
func TestShrinkHoldWaitsForTheRemoval(t *testing.T) {
	afterWrite := pickWhere(t, "controller-after-zk-write, pause, bounce-other-then-third", func(p FPPlan) bool {
		return p.Window.Name == "controller-after-zk-write" && p.Action == FPPause && p.Provoke == ProvokeBounceTwo
	})
	st := func(topic string, p, leader int32, isr ...int32) history.PartitionState {
		return history.PartitionState{Topic: topic, Partition: p, Leader: leader, ISR: isr}
	}
	// The provocation stops n2 first (it leads chaos-0 in the fake).
	leaders := leadersNow{history.TP("chaos", 0): 2, history.TP("chaos", 1): 3, history.TP("chaos", 2): 1}
	created := []history.PartitionState{st("chaos-admin-1", 0, 1, 1, 2, 3)}
	for _, tc := range []struct {
		name     string
		leaders  Leaders
		batches  [][]history.PartitionState
		released int
	}{
		{"removal first", leaders, [][]history.PartitionState{{st("chaos", 1, 3, 3, 1), st("chaos", 2, 1, 1, 3)}}, 0},
		{"a topic creation, then the removal", leaders, [][]history.PartitionState{created, {st("chaos", 1, 3, 3, 1), st("chaos", 2, 1, 1, 3)}}, 1},
		{"creation, elections, then the removal", leaders, [][]history.PartitionState{created, {st("chaos", 0, 3, 3, 1)}, {st("chaos", 2, 1, 1, 3)}}, 2},
		{"never a removal: let go until the last firing", leaders, [][]history.PartitionState{created}, shrinkHoldFirings - 1},
		{"leaders unknown: the first firing holds", nil, [][]history.PartitionState{created}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := &fpWorld{armed: map[string]time.Time{}, reach: true}
				w.batches = tc.batches
				f := newFailpoint(w, Env{Partitions: w, Failpoints: w, Session: w.SessionTimeout(), ReplicaLag: time.Second, Leaders: tc.leaders}, nil, fpProcs{w})
				heal, err := f.inject(t.Context(), afterWrite)
				if err != nil {
					t.Fatal(err)
				}
				if err := heal(t.Context()); err != nil {
					t.Fatal(err)
				}
				w.mu.Lock()
				calls := strings.Join(w.calls, "\n")
				w.mu.Unlock()
				if want := fmt.Sprintf("controller-after-zk-write=%d*pause", shrinkHoldFirings); !strings.Contains(calls, want) {
					t.Errorf("want the window armed as %s; calls:\n%s", want, calls)
				}
				if got := strings.Count(calls, "release n"); got != tc.released {
					t.Errorf("%d firings let go, want %d; calls:\n%s", got, tc.released, calls)
				}
			})
		})
	}
}

// killLate is fpProcs whose kill reports the client's expired deadline
// after the engine killed the broker (what a kill at the run's time limit
// did).
type killLate struct{ fpProcs }

func (p killLate) kill(_ context.Context, t Target) error {
	p.w.log("kill %s (deadline exceeded)", t.Name)
	p.w.mu.Lock()
	p.w.down[t.Name] = true
	p.w.mu.Unlock()
	return context.DeadlineExceeded
}

// A restart-target plan whose kill reports an error after the broker died
// starts it again: nothing else would, since the fault ends there.
func TestRestartPlanStartsABrokerItsFailedKillLeftDown(t *testing.T) {
	restart := pickWhere(t, "restart-target", func(p FPPlan) bool { return p.Provoke == ProvokeRestart })
	synctest.Test(t, func(t *testing.T) {
		w := &fpWorld{armed: map[string]time.Time{}, reach: true, down: map[string]bool{}}
		f := newFailpoint(w, Env{Partitions: w, Failpoints: w, Session: w.SessionTimeout()}, nil, killLate{fpProcs{w}})
		if _, err := f.inject(t.Context(), restart); err == nil {
			t.Fatal("inject succeeded; want the kill's error")
		}
		w.mu.Lock()
		calls := strings.Join(w.calls, "\n")
		w.mu.Unlock()
		if !strings.Contains(calls, "start n") {
			t.Errorf("the broker the kill left down was not started again; calls:\n%s", calls)
		}
	})
}

// An arm whose answer never came may have armed the node all the same: the
// fault disarms it before giving up, or a later firing holds with nobody
// to end the hold. In a queue run (seed 7) the controller held its broker
// change from +1m11s to the end of the run after such an arm.
func TestFailedArmIsDisarmed(t *testing.T) {
	tests := []struct {
		window, action string
		want           []string
	}{
		{"controller-before-broker-change", FPPause,
			[]string{"arm n1 controller-before-broker-change=1*pause", "disarm n1 controller-before-broker-change"}},
		{"controller-after-zk-write", FPSigstop,
			[]string{"arm n1 controller-after-zk-write=1*sigstop", "disarm n1 controller-after-zk-write"}},
	}
	for _, tt := range tests {
		t.Run(tt.window+"/"+tt.action, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lost := errors.New("node 1 admin PUT: context deadline exceeded")
				w := &fpWorld{armed: map[string]time.Time{}, armErr: lost}
				rec := nemesis.NewFileRecorder(filepath.Join(t.TempDir(), "nemesis.jsonl"))
				defer rec.Close()
				heal, err := fpFault(w, rec, fpProcs{w}).inject(t.Context(), pickFor(t, tt.window, tt.action))
				if !errors.Is(err, lost) || heal != nil {
					t.Fatalf("inject = %v, %v; want no heal and %v", heal != nil, err, lost)
				}
				w.mu.Lock()
				defer w.mu.Unlock()
				if !slices.Equal(w.calls, tt.want) {
					t.Fatalf("calls %q, want %q", w.calls, tt.want)
				}
				if w.claims != 0 {
					t.Fatalf("%d claim(s) left", w.claims)
				}
			})
		})
	}
}
