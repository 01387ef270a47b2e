package reprobench

import (
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
)

const base = int64(1_780_000_000_000_000_000)

func at(ms int) int64 { return base + int64(ms)*int64(time.Millisecond) }

func phaseEv(ms int, name, mark string) history.Event {
	return history.Event{Time: at(ms), Kind: history.KindPhase, Phase: &history.Phase{Name: name, Mark: mark}}
}

// The set-up marks count from the set-up's start: the watcher's first
// session (a later reconnect does not move it) and the last registration
// within the set-up (a re-registration after a restart does not move it).
func TestPhaseTimesSetupMarks(t *testing.T) {
	tests := []struct {
		name           string
		zk             []history.Event
		regs           map[int32][]int // broker → registration times (ms)
		wantZK, wantRg []time.Duration
	}{
		{
			name: "both marks",
			zk: []history.Event{
				{Time: at(3100), Kind: history.KindZKWatch, Watch: &history.Watch{Path: "/", Type: history.WatchState, SessionState: "StateConnected"}},
				{Time: at(3200), Kind: history.KindZKWatch, Watch: &history.Watch{Path: "/", Type: history.WatchState, SessionState: "StateHasSession"}},
				{Time: at(9000), Kind: history.KindZKWatch, Watch: &history.Watch{Path: "/", Type: history.WatchState, SessionState: "StateHasSession"}},
			},
			regs:   map[int32][]int{1: {3900}, 2: {4100, 9500}, 3: {3800}, 4: {9600}},
			wantZK: []time.Duration{3200 * time.Millisecond},
			wantRg: []time.Duration{4100 * time.Millisecond},
		},
		{
			name: "no watcher session, no registration in the set-up",
			regs: map[int32][]int{1: {5000}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			historytest.WriteSource(t, dir, "harness", 0,
				phaseEv(0, history.PhaseSetup, history.PhaseBegin),
				phaseEv(4500, history.PhaseSetup, history.PhaseEnd),
				phaseEv(4501, history.PhaseWorkload, history.PhaseBegin),
				phaseEv(11000, history.PhaseWorkload, history.PhaseEnd),
			)
			if len(tt.zk) > 0 {
				historytest.WriteSource(t, dir, "zk", 0, tt.zk...)
			}
			for b, times := range tt.regs {
				var evs []history.Event
				for _, ms := range times {
					evs = append(evs, history.Event{Time: at(ms), Kind: history.KindBrokerRegistered,
						Registration: &history.Registration{BrokerID: b, BrokerEpoch: int64(ms)}})
				}
				historytest.WriteSource(t, dir, "n"+string(rune('0'+b)), b, evs...)
			}
			got := map[string][]time.Duration{}
			if err := PhaseTimes(dir, got); err != nil {
				t.Fatal(err)
			}
			if d := got[history.PhaseSetup]; len(d) != 1 || d[0] != 4500*time.Millisecond {
				t.Errorf("setup %v, want [4.5s]", d)
			}
			if d := got[history.PhaseWorkload]; len(d) != 1 || d[0] != 6499*time.Millisecond {
				t.Errorf("workload %v, want [6.499s]", d)
			}
			if !equalDurations(got[MarkEnsemble], tt.wantZK) {
				t.Errorf("%s %v, want %v", MarkEnsemble, got[MarkEnsemble], tt.wantZK)
			}
			if !equalDurations(got[MarkRegistered], tt.wantRg) {
				t.Errorf("%s %v, want %v", MarkRegistered, got[MarkRegistered], tt.wantRg)
			}
		})
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSumFirst(t *testing.T) {
	m := map[string][]time.Duration{"a": {time.Second, time.Hour}, "b": {2 * time.Second}, "c": nil}
	if got := sumFirst(m, []string{"a", "b", "c", "d"}); got != 3*time.Second {
		t.Errorf("sumFirst = %s, want 3s", got)
	}
}
