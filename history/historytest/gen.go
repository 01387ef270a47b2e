package historytest

import (
	"fmt"
	"math/rand"
	"sort"

	"github.com/zkchaos/zkchaos/history"
)

// GenConfig shapes a generated clean history.
type GenConfig struct {
	Partitions  int     // topic-partitions, topic "t"
	Processes   int     // concurrent client processes per partition
	Ops         int     // client operations per partition
	UnknownRate float64 // fraction of produces whose outcome is info (each took effect or not, 50/50)
	ReadRate    float64 // fraction of operations that are reads
	FinalReads  bool    // end with a final full read of every partition
	NodeEvents  bool    // add a clean cluster's node, watcher and nemesis events
	// NoCompletion leaves unknown produces without any completion event
	// (as when a client crashed) instead of an info.
	NoCompletion bool
	// ReadRecords, when positive, makes reads look like the workload's
	// (one consumer poll of at most ReadRecords records): half tail the
	// log from up to ReadRecords records before its end, half read from a
	// random offset, each returning every record there up to ReadRecords.
	// Zero keeps the short reads (1 to 3 records near the end) that the
	// older benchmarks were measured with.
	ReadRecords int
	Seed        int64
}

// genOp is one simulated client operation.
type genOp struct {
	proc      int
	tp        history.TopicPartition
	produce   bool
	value     string
	call, ret int64
	lin       int64 // linearization point, within [call, ret]
	unknown   bool
	effect    bool // for unknown produces: whether it took effect
	offset    int64
	records   []history.Record
}

// Clean generates a history with no anomaly: every operation takes effect
// atomically at a point inside its interval on a single log per partition,
// so it is linearizable, durable and fenced. With NodeEvents, a clean
// cluster (3 brokers, one controller, fixed leaders, one healed fault) is
// written around the client traffic.
func Clean(cfg GenConfig) *history.History {
	rng := rand.New(rand.NewSource(cfg.Seed))
	if cfg.Processes <= 0 {
		cfg.Processes = 1
	}
	var all []history.Event
	add := func(e history.Event) { all = append(all, e) }
	var end int64 = T0
	logs := make([][]string, cfg.Partitions)
	// commits[p][k] is when offset k of partition p was committed: the time
	// of the leader's hw_advance to k+1 (offsets follow linearization order,
	// so the times never decrease).
	commits := make([][]int64, cfg.Partitions)
	leaderOf := func(p int) int32 { return int32(p%3) + 1 }

	if cfg.NodeEvents {
		all = append(all, cleanClusterStart(cfg.Partitions, leaderOf)...)
	}

	proc := 0
	for p := 0; p < cfg.Partitions; p++ {
		tp := history.TP("t", int32(p))
		var ops []*genOp
		for c := 0; c < cfg.Processes; c++ {
			t := T0 + int64(rng.Intn(5))*Ms
			n := cfg.Ops / cfg.Processes
			if c < cfg.Ops%cfg.Processes {
				n++
			}
			for i := 0; i < n; i++ {
				dur := int64(1+rng.Intn(20)) * Ms
				o := &genOp{proc: proc, tp: tp, call: t, ret: t + dur}
				o.lin = o.call + rng.Int63n(dur+1)
				o.produce = rng.Float64() >= cfg.ReadRate
				if o.produce {
					o.value = fmt.Sprintf("p%d-c%d-%d", p, c, i)
					if rng.Float64() < cfg.UnknownRate {
						o.unknown, o.effect = true, rng.Intn(2) == 0
					}
				}
				ops = append(ops, o)
				t = o.ret + int64(rng.Intn(3))*Ms
			}
			proc++
		}
		emit := append([]*genOp(nil), ops...) // per-process order, for emission
		sort.SliceStable(ops, func(a, b int) bool { return ops[a].lin < ops[b].lin })
		var log []string
		for _, o := range ops {
			if o.produce {
				if !o.unknown || o.effect {
					o.offset = int64(len(log))
					log = append(log, o.value)
					commits[p] = append(commits[p], o.lin)
				}
				continue
			}
			var k int
			if cfg.ReadRecords > 0 {
				if rng.Intn(2) == 0 {
					o.offset = int64(max(len(log)-rng.Intn(cfg.ReadRecords), 0))
				} else {
					o.offset = int64(rng.Intn(len(log) + 1))
				}
				k = cfg.ReadRecords
			} else {
				lo := len(log) - 3
				if lo < 0 {
					lo = 0
				}
				o.offset = int64(lo + rng.Intn(len(log)-lo+1))
				k = 1 + rng.Intn(3)
			}
			for j := o.offset; j < int64(len(log)) && j < o.offset+int64(k); j++ {
				o.records = append(o.records, history.Record{Offset: j, Value: log[j]})
			}
		}
		logs[p] = log
		for _, o := range emit {
			if o.ret > end {
				end = o.ret
			}
			src := fmt.Sprintf("client-%d", o.proc/max(cfg.Processes, 1))
			inv := history.ClientOp{Type: history.OpInvoke, Process: o.proc, Topic: tp.Topic, Partition: tp.Partition}
			done := history.ClientOp{Process: o.proc, Topic: tp.Topic, Partition: tp.Partition}
			if o.produce {
				inv.F, inv.Value, inv.Acks = history.FProduce, o.value, history.AcksAll
				done.F, done.Value = history.FProduce, o.value
				if o.unknown {
					done.Type, done.Error = history.OpInfo, "request timed out"
				} else {
					done.Type, done.Offset = history.OpOK, o.offset
				}
			} else {
				inv.F, inv.Offset = history.FRead, o.offset
				done.F, done.Type, done.Offset, done.Records = history.FRead, history.OpOK, o.offset, o.records
			}
			add(history.Event{Time: o.call, Source: src, Kind: history.KindOp, Op: &inv})
			if !(o.unknown && cfg.NoCompletion) {
				add(history.Event{Time: o.ret, Source: src, Kind: history.KindOp, Op: &done})
			}
			if cfg.NodeEvents && o.produce && (!o.unknown || o.effect) {
				l := leaderOf(p)
				nsrc := fmt.Sprintf("n%d", l)
				ap := history.Append{Topic: tp.Topic, Partition: tp.Partition, BaseOffset: o.offset, LastOffset: o.offset, LeaderEpoch: 1, Acks: history.AcksAll}
				ak := ap
				add(history.Event{Time: o.lin - 1, Source: nsrc, Node: l, Kind: history.KindProduceAppend, Append: &ap})
				add(history.Event{Time: o.lin, Source: nsrc, Node: l, Kind: history.KindHWAdvance, HW: &history.HWAdvance{Topic: tp.Topic, Partition: tp.Partition, Old: o.offset, New: o.offset + 1, LeaderEpoch: 1}})
				if !o.unknown {
					add(history.Event{Time: o.lin + 1, Source: nsrc, Node: l, Kind: history.KindProduceAck, Append: &ak})
				}
			}
		}
	}

	if cfg.NodeEvents {
		all = append(all, cleanCheckpointsAndPause(cfg.Partitions, commits, end)...)
	}
	if cfg.FinalReads {
		all = append(all, cleanFinalReads(logs, end)...)
	}
	for i := range all {
		all[i].V = history.SchemaVersion
	}
	// Merge keeps one source's order as given: put every event where its
	// time says, as a node logs them, so a checkpoint follows the
	// hw_advance events that set what it writes (ties keep the order
	// above, which puts the checkpoints after).
	sort.SliceStable(all, func(a, b int) bool { return all[a].Time < all[b].Time })
	return history.Merge(all)
}

