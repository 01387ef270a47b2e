package harness

import (
	"reflect"
	"slices"
	"testing"

	"github.com/zkchaos/zkchaos/rundir"
)

// The set-up's topics: the workload topic on RF brokers in a row, and with
// SpreadTopic (3 brokers or more) a second one at RF 2, one partition per
// broker, assignments rotating.
func TestLayouts(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  RunConfig
		want []layout
	}{
		{"3 brokers, workload topic alone", RunConfig{}, []layout{
			{"chaos", [][]int{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}},
		}},
		{"3 brokers with the spread topic", RunConfig{RunSpec: rundir.RunSpec{SpreadTopic: "chaos-rf2"}}, []layout{
			{"chaos", [][]int{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}},
			{"chaos-rf2", [][]int{{1, 2}, {2, 3}, {3, 1}}},
		}},
		{"named topic, 4 partitions on 5 brokers", RunConfig{RunSpec: rundir.RunSpec{Topic: "t", Nodes: 5, Partitions: 4, SpreadTopic: "t-rf2"}}, []layout{
			{"t", [][]int{{1, 2, 3}, {2, 3, 4}, {3, 4, 5}, {4, 5, 1}}},
			{"t-rf2", [][]int{{1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 1}}},
		}},
		{"2 brokers: RF 2 would be on every broker, so none", RunConfig{RunSpec: rundir.RunSpec{Nodes: 2, SpreadTopic: "chaos-rf2"}}, []layout{
			{"chaos", [][]int{{1, 2}, {2, 1}, {1, 2}}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.defaults()
			if got := cfg.layouts(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("layouts %v, want %v", got, tc.want)
			}
		})
	}
}

// The point of the spread topic: whichever broker A is controller and
// whichever other broker B a fault bounces, some partition replicates B
// and not A (a zombie A's write there meets no rewrite by the controller
// that replaced it).
func TestSpreadTopicHasAPartitionWithoutEachController(t *testing.T) {
	for nodes := 3; nodes <= 7; nodes++ {
		cfg := RunConfig{RunSpec: rundir.RunSpec{Nodes: nodes, SpreadTopic: "chaos-rf2"}}
		cfg.defaults()
		ls := cfg.layouts()
		if len(ls) != 2 {
			t.Fatalf("%d brokers: %d topics, want 2", nodes, len(ls))
		}
		for a := 1; a <= nodes; a++ {
			for b := 1; b <= nodes; b++ {
				if a == b {
					continue
				}
				if !slices.ContainsFunc(ls[1].assign, func(reps []int) bool {
					return slices.Contains(reps, b) && !slices.Contains(reps, a)
				}) {
					t.Errorf("%d brokers: no partition of %v has n%d without n%d", nodes, ls[1].assign, b, a)
				}
			}
		}
	}
}

// run.json names the spread topic, and a run read back from it has the
// same topics; a run stored before the spread topic existed reads back
// without it.
func TestSpreadTopicInRunInfo(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    RunConfig
		stored string // RunSpec.SpreadTopic
	}{
		{"with", RunConfig{RunSpec: rundir.RunSpec{SpreadTopic: "chaos-rf2"}}, "chaos-rf2"},
		{"without", RunConfig{}, ""},
		{"asked for on 2 brokers", RunConfig{RunSpec: rundir.RunSpec{Nodes: 2, SpreadTopic: "chaos-rf2"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.defaults()
			dir := t.TempDir()
			if err := rundir.WriteInfo(dir, cfg.RunSpec); err != nil {
				t.Fatal(err)
			}
			info, err := rundir.ReadInfo(dir)
			if err != nil {
				t.Fatal(err)
			}
			if info.SpreadTopic != tc.stored {
				t.Fatalf("run.json SpreadTopic %q, want %q", info.SpreadTopic, tc.stored)
			}
			back := RunConfig{RunSpec: *info}
			back.defaults()
			if !reflect.DeepEqual(back.layouts(), cfg.layouts()) {
				t.Fatalf("read back: topics %v, want %v", back.layouts(), cfg.layouts())
			}
		})
	}
	old := RunConfig{RunSpec: rundir.Info{Nodes: 3, Topic: "chaos", Partitions: 3, RF: 3}}
	old.defaults()
	if ls := old.layouts(); len(ls) != 1 {
		t.Fatalf("a run stored without a spread topic reads back with topics %v", ls)
	}
}
