package nemesis

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
)

// faultEvents reads the fault events recorded at path; none when the
// recorder never created the file.
func faultEvents(t *testing.T, path string) []history.Event {
	t.Helper()
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	evs, _, err := history.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// A start whose call failed may not have happened (or may happen later):
// the broker stays held and Heal starts it, without recording the
// fault's stop twice.
func TestFailedStartStartedAtHeal(t *testing.T) {
	e := &fakeEngine{}
	n, rec, path, n1 := onFakeEngine(t, e)
	if err := n.KillTarget(t.Context(), n1); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	e.failFirst = map[string]error{"start": context.DeadlineExceeded}
	e.mu.Unlock()
	if err := n.StartTarget(t.Context(), n1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("start: %v, want its error", err)
	}
	if !n.Holds(n1) {
		t.Error("n1 free after a start of unknown outcome")
	}
	if err := n.Heal(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := e.log(), []string{"kill n1", "start n1", "start n1"}; !slices.Equal(got, want) {
		t.Errorf("engine calls %q, want %q", got, want)
	}
	rec.Close()
	if stops := faultStops(t, path); len(stops) != 1 || stops["f1"] != 1 {
		t.Errorf("stop events %v, want one for f1", stops)
	}
}

// A pause whose call failed is resumed at once. It stays held until Heal
// (whose resume catches a SIGSTOP the engine delivers later still) unless
// the process was seen stopped before that resume and running after it:
// the signal landed, a signal lands once, and the broker is free for
// other faults again.
func TestFailedPauseHold(t *testing.T) {
	tests := []struct {
		name                      string
		landPause, resumeNoEffect bool
		held                      bool
		calls                     []string
	}{
		{name: "landed and undone", landPause: true,
			calls: []string{"pause n1", "resume n1"}},
		{name: "not seen landed", held: true,
			calls: []string{"pause n1", "resume n1", "resume n1"}},
		{name: "still stopped after the resume", landPause: true, resumeNoEffect: true, held: true,
			calls: []string{"pause n1", "resume n1", "resume n1"}},
	}
	defer func(d time.Duration) { stopSettle = d }(stopSettle)
	stopSettle = 50 * time.Millisecond
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &fakeEngine{fail: map[string]error{"pause": context.DeadlineExceeded}, landPause: tt.landPause, resumeNoEffect: tt.resumeNoEffect}
			n, rec, path, n1 := onFakeEngine(t, e)
			if err := n.PauseTarget(t.Context(), n1); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("pause: %v, want its error", err)
			}
			if got := n.Holds(n1); got != tt.held {
				t.Errorf("held after the failed pause: %v, want %v", got, tt.held)
			}
			if err := n.Heal(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := e.log(); !slices.Equal(got, tt.calls) {
				t.Errorf("engine calls %q, want %q", got, tt.calls)
			}
			rec.Close()
			var stop *history.Event
			for _, ev := range faultEvents(t, path) {
				if ev.Kind == history.KindFaultStop {
					if stop != nil {
						t.Fatalf("two stop events for the pause")
					}
					stop = &ev
				}
			}
			if stop == nil {
				t.Fatal("no stop event for the pause")
			}
			if landed := strings.Contains(stop.Fault.Error, "landed"); landed != !tt.held {
				t.Errorf("stop event's error %q; want it to say the SIGSTOP landed: %v", stop.Fault.Error, !tt.held)
			}
		})
	}
}

func TestStatStopped(t *testing.T) {
	tests := []struct {
		stat    string
		stopped bool
		bad     bool
	}{
		{stat: "1 (kafkanode) S 0 1 1 0 -1 4194560 2817", stopped: false},
		{stat: "1 (kafkanode) T 0 1 1 0 -1 4194560 2817", stopped: true},
		{stat: "7 (a) b) T) R 1 7 7", stopped: false},
		{stat: "7 (a (T) T 1 7 7", stopped: true},
		{stat: "1 (kafkanode) t 0 1", stopped: false},
		{stat: "garbage", bad: true},
		{stat: "1 (x)", bad: true},
	}
	for _, tt := range tests {
		got, err := statStopped([]byte(tt.stat))
		if (err != nil) != tt.bad || got != tt.stopped {
			t.Errorf("statStopped(%q) = %v, %v; want %v, error %v", tt.stat, got, err, tt.stopped, tt.bad)
		}
	}
}
