package checkers

import (
	"testing"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// told appends an accepted LeaderAndIsr at node for partitions ps of t
// (each applied, error code 0) and returns its index.
func told(b *hb.Builder, node int32, ps ...int32) int {
	c := lai(1, 50, history.VerdictAccepted, 0)
	c.Partitions = nil
	for _, p := range ps {
		c.Partitions = append(c.Partitions, history.ControlPartition{Topic: "t", Partition: p, Leader: node, LeaderEpoch: 1})
	}
	return b.Control(node, c)
}

// sentReplicas appends controller ctl's LeaderAndIsr to target for t-p
// naming replicas.
func sentReplicas(b *hb.Builder, ctl, target, p int32, replicas ...int32) int {
	return b.Add(history.Event{Kind: history.KindControlSent, Node: ctl, Control: &history.Control{API: history.APILeaderAndIsr,
		ControllerID: ctl, ControllerEpoch: 1, TargetBroker: target, Partitions: []history.ControlPartition{{Topic: "t", Partition: p, Leader: replicas[0], Replicas: replicas}}}})
}

// Kafka 2.6.3's ReplicaManager.checkpointHighWatermarks writes only the
// partitions in the process's in-memory map: a restarted process's write may
// leave out a partition no accepted LeaderAndIsr has told it about yet, as
// long as one does before the process ends, and the partition comes back
// with the high watermark the broker last wrote. A process is owed that
// LeaderAndIsr once a controller acted in its reach for the grace after it
// registered. Each case has its harm and its clean twin.
func TestHWCheckpointJudgesTheInMemoryMap(t *testing.T) {
	runCases(t, HWCheckpoint{}, []tcase{
		{name: "left out until its process is told, then back at its high watermark", want: Valid, build: func(b *hb.Builder) []int {
			checkpoint(b, 2, nil, cpe(0, 5), cpe(1, 3))
			b.Start(2)
			told(b, 2, 0)
			checkpoint(b, 2, nil, cpe(0, 5))
			told(b, 2, 1)
			checkpoint(b, 2, nil, cpe(0, 5), cpe(1, 3))
			return nil
		}},
		{name: "left out, then told, and back below the high watermark written", want: Invalid, explain: "moved t-1's high watermark back from 3 (event 0) to 0", build: func(b *hb.Builder) []int {
			a := checkpoint(b, 2, nil, cpe(0, 5), cpe(1, 3))
			s := b.Start(2)
			told(b, 2, 0)
			checkpoint(b, 2, nil, cpe(0, 5))
			told(b, 2, 1)
			c := checkpoint(b, 2, nil, cpe(0, 5), cpe(1, 0))
			return []int{a, s, c}
		}},
		{name: "left out and never told before the next restart", want: Invalid, explain: "before the next one started at event", build: func(b *hb.Builder) []int {
			ctl := elected(b, 1, 1, 10)
			a := checkpoint(b, 2, nil, cpe(0, 5), cpe(1, 3))
			s1 := b.Start(2)
			r := b.Register(2, 200)
			told(b, 2, 0)
			c := checkpoint(b, 2, nil, cpe(0, 5))
			s2 := b.At(2000).Start(2)
			return []int{ctl, a, s1, r, c, s2}
		}},
		{name: "left out, and the process crashed before a controller had the grace to tell it", want: Valid, explain: KnownCheckpointUntold, build: func(b *hb.Builder) []int {
			elected(b, 1, 1, 10)
			checkpoint(b, 2, nil, cpe(0, 5), cpe(1, 3))
			b.Start(2)
			b.Register(2, 200)
			told(b, 2, 0)
			checkpoint(b, 2, nil, cpe(0, 5))
			b.At(500).Start(2)
			return nil
		}},
		{name: "left out by a process that never registered", want: Valid, explain: KnownCheckpointUntold, build: func(b *hb.Builder) []int {
			elected(b, 1, 1, 10)
			checkpoint(b, 2, nil, cpe(0, 5), cpe(1, 3))
			b.Start(2)
			told(b, 2, 0)
			checkpoint(b, 2, nil, cpe(0, 5))
			b.At(20000).Start(2)
			return nil
		}},
		{name: "left out, then stopped: nothing to keep", want: Valid, build: func(b *hb.Builder) []int {
			checkpoint(b, 2, nil, cpe(0, 5), cpe(1, 3))
			b.Start(2)
			told(b, 2, 0)
			checkpoint(b, 2, nil, cpe(0, 5))
			b.Add(history.Event{Kind: history.KindRoleChange, Node: 2, Role: &history.Role{Topic: "t", Partition: 1, Role: history.RoleStopped}})
			return nil
		}},
		{name: "dropped although its process was told about it", want: Invalid, explain: "dropped t-1 (HW 3, written by event 0), which that process held in memory", build: func(b *hb.Builder) []int {
			a := checkpoint(b, 2, nil, cpe(0, 5), cpe(1, 3))
			s := b.Start(2)
			told(b, 2, 0, 1)
			c := checkpoint(b, 2, nil, cpe(0, 5))
			return []int{a, s, c}
		}},
		{name: "told of both, writes both", want: Valid, build: func(b *hb.Builder) []int {
			checkpoint(b, 2, nil, cpe(0, 5), cpe(1, 3))
			b.Start(2)
			told(b, 2, 0, 1)
			checkpoint(b, 2, nil, cpe(0, 5), cpe(1, 3))
			return nil
		}},
		// Seen in a random crash-lose-unflushed run with the admin
		// workload: t-1 moved to brokers 1 and 3 while broker 2 was down,
		// and back to broker 2 only after its next process had died.
		{name: "reassigned away for the whole life of the process that left it out", want: Valid, build: func(b *hb.Builder) []int {
			elected(b, 1, 1, 10)
			checkpoint(b, 2, nil, cpe(0, 5), cpe(1, 3))
			b.Fault(true, "f1", "crash-lose-unflushed", "n2")
			sentReplicas(b, 1, 3, 1, 1, 3)
			b.At(1000).Start(2)
			b.Fault(false, "f1", "crash-lose-unflushed", "n2")
			b.Register(2, 200)
			told(b, 2, 0)
			checkpoint(b, 2, nil, cpe(0, 5))
			b.At(9000).Fault(true, "f2", "kill", "n2")
			sentReplicas(b, 1, 1, 1, 2, 3, 1)
			b.At(12000).Start(2)
			return nil
		}},
		{name: "reassigned back to the broker while its process lived, and never told", want: Invalid, explain: "acted in its reach for", build: func(b *hb.Builder) []int {
			elected(b, 1, 1, 10)
			a := checkpoint(b, 2, nil, cpe(0, 5), cpe(1, 3))
			b.Fault(true, "f1", "crash-lose-unflushed", "n2")
			sentReplicas(b, 1, 3, 1, 1, 3)
			b.At(1000).Start(2)
			b.Fault(false, "f1", "crash-lose-unflushed", "n2")
			r := b.Register(2, 200)
			told(b, 2, 0)
			c := checkpoint(b, 2, nil, cpe(0, 5))
			b.At(5000)
			sentReplicas(b, 1, 1, 1, 2, 3, 1)
			s := b.At(12000).Start(2)
			return []int{a, r, c, s}
		}},
		{name: "a LeaderAndIsr of the previous process does not tell the new one", want: Invalid, explain: "left out t-1", build: func(b *hb.Builder) []int {
			elected(b, 1, 1, 10)
			told(b, 2, 0, 1)
			a := checkpoint(b, 2, nil, cpe(0, 5), cpe(1, 3))
			s := b.Start(2)
			b.Register(2, 200)
			told(b, 2, 0)
			c := checkpoint(b, 2, nil, cpe(0, 5))
			b.At(2000).Phase()
			return []int{a, s, c}
		}},
		{name: "a partition refused in the LeaderAndIsr is not told", want: Invalid, explain: "(over at +1s), and the process refused the LeaderAndIsr of controller 1 (epoch 1) at event 4 (+0s) with error 11: ", build: func(b *hb.Builder) []int {
			elected(b, 1, 1, 10)
			a := checkpoint(b, 2, nil, cpe(0, 5), cpe(1, 3))
			s := b.Start(2)
			b.Register(2, 200)
			c := lai(1, 50, history.VerdictAccepted, 0)
			c.Partitions = []history.ControlPartition{{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 1},
				{Topic: "t", Partition: 1, Leader: 2, LeaderEpoch: 1, ErrorCode: history.ErrStaleControllerEpoch}}
			r := b.Control(2, c)
			w := checkpoint(b, 2, nil, cpe(0, 5))
			b.At(2000).Phase()
			return []int{a, s, r, w}
		}},
	})
}