// cleanClusterStart is a clean cluster's start: three brokers registered,
// n1 elected controller, each partition led by leaderOf with a full ISR.
func cleanClusterStart(partitions int, leaderOf func(int) int32) []history.Event {
	var all []history.Event
	add := func(e history.Event) { all = append(all, e) }
	for n := int32(1); n <= 3; n++ {
		add(history.Event{Time: T0 - 100*Ms, Source: fmt.Sprintf("n%d", n), Node: n, Kind: history.KindNodeStart, Process: &history.Process{Incarnation: int64(n)}})
		add(history.Event{Time: T0 - 90*Ms, Source: fmt.Sprintf("n%d", n), Node: n, Kind: history.KindBrokerRegistered, Registration: &history.Registration{BrokerID: n, BrokerEpoch: 100 + int64(n)}})
	}
	add(history.Event{Time: T0 - 80*Ms, Source: "zk", Kind: history.KindZKWatch, Watch: &history.Watch{Path: "/brokers/ids", Type: history.WatchChildren,
		Brokers: []history.BrokerZnode{{ID: 1, Czxid: 101}, {ID: 2, Czxid: 102}, {ID: 3, Czxid: 103}}}})
	add(history.Event{Time: T0 - 70*Ms, Source: "n1", Node: 1, Kind: history.KindControllerElected, Controller: &history.ControllerRun{Epoch: 1, EpochZkVersion: 1, Zxid: 110}})
	for p := 0; p < partitions; p++ {
		l := leaderOf(p)
		st := &history.PartitionState{Topic: "t", Partition: int32(p), Leader: l, LeaderEpoch: 1, ControllerEpoch: 1, ISR: []int32{1, 2, 3}, Replicas: []int32{1, 2, 3}}
		add(history.Event{Time: T0 - 60*Ms, Source: "n1", Node: 1, Kind: history.KindZKWrite, ZKWrite: &history.ZKWrite{Start: T0 - 61*Ms,
			Path: fmt.Sprintf("/brokers/topics/t/partitions/%d/state", p), Op: "set", Conditional: true, ControllerEpoch: 1, EpochZkVersion: 1,
			Outcome: history.ZKOK, Zxid: 200 + int64(p), State: st}})
		add(history.Event{Time: T0 - 59*Ms, Source: "zk", Kind: history.KindZKWatch, Watch: &history.Watch{Path: fmt.Sprintf("/brokers/topics/t/partitions/%d/state", p),
			Type: history.WatchChanged, Mzxid: 200 + int64(p), State: st}})
		for n := int32(1); n <= 3; n++ {
			add(history.Event{Time: T0 - 50*Ms, Source: fmt.Sprintf("n%d", n), Node: n, Kind: history.KindControlRequest, Control: &history.Control{
				API: history.APILeaderAndIsr, CorrelationID: int32(p), ControllerID: 1, ControllerEpoch: 1, BrokerEpoch: 100 + int64(n),
				Partitions: []history.ControlPartition{{Topic: "t", Partition: int32(p), Leader: l, LeaderEpoch: 1, ISR: []int32{1, 2, 3}}},
				Verdict:    history.VerdictAccepted, KnownControllerEpoch: 1, OwnBrokerEpoch: 100 + int64(n)}})
			role := history.RoleFollower
			if n == l {
				role = history.RoleLeader
			}
			add(history.Event{Time: T0 - 49*Ms, Source: fmt.Sprintf("n%d", n), Node: n, Kind: history.KindRoleChange,
				Role: &history.Role{Topic: "t", Partition: int32(p), Role: role, Leader: l, LeaderEpoch: 1}})
		}
	}
	return all
}

