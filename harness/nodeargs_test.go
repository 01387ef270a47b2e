package harness

import (
	"slices"
	"testing"

	"github.com/zkchaos/zkchaos/rundir"
)

// The offsets topic's replication factor follows the cluster's size (at
// most Kafka's 3), and a --node-flag still overrides it.
func TestNodeArgsOffsetsReplicationFactor(t *testing.T) {
	tests := []struct {
		nodes int
		extra []string
		want  string
	}{
		{1, nil, "--offsets-topic-replication-factor=1"},
		{2, nil, "--offsets-topic-replication-factor=2"},
		{5, nil, "--offsets-topic-replication-factor=3"},
		{5, []string{"--offsets-topic-replication-factor=5"}, "--offsets-topic-replication-factor=5"},
	}
	for _, tc := range tests {
		args := nodeArgs([]string{"--id=1"}, RunConfig{RunSpec: rundir.RunSpec{Nodes: tc.nodes, NodeFlags: tc.extra}})
		var last string
		for _, a := range args {
			if len(a) > 35 && a[:35] == "--offsets-topic-replication-factor=" {
				last = a
			}
		}
		if last != tc.want || !slices.Contains(args, "--id=1") {
			t.Errorf("%d nodes, extra %v: %v", tc.nodes, tc.extra, args)
		}
	}
}
