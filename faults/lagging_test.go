package faults

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkchaos/zkchaos/nemesis"
)

func TestLaggingPartition(t *testing.T) {
	rr := map[int32][]int{0: {1, 2, 3}, 1: {2, 3, 1}, 2: {3, 1, 2}}
	for _, tt := range []struct {
		name    string
		pick    int
		leaders map[int32]int
		assign  map[int32][]int
		want    int32
	}{
		{"every leader preferred: pick mod parts", 7, map[int32]int{0: 1, 1: 2, 2: 3}, rr, 1},
		{"one partition off its preferred replica", 7, map[int32]int{0: 1, 1: 3, 2: 3}, rr, 1},
		{"one partition off its preferred replica, any pick", 6, map[int32]int{0: 1, 1: 3, 2: 3}, rr, 1},
		{"two off: the pick chooses among them", 5, map[int32]int{0: 2, 1: 3, 2: 3}, rr, 1},
		{"two off: the other pick", 4, map[int32]int{0: 2, 1: 3, 2: 3}, rr, 0},
		{"an offline partition is no candidate", 5, map[int32]int{0: -1, 1: 2, 2: 1}, rr, 2},
		{"an unread leader is no candidate", 3, map[int32]int{1: 2, 2: 1}, rr, 2},
		{"no assignment: pick mod parts", 5, map[int32]int{0: 2, 1: 3, 2: 1}, nil, 2},
		{"a reordered assignment moves the preferred replica", 8, map[int32]int{0: 1, 1: 2, 2: 3}, map[int32][]int{0: {1, 2, 3}, 1: {3, 2, 1}, 2: {3, 1, 2}}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := laggingPartition(tt.pick, 3, tt.leaders, tt.assign); got != tt.want {
				t.Errorf("laggingPartition(%d) = %d, want %d", tt.pick, got, tt.want)
			}
		})
	}
}

// recWorld is the partitions of topic chaos as the recovery election sees
// them after the fault killed a leader: states[q] until the controller
// takes the death (after takeAfter reads of the fault's partition), then
// offline[q]. Its controller runs a preferred election as Kafka's does
// (the preferred replica must be live and in the ISR), unless ignoreISR.
type recWorld struct {
	mu              sync.Mutex
	states, offline map[int32]recState
	assign          map[int32][]int
	live            []int
	takeAfter       int
	reads           int
	ignoreISR       bool
	asked           [][]int32
	electErr        error
}

type recState struct {
	leader int
	isr    []int
}

func (w *recWorld) PartitionISR(_ context.Context, _ string, q int32) (int, []int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reads++
	st := w.states[q]
	if w.reads > w.takeAfter {
		if o, ok := w.offline[q]; ok {
			st = o
		}
	}
	return st.leader, st.isr, nil
}

func (w *recWorld) PartitionReplicas(context.Context, string) (map[int32][]int, error) {
	return w.assign, nil
}

func (w *recWorld) SessionTimeout() time.Duration { return 10 * time.Millisecond }

func (w *recWorld) ElectPreferred(_ context.Context, _ string, ps []int32) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.asked = append(w.asked, slices.Clone(ps))
	if w.electErr != nil {
		return w.electErr
	}
	for _, q := range ps {
		st := w.states[q]
		if o, ok := w.offline[q]; ok {
			st = o
		}
		pref := w.assign[q][0]
		if st.leader == pref || !slices.Contains(w.live, pref) || (!w.ignoreISR && !slices.Contains(st.isr, pref)) {
			continue
		}
		st.leader = pref
		w.offline[q] = st
	}
	return nil
}

func (w *recWorld) WorkloadTopic() (string, int32) { return "chaos", 3 }

// recoverOn is kill-lagging-leader on w, asking e (nil: nobody) for the
// recovery election.
func recoverOn(w *recWorld, e PreferredElector, rec *nemesis.Recorder) *laggingLeader {
	return &laggingLeader{rec: rec, parts: w, elector: e, session: w.SessionTimeout()}
}

