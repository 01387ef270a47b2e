package power

import (
	"slices"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
	"github.com/zkchaos/zkchaos/zklayout"
)

// threeBrokers starts a built history as a 3-broker run: n1 is the controller,
// t-0 is led by n1 and t-1 by n2, both with replicas 1,2 and a full ISR,
// and n3 hosts nothing.
func threeBrokers() *historytest.Builder {
	b := historytest.New()
	controllerIs(b, 1)
	leaderAndIsr(b, 1, history.TP("t", 0), 1, 2)
	leaderAndIsr(b, 1, history.TP("t", 1), 1, 2)
	b.State(history.TP("t", 0), 1, 0, 1, 10, 1, 2)
	b.State(history.TP("t", 1), 2, 0, 1, 11, 1, 2)
	return b
}

func controllerIs(b *historytest.Builder, id int32) {
	b.Add(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: zklayout.ControllerPath, Type: history.WatchChanged, ControllerID: &id}})
}

// leaderAndIsr is controller ctl sending a LeaderAndIsr for tp with its
// replica set.
func leaderAndIsr(b *historytest.Builder, ctl int32, tp history.TopicPartition, replicas ...int32) {
	b.Add(history.Event{Kind: history.KindControlSent, Node: ctl, Control: &history.Control{API: history.APILeaderAndIsr, ControllerID: ctl,
		Partitions: []history.ControlPartition{{Topic: tp.Topic, Partition: tp.Partition, Replicas: replicas}}}})
}

func faultStart(b *historytest.Builder, f history.Fault) {
	b.Add(history.Event{Kind: history.KindFaultStart, Fault: &f})
}

func deletion(b *historytest.Builder, ctl int32, topic, step string) {
	b.Add(history.Event{Kind: history.KindTopicDeletion, Node: ctl, Deletion: &history.TopicDeletion{Topic: topic, Step: step, Partitions: []int32{0, 1}}})
}

func reassign(b *historytest.Builder, typ history.OpType, tp history.TopicPartition) {
	b.Add(history.Event{Kind: history.KindOp, Source: "admin", Op: &history.ClientOp{Type: typ, F: history.FReassign, Topic: tp.Topic, Partition: tp.Partition}})
}

