package config

import (
	"github.com/zkchaos/zkchaos/history"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/internal/wanterr"
)

func TestParse(t *testing.T) {
	base := []string{"--id=2", "--zk=10.0.0.11:2181,10.0.0.12:2181", "--advertised=10.0.0.102:9092"}
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(*Config) bool
	}{
		{"defaults are the fixed behaviour", base, "", func(c *Config) bool {
			return c.BrokerID == 2 && len(c.ZKServers) == 2 && len(c.Bugs.List()) == 0 && c.OfflinePolicy == PolicyOffline &&
				c.AdminListen == "10.0.0.102:9093" && c.AdvertisedPort == 9092 && !c.ZKSyncBeforeRead
		}},
		{"sync before read is an opt-in proposal", append(base, "--proposals=zk-sync-before-read"), "", func(c *Config) bool { return c.ZKSyncBeforeRead }},
		{"bugs", append(base, "--bugs=kafka-532, KAFKA-7235"), "", func(c *Config) bool {
			return c.Bugs.On(BugKafka532) && c.Bugs.On(BugKafka7235) && !c.Bugs.On(BugKafka16667)
		}},
		{"proposals default off", base, "", func(c *Config) bool { return len(c.Proposals) == 0 }},
		{"proposals", append(base, "--proposals=Checkpoint-Hosted, ack-timeout-on-leader-loss"), "", func(c *Config) bool {
			return c.Proposals.On(ProposalCheckpointHosted) && c.Proposals.On(ProposalAckTimeoutOnLeaderLoss) && !c.Proposals.On(ProposalRefuseMidLogDamage)
		}},
		{"all proposals", append(base, "--proposals=all"), "", func(c *Config) bool { return len(c.Proposals) == len(AllProposals) }},
		{"unknown proposal", append(base, "--proposals=faster"), `unknown proposal "faster"`, nil},
		{"policy", append(base, "--offline-election=query-leo"), "", func(c *Config) bool { return c.OfflinePolicy == PolicyQueryLEO }},
		{"session timeout", append(base, "--zk-session-timeout=750ms"), "", func(c *Config) bool { return c.ZKSessionTimeout == 750*time.Millisecond }},
		{"zk server by id", append(base, "--zk-server-by-id"), "", func(c *Config) bool {
			return len(c.ZKServers) == 1 && c.ZKServers[0] == "10.0.0.12:2181"
		}},
		{"zk server by id wraps", []string{"--id=3", "--zk=a:1,b:1", "--zk-server-by-id"}, "", func(c *Config) bool {
			return len(c.ZKServers) == 1 && c.ZKServers[0] == "a:1"
		}},
		{"zk server by id needs id 1 or more", []string{"--id=0", "--zk=a:1,b:1", "--zk-server-by-id"}, "--zk-server-by-id", nil},
		{"group coordinator defaults", base, "", func(c *Config) bool {
			return c.OffsetsTopicPartitions == 3 && c.OffsetsTopicReplicationFactor == 3 && c.GroupMinSessionTimeout == 6*time.Second &&
				c.GroupMaxSessionTimeout == 30*time.Minute && c.GroupInitialRebalanceDelay == 3*time.Second && c.OffsetsCommitTimeout == 5*time.Second
		}},
		{"group coordinator flags", append(base, "--offsets-topic-partitions=5", "--offsets-topic-replication-factor=1", "--group-initial-rebalance-delay=0s"), "", func(c *Config) bool {
			return c.OffsetsTopicPartitions == 5 && c.OffsetsTopicReplicationFactor == 1 && c.GroupInitialRebalanceDelay == 0
		}},
		{"no offsets partitions", append(base, "--offsets-topic-partitions=0"), "--offsets-topic-partitions", nil},
		{"no offsets replicas", append(base, "--offsets-topic-replication-factor=0"), "--offsets-topic-replication-factor", nil},
		{"session limits crossed", append(base, "--group-max-session-timeout=1s"), "--group-max-session-timeout", nil},
		{"unknown bug", append(base, "--bugs=KAFKA-1"), `unknown bug switch "KAFKA-1"`, nil},
		{"unknown policy", append(base, "--offline-election=random"), `unknown policy "random"`, nil},
		{"missing id", base[1:], "--id", nil},
		{"missing zk", []string{"--id=1"}, "--zk", nil},
		{"bad zk address", []string{"--id=1", "--zk=nohost"}, "--zk", nil},
		{"unknown flag", append(base, "--nope"), "flag provided but not defined", nil},
		{"stray argument", append(base, "extra"), "unexpected arguments", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse(tt.args, io.Discard)
			if wanterr.Check(t, err, tt.wantErr) {
				return
			}
			if !tt.check(c) {
				t.Fatalf("unexpected config %+v", c)
			}
		})
	}
}

func TestFailpointsFromEnvironment(t *testing.T) {
	t.Setenv(FailpointsEnv, "broker-before-register=pause")
	c, err := Parse([]string{"--id=1", "--zk=h:1", "--failpoints=controller-after-zk-write=error"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Failpoints != "broker-before-register=pause;controller-after-zk-write=error" {
		t.Fatalf("failpoints %q", c.Failpoints)
	}
}

func TestUsageNamesEveryFailpoint(t *testing.T) {
	var out strings.Builder
	if _, err := Parse([]string{"-h"}, &out); err == nil {
		t.Fatal("-h parsed without flag.ErrHelp")
	}
	for _, n := range history.FailpointNames {
		if !strings.Contains(out.String(), n) {
			t.Errorf("usage does not name failpoint %s", n)
		}
	}
}
