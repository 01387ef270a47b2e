package nemesis

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/schedule"
)

// What a network fault came to is its stop event's detail: a
// kill-lagging-leader that killed nobody says so, with the ISR it saw, and
// the other network faults in force keep an empty detail.
func TestNetOutcomeOnTheStopEvent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nemesis.jsonl")
	rec := NewFileRecorder(path)
	n := New(nil, rec)
	for _, name := range []string{string(schedule.KillLaggingLeader), "partition"} {
		f, err := n.record(name, []string{"n1", "|", "n2", "n3"}, "", func() error { return nil })
		if err := n.holdNet(f, err); err != nil {
			t.Fatal(err)
		}
	}
	const outcome = "not killed: the ISR of chaos-0 was still [1 2] 14s after its leader n1 was cut off from the other brokers"
	n.NetOutcome(string(schedule.KillLaggingLeader), outcome)
	if err := n.HealNet(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec.Close()
	evs, _, err := history.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range evs {
		if e.Kind == history.KindFaultStop {
			got[e.Fault.Name] = e.Fault.Detail
		}
	}
	if got[string(schedule.KillLaggingLeader)] != outcome || got["partition"] != "" || len(got) != 2 {
		t.Fatalf("stop details %q", got)
	}
}
