package faults

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/zklayout"
)

// zkfWorld is three brokers and three ZooKeeper servers as the
// failover-on-lagging-zk fault sees them: n1 controls, zk3 leads, chaos-p
// is led by n(p+1) with ISR [all three] until the controller is cut off;
// then, once shrink is set, n3 shrinks n1 out of chaos-2.
type zkfWorld struct {
	callLog
	served map[string]string // broker → its session's server
	reach  bool              // the successor reaches controller-after-elected once n1 is cut off
	shrink bool              // n3 shrinks n1 out of chaos-2 once n1 is cut off from it
	killed bool              // n1 cut from ZooKeeper
	// cutFromOthers: n1 cut from the other survivors.
	cutFromOthers bool
	armed         map[string]bool
	// leadAll > 0: that broker leads every partition (ISR it and n1);
	// with leadAllUntilArmed, only until the fault arms a failpoint.
	leadAll           int
	leadAllUntilArmed bool
	slowErr           error
	// applied is the lagging server's last applied zxid; the shrink of
	// chaos-2 is written at shrinkZxid, every earlier state at 1.
	applied      int64
	appliedCalls int
	// noVia: the world cannot read through one server (stateAt fails).
	noVia bool
	// moveTo: where a broker's session goes when it is cut from its
	// server.
	moveTo map[string]string
	// downPolls: n3 has no session yet (restarting, say after a
	// controlled shutdown) for the first downPolls plans.
	downPolls int
	// refuse: how many disarms the successor n2's admin port refuses (-1:
	// every one), as a process another fault killed or paused refuses
	// them; succDown: n2 is down through the heal.
	refuse   int
	succDown bool
}

// DisarmFailpoint refuses n2's disarms while refuse says so.
func (w *zkfWorld) DisarmFailpoint(ctx context.Context, node int, name string) error {
	w.mu.Lock()
	refused := node == 2 && w.refuse != 0
	if refused && w.refuse > 0 {
		w.refuse--
	}
	w.mu.Unlock()
	if refused {
		w.log("disarm n%d %s refused", node, name)
		return fmt.Errorf("node %d admin DELETE /failpoints/%s: context deadline exceeded", node, name)
	}
	return w.callLog.DisarmFailpoint(ctx, node, name)
}

const shrinkZxid = 0x100

func (w *zkfWorld) Nodes() []Target { return []Target{{Name: "n1"}, {Name: "n2"}, {Name: "n3"}} }
func (w *zkfWorld) ZKServers() []Target {
	return []Target{{Name: "zk1"}, {Name: "zk2"}, {Name: "zk3"}}
}
func (w *zkfWorld) Controller(context.Context) (int, error)                     { return 1, nil }
func (w *zkfWorld) ZKLeader(context.Context) (int, error)                       { return 3, nil }
func (w *zkfWorld) PartitionLeader(context.Context, string, int32) (int, error) { return 1, nil }
func (w *zkfWorld) PartitionISR(_ context.Context, _ string, p int32) (int, []int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if p == 2 && w.cutFromOthers && w.shrink {
		return 3, []int{3, 2}, nil
	}
	if w.leadAll > 0 && (!w.leadAllUntilArmed || len(w.armed) == 0) {
		return w.leadAll, []int{w.leadAll, 1}, nil
	}
	return int(p) + 1, []int{int(p) + 1, 1, 2, 3}[:3], nil
}
func (w *zkfWorld) WorkloadTopic() (string, int32) { return "chaos", 3 }
func (w *zkfWorld) SessionTimeout() time.Duration  { return 20 * time.Millisecond }

// PartitionReplicas is createTopic's round-robin assignment.
func (w *zkfWorld) PartitionReplicas(context.Context, string) (map[int32][]int, error) {
	return map[int32][]int{0: {1, 2, 3}, 1: {2, 3, 1}, 2: {3, 1, 2}}, nil
}
func (w *zkfWorld) ArmFailpoint(_ context.Context, node int, name, action string) error {
	w.log("arm n%d %s=%s", node, name, action)
	w.mu.Lock()
	w.armed[fmt.Sprintf("n%d %s", node, name)] = true
	w.mu.Unlock()
	return nil
}
func (w *zkfWorld) ArmAtStart(context.Context, int, string, string) error { return nil }
func (w *zkfWorld) FailpointReached(_ context.Context, node int, name string, _ time.Time) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reach && w.killed && w.armed[fmt.Sprintf("n%d %s", node, name)] && name == fpAfterElected, nil
}

