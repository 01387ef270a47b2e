package main

import (
	"path/filepath"
	"testing"

	"github.com/zkchaos/zkchaos/history"
)

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "n1.jsonl")
	base := []string{"--id=1", "--listen=127.0.0.1:0", "--advertised=127.0.0.1:9092", "--admin-listen=off", "--data-dir=" + dir, "--event-log=" + events}
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"help", []string{"--help"}, 0},
		{"unknown bug switch", append(base, "--zk=127.0.0.1:1", "--bugs=KAFKA-0"), 2},
		{"unknown policy", append(base, "--zk=127.0.0.1:1", "--offline-election=coin"), 2},
		{"unknown failpoint", append(base, "--zk=127.0.0.1:1", "--failpoints=nope=pause"), 2},
		{"bad failpoint action", append(base, "--zk=127.0.0.1:1", "--failpoints=broker-before-register=explode"), 2},
		{"no zookeeper", base, 2},
		{"check-flags: good", append(base, "--zk=127.0.0.1:1", "--bugs=KAFKA-532", "--check-flags"), 0},
		{"check-flags: unknown bug switch", append(base, "--zk=127.0.0.1:1", "--bugs=KAFKA-0", "--check-flags"), 2},
		{"check-flags: bad failpoint", append(base, "--zk=127.0.0.1:1", "--failpoints=nope=pause", "--check-flags"), 2},
		// Nothing listens on port 1: start-up fails with a clear error.
		{"unreachable zookeeper", append(base, "--zk=127.0.0.1:1", "--zk-connect-timeout=300ms"), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := run(tt.args); got != tt.want {
				t.Fatalf("exit %d, want %d", got, tt.want)
			}
		})
	}
	// The failed start still left a readable history line.
	evs, _, err := history.ReadFile(events)
	if err != nil || len(evs) == 0 || evs[0].Kind != history.KindNodeStart {
		t.Fatalf("event log after failed start: %v %v", evs, err)
	}
}
