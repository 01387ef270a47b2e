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

// StartedSince names the faults started after a mark, and only those, so
// `chaos fault` can say which broker its random pick hit; a nil Recorder
// (a run that records nothing) answers nothing.
func TestStartedSinceNamesTheNewFaults(t *testing.T) {
	rec := NewFileRecorder(filepath.Join(t.TempDir(), "nemesis.jsonl"))
	defer rec.Close()
	rec.Start("pause", []string{"n1"}, "SIGSTOP")
	mark := rec.Mark()
	if got := rec.StartedSince(mark); len(got) != 0 {
		t.Fatalf("right after the mark: %+v, want nothing", got)
	}
	rec.Start("kill", []string{"n3"}, "SIGKILL")
	rec.Start("partition", []string{"n2", "|", "n1", "n3"}, "")
	got := rec.StartedSince(mark)
	if len(got) != 2 || got[0].Name != "kill" || got[0].Targets[0] != "n3" || got[1].Name != "partition" || got[1].ID != "f3" {
		t.Fatalf("since the mark: %+v, want kill n3 then the partition (f3)", got)
	}
	for range 2 * keepRecent {
		rec.Start("pause", []string{"zk1"}, "")
	}
	if got := rec.StartedSince(0); len(got) != keepRecent {
		t.Fatalf("after %d more faults: %d remembered, want the last %d", 2*keepRecent, len(got), keepRecent)
	}
	var none *Recorder
	if none.Mark() != 0 || none.StartedSince(0) != nil {
		t.Fatal("a nil Recorder remembers faults")
	}
}