// zkfFake is the fault's process, link and session operations on zkfWorld.
type zkfFake struct{ w *zkfWorld }

func (f zkfFake) bounce(_ context.Context, t Target) error { f.w.log("bounce %s", t.Name); return nil }
func (f zkfFake) kill(_ context.Context, t Target) error {
	f.w.log("kill %s", t.Name)
	f.w.mu.Lock()
	f.w.killed = true
	f.w.mu.Unlock()
	return nil
}
func (f zkfFake) start(_ context.Context, t Target) error  { f.w.log("start %s", t.Name); return nil }
func (f zkfFake) terminate(context.Context, Target) error  { return nil }
func (f zkfFake) waitExited(context.Context, Target) error { return nil }
func (f zkfFake) pause(_ context.Context, t Target) error  { f.w.log("sigstop %s", t.Name); return nil }
func (f zkfFake) down(_ context.Context, t Target) bool {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	return t.Name == "n2" && f.w.succDown
}
func (f zkfFake) held(Target) bool    { return false }
func (f zkfFake) claim(Target) func() { return func() {} }
func (f zkfFake) resume(_ context.Context, t Target) error {
	f.w.log("sigcont %s", t.Name)
	return nil
}
func (f zkfFake) slow(_ context.Context, from, to Target, s nemesis.SlowSpec) error {
	f.w.log("slow %s->%s %dkbit", from.Name, to.Name, s.RateKbit)
	return f.w.slowErr
}
func (f zkfFake) partition(_ context.Context, _ string, a, b []Target) error {
	f.w.log("partition %s | %s", strings.Join(targetNames(a), " "), strings.Join(targetNames(b), " "))
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	if a[0].Name == "n1" { // the controller cut off: from ZooKeeper first, then from the others
		if strings.HasPrefix(b[0].Name, "zk") {
			f.w.killed = true
		} else {
			f.w.cutFromOthers = true
		}
	}
	// A broker cut from its server reconnects to the one moveTo names.
	if to, ok := f.w.moveTo[a[0].Name]; ok && len(a) == 1 {
		f.w.served = maps.Clone(f.w.served)
		f.w.served[a[0].Name] = to
	}
	return nil
}
func (f zkfFake) healNet(context.Context) error { f.w.log("heal-net"); return nil }
func (f zkfFake) cutOff(context.Context, string, []Target, []Target) (nemesis.Heal, error) {
	return func(context.Context) error { return nil }, nil
}

// electPreferred: the preferred replica of chaos-p is n(p+1), so the
// controller n1 leading every partition keeps chaos-0 alone.
func (f zkfFake) electPreferred(_ context.Context, _ Target, topic string, parts []int32) error {
	f.w.log("elect-preferred %s %v", topic, parts)
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	if f.w.leadAll == 1 {
		f.w.leadAll = 0
	}
	return nil
}
func (f zkfFake) sessions(context.Context, []Target, []Target) map[string]string {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	if f.w.downPolls > 0 {
		f.w.downPolls--
		out := map[string]string{}
		for n, s := range f.w.served {
			if n != "n3" {
				out[n] = s
			}
		}
		return out
	}
	return f.w.served
}
func (f zkfFake) stateAt(ctx context.Context, zk Target, topic string, p int32) (PartitionState, error) {
	if f.w.noVia {
		return PartitionState{}, fmt.Errorf("no reads through %s", zk.Name)
	}
	l, isr, err := f.w.PartitionISR(ctx, topic, p)
	z := int64(1)
	if !slices.Contains(isr, 1) {
		z = shrinkZxid
	}
	return PartitionState{PartitionState: zklayout.PartitionState{Leader: l, ISR: isr}, Mzxid: z}, err
}