// cleanCheckpointsAndPause is a clean cluster's periodic HW checkpoints up
// to end (commits[p][k]: when offset k of partition p was committed) and a
// healed pause of n3 halfway.
func cleanCheckpointsAndPause(partitions int, commits [][]int64, end int64) []history.Event {
	var all []history.Event
	add := func(e history.Event) { all = append(all, e) }
	// Periodic checkpoints and a healed pause of n3. Each broker writes
	// each partition's high watermark at the time: the leader's, which
	// its hw_advance events show, and the same on the followers, which
	// the generator lets replicate at once.
	steps := int64(20)
	for s := int64(1); s <= steps; s++ {
		t := T0 + (end-T0)*s/steps
		for n := int32(1); n <= 3; n++ {
			var entries []history.CheckpointEntry
			for p := 0; p < partitions; p++ {
				hw := sort.Search(len(commits[p]), func(k int) bool { return commits[p][k] > t })
				entries = append(entries, history.CheckpointEntry{Topic: "t", Partition: int32(p), HW: int64(hw)})
			}
			add(history.Event{Time: t, Source: fmt.Sprintf("n%d", n), Node: n, Kind: history.KindHWCheckpoint, Checkpoint: &history.Checkpoint{Entries: entries}})
		}
	}
	mid := T0 + (end-T0)/2
	add(history.Event{Time: mid, Source: "nemesis", Kind: history.KindFaultStart, Fault: &history.Fault{ID: "f1", Name: "pause", Targets: []string{"n3"}}})
	add(history.Event{Time: mid + 10*Ms, Source: "nemesis", Kind: history.KindFaultStop, Fault: &history.Fault{ID: "f1", Name: "pause", Targets: []string{"n3"}}})
	return all
}

// cleanFinalReads is one full final read of each partition's log after end.
func cleanFinalReads(logs [][]string, end int64) []history.Event {
	var all []history.Event
	add := func(e history.Event) { all = append(all, e) }
	t := end + 10*Ms
	for p := range logs {
		tp := history.TP("t", int32(p))
		var recs []history.Record
		for i, v := range logs[p] {
			recs = append(recs, history.Record{Offset: int64(i), Value: v})
		}
		proc := 1_000_000 + p
		add(history.Event{Time: t, Source: "final", Kind: history.KindOp, Op: &history.ClientOp{Type: history.OpInvoke, Process: proc, F: history.FRead, Topic: tp.Topic, Partition: tp.Partition, Final: true}})
		add(history.Event{Time: t + Ms, Source: "final", Kind: history.KindOp, Op: &history.ClientOp{Type: history.OpOK, Process: proc, F: history.FRead, Topic: tp.Topic, Partition: tp.Partition, Final: true, Records: recs}})
	}
	return all
}