// Each case is the cluster above, then what the case adds; the
// combinations are those of the faults it starts.
func TestCombinations(t *testing.T) {
	t0, t1 := history.TP("t", 0), history.TP("t", 1)
	for _, tt := range []struct {
		name  string
		build func(b *historytest.Builder)
		want  []string
	}{
		{"the controller, every ISR full", func(b *historytest.Builder) {
			b.Fault(true, "f1", "pause", "n1")
		}, []string{"pause/controller/-/isr-full"}},
		{"a leader that is not controller", func(b *historytest.Builder) {
			b.Fault(true, "f1", "kill", "n2")
		}, []string{"kill/leader/-/isr-full"}},
		{"the controller moved: the old one now only leads", func(b *historytest.Builder) {
			controllerIs(b, 2)
			b.Fault(true, "f1", "kill", "n1")
		}, []string{"kill/leader/-/isr-full"}},
		{"a follower, its partition's ISR shrunk", func(b *historytest.Builder) {
			b.State(t1, 1, 1, 1, 12, 1)
			b.Fault(true, "f1", "bounce", "n2")
		}, []string{"bounce/follower/-/isr-shrunk"}},
		{"a broker that hosts nothing", func(b *historytest.Builder) {
			b.Fault(true, "f1", "pause", "n3")
		}, []string{"pause/other/-/-"}},
		{"offline outranks shrunk", func(b *historytest.Builder) {
			b.State(t0, 1, 1, 1, 12, 1)
			b.State(t1, -1, 1, 1, 13, 2)
			b.Fault(true, "f1", "pause", "n1")
		}, []string{"pause/controller/-/offline"}},
		{"only the target's partitions count", func(b *historytest.Builder) {
			leaderAndIsr(b, 1, history.TP("u", 0), 3)
			b.State(history.TP("u", 0), -1, 1, 1, 12)
			b.Fault(true, "f1", "pause", "n2")
		}, []string{"pause/leader/-/isr-full"}},
		{"a leader outside its ISR", func(b *historytest.Builder) {
			b.State(t0, 1, 1, 1, 12, 2)
			b.Fault(true, "f1", "pause", "n2")
		}, []string{"pause/leader/-/leader-outside-isr"}},
		{"a reassignment in flight, then done", func(b *historytest.Builder) {
			reassign(b, history.OpInvoke, t1)
			b.Fault(true, "f1", "pause", "n2")
			reassign(b, history.OpOK, t1)
			b.Fault(true, "f2", "pause", "n2")
		}, []string{"pause/leader/-/reassigning", "pause/leader/-/isr-full"}},
		{"a topic being deleted, deleted, created again", func(b *historytest.Builder) {
			deletion(b, 1, "t", history.DeletionStarted)
			b.Fault(true, "f1", "pause", "n2")
			deletion(b, 1, "t", history.DeletionCompleted)
			for _, tp := range []history.TopicPartition{t0, t1} {
				b.Add(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: zklayout.StatePath(tp.Topic, tp.Partition), Type: history.WatchDeleted}})
			}
			b.Fault(true, "f2", "pause", "n2")
			// Created again: a new incarnation, not being deleted.
			leaderAndIsr(b, 1, t0, 2, 3)
			b.State(t0, 2, 0, 1, 20, 2, 3)
			b.Fault(true, "f3", "pause", "n2")
		}, []string{"pause/leader/-/deleting", "pause/other/-/-", "pause/leader/-/isr-full"}},
		{"replicas unknown: the state's members replicate, unclassed", func(b *historytest.Builder) {
			b.State(history.TP("v", 0), 3, 0, 1, 12, 3)
			b.Fault(true, "f1", "pause", "n3")
		}, []string{"pause/leader/-/-"}},
		{"a failpoint window reached, and one not", func(b *historytest.Builder) {
			faultStart(b, history.Fault{ID: "f1", Name: "failpoint", Targets: []string{"n1"}, Failpoint: "controller-before-send"})
			b.Add(history.Event{Kind: history.KindFaultStop, Fault: &history.Fault{ID: "f1", Name: "failpoint", Targets: []string{"n1"}, Detail: "window reached", Failpoint: "controller-before-send"}})
			faultStart(b, history.Fault{ID: "f2", Name: "failpoint", Targets: []string{"n1"}, Failpoint: "controller-before-send"})
			b.Add(history.Event{Kind: history.KindFaultStop, Fault: &history.Fault{ID: "f2", Name: "failpoint", Targets: []string{"n1"}, Detail: "window not reached", Failpoint: "controller-before-send"}})
		}, []string{"failpoint/controller/controller-before-send/isr-full", "failpoint/controller/-/isr-full"}},
		{"ZooKeeper servers by their faults' records", func(b *historytest.Builder) {
			b.Fault(true, "f1", "isolate-zk-leader", "zk3", "|", "zk1", "zk2")
			b.Fault(true, "f2", "slow-link", "zk1", "->", "zk2")
			b.Fault(true, "f3", "pause", "zk2")
			faultStart(b, history.Fault{ID: "f4", Name: "stall-zk-session-server", Targets: []string{"zk1", "n2"}, Detail: "zk1 (the ZooKeeper leader) holds the session of n2"})
			faultStart(b, history.Fault{ID: "f5", Name: "stall-zk-session-server", Targets: []string{"zk2", "n2"}, Detail: "zk2 (a follower) holds the session of n2"})
			b.Fault(true, "f6", "kill", "zk1")
		}, []string{"isolate-zk-leader/zk-leader/-/isr-full", "slow-link/zk-leader/-/isr-full", "pause/zk-follower/-/isr-full",
			"stall-zk-session-server/zk-leader/-/isr-full", "stall-zk-session-server/zk-follower/-/isr-full", "kill/zk-server/-/isr-full"}},
		{"ZooKeeper servers by their polled modes, the record where a server did not answer", func(b *historytest.Builder) {
			mode := func(server, m string) {
				b.Add(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: "/", Type: history.WatchServerMode, Server: server, Mode: m}})
			}
			mode("zk1", "follower")
			mode("zk2", "leader")
			mode("zk3", "")
			b.Fault(true, "f1", "kill", "zk2")
			b.Fault(true, "f2", "isolate-node", "zk1")
			b.Fault(true, "f3", "pause", "zk3")
			b.Fault(true, "f4", "kill", "zk3")
		}, []string{"kill/zk-leader/-/isr-full", "isolate-node/zk-follower/-/isr-full", "pause/zk-follower/-/isr-full", "kill/zk-server/-/isr-full"}},
		{"a fault without target; one not applied; a node's own failpoint report; a step left alone", func(b *historytest.Builder) {
			faultStart(b, history.Fault{ID: "f1", Name: "delete-recreate-topic", Detail: "deletion of topic t asked for"})
			faultStart(b, history.Fault{ID: "f2", Name: "kill-lagging-leader", Detail: "not applied"})
			b.Add(history.Event{Kind: history.KindFaultStart, Node: 2, Fault: &history.Fault{ID: "fp1", Name: "failpoint", Failpoint: "controller-before-send"}})
			b.Fault(true, "f3", "pause-controller", "n1")
			b.Add(history.Event{Kind: history.KindFaultStop, Fault: &history.Fault{ID: "f3", Name: "pause-controller", Targets: []string{"n1"},
				Detail: "left alone: controller n1 is retrying a failed conditional write"}})
		}, []string{"delete-recreate-topic/none/-/isr-full"}},
		{"a combination reached twice counts once", func(b *historytest.Builder) {
			b.Fault(true, "f1", "pause", "n1")
			b.Fault(true, "f2", "pause", "n1")
		}, []string{"pause/controller/-/isr-full"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := threeBrokers()
			tt.build(b)
			got := CombinationStrings(Combinations(b.History()))
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}
