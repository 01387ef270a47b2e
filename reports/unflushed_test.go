package reports

import (
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
	"github.com/zkchaos/zkchaos/schedule"
)

// crash-lose-unflushed is on the fault lane in its own colour, beside the
// kill it made, and its title says what it dropped.
func TestCrashLoseUnflushedOnTheFaultLane(t *testing.T) {
	b := historytest.New()
	b.At(100).Add(history.Event{Kind: history.KindFaultStart, Fault: &history.Fault{ID: "f1", Name: "kill", Targets: []string{"n2"}}})
	b.At(110).Add(history.Event{Kind: history.KindFaultStart, Fault: &history.Fault{ID: "f2", Name: string(schedule.CrashLoseUnflushed),
		Targets: []string{"n2"}, Detail: "SIGKILL; dropped unflushed chaos-0 offsets [40, 52)"}})
	b.At(900).Fault(false, "f1", "kill", "n2")
	b.At(901).Fault(false, "f2", string(schedule.CrashLoseUnflushed), "n2")
	b.At(1000).Phase()
	tl := buildTimeline(b.History())
	var found, kill bool
	for _, s := range tl.faults {
		switch s.label {
		case "crash-lose-unflushed n2":
			found = true
			if s.color != "#8b1a1a" || !strings.Contains(s.title, "dropped unflushed chaos-0 offsets [40, 52)") {
				t.Errorf("span %+v: want its own colour and what it dropped in the title", s)
			}
		case "kill n2":
			kill = true
			if s.color == "#8b1a1a" {
				t.Errorf("a plain kill drawn in crash-lose-unflushed's colour")
			}
		}
	}
	if !found || !kill {
		t.Fatalf("fault lane %+v lacks the crash or its kill", tl.faults)
	}
}