func TestRecoverPreferred(t *testing.T) {
	rr := func() map[int32][]int { return map[int32][]int{0: {1, 2, 3}, 1: {2, 3, 1}, 2: {3, 1, 2}} }
	for _, tt := range []struct {
		name string
		w    *recWorld
		// noElect: the run has no PreferredElector.
		noElect bool
		want    []int32 // the partitions asked for
		// after is chaos-1's leader once the request was handled.
		after int
	}{
		{
			// n1 led chaos-0 (its own) and chaos-1 (n2's) with ISR [1];
			// killed, both go offline with ISR [1]. chaos-1's preferred
			// replica n2 is live but out of the ISR: asked, refused.
			name: "offline partition whose preferred replica lags: asked, refused",
			w: &recWorld{
				states:  map[int32]recState{0: {1, []int{1}}, 1: {1, []int{1}}, 2: {3, []int{3, 2}}},
				offline: map[int32]recState{0: {-1, []int{1}}, 1: {-1, []int{1}}},
				assign:  rr(), live: []int{2, 3}, takeAfter: 4,
			},
			want: []int32{1}, after: -1,
		},
		{
			name: "the same with a controller that ignores the ISR: the lagging replica is elected",
			w: &recWorld{
				states:  map[int32]recState{0: {1, []int{1}}, 1: {1, []int{1}}, 2: {3, []int{3, 2}}},
				offline: map[int32]recState{0: {-1, []int{1}}, 1: {-1, []int{1}}},
				assign:  rr(), live: []int{2, 3}, takeAfter: 4, ignoreISR: true,
			},
			want: []int32{1}, after: 2,
		},
		{
			// A clean failover already elected the preferred replica:
			// nothing to ask.
			name: "preferred replica already leads",
			w: &recWorld{
				states:  map[int32]recState{0: {1, []int{1, 2}}, 1: {1, []int{1, 2}}, 2: {3, []int{3}}},
				offline: map[int32]recState{0: {2, []int{2}}, 1: {2, []int{2}}},
				assign:  rr(), live: []int{2, 3}, takeAfter: 3,
			},
			after: 2,
		},
		{
			name: "the killed leader led only partitions it is preferred for",
			w: &recWorld{
				states:  map[int32]recState{0: {1, []int{1}}, 1: {2, []int{2, 3}}, 2: {3, []int{3, 2}}},
				offline: map[int32]recState{0: {-1, []int{1}}},
				assign:  rr(), live: []int{2, 3}, takeAfter: 3,
			},
			after: 2,
		},
		{
			name: "a world without preferred elections asks nothing",
			w: &recWorld{
				states:  map[int32]recState{0: {1, []int{1}}, 1: {1, []int{1}}, 2: {3, []int{3, 2}}},
				offline: map[int32]recState{0: {-1, []int{1}}, 1: {-1, []int{1}}},
				assign:  rr(), live: []int{2, 3}, takeAfter: 4, ignoreISR: true,
			},
			noElect: true, after: 1,
		},
		{
			// The controller never takes the death within offlineWithin:
			// the request is made anyway.
			name: "the controller is slow: asked after the wait",
			w: &recWorld{
				states:  map[int32]recState{0: {1, []int{1}}, 1: {1, []int{1}}, 2: {3, []int{3, 2}}},
				offline: map[int32]recState{},
				assign:  rr(), live: []int{2, 3}, takeAfter: 1 << 30, electErr: errors.New("zookeeper unreachable"),
			},
			want: []int32{1}, after: 1,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var e PreferredElector = tt.w
				if tt.noElect {
					e = nil
				}
				got := recoverOn(tt.w, e, nil).recoverPreferred(t.Context(), "chaos", 3, 1, 1)
				if !slices.Equal(got, tt.want) {
					t.Errorf("asked for %v, want %v", got, tt.want)
				}
				if len(tt.want) > 0 && (len(tt.w.asked) != 1 || !slices.Equal(tt.w.asked[0], tt.want)) {
					t.Errorf("the world was asked %v, want one request for %v", tt.w.asked, tt.want)
				}
				if len(tt.want) == 0 && len(tt.w.asked) > 0 {
					t.Errorf("the world was asked %v, want nothing", tt.w.asked)
				}
				if l, _, _ := tt.w.PartitionISR(t.Context(), "chaos", 1); l != tt.after {
					t.Errorf("chaos-1's leader after = %d, want %d", l, tt.after)
				}
			})
		})
	}
}

// TestRecoverPreferredRecords: the request is a preferred-election fault in
// the history, its detail naming the partitions, their preferred replicas
// and their states, its stop what the controller made of it.
func TestRecoverPreferredRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &recWorld{
			states:  map[int32]recState{0: {1, []int{1}}, 1: {1, []int{1}}, 2: {3, []int{3, 2}}},
			offline: map[int32]recState{0: {-1, []int{1}}, 1: {-1, []int{1}}},
			assign:  map[int32][]int{0: {1, 2, 3}, 1: {2, 3, 1}, 2: {3, 1, 2}}, live: []int{2, 3}, takeAfter: 4,
		}
		file := filepath.Join(t.TempDir(), "nemesis.jsonl")
		rec := nemesis.NewFileRecorder(file)
		recoverOn(w, w, rec).recoverPreferred(t.Context(), "chaos", 3, 1, 1)
		rec.Close()
		start, stop := lastFaultEvents(t, file)
		if start == nil || stop == nil {
			t.Fatalf("recorded %+v / %+v, want a start and a stop", start, stop)
		}
		for _, want := range []string{"n1", "chaos-1 (preferred replica n2; leader -1, ISR [1])", "kill-lagging-leader"} {
			if start.Name != preferredElection || !strings.Contains(start.Detail, want) {
				t.Errorf("start %s %q does not say %q", start.Name, start.Detail, want)
			}
		}
		if want := "chaos-1 leader -1, ISR [1]"; !strings.Contains(stop.Detail, want) {
			t.Errorf("stop %q does not say %q", stop.Detail, want)
		}
		if fmt.Sprint(start.Targets) != "[n1]" {
			t.Errorf("targets %v, want [n1]", start.Targets)
		}
	})
}

