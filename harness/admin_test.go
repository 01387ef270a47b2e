package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/nemesis"
)

// fakeOperatorProcs counts claims and answers StopTarget as told.
type fakeOperatorProcs struct {
	claims  int
	stopped int
	how     nemesis.Stopped
	err     error
}

func (p *fakeOperatorProcs) Claim(nemesis.Target) func() {
	p.claims++
	return func() { p.claims-- }
}

func (p *fakeOperatorProcs) StopTarget(context.Context, nemesis.Target, time.Duration) (nemesis.Stopped, error) {
	p.stopped++
	if p.claims == 0 {
		return p.how, errors.New("stopped unclaimed")
	}
	return p.how, p.err
}

// An operator's stop claims its broker while it waits for it to be up and
// while it stops it (a fault that picked it meanwhile would race the
// shutdown), lets go of the claim after (the nemesis holds a stopped
// broker until its start), and says when its SIGTERM call failed or the
// process was killed.
func TestOperatorStop(t *testing.T) {
	notReady := errors.New("n1 has not registered since its last start")
	tests := []struct {
		name     string
		ready    error
		how      nemesis.Stopped
		stopErr  error
		wantErr  error
		stops    int
		notes    []string
		noteNone bool
	}{
		{name: "stopped", stops: 1, noteNone: true},
		{name: "not up", ready: notReady, wantErr: notReady, noteNone: true},
		{name: "signal failed", how: nemesis.Stopped{SignalErr: context.DeadlineExceeded}, stops: 1,
			notes: []string{"SIGTERM call failed (context deadline exceeded); sent again"}},
		{name: "killed", how: nemesis.Stopped{Killed: true}, stops: 1, notes: []string{"killed"}},
		{name: "kill failed", how: nemesis.Stopped{Killed: true}, stopErr: context.DeadlineExceeded, wantErr: context.DeadlineExceeded,
			stops: 1, notes: []string{"killed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &fakeOperatorProcs{how: tt.how, err: tt.stopErr}
			n1 := nemesis.Target{Name: "n1"}
			claimedWhileWaiting := false
			var notes []string
			err := operatorStop(t.Context(), p, n1, func(context.Context) error {
				claimedWhileWaiting = p.claims > 0
				return tt.ready
			}, func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) })
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Errorf("stop: %v, want %v", err, tt.wantErr)
			}
			if !claimedWhileWaiting {
				t.Error("n1 not claimed while the operator waited for it to be up")
			}
			if p.claims != 0 {
				t.Errorf("%d claims left after the stop", p.claims)
			}
			if p.stopped != tt.stops {
				t.Errorf("%d stops, want %d", p.stopped, tt.stops)
			}
			if tt.noteNone && len(notes) > 0 {
				t.Errorf("notes %q, want none", notes)
			}
			for _, want := range tt.notes {
				if !strings.Contains(strings.Join(notes, "\n"), want) {
					t.Errorf("notes %q, want one saying %q", notes, want)
				}
			}
		})
	}
}
