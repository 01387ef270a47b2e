package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/rundir"
)

// A dense random run's schedule, saved as the harness saves it and read
// back through `chaos run --replay`, arms the same failpoint windows on the
// same roles with the same actions at the same offsets, and is still run
// with its faults overlapping.
func TestDenseScheduleReplaysTheSameFailpoints(t *testing.T) {
	o := &runOptions{}
	cmd := newRunCmdWith(o)
	if err := cmd.ParseFlags([]string{"--seed", "5", "--time-limit", "180s", "--fault-density", "2", "--faults", "all"}); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := o.config()
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Plan()
	if s.Density != 2 || s.MaxOverlap() < 2 {
		t.Fatalf("not a dense schedule: density %g, max overlap %d", s.Density, s.MaxOverlap())
	}
	arms := func(s faults.Schedule) []string {
		var out []string
		for _, st := range s.Steps {
			if st.Kind == faults.FailpointFault {
				p := faults.PlanFailpoint(st.Pick)
				out = append(out, fmt.Sprintf("%s %s/%s %s %s p%d opening=%v", st.At, p.Window.Name, p.Window.Role, p.Action, p.Provoke, p.Partition, st.Opening))
			}
		}
		return out
	}
	first := arms(s)
	if len(first) == 0 || !strings.HasSuffix(first[0], "opening=true") {
		t.Fatalf("the schedule does not begin with a failpoint opening: %q", first)
	}
	// Failpoint steps are weighted (faults.FailpointShare): the two
	// minutes after the openings, at density 2, draw several.
	if len(first) < 3 {
		t.Fatalf("only %d failpoint steps in %d: %q", len(first), len(s.Steps), first)
	}
	path := filepath.Join(t.TempDir(), rundir.ScheduleFile)
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	o2 := &runOptions{}
	cmd2 := newRunCmdWith(o2)
	if err := cmd2.ParseFlags([]string{"--replay", path}); err != nil {
		t.Fatal(err)
	}
	replay, _, err := o2.config()
	if err != nil {
		t.Fatal(err)
	}
	if replay.Schedule == nil || replay.Density != 2 || replay.TimeLimit != 3*time.Minute {
		t.Fatalf("replay config: schedule %v, density %g, time limit %s", replay.Schedule != nil, replay.Density, replay.TimeLimit)
	}
	second := arms(replay.Plan())
	if fmt.Sprint(first) != fmt.Sprint(second) {
		t.Fatalf("replay arms\n%q\nthe run armed\n%q", second, first)
	}
}
