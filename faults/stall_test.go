package faults

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/nemesis"
)

// stallWorld is a three-broker, three-server cluster whose controller is
// n1, whose ZooKeeper leader is zk2, where chaos-q is led by n(q+1), and
// whose brokers' sessions are on the servers served names.
type stallWorld struct {
	mu      sync.Mutex
	served  map[string]string
	claimed map[string]bool
	ops     []string      // "stop zk3", "cont zk3"
	stopped time.Duration // longest time a server stayed stopped
	since   time.Time
}

func (w *stallWorld) Nodes() []Target {
	return []Target{{Name: "n1"}, {Name: "n2"}, {Name: "n3"}}
}
func (w *stallWorld) ZKServers() []Target {
	return []Target{{Name: "zk1"}, {Name: "zk2"}, {Name: "zk3"}}
}
func (w *stallWorld) Controller(context.Context) (int, error) { return 1, nil }
func (w *stallWorld) ZKLeader(context.Context) (int, error)   { return 2, nil }
func (w *stallWorld) PartitionLeader(_ context.Context, _ string, q int32) (int, error) {
	return int(q) + 1, nil
}
func (w *stallWorld) WorkloadTopic() (string, int32) { return "chaos", 3 }
func (w *stallWorld) PartitionISR(_ context.Context, _ string, q int32) (int, []int, error) {
	return int(q) + 1, []int{1, 2, 3}, nil
}
func (w *stallWorld) PartitionReplicas(context.Context, string) (map[int32][]int, error) {
	return nil, nil
}

func (w *stallWorld) sigstop(_ context.Context, t Target) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ops = append(w.ops, "stop "+t.Name)
	w.since = time.Now()
	return nil
}
func (w *stallWorld) sigcont(_ context.Context, t Target) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.ops); n > 0 && w.ops[n-1] == "stop "+t.Name {
		w.stopped = max(w.stopped, time.Since(w.since))
	}
	w.ops = append(w.ops, "cont "+t.Name)
	return nil
}
func (w *stallWorld) held(t Target) bool { return w.claimed[t.Name] }
func (w *stallWorld) claim(t Target) func() {
	w.claimed[t.Name] = true
	return func() { delete(w.claimed, t.Name) }
}
func (w *stallWorld) sessions(context.Context, []Target, []Target) map[string]string {
	return w.served
}

// The controller's server (even picks) and a partition leader's (odd
// picks) are stopped in stalls of a third of the session timeout, 200 ms
// apart (picks 4-7, 12-15, ...: a quarter of both), never one longer than
// the client's read timeout, for as long as the step holds; the heal leaves the server running and the history has
// one window naming the server, the broker and its role.
func TestStallZKSessionServer(t *testing.T) {
	for _, tt := range []struct {
		name   string
		pick   int
		served map[string]string
		zk     string
		detail string
		err    string
		stops  int           // in a 5 s hold
		stall  time.Duration // each stop
	}{
		{"controller's server", 0, map[string]string{"n1": "zk3", "n2": "zk2"}, "zk3",
			"zk3 (a follower) holds the session of n1, the controller: SIGSTOP for 1s, SIGCONT for 200ms", "", 5, time.Second},
		{"a leader's server", 3, map[string]string{"n1": "zk3", "n2": "zk2"}, "zk2",
			"zk2 (the ZooKeeper leader) holds the session of n2, the leader of chaos-1", "", 5, time.Second},
		// Stops at 0, 0.3, ..., 4.8 s.
		{"controller's server, quick stutter", 4, map[string]string{"n1": "zk3", "n2": "zk2"}, "zk3",
			"zk3 (a follower) holds the session of n1, the controller: SIGSTOP for 250ms, SIGCONT for 50ms", "", 17, 250 * time.Millisecond},
		{"no connection listed", 0, map[string]string{"n2": "zk2"}, "", "",
			"stall-zk-session-server: no ZooKeeper server lists n1's connection", 0, 0},
		{"server held", 0, map[string]string{"n1": "zk1"}, "", "",
			"stall-zk-session-server: zk1, the server of n1, is held by another fault", 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := &stallWorld{served: tt.served, claimed: map[string]bool{"zk1": true}}
				var buf bytes.Buffer
				stall, open := stallTiming(3 * time.Second)
				f := &zkStall{world: w, parts: w, ops: w, rec: nemesis.NewRecorder(history.NewWriter(&buf, "nemesis", 0)), stall: stall, open: open}
				heal, err := f.inject(t.Context(), tt.pick)
				if tt.err != "" {
					if err == nil || err.Error() != tt.err {
						t.Fatalf("inject: %v, want %q", err, tt.err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if !w.claimed[tt.zk] {
					t.Errorf("%s not claimed while stalled", tt.zk)
				}
				time.Sleep(5 * time.Second)
				if err := heal(t.Context()); err != nil {
					t.Fatal(err)
				}
				// Long stops at 0, 1.2, 2.4, 3.6 and 4.8 s.
				var want []string
				for range tt.stops {
					want = append(want, "stop "+tt.zk, "cont "+tt.zk)
				}
				want = append(want, "cont "+tt.zk)
				if got := strings.Join(w.ops, ", "); got != strings.Join(want, ", ") {
					t.Fatalf("ops %s\nwant %s", got, strings.Join(want, ", "))
				}
				if w.stopped != tt.stall {
					t.Errorf("longest stall %s, want %s (below the read timeout of 2s)", w.stopped, tt.stall)
				}
				if w.claimed[tt.zk] {
					t.Errorf("%s still claimed after the heal", tt.zk)
				}
				out := buf.String()
				if !strings.Contains(out, tt.detail) || !strings.Contains(out, fmt.Sprintf("%d stalls of %s on %s ended", tt.stops, tt.stall, tt.zk)) {
					t.Fatalf("recorded %s", out)
				}
			})
		})
	}
}

