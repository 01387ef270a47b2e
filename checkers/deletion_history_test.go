package checkers

import (
	"fmt"
	"slices"
	"sort"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
)

// deletionRun is a clean run (topic "t", client traffic, the generator's
// clean cluster) with the life of a second topic "d" beside it, as the
// node logs it: created (leader 2, epoch 0), written to (offsets 0-4),
// two elections (epochs 1, 2), deleted (StopReplica without then with
// delete at epoch -2, the ISR removals, the znodes removed), then created
// again at the same name (leader 1, epoch 0, zkVersion 0) and written to
// from offset 0. Every broker's checkpoints list d-0 while it hosts it.
// With zombie, broker 3 appends to and advances the high watermark of its
// deleted d-0 after the deletion, before the topic is created again.
func deletionRun(zombie bool) *history.History {
	base := historytest.Clean(historytest.GenConfig{Partitions: 1, Processes: 2, Ops: 40, FinalReads: true, NodeEvents: true, Seed: 3})
	evs := slices.Clone(base.Events)
	// d's life spans 10 s, longer than the client traffic: its deletion
	// keeps its partition without a leader for seconds.
	span := 10_000 * historytest.Ms
	at := func(frac float64, plus int64) int64 { return historytest.T0 + int64(float64(span)*frac) + plus }
	var add []history.Event
	emit := func(t int64, src string, node int32, e history.Event) {
		e.Time, e.Source, e.Node = t, src, node
		add = append(add, e)
	}
	n := func(id int32) string { return fmt.Sprintf("n%d", id) }
	statePath := "/brokers/topics/d/partitions/0/state"
	zxid := int64(10_000)
	// hosted[b] says, per time, d-0's HW on broker b (-1: not hosted).
	type hwAt struct {
		t  int64
		hw int64
	}
	hosted := map[int32][]hwAt{}
	setHW := func(b int32, t, hw int64) { hosted[b] = append(hosted[b], hwAt{t, hw}) }

	write := func(t int64, op string, st history.PartitionState, ver int32) {
		zxid++
		s := st
		emit(t, "n1", 1, history.Event{Kind: history.KindZKWrite, ZKWrite: &history.ZKWrite{Start: t - 1, Path: statePath, Op: op, Conditional: true,
			ControllerEpoch: 1, EpochZkVersion: 1, ExpectedVersion: ver - 1, Outcome: history.ZKOK, NewVersion: ver, Zxid: zxid, State: &s}})
		w := st
		emit(t+1, "zk", 0, history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: statePath, Type: history.WatchChanged,
			Mzxid: zxid, Version: ver, State: &w}})
	}
	lai := func(t int64, st history.PartitionState, ver int32, isNew bool) {
		for _, b := range st.Replicas {
			cp := history.ControlPartition{Topic: "d", Partition: 0, Leader: st.Leader, LeaderEpoch: st.LeaderEpoch, ISR: st.ISR,
				Replicas: st.Replicas, ZkVersion: ver, IsNew: isNew}
			emit(t, "n1", 1, history.Event{Kind: history.KindControlSent, Control: &history.Control{API: history.APILeaderAndIsr, APIVersion: 4,
				CorrelationID: int32(t % 100000), ControllerID: 1, ControllerEpoch: 1, BrokerEpoch: 100 + int64(b), TargetBroker: b,
				MeantBrokerEpoch: 100 + int64(b), Attempt: 1, Partitions: []history.ControlPartition{cp}}})
			emit(t+1, n(b), b, history.Event{Kind: history.KindControlRequest, Control: &history.Control{API: history.APILeaderAndIsr, APIVersion: 4,
				CorrelationID: int32(t % 100000), ControllerID: 1, ControllerEpoch: 1, BrokerEpoch: 100 + int64(b), Partitions: []history.ControlPartition{cp},
				Verdict: history.VerdictAccepted, KnownControllerEpoch: 1, OwnBrokerEpoch: 100 + int64(b)}})
			role := history.RoleFollower
			if b == st.Leader {
				role = history.RoleLeader
			}
			emit(t+2, n(b), b, history.Event{Kind: history.KindRoleChange, Role: &history.Role{Topic: "d", Partition: 0, Role: role,
				Leader: st.Leader, LeaderEpoch: st.LeaderEpoch, ISR: st.ISR, ControllerEpoch: 1}})
		}
	}
	appendHW := func(t int64, leader int32, epoch int32, from, to int64, replicas []int32) {
		ap := history.Append{Topic: "d", Partition: 0, BaseOffset: from, LastOffset: to - 1, LeaderEpoch: epoch, Acks: history.AcksAll}
		emit(t, n(leader), leader, history.Event{Kind: history.KindProduceAppend, Append: &ap})
		for i, b := range replicas {
			leo := to
			emit(t+int64(1+i)*historytest.Ms, n(b), b, history.Event{Kind: history.KindHWAdvance, HW: &history.HWAdvance{Topic: "d", Partition: 0,
				Old: from, New: to, LeaderEpoch: epoch, LEO: &leo}})
			setHW(b, t+int64(1+i)*historytest.Ms, to)
		}
		ak := ap
		emit(t+5*historytest.Ms, n(leader), leader, history.Event{Kind: history.KindProduceAck, Append: &ak})
	}
	all := []int32{2, 3, 1}
	st := func(leader, epoch int32, isr ...int32) history.PartitionState {
		return history.PartitionState{Topic: "d", Partition: 0, Leader: leader, LeaderEpoch: epoch, ControllerEpoch: 1, ISR: isr, Replicas: all}
	}

	// The first incarnation.
	t := at(0.05, 0)
	write(t, "create", st(2, 0, 2, 3, 1), 0)
	lai(t+2, st(2, 0, 2, 3, 1), 0, true)
	for _, b := range all {
		setHW(b, t+4, 0)
	}
	appendHW(at(0.10, 0), 2, 0, 0, 5, []int32{2, 3, 1})
	write(at(0.20, 0), "set", st(3, 1, 3, 1, 2), 1)
	lai(at(0.20, 3), st(3, 1, 3, 1, 2), 1, false)
	write(at(0.30, 0), "set", st(2, 2, 2, 3, 1), 2)
	lai(at(0.30, 3), st(2, 2, 2, 3, 1), 2, false)

	// The deletion.
	t = at(0.40, 0)
	emit(t, "n1", 1, history.Event{Kind: history.KindTopicDeletion, Deletion: &history.TopicDeletion{Topic: "d", Step: history.DeletionStarted,
		Partitions: []int32{0}, ControllerEpoch: 1}})
	stop := func(t int64, b int32, del bool) {
		cp := history.ControlPartition{Topic: "d", Partition: 0, Leader: -1, LeaderEpoch: -2}
		emit(t, "n1", 1, history.Event{Kind: history.KindControlSent, Control: &history.Control{API: history.APIStopReplica, APIVersion: 3,
			CorrelationID: int32(t % 100000), ControllerID: 1, ControllerEpoch: 1, BrokerEpoch: 100 + int64(b), TargetBroker: b, DeletePartition: del,
			MeantBrokerEpoch: 100 + int64(b), Attempt: 1, Partitions: []history.ControlPartition{cp}}})
		emit(t+1, n(b), b, history.Event{Kind: history.KindControlRequest, Control: &history.Control{API: history.APIStopReplica, APIVersion: 3,
			CorrelationID: int32(t % 100000), ControllerID: 1, ControllerEpoch: 1, BrokerEpoch: 100 + int64(b), DeletePartition: del,
			Partitions: []history.ControlPartition{cp}, Verdict: history.VerdictAccepted, KnownControllerEpoch: 1, OwnBrokerEpoch: 100 + int64(b)}})
		if del || b != 2 {
			// A leader stopped without delete keeps leading.
			emit(t+2, n(b), b, history.Event{Kind: history.KindRoleChange, Role: &history.Role{Topic: "d", Partition: 0, Role: history.RoleStopped,
				Leader: -1, LeaderEpoch: 2, ControllerEpoch: 1}})
		}
		if del {
			emit(t+3, n(b), b, history.Event{Kind: history.KindTopicDeletion, Deletion: &history.TopicDeletion{Topic: "d", Step: history.PartitionDeleted,
				Partitions: []int32{0}, ControllerEpoch: 1, LeaderEpoch: 2}})
			setHW(b, t+3, -1)
		}
	}
	write(t+10, "set", st(-1, 3, 3, 1), 3)
	write(t+20, "set", st(-1, 4, 1), 4)
	for i, b := range all {
		stop(t+30+int64(i)*10, b, false)
	}
	for i, b := range all {
		stop(at(0.48, int64(i)*historytest.Ms), b, true)
	}
	t = at(0.50, 0)
	for i, p := range []string{statePath, "/brokers/topics/d/partitions/0", "/brokers/topics/d/partitions", "/brokers/topics/d", "/admin/delete_topics/d"} {
		emit(t+int64(i), "n1", 1, history.Event{Kind: history.KindZKWrite, ZKWrite: &history.ZKWrite{Start: t, Path: p, Op: "delete", Conditional: true,
			ControllerEpoch: 1, EpochZkVersion: 1, ExpectedVersion: -1, Outcome: history.ZKOK}})
	}
	emit(t+6, "zk", 0, history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: statePath, Type: history.WatchDeleted}})
	emit(t+7, "n1", 1, history.Event{Kind: history.KindTopicDeletion, Deletion: &history.TopicDeletion{Topic: "d", Step: history.DeletionCompleted,
		Partitions: []int32{0}, ControllerEpoch: 1}})
	if zombie {
		// Broker 3 goes on with the old incarnation's log after deleting it.
		zt := at(0.52, 0)
		ap := history.Append{Topic: "d", Partition: 0, BaseOffset: 5, LastOffset: 5, LeaderEpoch: 2, Acks: history.AcksLeader}
		emit(zt, "n3", 3, history.Event{Kind: history.KindProduceAppend, Append: &ap})
		leo := int64(6)
		emit(zt+1, "n3", 3, history.Event{Kind: history.KindHWAdvance, HW: &history.HWAdvance{Topic: "d", Partition: 0, Old: 5, New: 6, LeaderEpoch: 2, LEO: &leo}})
	}

	// The second incarnation: same name, a new partition.
	t = at(0.55, 0)
	// Its leader, 3, was outside the deleted incarnation's last ISR: a
	// creation is no election.
	again := history.PartitionState{Topic: "d", Partition: 0, Leader: 3, LeaderEpoch: 0, ControllerEpoch: 1, ISR: []int32{3, 1, 2}, Replicas: []int32{3, 1, 2}}
	write(t, "create", again, 0)
	lai(t+2, again, 0, true)
	for _, b := range all {
		setHW(b, t+4, 0)
	}
	appendHW(at(0.65, 0), 3, 0, 0, 3, []int32{3, 1, 2})
	// A leader change in the new incarnation, at leader epoch 1 again.
	write(at(0.70, 0), "set", history.PartitionState{Topic: "d", Partition: 0, Leader: 1, LeaderEpoch: 1, ControllerEpoch: 1, ISR: []int32{1, 2, 3}, Replicas: []int32{3, 1, 2}}, 1)
	lai(at(0.70, 3), history.PartitionState{Topic: "d", Partition: 0, Leader: 1, LeaderEpoch: 1, ControllerEpoch: 1, ISR: []int32{1, 2, 3}, Replicas: []int32{3, 1, 2}}, 1, false)
	emit(at(1.2, 0), "harness", 0, history.Event{Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseCollect, Mark: history.PhaseBegin}})

	// Every broker goes on checkpointing after the client traffic: t-0 at
	// its last high watermark, d-0 while it hosts it.
	var tHW int64
	for _, e := range evs {
		if e.Kind == history.KindHWCheckpoint {
			tHW = e.Checkpoint.Entries[0].HW
		}
	}
	last := evs[len(evs)-1].Time
	for ct := last + 100*historytest.Ms; ct < at(1.0, 0); ct += 250 * historytest.Ms {
		for _, b := range all {
			evs = append(evs, history.Event{V: history.SchemaVersion, Time: ct, Source: n(b), Node: b, Kind: history.KindHWCheckpoint,
				Checkpoint: &history.Checkpoint{Entries: []history.CheckpointEntry{{Topic: "t", Partition: 0, HW: tHW}}}})
		}
	}
	// d-0 in every checkpoint its broker wrote while hosting it.
	for i := range evs {
		e := &evs[i]
		if e.Kind != history.KindHWCheckpoint {
			continue
		}
		hw := int64(-1)
		for _, h := range hosted[e.Node] {
			if h.t <= e.Time {
				hw = h.hw
			}
		}
		if hw >= 0 {
			cp := *e.Checkpoint
			cp.Entries = append(slices.Clone(cp.Entries), history.CheckpointEntry{Topic: "d", Partition: 0, HW: hw})
			e.Checkpoint = &cp
		}
	}
	for i := range add {
		add[i].V = history.SchemaVersion
	}
	evs = append(evs, add...)
	for i := range evs {
		evs[i].Index = 0
	}
	sort.SliceStable(evs, func(a, b int) bool { return evs[a].Time < evs[b].Time })
	return history.Merge(evs)
}