// appliedZxid: the lagging server catches up with the shrink from the
// third question on (after the check and the one at the release).
func (f zkfFake) appliedZxid(context.Context, Target) (int64, error) {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	if f.w.appliedCalls++; f.w.appliedCalls > 2 {
		return max(f.w.applied, shrinkZxid), nil
	}
	return f.w.applied, nil
}

func TestFailoverOnLaggingZK(t *testing.T) {
	pinned := map[string]string{"n1": "zk1", "n2": "zk2", "n3": "zk3"} // --zk-server-by-id
	tests := []struct {
		name          string
		served        map[string]string
		reach, shrink bool
		slowErr       error
		applied       int64 // the lagging server's zxid when the shrink is seen
		noVia         bool
		wantErr       string
		want          []string // calls, in order
		wantStop      string   // prefix of the fault_stop's detail
	}{
		{"pinned sessions: the survivor on a follower takes over", pinned, true, true, nil, 0x42, false, "",
			[]string{"arm n3 controller-before-elect=1*pause", "arm n2 controller-after-elected=1*pause", "partition n1 | zk1 zk2 zk3",
				"slow zk3->zk2 4kbit", "disarm n3 controller-before-elect", "partition n1 | n3", "disarm n2 controller-after-elected", "heal-net"},
			"window reached: n2 released after n3 shrank chaos-2 to [3 2] at zxid 0x100, zk2 at 0x42 (0x42 once n2 was released; zk2 applied it"},
		// The slowed server applied the shrink before the successor could
		// read it: said so, not counted as the window.
		{"the lagging server already applied the shrink: window missed", pinned, true, true, nil, shrinkZxid, false, "",
			[]string{"arm n3 controller-before-elect=1*pause", "arm n2 controller-after-elected=1*pause", "partition n1 | zk1 zk2 zk3",
				"slow zk3->zk2 4kbit", "disarm n3 controller-before-elect", "partition n1 | n3", "disarm n2 controller-after-elected", "heal-net"},
			"window missed: n2 released after n3 shrank chaos-2 to [3 2] at zxid 0x100, zk2 at 0x100"},
		{"no reads through one server: the run's reads, unchecked", pinned, true, true, nil, shrinkZxid, true, "",
			[]string{"arm n3 controller-before-elect=1*pause", "arm n2 controller-after-elected=1*pause", "partition n1 | zk1 zk2 zk3",
				"slow zk3->zk2 4kbit", "disarm n3 controller-before-elect", "partition n1 | n3", "disarm n2 controller-after-elected", "heal-net"},
			"window reached: n2 released after n3 shrank chaos-2 to [3 2]"},
		{"no shrink in time: released anyway", pinned, true, false, nil, 0, false, "",
			[]string{"arm n3 controller-before-elect=1*pause", "arm n2 controller-after-elected=1*pause", "partition n1 | zk1 zk2 zk3",
				"slow zk3->zk2 4kbit", "disarm n3 controller-before-elect", "partition n1 | n3", "disarm n2 controller-after-elected", "heal-net"},
			"successor held; no ISR shrink seen"},
		{"successor never held: nothing slowed, everything disarmed", pinned, false, true, nil, 0, false, "",
			[]string{"arm n3 controller-before-elect=1*pause", "arm n2 controller-after-elected=1*pause", "partition n1 | zk1 zk2 zk3",
				"heal-net", "disarm n2 controller-after-elected", "disarm n3 controller-before-elect"},
			"successor not held"},
		{"slowing fails (its target gone): released at heal", pinned, true, true, fmt.Errorf("zk2 is not running"), 0, false, "zk2 is not running",
			[]string{"arm n3 controller-before-elect=1*pause", "arm n2 controller-after-elected=1*pause", "partition n1 | zk1 zk2 zk3",
				"slow zk3->zk2 4kbit", "heal-net", "disarm n2 controller-after-elected", "disarm n3 controller-before-elect"},
			"successor held; slowing the link failed"},
		// Both survivors on the leader, and cutting n2 from it does not
		// move its session (moveTo empty): unavailable now.
		{"unpinned, both survivors on the leader and staying there: unavailable now", map[string]string{"n1": "zk1", "n2": "zk3", "n3": "zk3"}, true, true, nil, 0, false,
			"no broker but the controller n1 has its session on a ZooKeeper follower", []string{"partition n2 | zk3", "heal-net", "partition n2 | zk3", "heal-net"}, ""},
		{"sessions unknown: unavailable now", map[string]string{}, true, true, nil, 0, false, "on a ZooKeeper follower", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := &zkfWorld{served: tt.served, reach: tt.reach, shrink: tt.shrink, armed: map[string]bool{}, slowErr: tt.slowErr,
					applied: tt.applied, noVia: tt.noVia}
				dir := t.TempDir()
				rec := nemesis.NewFileRecorder(filepath.Join(dir, "nemesis.jsonl"))
				heal, err := zkfOn(w, rec, zkfFake{w}).inject(t.Context(), 0)
				if err == nil {
					err = heal(t.Context())
				}
				rec.Close()
				if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				w.mu.Lock()
				calls := slices.Clone(w.calls)
				w.mu.Unlock()
				if !slices.Equal(calls, tt.want) {
					t.Fatalf("calls\n %q\nwant\n %q", calls, tt.want)
				}
				if tt.wantErr != "" {
					return // not started, nothing recorded
				}
				start, stop := lastFaultEvents(t, filepath.Join(dir, "nemesis.jsonl"))
				if start == nil || stop == nil || start.Name != string(FailoverOnLaggingZK) || stop.ID != start.ID {
					t.Fatalf("fault events %+v / %+v, want one %s start and its stop", start, stop, FailoverOnLaggingZK)
				}
				if !strings.HasPrefix(stop.Detail, tt.wantStop) {
					t.Fatalf("fault_stop detail %q, want %q...", stop.Detail, tt.wantStop)
				}
			})
		})
	}
}

