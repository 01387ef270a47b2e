package faults

import (
	"context"
	"fmt"
	"strings"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/nemesis"
)

// CrashLoseUnflushedDoc is crash-lose-unflushed's catalogue line.
const CrashLoseUnflushedDoc = "SIGKILL a random broker and drop what it had not fsynced (each segment cut to its last fsynced length, as lazyfs loses the page cache); restarted at the end of the fault"

// Disks reaches a node's data directory while its process is down.
type Disks interface {
	// LoseUnflushed cuts every segment file in node's data directory to
	// the length the node last recorded as fsynced
	// (history.DurableLengthsFile) and says what it cut; the node must be
	// down.
	LoseUnflushed(ctx context.Context, node int) ([]UnflushedCut, error)
}

// UnflushedCut is one segment file crash-lose-unflushed cut: from Size
// bytes to its Durable length, dropping the batches of offsets
// [FirstOffset, EndOffset).
type UnflushedCut struct {
	Topic     string
	Partition int32
	File      string // the segment file's name
	Durable   int64
	Size      int64
	// FirstOffset and EndOffset bound the dropped batches; -1 when the
	// dropped bytes held no whole batch header.
	FirstOffset, EndOffset int64
}

func (c UnflushedCut) String() string {
	return fmt.Sprintf("%s-%d offsets [%d, %d) (%s %d → %d bytes)", c.Topic, c.Partition, c.FirstOffset, c.EndOffset, c.File, c.Size, c.Durable)
}

// crashOps is what crash-lose-unflushed does to processes (procs on the
// Nemesis, a fake in tests).
type crashOps interface {
	kill(ctx context.Context, t Target) error
	start(ctx context.Context, t Target) error
	held(t Target) bool
}

// unflushedCrash is crash-lose-unflushed: a process crash with a machine
// crash. Kafka fsyncs a segment only when it rolls or the log closes
// (Log.roll, Log.flush); whatever it appended since is in the page cache
// only, and a machine crash loses it. The fault kills a broker, cuts its
// segments to their fsynced lengths while it is down and starts it when
// the step heals; replication must then bring the lost suffix back.
type unflushedCrash struct {
	world nemesis.World
	ops   crashOps
	disks Disks
	rec   *nemesis.Recorder
}

// inject kills the broker pick chooses among those no other fault holds
// (none: the step is not applied),
// cuts its unflushed bytes and records the fault with what it cut; the
// heal starts the broker again. A cut that fails is recorded as the
// fault's error and the broker is still started by the heal.
func (f *unflushedCrash) inject(ctx context.Context, pick int) (Heal, error) {
	k := CrashLoseUnflushed
	var cands []Target // the brokers no other fault holds
	for _, n := range f.world.Nodes() {
		if !f.ops.held(n) {
			cands = append(cands, n)
		}
	}
	if len(cands) == 0 {
		// Crashing a broker another fault holds (killed, paused, armed)
		// would race that fault's heal: its restart meets this kill.
		return nil, fmt.Errorf("%s: every broker is held by another fault", k)
	}
	t, err := pickOne(k, cands, pick)
	if err != nil {
		return nil, err
	}
	if err := f.ops.kill(ctx, t); err != nil {
		return nil, fmt.Errorf("%s: %w", k, err)
	}
	targets := []string{t.Name}
	cuts, cutErr := f.disks.LoseUnflushed(ctx, nodeID(t))
	detail := unflushedDetail(cuts)
	id := f.rec.StartFault(history.Fault{Name: string(k), Targets: targets, Detail: detail})
	for _, tr := range unflushedTruncations(cuts) {
		f.rec.Truncated(int32(nodeID(t)), tr)
	}
	if cutErr != nil {
		f.rec.StopFault(history.Fault{ID: id, Name: string(k), Targets: targets, Detail: detail}, cutErr)
	}
	return func(ctx context.Context) error {
		err := f.ops.start(ctx, t)
		if cutErr == nil {
			f.rec.StopFault(history.Fault{ID: id, Name: string(k), Targets: targets, Detail: "started again"}, err)
		}
		return err
	}, nil
}

// unflushedDetail is the fault's detail: every cut, or that there was
// nothing unflushed.
func unflushedDetail(cuts []UnflushedCut) string {
	if len(cuts) == 0 {
		return "SIGKILL; nothing unflushed to drop"
	}
	parts := make([]string, len(cuts))
	for i, c := range cuts {
		parts[i] = c.String()
	}
	return "SIGKILL; dropped unflushed " + strings.Join(parts, "; ")
}

// unflushedTruncations is what cuts did to each partition's log, as
// truncation events (history.TruncationUnflushedLoss): from the highest
// end it cut from to the first offset it dropped, partitions in the order
// of their first cut.
func unflushedTruncations(cuts []UnflushedCut) []history.Truncation {
	var out []history.Truncation
	at := map[history.TopicPartition]int{}
	for _, c := range cuts {
		if c.FirstOffset < 0 {
			continue
		}
		tp := history.TP(c.Topic, c.Partition)
		i, ok := at[tp]
		if !ok {
			at[tp] = len(out)
			out = append(out, history.Truncation{Topic: c.Topic, Partition: c.Partition, From: c.EndOffset, To: c.FirstOffset,
				Reason: history.TruncationUnflushedLoss})
			continue
		}
		out[i].From = max(out[i].From, c.EndOffset)
		out[i].To = min(out[i].To, c.FirstOffset)
	}
	return out
}
