package harness

import (
	"slices"
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/rundir"
)

// The planned schedule leaves out, and names, a fault kind this build does
// not know, rather than reading the stored list as every kind.
func TestPlanNamesUnknownKinds(t *testing.T) {
	s := RunConfig{RunSpec: rundir.RunSpec{Seed: 3, Faults: []string{"melt-disk"}}}
	sched := s.Plan()
	if len(sched.Steps) != 0 || !slices.ContainsFunc(sched.Skipped, func(r string) bool { return strings.Contains(r, "melt-disk") }) {
		t.Fatalf("steps %v, skipped %v", sched.Steps, sched.Skipped)
	}
	s.Faults = nil
	if sched := s.Plan(); len(sched.Steps) != 0 {
		t.Fatalf("a fault-free run plans %v", sched.Steps)
	}
}