// zkfTestWorld is what the fakes offer the fault: a world with partition
// roles and failpoints.
type zkfTestWorld interface {
	nemesis.World
	Partitions
	Failpoints
	SessionTimeout() time.Duration
}

// zkfOn builds the fault on w as New would, taking the optional
// capabilities the fake has.
func zkfOn(w zkfTestWorld, rec *nemesis.Recorder, ops zkfOps) *zkFailover {
	env := Env{Partitions: w, Failpoints: w, Session: w.SessionTimeout()}
	if bv, ok := w.(BadVersionCounter); ok {
		env.BadVersions = bv
	}
	if l, ok := w.(interface{ ReplicaLagTime() time.Duration }); ok {
		env.ReplicaLag = l.ReplicaLagTime()
	}
	return newZKFailover(w, env, rec, ops)
}

// lastFaultEvents reads the last fault_start and fault_stop a recorder wrote
// to path.
func lastFaultEvents(t *testing.T, path string) (start, stop *history.Fault) {
	t.Helper()
	evs, _, err := history.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		switch e.Kind {
		case history.KindFaultStart:
			start = e.Fault
		case history.KindFaultStop:
			stop = e.Fault
		}
	}
	return start, stop
}

// The step's Pick chooses the successor among the survivors on a follower,
// so a replayed step takes the same position.
func TestFailoverOnLaggingZKPick(t *testing.T) {
	w := &zkfWorld{served: map[string]string{"n1": "zk3", "n2": "zk1", "n3": "zk2"}}
	for _, tt := range []struct {
		pick          int
		leadAll       int
		succ, lagging string
		others        []string
	}{
		{0, 0, "n2", "zk1", []string{"n3"}},
		{1, 0, "n3", "zk2", []string{"n2"}},
		{2, 0, "n2", "zk1", []string{"n3"}},
		{7, 0, "n3", "zk2", []string{"n2"}},
		// n2 leads every partition: only n3 as the successor leaves a
		// survivor (n2) whose ISR shrink of n1 is the state change.
		{0, 2, "n3", "zk2", []string{"n2"}},
		{1, 2, "n3", "zk2", []string{"n2"}},
	} {
		w.leadAll = tt.leadAll
		for range 2 { // the same pick, the same plan
			p, err := zkfOn(w, nil, zkfFake{w}).plan(t.Context(), tt.pick)
			if err != nil {
				t.Fatal(err)
			}
			if p.ctl.Name != "n1" || p.leader.Name != "zk3" || p.succ.Name != tt.succ || p.lagging.Name != tt.lagging ||
				!slices.Equal(targetNames(p.others), tt.others) {
				t.Fatalf("pick %d: plan %+v, want successor %s on %s, others %v", tt.pick, p, tt.succ, tt.lagging, tt.others)
			}
		}
	}
}

