package historytest

import (
	"testing"

	"github.com/zkchaos/zkchaos/history"
)

// What WriteSource writes reads back, merged, as the events given, with the
// source and node the file names.
func TestWriteSource(t *testing.T) {
	dir := t.TempDir()
	WriteSource(t, dir, "n2", 2,
		history.Event{Time: T0, Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseSetup, Mark: history.PhaseBegin}},
		history.Event{Time: T0 + Ms, Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseSetup, Mark: history.PhaseEnd}})
	WriteSource(t, dir, "harness", 0, history.Event{Time: T0 + 2*Ms, Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseWorkload, Mark: history.PhaseBegin}})
	h, err := history.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Events) != 3 {
		t.Fatalf("read %d events, want 3", len(h.Events))
	}
	for i, want := range []struct {
		kind history.Kind
		src  string
		node int32
	}{{history.KindPhase, "n2", 2}, {history.KindPhase, "n2", 2}, {history.KindPhase, "harness", 0}} {
		if e := h.Events[i]; e.Kind != want.kind || e.Source != want.src || e.Node != want.node {
			t.Errorf("event %d: %s from %s (node %d), want %s from %s (node %d)", i, e.Kind, e.Source, e.Node, want.kind, want.src, want.node)
		}
	}
}
