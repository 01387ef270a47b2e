package nemesis

import (
	"testing"

	"github.com/zkchaos/zkchaos/docker"
)

// A killed or paused target stays held while its heal runs: a fault
// injected during a slow start must not pick it (power, crash-lose-unflushed
// at density 3, seed 30: a kill sent while n3's start was under way timed
// out, reached the engine after the start and killed the new process, which
// nothing started again).
func TestTargetHeldUntilItsHealReturns(t *testing.T) {
	for _, tc := range []struct {
		name string
		held func(n *Nemesis) map[*docker.Container]openFault
	}{
		{"kill", func(n *Nemesis) map[*docker.Container]openFault { return n.killed }},
		{"pause", func(n *Nemesis) map[*docker.Container]openFault { return n.paused }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := New(nil, nil)
			c := &docker.Container{Name: "n3"}
			tgt := Target{Name: "n3", Container: c}
			tc.held(n)[c] = openFault{id: "f1", name: tc.name, targets: []string{"n3"}}
			if !n.Holds(tgt) {
				t.Fatal("not held after the fault")
			}
			during := false
			if err := n.undo(tc.held(n), c, func() error { during = n.Holds(tgt); return nil }); err != nil {
				t.Fatal(err)
			}
			if !during {
				t.Error("released while its heal was still running")
			}
			if n.Holds(tgt) {
				t.Error("still held after its heal returned")
			}
		})
	}
}
