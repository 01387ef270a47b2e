package nemesis

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/history"
)

// fakeEngine is procOps that logs each call and can hold a call until the
// test lets it go, or fail it, as a loaded engine does.
type fakeEngine struct {
	mu    sync.Mutex
	calls []string
	// gate, when set for an operation ("kill", "start"), holds that
	// call: it reports on entered and returns when gate is closed.
	gate    map[string]chan struct{}
	entered chan string
	fail    map[string]error
	// failFirst fails only the next call of an operation.
	failFirst map[string]error
	// The process as the kernel sees it: sigstopped by a pause that
	// landed (landPause, even one whose call failed), running again after
	// a resume unless resumeNoEffect.
	landPause, resumeNoEffect, sigstopped bool
}

// onFakeEngine is a Nemesis on e, recording to a file in t's temp dir
// (path), and its broker n1.
func onFakeEngine(t *testing.T, e *fakeEngine) (n *Nemesis, rec *Recorder, path string, n1 Target) {
	path = filepath.Join(t.TempDir(), "nemesis.jsonl")
	rec = NewFileRecorder(path)
	n = New(nil, rec)
	n.ops = e
	return n, rec, path, Target{Name: "n1", Container: &docker.Container{Name: "n1"}}
}

// passHeld waits for op's gated call to begin, checks that n holds tg
// while it is in flight, and lets it return.
func (e *fakeEngine) passHeld(t *testing.T, n *Nemesis, tg Target, op string) {
	t.Helper()
	<-e.entered
	if !n.Holds(tg) {
		t.Errorf("%s not held while its %s is in flight", tg.Name, op)
	}
	e.mu.Lock()
	close(e.gate[op])
	e.mu.Unlock()
}

func (e *fakeEngine) do(op string, c *docker.Container) error {
	e.mu.Lock()
	e.calls = append(e.calls, op+" "+c.Name)
	g, err := e.gate[op], e.fail[op]
	if ferr, ok := e.failFirst[op]; ok {
		err = ferr
		delete(e.failFirst, op)
	}
	switch {
	case op == "pause" && e.landPause:
		e.sigstopped = true
	case op == "resume" && !e.resumeNoEffect:
		e.sigstopped = false
	}
	e.mu.Unlock()
	if g != nil {
		e.entered <- op
		<-g
	}
	return err
}
func (e *fakeEngine) kill(_ context.Context, c *docker.Container) error   { return e.do("kill", c) }
func (e *fakeEngine) start(_ context.Context, c *docker.Container) error  { return e.do("start", c) }
func (e *fakeEngine) pause(_ context.Context, c *docker.Container) error  { return e.do("pause", c) }
func (e *fakeEngine) resume(_ context.Context, c *docker.Container) error { return e.do("resume", c) }
func (e *fakeEngine) reapply(context.Context, *docker.Container) error    { return nil }
func (e *fakeEngine) bounce(_ context.Context, c *docker.Container) (time.Duration, error) {
	return 0, e.do("bounce", c)
}
func (e *fakeEngine) terminate(_ context.Context, c *docker.Container) error {
	return e.do("terminate", c)
}
func (e *fakeEngine) waitExited(_ context.Context, c *docker.Container) error {
	return e.do("wait", c)
}
func (e *fakeEngine) stopped(context.Context, *docker.Container) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sigstopped, nil
}

func (e *fakeEngine) log() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.calls)
}

// faultStops reads the stop events of the recorded faults, by fault id.
func faultStops(t *testing.T, path string) map[string]int {
	t.Helper()
	evs, _, err := history.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	stops := map[string]int{}
	for _, e := range evs {
		if e.Kind == history.KindFaultStop {
			stops[e.Fault.ID]++
		}
	}
	return stops
}