// The controller led every partition when the fault planned, and an
// operator's preferred election moved some to the survivors before the
// controller was cut from them: the watch is what they lead then.
func TestFailoverOnLaggingZKWatchesLeadersOfNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &zkfWorld{served: map[string]string{"n1": "zk1", "n2": "zk2", "n3": "zk3"}, reach: true, shrink: true, armed: map[string]bool{},
			leadAll: 1, leadAllUntilArmed: true}
		// Leadership moves by the operator's election only, not the fault's.
		_, stop := injectAndHeal(t, w, stickyOps{zkfFake{w}})
		if want := "window reached: n2 released after n3 shrank chaos-2"; stop == nil || !strings.HasPrefix(stop.Detail, want) {
			t.Fatalf("fault_stop %+v, want %q...", stop, want)
		}
	})
}

// zkfStuckWorld is zkfWorld whose controller (n1) failed bad conditional
// writes recently.
type zkfStuckWorld struct {
	*zkfWorld
	bad int
}

func (w zkfStuckWorld) BadVersions(_ context.Context, node int, since time.Time) (int, error) {
	if node != 1 || time.Since(since) > zkfStuckWithin+time.Second {
		return 0, nil
	}
	return w.bad, nil
}

// A controller already retrying a stale zkVersion is left alone (failing
// it over would end the harm); one that failed once and moved on is not.
func TestFailoverOnLaggingZKLeavesAStuckControllerAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tt := range []struct {
			bad       int
			wantCalls bool
			wantStop  string
		}{
			{zkfStuckCount, false, "left alone: controller n1 is already retrying a failed conditional write (3 BADVERSION in the last 3s)"},
			{1, true, "window reached"},
		} {
			w := &zkfWorld{served: map[string]string{"n1": "zk1", "n2": "zk2", "n3": "zk3"}, reach: true, shrink: true, armed: map[string]bool{}}
			path := filepath.Join(t.TempDir(), "nemesis.jsonl")
			rec := nemesis.NewFileRecorder(path)
			f := zkfOn(zkfStuckWorld{w, tt.bad}, rec, zkfFake{w})
			injectThenHeal(t, f, 0)
			rec.Close()
			w.mu.Lock()
			calls := len(w.calls)
			w.mu.Unlock()
			if (calls > 0) != tt.wantCalls {
				t.Fatalf("%d BADVERSION: %d calls, want some: %v", tt.bad, calls, tt.wantCalls)
			}
			if _, stop := lastFaultEvents(t, path); stop == nil || !strings.HasPrefix(stop.Detail, tt.wantStop) {
				t.Fatalf("%d BADVERSION: fault_stop %+v, want %q...", tt.bad, stop, tt.wantStop)
			}
			// Healed, the run may draw the fault again.
			if f.busy {
				t.Fatalf("%d BADVERSION: still marked in progress after the heal", tt.bad)
			}
		}
	})
}

// zkfLagWorld is zkfWorld with a replica.lag.time.max.
type zkfLagWorld struct {
	*zkfWorld
	lag time.Duration
}

func (w zkfLagWorld) ReplicaLagTime() time.Duration { return w.lag }

