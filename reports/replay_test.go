package reports

import (
	"strings"
	"testing"

	hb "github.com/zkchaos/zkchaos/history/historytest"
	"github.com/zkchaos/zkchaos/internal/wanttext"
	"github.com/zkchaos/zkchaos/rundir"
)

func TestReplayCommandForScenariosAndControlPlaneRuns(t *testing.T) {
	tests := []struct {
		name string
		info rundir.Info
		want string
		not  string
	}{
		{"scenario with its bug", rundir.Info{Scenario: "KAFKA-532", Bugs: []string{"KAFKA-532"}}, "chaos repro KAFKA-532", "--fixed"},
		{"scenario fixed", rundir.Info{Scenario: "KAFKA-532"}, "chaos repro KAFKA-532 --fixed", "chaos run"},
		{"control plane only", rundir.Info{Seed: 4, NoWorkload: true, Producers: 4, Readers: 2}, "--no-workload", "--producers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rundir.ReplayCommand("/runs/r1", &tt.info, true)
			if !strings.Contains(got, tt.want) || (tt.not != "" && strings.Contains(got, tt.not)) {
				t.Fatalf("got %q; want it to contain %q and not %q", got, tt.want, tt.not)
			}
		})
	}
}

func TestHeaderNamesTheScenarioAndAbsentWorkload(t *testing.T) {
	dir := t.TempDir()
	b := hb.New()
	b.Start(1)
	b.Register(1, 10)
	writeHistory(t, dir, b.History())
	ri := sampleInfo("r-scenario")
	ri.Scenario, ri.NoWorkload, ri.Faults = "KAFKA-532", true, nil
	writeRunInfo(t, dir, ri)
	var sb strings.Builder
	if err := WriteHTML(&sb, dir); err != nil {
		t.Fatal(err)
	}
	wanttext.Contains(t, "report", sb.String(), "driven by scenario KAFKA-532", "no client workload", "chaos repro KAFKA-532")
}