// The stall is shorter than the read timeout for every session timeout a
// run can have, and at most a second (under the ensemble's 2 s sync limit).
func TestStallTiming(t *testing.T) {
	for _, s := range []time.Duration{300 * time.Millisecond, time.Second, 3 * time.Second, 30 * time.Second} {
		stall, open := stallTiming(s)
		if stall >= s*2/3 || stall > time.Second || open <= 0 {
			t.Errorf("session %s: stall %s, open %s", s, stall, open)
		}
	}
}

// lateStopWorld is a stallWorld whose engine acts on a SIGSTOP request even
// when its client gave up on it: a stop whose context ends before the
// engine answers still takes effect when the engine gets to it (proceed).
type lateStopWorld struct {
	*stallWorld
	inflight chan struct{}
	proceed  chan struct{}
	once     sync.Once
}

func (w *lateStopWorld) sigstop(ctx context.Context, t Target) error {
	w.once.Do(func() { close(w.inflight) })
	select {
	case <-w.proceed:
		return w.stallWorld.sigstop(ctx, t)
	case <-ctx.Done():
		go func() {
			<-w.proceed
			w.stallWorld.sigstop(ctx, t)
		}()
		return ctx.Err()
	}
}

// A step healed while its first SIGSTOP is on its way (a step started
// after its own heal time, healed at once) leaves the server running: the
// heal's SIGCONT follows the stop instead of racing it.
func TestStallHealDuringFirstStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &lateStopWorld{stallWorld: &stallWorld{served: map[string]string{"n1": "zk3"}, claimed: map[string]bool{}},
			inflight: make(chan struct{}), proceed: make(chan struct{})}
		var buf bytes.Buffer
		stall, open := stallTiming(3 * time.Second)
		f := &zkStall{world: w, parts: w, ops: w, rec: nemesis.NewRecorder(history.NewWriter(&buf, "nemesis", 0)), stall: stall, open: open}
		heal, err := f.inject(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		<-w.inflight
		healed := make(chan error, 1)
		go func() { healed <- heal(t.Context()) }()
		// The engine answers the stop 100 ms later, or once the heal
		// returned without waiting for it.
		select {
		case err = <-healed:
			close(w.proceed)
		case <-time.After(100 * time.Millisecond):
			close(w.proceed)
			err = <-healed
		}
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := len(w.ops); n == 0 || w.ops[n-1] != "cont zk3" {
			t.Fatalf("ops %s: zk3 left stopped after the heal", strings.Join(w.ops, ", "))
		}
	})
}
