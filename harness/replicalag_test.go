package harness

import (
	"testing"
	"time"
)

func TestReplicaLagOf(t *testing.T) {
	for _, tt := range []struct {
		flags []string
		want  time.Duration
	}{
		{nil, nodeReplicaLagDefault},
		{[]string{"--offline-election=offline"}, nodeReplicaLagDefault},
		{[]string{"--replica-lag-time-max=2s"}, 2 * time.Second},
		{[]string{"-replica-lag-time-max=3s"}, 3 * time.Second},
		{[]string{"--replica-lag-time-max", "1500ms"}, 1500 * time.Millisecond},
		{[]string{"--replica-lag-time-max=2s", "--replica-lag-time-max=4s"}, 4 * time.Second}, // the last wins
		{[]string{"--replica-lag-time-max=soon"}, nodeReplicaLagDefault},
		{[]string{"--replica-lag-time-maximum=2s"}, nodeReplicaLagDefault},
	} {
		if got := replicaLagOf(tt.flags); got != tt.want {
			t.Errorf("replicaLagOf(%q) = %s, want %s", tt.flags, got, tt.want)
		}
	}
}