// With a replica.lag.time.max longer than zkfSlowAhead the link is slowed
// only that long before the shrinks are due, after the controller's cut
// from the others; with a short one, at once.
func TestFailoverOnLaggingZKSlowsAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tt := range []struct {
			lag       time.Duration
			want      []string
			minWindow time.Duration
		}{
			{2 * time.Second, []string{"slow zk3->zk2 4kbit", "disarm n3 controller-before-elect", "partition n1 | n3"}, 0},
			{zkfSlowAhead + 200*time.Millisecond, []string{"disarm n3 controller-before-elect", "partition n1 | n3", "slow zk3->zk2 4kbit"}, 200 * time.Millisecond},
		} {
			w := &zkfWorld{served: map[string]string{"n1": "zk1", "n2": "zk2", "n3": "zk3"}, reach: true, shrink: true, armed: map[string]bool{}}
			lw := zkfLagWorld{w, tt.lag}
			begin := time.Now()
			injectThenHeal(t, zkfOn(lw, nil, zkfFake{w}), 0)
			took := time.Since(begin)
			w.mu.Lock()
			calls := slices.Clone(w.calls)
			w.mu.Unlock()
			// Between the controller's cut from ZooKeeper and the release.
			if len(calls) < 7 || !slices.Equal(calls[3:6], tt.want) {
				t.Fatalf("lag %s: calls\n %q\nwant %q after the cut", tt.lag, calls, tt.want)
			}
			if took < tt.minWindow {
				t.Fatalf("lag %s: done in %s, want the slowing %s after the cut", tt.lag, took, tt.minWindow)
			}
		}
	})
}

// Both survivors on the ZooKeeper leader: one is cut from it until its
// session moves to a follower, and takes over from there.
func TestFailoverOnLaggingZKMovesASession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &zkfWorld{served: map[string]string{"n1": "zk1", "n2": "zk3", "n3": "zk3"}, moveTo: map[string]string{"n2": "zk2", "n3": "zk1"},
			reach: true, shrink: true, armed: map[string]bool{}, applied: 1}
		injectThenHeal(t, zkfOn(w, nil, zkfFake{w}), 0)
		w.mu.Lock()
		calls := slices.Clone(w.calls)
		w.mu.Unlock()
		want := []string{"partition n2 | zk3", "heal-net", // n2's session moves to zk2
			"arm n3 controller-before-elect=1*pause", "arm n2 controller-after-elected=1*pause", "partition n1 | zk1 zk2 zk3",
			"slow zk3->zk2 4kbit", "disarm n3 controller-before-elect", "partition n1 | n3", "disarm n2 controller-after-elected", "heal-net"}
		if !slices.Equal(calls, want) {
			t.Fatalf("calls\n %q\nwant\n %q", calls, want)
		}
	})
}

// A plan without a partition to watch is made again for a while: a broker
// restarting has no session to place yet, and once it has one it is the
// successor that leaves a shrinking leader.
func TestFailoverOnLaggingZKPlansAgain(t *testing.T) {
	for _, tt := range []struct {
		name      string
		downPolls int
		succ      string
		watch     []shrinkWatch
	}{
		// n2 leads every partition; n3 (restarting) has no session at
		// the first plan, so n2 alone is a candidate and leaves no
		// shrinking leader.
		{"n3 back by the second plan", 1, "n3", []shrinkWatch{{0, 2}, {1, 2}, {2, 2}}},
		// n3 never comes back within the wait: the last plan, nothing to
		// watch (said so at the fault's stop).
		{"n3 never back", 1 << 20, "n2", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := &zkfWorld{served: map[string]string{"n1": "zk3", "n2": "zk1", "n3": "zk2"}, leadAll: 2, downPolls: tt.downPolls}
				p, err := zkfOn(w, nil, zkfFake{w}).planSoon(t.Context(), 0)
				if err != nil {
					t.Fatal(err)
				}
				if p.succ.Name != tt.succ || !slices.Equal(p.watch, tt.watch) {
					t.Fatalf("successor %s watching %v, want %s watching %v", p.succ.Name, p.watch, tt.succ, tt.watch)
				}
			})
		})
	}
}