// lagWorld is chaos-0 (one partition, replicas [1 2 3]) as kill-lagging-leader
// sees it, and the fault's operations on it: n1 leads with ISR [1 2 3];
// from read moveAt on, n2 leads with ISR [2 1 3] (moveAt 0: never); from
// read shrinkAt on, the ISR is its leader alone (0: never). The fault reads
// twice before its cut, then once per 200 ms poll.
type lagWorld struct {
	callLog
	moveAt, shrinkAt int
	reads            int
	claims           int
	outcomes         map[string]string
}

func (w *lagWorld) Nodes() []Target                                             { return []Target{{Name: "n1"}, {Name: "n2"}, {Name: "n3"}} }
func (w *lagWorld) ZKServers() []Target                                         { return []Target{{Name: "zk1"}} }
func (w *lagWorld) Controller(context.Context) (int, error)                     { return 3, nil }
func (w *lagWorld) ZKLeader(context.Context) (int, error)                       { return 1, nil }
func (w *lagWorld) PartitionLeader(context.Context, string, int32) (int, error) { return 1, nil }
func (w *lagWorld) WorkloadTopic() (string, int32)                              { return "chaos", 1 }
func (w *lagWorld) PartitionReplicas(context.Context, string) (map[int32][]int, error) {
	return map[int32][]int{0: {1, 2, 3}}, nil
}
func (w *lagWorld) PartitionISR(context.Context, string, int32) (int, []int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reads++
	leader, isr := 1, []int{1, 2, 3}
	if w.moveAt > 0 && w.reads >= w.moveAt {
		leader, isr = 2, []int{2, 1, 3}
	}
	if w.shrinkAt > 0 && w.reads >= w.shrinkAt {
		isr = []int{leader}
	}
	return leader, isr, nil
}

func (w *lagWorld) kill(_ context.Context, t Target) error  { w.log("kill %s", t.Name); return nil }
func (w *lagWorld) start(_ context.Context, t Target) error { w.log("start %s", t.Name); return nil }
func (w *lagWorld) claim(Target) func() {
	w.mu.Lock()
	w.claims++
	w.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			w.claims--
			w.mu.Unlock()
		})
	}
}
func (w *lagWorld) holdPartition(topic string, p int32) func() {
	w.log("hold %s-%d", topic, p)
	return w.claim(Target{})
}
func (w *lagWorld) partition(_ context.Context, _ string, a, b []Target) error {
	w.log("cut %s | %s", strings.Join(targetNames(a), " "), strings.Join(targetNames(b), " "))
	return nil
}
func (w *lagWorld) healNet(context.Context) error { w.log("heal-net"); return nil }
func (w *lagWorld) netOutcome(name, outcome string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.outcomes[name] = outcome
}

// kill-lagging-leader cuts the leader from its followers, kills it once
// its ISR is itself alone (following leadership that moves meanwhile) and
// keeps it down past the failover before heal restarts it; an ISR that
// never shrinks leaves it a partition, said so on its stop event. Every
// claim it made is released at heal.
func TestKillLaggingLeader(t *testing.T) {
	const session = time.Second
	for _, tt := range []struct {
		name             string
		moveAt, shrinkAt int
		want             []string
		outcome          string
		minHeal          time.Duration // from the injection to heal's return
	}{
		{"the ISR shrinks: killed, kept down, started again", 0, 5,
			[]string{"hold chaos-0", "cut n1 | n2 n3", "kill n1", "heal-net", "start n1"},
			"killed leader n1 of chaos-0 400ms after the cut, its ISR [1] alone", keepDown(session)},
		{"leadership moves during the cut: the new leader is cut and killed", 3, 6,
			[]string{"hold chaos-0", "cut n1 | n2 n3", "cut n2 | n1 n3", "kill n2", "heal-net", "start n2"},
			"killed leader n2 of chaos-0 600ms after the cut, its ISR [2] alone", keepDown(session)},
		{"the ISR never shrinks: not killed", 0, 0,
			[]string{"hold chaos-0", "cut n1 | n2 n3", "heal-net"},
			"not killed: the ISR of chaos-0 was still [1 2 3] 13.2s after its leader n1 was cut off from the other brokers", laggingWithin(session)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := &lagWorld{moveAt: tt.moveAt, shrinkAt: tt.shrinkAt, outcomes: map[string]string{}}
				f := &laggingLeader{world: w, ops: w, parts: w, session: session}
				begin := time.Now()
				injectThenHeal(t, f, 0)
				took := time.Since(begin)
				w.mu.Lock()
				defer w.mu.Unlock()
				if !slices.Equal(w.calls, tt.want) {
					t.Errorf("calls %q, want %q", w.calls, tt.want)
				}
				if got := w.outcomes[string(KillLaggingLeader)]; got != tt.outcome {
					t.Errorf("outcome %q, want %q", got, tt.outcome)
				}
				if took < tt.minHeal {
					t.Errorf("healed %s after the injection, want %s at least", took, tt.minHeal)
				}
				if w.claims != 0 {
					t.Errorf("%d claims left after heal", w.claims)
				}
			})
		})
	}
}
