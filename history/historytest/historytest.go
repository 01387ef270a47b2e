// Package historytest builds histories for tests and benchmarks: a Builder
// for short hand-written histories and generators of clean (anomaly-free)
// histories of any size, whose configuration property tests Draw. It belongs to package history's tree so every
// consumer's tests share one vocabulary; production code must not import it.
package historytest

import (
	"fmt"

	"github.com/zkchaos/zkchaos/history"
)

// Ms is one millisecond in history time.
const Ms = int64(1_000_000)

// T0 is the time origin of built histories (an arbitrary 2026 instant).
const T0 = int64(1_780_000_000_000_000_000)

// Builder appends events one millisecond apart (or at a time set with At).
type Builder struct {
	now int64
	evs []history.Event
}

// New returns an empty Builder at T0.
func New() *Builder { return &Builder{now: T0} }

// At moves the clock to T0 + ms milliseconds.
func (b *Builder) At(ms int64) *Builder { b.now = T0 + ms*Ms; return b }

// Now returns the clock.
func (b *Builder) Now() int64 { return b.now }

// Add appends e at the clock (unless e.Time is set), stamping V, Source and
// Seq, and returns its index.
func (b *Builder) Add(e history.Event) int {
	if e.Time == 0 {
		e.Time = b.now
		b.now += Ms
	}
	e.V = history.SchemaVersion
	if e.Source == "" {
		switch {
		case e.Node != 0:
			e.Source = fmt.Sprintf("n%d", e.Node)
		case e.Op != nil:
			e.Source = "client"
		case e.Watch != nil:
			e.Source = "zk"
		case e.Fault != nil:
			e.Source = "nemesis"
		default:
			e.Source = "harness"
		}
	}
	e.Index = len(b.evs)
	e.Seq = uint64(e.Index)
	b.evs = append(b.evs, e)
	return e.Index
}

// History returns the built history (events in Add order).
func (b *Builder) History() *history.History { return history.New(b.evs) }

// Op appends a client op event.
func (b *Builder) Op(o history.ClientOp) int {
	return b.Add(history.Event{Kind: history.KindOp, Op: &o})
}

// Produce appends an acks=all produce invoke.
func (b *Builder) Produce(proc int, tp history.TopicPartition, value string) int {
	return b.Op(history.ClientOp{Type: history.OpInvoke, Process: proc, F: history.FProduce,
		Topic: tp.Topic, Partition: tp.Partition, Value: value, Acks: history.AcksAll})
}

// Complete appends the completion of proc's pending op.
func (b *Builder) Complete(proc int, typ history.OpType, tp history.TopicPartition, f string, offset int64, recs ...history.Record) int {
	return b.Op(history.ClientOp{Type: typ, Process: proc, F: f, Topic: tp.Topic, Partition: tp.Partition,
		Offset: offset, Records: recs, Acks: history.AcksAll})
}

// Read appends a read invoke at offset; final marks a final read.
func (b *Builder) Read(proc int, tp history.TopicPartition, offset int64, final bool) int {
	return b.Op(history.ClientOp{Type: history.OpInvoke, Process: proc, F: history.FRead,
		Topic: tp.Topic, Partition: tp.Partition, Offset: offset, Final: final})
}

// ReadOK appends an ok read completion with records.
func (b *Builder) ReadOK(proc int, tp history.TopicPartition, offset int64, final bool, recs ...history.Record) int {
	return b.Op(history.ClientOp{Type: history.OpOK, Process: proc, F: history.FRead,
		Topic: tp.Topic, Partition: tp.Partition, Offset: offset, Records: recs, Final: final})
}

// ProduceOK appends a produce invoke of value and its ok at offset, and
// returns both indices.
func (b *Builder) ProduceOK(proc int, tp history.TopicPartition, value string, offset int64) (invoke, ok int) {
	invoke = b.Produce(proc, tp, value)
	return invoke, b.Complete(proc, history.OpOK, tp, history.FProduce, offset)
}

// ReadBack appends a read invoke at offset and its ok returning recs, and
// returns the ok's index.
func (b *Builder) ReadBack(proc int, tp history.TopicPartition, offset int64, final bool, recs ...history.Record) int {
	b.Read(proc, tp, offset, final)
	return b.ReadOK(proc, tp, offset, final, recs...)
}

// Rec is a record read back at off.
func Rec(off int64, value string) history.Record { return history.Record{Offset: off, Value: value} }

// Control appends a control_request judged by node.
func (b *Builder) Control(node int32, c history.Control) int {
	return b.Add(history.Event{Kind: history.KindControlRequest, Node: node, Control: &c})
}

// Register appends broker_registered for node with czxid.
func (b *Builder) Register(node int32, czxid int64) int {
	return b.Add(history.Event{Kind: history.KindBrokerRegistered, Node: node,
		Registration: &history.Registration{BrokerID: node, BrokerEpoch: czxid}})
}

// Start appends node_start for node.
func (b *Builder) Start(node int32) int {
	return b.Add(history.Event{Kind: history.KindNodeStart, Node: node, Process: &history.Process{Incarnation: b.now}})
}

// Fault appends fault_start (start true) or fault_stop for id.
func (b *Builder) Fault(start bool, id, name string, targets ...string) int {
	k := history.KindFaultStop
	if start {
		k = history.KindFaultStart
	}
	return b.Add(history.Event{Kind: k, Fault: &history.Fault{ID: id, Name: name, Targets: targets}})
}

// State appends a zk_watch observation of a partition state.
func (b *Builder) State(tp history.TopicPartition, leader, leaderEpoch, ctrlEpoch int32, mzxid int64, isr ...int32) int {
	return b.Add(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{
		Path: fmt.Sprintf("/brokers/topics/%s/partitions/%d/state", tp.Topic, tp.Partition), Type: history.WatchChanged, Mzxid: mzxid,
		State: &history.PartitionState{Topic: tp.Topic, Partition: tp.Partition, Leader: leader, LeaderEpoch: leaderEpoch, ControllerEpoch: ctrlEpoch, ISR: isr}}})
}

// Brokers appends a zk_watch listing of /brokers/ids.
func (b *Builder) Brokers(ids ...int32) int {
	var bs []history.BrokerZnode
	for _, id := range ids {
		bs = append(bs, history.BrokerZnode{ID: id, Czxid: int64(100 + id)})
	}
	return b.Add(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: "/brokers/ids", Type: history.WatchChildren, Brokers: bs}})
}

// Phase appends a harness phase marker (handy to extend a history in time).
func (b *Builder) Phase() int {
	return b.Add(history.Event{Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseCollect, Mark: history.PhaseBegin}})
}
