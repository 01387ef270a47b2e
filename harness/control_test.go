package harness

import (
	"testing"

	"github.com/zkchaos/zkchaos/history"
)

// A fault's answer names every primitive it started with its targets, so a
// random pick is visible to whoever asked; with none started it adds
// nothing.
func TestHitListNamesTargets(t *testing.T) {
	got := hitList([]history.Fault{
		{Name: "pause", Targets: []string{"n3"}},
		{Name: "partition", Targets: []string{"n1", "|", "n2", "n3", "zk1"}},
	})
	if want := ": pause n3, partition n1 | n2 n3 zk1"; got != want {
		t.Errorf("hitList = %q, want %q", got, want)
	}
	if got := hitList(nil); got != "" {
		t.Errorf("hitList(nil) = %q, want nothing", got)
	}
}
