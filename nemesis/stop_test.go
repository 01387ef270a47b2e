package nemesis

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/docker"
)

// An operator's stop holds the broker from its SIGTERM until its start:
// a fault that picked it meanwhile would race the shutdown or the start.
// The operator's workload records the operation; the nemesis records no
// fault for it.
func TestOperatorStopHeldUntilStarted(t *testing.T) {
	e := &fakeEngine{gate: map[string]chan struct{}{"terminate": make(chan struct{}), "wait": make(chan struct{})}, entered: make(chan string, 1)}
	n, rec, path, n1 := onFakeEngine(t, e)
	done := make(chan error, 1)
	go func() {
		how, err := n.StopTarget(t.Context(), n1, time.Second)
		if err == nil && (how.SignalErr != nil || how.Killed) {
			err = errors.New("the stop says it failed a signal or killed")
		}
		done <- err
	}()
	for _, op := range []string{"terminate", "wait"} {
		e.passHeld(t, n, n1, op)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !n.Holds(n1) {
		t.Error("n1 free between the operator's stop and its start")
	}
	if err := n.StartTarget(t.Context(), n1); err != nil {
		t.Fatal(err)
	}
	if n.Holds(n1) {
		t.Error("n1 still held after its start")
	}
	if got, want := e.log(), []string{"terminate n1", "wait n1", "start n1"}; !slices.Equal(got, want) {
		t.Errorf("engine calls %q, want %q", got, want)
	}
	rec.Close()
	if evs := faultEvents(t, path); len(evs) != 0 {
		t.Errorf("recorded %d fault events for an operator's stop, want none", len(evs))
	}
}

// A SIGTERM whose call failed may still be carried out (a broker stopped
// 0.1s after the end of a run's heal phase had listed it running): it is
// sent again, the stop waits for the exit as ever, and a broker its
// operator does not start again is started by Heal.
func TestOperatorStopSignalFailed(t *testing.T) {
	tests := []struct {
		name      string
		failFirst map[string]error
		fail      map[string]error
		calls     []string
		wantErrs  int // errors in SignalErr
	}{
		{name: "the first call fails", failFirst: map[string]error{"terminate": context.DeadlineExceeded},
			calls: []string{"terminate n1", "terminate n1", "wait n1", "start n1"}, wantErrs: 1},
		{name: "both calls fail", fail: map[string]error{"terminate": context.DeadlineExceeded},
			calls: []string{"terminate n1", "terminate n1", "wait n1", "start n1"}, wantErrs: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &fakeEngine{failFirst: tt.failFirst, fail: tt.fail}
			n := New(nil, nil)
			n.ops = e
			n1 := Target{Name: "n1", Container: &docker.Container{Name: "n1"}}
			how, err := n.StopTarget(t.Context(), n1, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(how.SignalErr, context.DeadlineExceeded) {
				t.Errorf("SignalErr %v, want the failed call's error", how.SignalErr)
			}
			if got := strings.Count(how.SignalErr.Error(), context.DeadlineExceeded.Error()); got != tt.wantErrs {
				t.Errorf("SignalErr %q holds %d errors, want %d", how.SignalErr, got, tt.wantErrs)
			}
			if !n.Holds(n1) {
				t.Error("n1 free after a stop whose signal may have landed")
			}
			if err := n.Heal(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := e.log(); !slices.Equal(got, tt.calls) {
				t.Errorf("engine calls %q, want %q", got, tt.calls)
			}
			if n.Holds(n1) {
				t.Error("n1 still held after Heal")
			}
		})
	}
}

// The signal is sent whatever becomes of the operator's context after it
// was: a stop cut short would leave a SIGTERM the engine may still
// deliver after the run's end listed the broker running. With the context
// done before anything was sent, nothing is.
func TestOperatorStopContext(t *testing.T) {
	t.Run("done before", func(t *testing.T) {
		e := &fakeEngine{}
		n := New(nil, nil)
		n.ops = e
		n1 := Target{Name: "n1", Container: &docker.Container{Name: "n1"}}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := n.StopTarget(ctx, n1, time.Second); !errors.Is(err, context.Canceled) {
			t.Errorf("stop: %v, want the context's error", err)
		}
		if got := e.log(); len(got) != 0 {
			t.Errorf("engine calls %q, want none", got)
		}
		if n.Holds(n1) {
			t.Error("n1 held by a stop that sent nothing")
		}
	})
	t.Run("done while the signal is in flight", func(t *testing.T) {
		e := &fakeEngine{gate: map[string]chan struct{}{"terminate": make(chan struct{})}, entered: make(chan string, 1)}
		n := New(nil, nil)
		n.ops = &ctxEngine{e}
		n1 := Target{Name: "n1", Container: &docker.Container{Name: "n1"}}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			how, err := n.StopTarget(ctx, n1, time.Second)
			if err == nil && how.SignalErr != nil {
				err = how.SignalErr
			}
			done <- err
		}()
		<-e.entered
		cancel()
		e.mu.Lock()
		close(e.gate["terminate"])
		e.mu.Unlock()
		if err := <-done; err != nil {
			t.Fatalf("stop: %v, want it carried out", err)
		}
		if got, want := e.log(), []string{"terminate n1", "wait n1"}; !slices.Equal(got, want) {
			t.Errorf("engine calls %q, want %q", got, want)
		}
	})
}

// ctxEngine fails a call whose context is done when it returns, as the
// engine's client does.
type ctxEngine struct{ *fakeEngine }

func (e *ctxEngine) terminate(ctx context.Context, c *docker.Container) error {
	if err := e.fakeEngine.terminate(ctx, c); err != nil {
		return err
	}
	return ctx.Err()
}

func (e *ctxEngine) waitExited(ctx context.Context, c *docker.Container) error {
	if err := e.fakeEngine.waitExited(ctx, c); err != nil {
		return err
	}
	return ctx.Err()
}

// A process that has not exited within the wait is killed, recorded as a
// kill, and held until its start records the kill's stop.
func TestOperatorStopKilledAfterTheWait(t *testing.T) {
	e := &fakeEngine{fail: map[string]error{"wait": context.DeadlineExceeded}}
	n, rec, path, n1 := onFakeEngine(t, e)
	how, err := n.StopTarget(t.Context(), n1, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !how.Killed {
		t.Error("the stop does not say it killed n1")
	}
	if !n.Holds(n1) {
		t.Error("n1 free after its kill")
	}
	if err := n.StartTarget(t.Context(), n1); err != nil {
		t.Fatal(err)
	}
	if got, want := e.log(), []string{"terminate n1", "wait n1", "kill n1", "start n1"}; !slices.Equal(got, want) {
		t.Errorf("engine calls %q, want %q", got, want)
	}
	rec.Close()
	if stops := faultStops(t, path); len(stops) != 1 || stops["f1"] != 1 {
		t.Errorf("stop events %v, want one for the kill f1", stops)
	}
}