// A second one drawn while the first is in progress is refused, and the
// run can take another once the first healed.
func TestFailoverOnLaggingZKOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &zkfWorld{served: map[string]string{"n1": "zk1", "n2": "zk2", "n3": "zk3"}, reach: true, shrink: true, armed: map[string]bool{}}
		f := zkfOn(w, nil, zkfFake{w})
		heal, err := f.inject(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.inject(t.Context(), 1); err == nil || !strings.Contains(err.Error(), "in progress") {
			t.Fatalf("second while the first holds: %v, want refused", err)
		}
		if err := heal(t.Context()); err != nil {
			t.Fatal(err)
		}
		heal, err = f.inject(t.Context(), 1)
		if err != nil {
			t.Fatalf("after the heal: %v", err)
		}
		if err := heal(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestFailoverOnLaggingZKNeeds(t *testing.T) {
	f, ok := Lookup(FailoverOnLaggingZK)
	if !ok {
		t.Fatal("not in the catalogue")
	}
	for _, tt := range []struct {
		topo Topology
		ok   bool
	}{
		{Topology{Nodes: 3, ZKServers: 3}, true},
		{Topology{Nodes: 5, ZKServers: 5}, true},
		{Topology{Nodes: 2, ZKServers: 3}, false}, // no third broker to change a partition's state
		{Topology{Nodes: 3, ZKServers: 1}, false}, // no follower to lag
	} {
		if err := f.Available(tt.topo); (err == nil) != tt.ok {
			t.Errorf("%+v: available %v, want %v", tt.topo, err, tt.ok)
		}
	}
}

// A broker whose session moved is still listed by the server it left (cut
// off, that server never saw the connection close): the latest
// established connection says where it is now.
func TestServedBy(t *testing.T) {
	n1, n2 := netip.MustParseAddr("10.0.0.101"), netip.MustParseAddr("10.0.0.102")
	byIP := map[netip.Addr]string{n1: "n1", n2: "n2"}
	line := func(ip netip.Addr, est int64) string {
		return fmt.Sprintf(" /%s:4000[1](queued=0,sid=0x1,est=%d,to=3000)\n", ip, est)
	}
	for _, tt := range []struct {
		name string
		outs []serverCons
		want map[string]string
	}{
		{"one connection each", []serverCons{{"zk1", line(n1, 100)}, {"zk2", line(n2, 100)}},
			map[string]string{"n1": "zk1", "n2": "zk2"}},
		{"n1 moved from zk3 to zk1: the later one", []serverCons{{"zk1", line(n1, 200)}, {"zk3", line(n1, 100) + line(n2, 100)}},
			map[string]string{"n1": "zk1", "n2": "zk3"}},
		{"the same, listed the other way round", []serverCons{{"zk3", line(n1, 100)}, {"zk1", line(n1, 200)}},
			map[string]string{"n1": "zk1"}},
		{"no times to tell: left out", []serverCons{{"zk1", line(n1, 0)}, {"zk3", line(n1, 0)}},
			map[string]string{}},
		{"unknown addresses ignored", []serverCons{{"zk1", line(netip.MustParseAddr("10.0.0.9"), 5)}},
			map[string]string{}},
	} {
		if got := servedBy(byIP, tt.outs); !maps.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A controller that leads every partition is shrunk out of no ISR once cut
// off; a preferred replica election first hands the partitions back to
// their preferred replicas, and the fault then reaches its window. The
// election is asked for once only: a controller that keeps every
// partition (its preferred replica) is planned as before.
func TestFailoverOnLaggingZKElectsPreferredOffTheController(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &zkfWorld{served: map[string]string{"n1": "zk1", "n2": "zk2", "n3": "zk3"}, reach: true, shrink: true, armed: map[string]bool{}, leadAll: 1}
		calls, stop := injectAndHeal(t, w, zkfFake{w})
		if len(calls) == 0 || calls[0] != "elect-preferred chaos [0 1 2]" || slices.Index(calls[1:], calls[0]) >= 0 {
			t.Fatalf("calls %q: want one preferred election of chaos 0-2 first", calls)
		}
		if stop == nil || !strings.HasPrefix(stop.Detail, "window reached") {
			t.Fatalf("fault_stop %+v, want the window reached", stop)
		}

		// Leadership that does not move: one election, then the plan as it is.
		w = &zkfWorld{served: map[string]string{"n1": "zk1", "n2": "zk2", "n3": "zk3"}, leadAll: 1}
		p, err := zkfOn(w, nil, stickyOps{zkfFake{w}}).planSoon(t.Context(), 0)
		if err != nil || len(p.watch) != 0 || len(p.ctlLeads) != 3 {
			t.Fatalf("plan %+v, %v: want no watch, the controller leading 3", p, err)
		}
		if n := strings.Count(strings.Join(w.calls, "\n"), "elect-preferred"); n != 1 {
			t.Fatalf("%d elections, want 1: %q", n, w.calls)
		}
	})
}

// stickyOps: the controller n1 stays the leader of every partition
// whatever the election (each is its preferred replica).
type stickyOps struct{ zkfFake }

func (o stickyOps) electPreferred(_ context.Context, _ Target, topic string, parts []int32) error {
	o.w.log("elect-preferred %s %v", topic, parts)
	return nil
}

// injectAndHeal runs one failover-on-lagging-zk on w with ops to its heal,
// and returns the calls it made and its fault_stop.
func injectAndHeal(t *testing.T, w *zkfWorld, ops zkfOps) ([]string, *history.Fault) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nemesis.jsonl")
	rec := nemesis.NewFileRecorder(path)
	injectThenHeal(t, zkfOn(w, rec, ops), 0)
	rec.Close()
	_, stop := lastFaultEvents(t, path)
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.calls), stop
}

