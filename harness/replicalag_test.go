package harness

import (
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
)

func TestReplicaLagOf(t *testing.T) {
	for _, tt := range []struct {
		flags []string
		want  time.Duration
	}{
		{nil, RunReplicaLag},
		{[]string{"--offline-election=offline"}, RunReplicaLag},
		{[]string{"--replica-lag-time-max=2s"}, 2 * time.Second},
		{[]string{"-replica-lag-time-max=3s"}, 3 * time.Second},
		{[]string{"--replica-lag-time-max", "1500ms"}, 1500 * time.Millisecond},
		{[]string{"--replica-lag-time-max=2s", "--replica-lag-time-max=4s"}, 4 * time.Second}, // the last wins
		{[]string{"--replica-lag-time-max=soon"}, RunReplicaLag},
		{[]string{"--replica-lag-time-maximum=2s"}, RunReplicaLag},
	} {
		if got := replicaLagOf(tt.flags); got != tt.want {
			t.Errorf("replicaLagOf(%q) = %s, want %s", tt.flags, got, tt.want)
		}
	}
}

// BadVersions counts the node's own BADVERSION writes since a time, and
// nothing else.
func TestBadVersions(t *testing.T) {
	dir := t.TempDir()
	base := time.Now().Add(-time.Minute)
	write := func(at time.Duration, outcome string) history.Event {
		return history.Event{Kind: history.KindZKWrite, Time: base.Add(at).UnixNano(), ZKWrite: &history.ZKWrite{
			Path: "/brokers/topics/chaos/partitions/0/state", Op: "set", Conditional: true, ExpectedVersion: 4, Outcome: outcome}}
	}
	historytest.WriteSource(t, dir, "n2", 2,
		write(0, history.ZKBadVersion), // before since
		write(2*time.Second, history.ZKOK),
		write(3*time.Second, history.ZKBadVersion),
		write(4*time.Second, history.ZKBadVersion))
	f := &failpointWorld{runDir: dir, logs: nodeLogs{keep: nemesisKinds}}
	for _, tt := range []struct {
		since time.Duration
		want  int
	}{{time.Second, 2}, {-time.Second, 3}, {5 * time.Second, 0}} {
		if n, err := f.BadVersions(t.Context(), 2, base.Add(tt.since)); err != nil || n != tt.want {
			t.Errorf("since +%s: %d, %v; want %d", tt.since, n, err, tt.want)
		}
	}
	if _, err := f.BadVersions(t.Context(), 3, base); err == nil {
		t.Error("a node without an event log: no error")
	}
}