// A broker stays held while the engine is killing or starting it: under
// load a start took 32s, and a crash that picked the broker meanwhile (n1,
// dense crash-lose-unflushed, seed 42) sent a kill that raced the start.
func TestHeldWhileKillOrStartInFlight(t *testing.T) {
	for _, op := range []string{"kill", "start"} {
		t.Run(op, func(t *testing.T) {
			e := &fakeEngine{gate: map[string]chan struct{}{op: make(chan struct{})}, entered: make(chan string, 1)}
			rec := NewFileRecorder(filepath.Join(t.TempDir(), "nemesis.jsonl"))
			defer rec.Close()
			n := New(nil, rec)
			n.ops = e
			n1 := Target{Name: "n1", Container: &docker.Container{Name: "n1"}}
			done := make(chan error, 1)
			if op == "kill" {
				go func() { done <- n.KillTarget(t.Context(), n1) }()
			} else {
				e.mu.Lock()
				e.gate = nil
				e.mu.Unlock()
				if err := n.KillTarget(t.Context(), n1); err != nil {
					t.Fatal(err)
				}
				e.mu.Lock()
				e.gate = map[string]chan struct{}{op: make(chan struct{})}
				e.mu.Unlock()
				go func() { done <- n.StartTarget(t.Context(), n1) }()
			}
			e.passHeld(t, n, n1, op)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if held := n.Holds(n1); held != (op == "kill") {
				t.Errorf("after the %s returned, held %v", op, held)
			}
		})
	}
}

// A kill whose request failed may still be carried out by the engine (a
// SIGKILL cut off by the end of the workload killed n1 10s after it was
// sent): the broker stays held and Heal starts it again, and the fault,
// already stopped with its error, is not stopped twice.
func TestFailedKillStartedAtHeal(t *testing.T) {
	e := &fakeEngine{fail: map[string]error{"kill": context.DeadlineExceeded}}
	n, rec, path, n1 := onFakeEngine(t, e)
	if err := n.KillTarget(t.Context(), n1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("kill: %v, want its error", err)
	}
	if !n.Holds(n1) {
		t.Error("n1 free after a kill of unknown outcome: another fault may pick it")
	}
	e.mu.Lock()
	e.fail = nil
	e.mu.Unlock()
	if err := n.Heal(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := e.log(), []string{"kill n1", "start n1"}; !slices.Equal(got, want) {
		t.Errorf("engine calls %q, want %q", got, want)
	}
	if n.Holds(n1) {
		t.Error("n1 still held after Heal")
	}
	rec.Close()
	if stops := faultStops(t, path); len(stops) != 1 || stops["f1"] != 1 {
		t.Errorf("stop events %v, want one for f1", stops)
	}
}

// A bounce whose engine call failed may have killed the broker without
// starting it (or kill it later, as a failed kill can): it is held like a
// failed kill, and Heal starts it.
func TestFailedBounceStartedAtHeal(t *testing.T) {
	e := &fakeEngine{fail: map[string]error{"bounce": context.DeadlineExceeded}}
	n, rec, path, n1 := onFakeEngine(t, e)
	if _, err := n.BounceTarget(t.Context(), n1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("bounce: %v, want its error", err)
	}
	if !n.Holds(n1) {
		t.Error("n1 free after a bounce of unknown outcome: another fault may pick it")
	}
	e.mu.Lock()
	e.fail = nil
	e.mu.Unlock()
	if err := n.Heal(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := e.log(), []string{"bounce n1", "start n1"}; !slices.Equal(got, want) {
		t.Errorf("engine calls %q, want %q", got, want)
	}
	rec.Close()
	if stops := faultStops(t, path); len(stops) != 1 || stops["f1"] != 1 {
		t.Errorf("stop events %v, want one for f1", stops)
	}
}

// A kill that failed while another kill holds the broker leaves that
// fault's heal to record its stop.
func TestFailedKillKeepsTheHeldFault(t *testing.T) {
	e := &fakeEngine{}
	n, rec, path, n1 := onFakeEngine(t, e)
	if err := n.KillTarget(t.Context(), n1); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	e.fail = map[string]error{"kill": errors.New("engine busy")}
	e.mu.Unlock()
	if err := n.KillTarget(t.Context(), n1); err == nil {
		t.Fatal("the second kill's error was lost")
	}
	e.mu.Lock()
	e.fail = nil
	e.mu.Unlock()
	if err := n.StartTarget(t.Context(), n1); err != nil {
		t.Fatal(err)
	}
	rec.Close()
	if stops := faultStops(t, path); len(stops) != 2 || stops["f1"] != 1 || stops["f2"] != 1 {
		t.Errorf("stop events %v, want one each for f1 and f2", stops)
	}
}