// The successor killed by another fault while it is held (a random run:
// kill-lagging-leader killed n1 at +17.9s, held down until +31.2s) does not
// answer the disarm that releases it. The release is left to the heal,
// which disarms the failpoint once the node answers, or finds the node
// down with its process gone; the record says so and the run goes on. A
// node that is up and never answers still fails the heal.
func TestFailoverOnLaggingZKSuccessorNotAnsweringTheRelease(t *testing.T) {
	pinned := map[string]string{"n1": "zk1", "n2": "zk2", "n3": "zk3"}
	upTo := []string{"arm n3 controller-before-elect=1*pause", "arm n2 controller-after-elected=1*pause", "partition n1 | zk1 zk2 zk3",
		"slow zk3->zk2 4kbit", "disarm n3 controller-before-elect", "partition n1 | n3", "disarm n2 controller-after-elected refused", "heal-net"}
	for _, tt := range []struct {
		name     string
		refuse   int
		succDown bool
		wantErr  string
		last     string   // the last call
		wantStop []string // in the fault_stop's detail
	}{
		{"back by the heal: disarmed then", 1, false, "", "disarm n2 controller-after-elected",
			[]string{"window reached: n2 released", "; n2 did not answer the disarm of controller-after-elected (", "), left to the heal; controller-after-elected disarmed at the heal"}},
		{"down through the heal: its process took the failpoint", -1, true, "", "disarm n2 controller-after-elected refused",
			[]string{"left to the heal; n2 down at the heal, its process gone with the failpoint"}},
		{"up and never answering: the heal fails", -1, false, "context deadline exceeded", "disarm n2 controller-after-elected refused",
			[]string{"left to the heal"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := &zkfWorld{served: pinned, reach: true, shrink: true, armed: map[string]bool{}, applied: 0x42,
					refuse: tt.refuse, succDown: tt.succDown}
				dir := t.TempDir()
				rec := nemesis.NewFileRecorder(filepath.Join(dir, "nemesis.jsonl"))
				heal, err := zkfOn(w, rec, zkfFake{w}).inject(t.Context(), 0)
				if err != nil {
					t.Fatal(err)
				}
				err = heal(t.Context())
				rec.Close()
				if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
					t.Fatalf("heal: %v, want %q", err, tt.wantErr)
				}
				w.mu.Lock()
				calls := slices.Clone(w.calls)
				w.mu.Unlock()
				if len(calls) <= len(upTo) || !slices.Equal(calls[:len(upTo)], upTo) || calls[len(calls)-1] != tt.last {
					t.Fatalf("calls\n %q\nwant\n %q then ... %q", calls, upTo, tt.last)
				}
				_, stop := lastFaultEvents(t, filepath.Join(dir, "nemesis.jsonl"))
				if stop == nil {
					t.Fatal("no fault_stop")
				}
				for _, want := range tt.wantStop {
					if !strings.Contains(stop.Detail, want) {
						t.Errorf("fault_stop detail %q, want %q in it", stop.Detail, want)
					}
				}
			})
		})
	}
}
