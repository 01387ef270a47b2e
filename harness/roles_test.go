package harness

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/rundir"
)

// The set-up ends only once every replica's broker has logged a role: a
// broker that has not heard its LeaderAndIsr yet is named.
func TestWaitRoles(t *testing.T) {
	cfg := RunConfig{RunSpec: rundir.RunSpec{Nodes: 3, Partitions: 2, RF: 2, Topic: "chaos"}} // replicas: p0 → n1 n2, p1 → n2 n3
	role := func(node, p int32, topic string) history.Event {
		return history.Event{Kind: history.KindRoleChange, Node: node, Time: 1, Role: &history.Role{Topic: topic, Partition: p, Role: "follower"}}
	}
	spread := cfg
	spread.SpreadTopic = "chaos-rf2" // chaos-rf2: p0 → n1 n2, p1 → n2 n3, p2 → n3 n1
	every := map[string][]history.Event{
		"n1": {role(1, 0, "chaos"), role(1, 0, "chaos-rf2"), role(1, 2, "chaos-rf2")},
		"n2": {role(2, 0, "chaos"), role(2, 1, "chaos"), role(2, 0, "chaos-rf2"), role(2, 1, "chaos-rf2")},
		"n3": {role(3, 1, "chaos"), role(3, 1, "chaos-rf2"), role(3, 2, "chaos-rf2")},
	}
	for _, tc := range []struct {
		name    string
		cfg     *RunConfig // nil: cfg
		events  map[string][]history.Event
		missing string // "" when every role is there
	}{
		{"every replica has its role", nil, map[string][]history.Event{
			"n1": {role(1, 0, "chaos")}, "n2": {role(2, 0, "chaos"), role(2, 1, "chaos")}, "n3": {role(3, 1, "chaos")},
		}, ""},
		{"a broker still waiting for one partition", nil, map[string][]history.Event{
			"n1": {role(1, 0, "chaos")}, "n2": {role(2, 0, "chaos")}, "n3": {role(3, 1, "chaos")},
		}, "n2 in chaos-1"},
		{"a role in another topic does not count", nil, map[string][]history.Event{
			"n1": {role(1, 0, "chaos")}, "n2": {role(2, 0, "chaos"), role(2, 1, "other")}, "n3": {role(3, 1, "chaos")},
		}, "n2 in chaos-1"},
		{"spread topic: every replica of both topics", &spread, every, ""},
		{"spread topic: a replica of it still waiting", &spread, map[string][]history.Event{
			"n1": every["n1"], "n2": every["n2"], "n3": every["n3"][:2],
		}, "n3 in chaos-rf2-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each its own directory; the missing cases wait out 200ms
			dir := t.TempDir()
			hdir := filepath.Join(dir, rundir.HistoryDir)
			if err := os.MkdirAll(hdir, 0o755); err != nil {
				t.Fatal(err)
			}
			for node, evs := range tc.events {
				var b strings.Builder
				for _, e := range evs {
					line, err := json.Marshal(e)
					if err != nil {
						t.Fatal(err)
					}
					b.Write(append(line, '\n'))
				}
				if err := os.WriteFile(filepath.Join(hdir, node+".jsonl"), []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			c := cfg
			if tc.cfg != nil {
				c = *tc.cfg
			}
			c.defaults()
			err := waitRoles(context.Background(), dir, c, 200*time.Millisecond)
			switch {
			case tc.missing == "" && err != nil:
				t.Fatalf("waitRoles: %v", err)
			case tc.missing != "" && (err == nil || !strings.Contains(err.Error(), tc.missing)):
				t.Fatalf("waitRoles: %v, want an error naming %q", err, tc.missing)
			}
		})
	}
}
