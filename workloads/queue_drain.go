package workloads

// The queue workload's final drain.

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/zkchaos/zkchaos/history"
)

// drainProcess is the drain's process number, apart from the workload's.
const drainProcess = 1_000_000

// QueueDrain reads every partition from offset 0 to its end after the
// cluster healed, at cfg's isolation level: an assign operation naming
// every partition from 0, one Final poll per fetch, and a drained
// operation whose ok lists each partition read to the end offset (the
// high watermark) its last fetch reported. A partition that could not be read to its end
// within the deadline is left out of that list, so the checkers know its
// truth is missing rather than empty.
func QueueDrain(ctx context.Context, cfg QueueConfig, w *history.Writer, within time.Duration) error {
	if cfg.OpTimeout == 0 {
		cfg.OpTimeout = 5 * time.Second
	}
	kc, err := kgo.NewClient(queueClientOpts(cfg)...)
	if err != nil {
		return fmt.Errorf("queue drain: %w", err)
	}
	defer kc.Close()
	write := func(op history.QueueOp) { w.Write(history.Event{Kind: history.KindQueueOp, Queue: &op}) }
	asg := history.QueueOp{Type: history.OpInvoke, Process: drainProcess, F: history.QueueAssign, Topic: cfg.Topic, Final: true}
	keys := make([]int32, 0, cfg.Partitions)
	for p := range cfg.Partitions {
		keys = append(keys, p)
		asg.Offsets = append(asg.Offsets, history.QueueOffset{Key: p})
	}
	write(asg)
	asg.Type = history.OpOK
	write(asg)
	deadline := time.Now().Add(within)
	var ends []history.QueueOffset
	var errs []error
	for _, p := range keys {
		end, err := drainPartition(ctx, cfg, kc, write, p, keys, deadline)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ends = append(ends, history.QueueOffset{Key: p, Offset: end})
	}
	done := history.QueueOp{Type: history.OpInvoke, Process: drainProcess, F: history.QueueDrained, Topic: cfg.Topic, Final: true}
	write(done)
	done.Type, done.Offsets = history.OpOK, ends
	write(done)
	if err := w.Sync(); err != nil {
		return err
	}
	if len(errs) > 0 {
		return fmt.Errorf("queue drain: %v", errs)
	}
	return nil
}

// drainPartition fetches partition p from 0 until its end and returns the
// end offset.
func drainPartition(ctx context.Context, cfg QueueConfig, kc *kgo.Client, write func(history.QueueOp), p int32, keys []int32, deadline time.Time) (int64, error) {
	next := int64(0)
	var last error
	for {
		inv := history.QueueOp{Type: history.OpInvoke, Process: drainProcess, F: history.QueueTxn, Topic: cfg.Topic,
			Mops: []history.QueueMop{{F: history.MopPoll}}, Isolation: cfg.Isolation(), Final: true}
		write(inv)
		fctx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
		res, err := fetchQueue(fctx, kc, cfg, p, next)
		cancel()
		done := inv
		done.Assignment = &history.QueueAssignment{Mode: history.QueueAssigned, Generation: -1, Epoch: 1, Keys: keys}
		if err != nil {
			last = err
			// A poll that failed returned nothing and moved nothing.
			done.Type, done.Error = history.OpFail, err.Error()
			noteCode(&done, err)
			write(done)
		} else {
			done.Type = history.OpOK
			if len(res.records) > 0 {
				done.Mops = []history.QueueMop{{F: history.MopPoll, Polled: []history.QueuePoll{{Key: p, Records: res.records}}}}
			}
			write(done)
			if res.next > next {
				next = res.next
				continue
			}
			if next >= res.end {
				return res.end, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if last == nil {
				last = fmt.Errorf("nothing readable below its end offset")
			}
			return 0, fmt.Errorf("%s-%d read to offset %d only: %w", cfg.Topic, p, next, last)
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

// queueFetched is what one drain fetch returned: the data records, the
// offset after the last record of any kind (control records move it too),
// and the high watermark the broker reported. The drain reads to the high
// watermark at both isolation levels: under read_committed a transaction
// still open holds the last stable offset below committed records, and
// a drain that stopped there would miss them; it waits instead until the
// transaction ends (its timeout aborts it) and the marker is read.
type queueFetched struct {
	records []history.QueueRecord
	next    int64
	end     int64
}

// fetchQueue fetches partition p from offset from at cfg's isolation
// level from its leader, as the log workload's fetch does, keeping the
// transaction markers so that the next offset passes them.
func fetchQueue(ctx context.Context, kc *kgo.Client, cfg QueueConfig, p int32, from int64) (queueFetched, error) {
	res := queueFetched{next: from}
	pf, err := fetchPartition(ctx, kc, cfg.Topic, p, from, finalMaxBytes, cfg.isolationLevel(), true)
	if err != nil {
		return res, err
	}
	res.end = pf.hw
	for _, r := range pf.records {
		if r.Offset < from {
			continue
		}
		res.next = max(res.next, r.Offset+1)
		if !r.Attrs.IsControl() {
			res.records = append(res.records, history.QueueRecord{Offset: r.Offset, Value: parseValue(r.Value)})
		}
	}
	return res, nil
}
