package reports

import (
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/schedule"
)

// stall-zk-session-server is a window on the fault lane in a colour of its
// own, labelled with the stalled server and the broker whose session it
// holds, its title saying whose session that is.
func TestStallZKSessionServerOnTheFaultLane(t *testing.T) {
	start := history.Event{Kind: history.KindFaultStart, Time: 100, Source: "nemesis",
		Fault: &history.Fault{ID: "f1", Name: string(schedule.StallZKSessionServer), Targets: []string{"zk3", "n1"},
			Detail: "zk3 (a follower) holds the session of n1, the controller: SIGSTOP for 1s, SIGCONT for 200ms, repeated until the heal"}}
	sp := faultSpan(history.FaultWindow{Start: start, End: 900})
	if sp.label != "stall-zk-session-server zk3,n1" || sp.color != "#2a7f8f" || !strings.Contains(sp.title, "session of n1, the controller") {
		t.Fatalf("span %+v", sp)
	}
	if plain := faultSpan(history.FaultWindow{Start: history.Event{Kind: history.KindFaultStart, Fault: &history.Fault{ID: "f2", Name: "pause", Targets: []string{"zk3"}}}}); plain.color == sp.color {
		t.Error("a plain pause drawn in stall-zk-session-server's colour")
	}
}
