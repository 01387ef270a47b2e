package workloads

import (
	"context"
	"fmt"
	"time"

	"github.com/zkchaos/zkchaos/history"
)

// FinalReads reads every partition from offset 0 to its end after the
// cluster healed, recording each fetch as a read op with Final set. The
// durability checker takes these as the truth about what survived. A
// partition that cannot be read before the deadline gets a failed final read,
// so checkers know the truth is missing rather than empty.
func FinalReads(ctx context.Context, cfg LogConfig, w *history.Writer, within time.Duration) error {
	kc, err := newKafkaClient(cfg, false)
	if err != nil {
		return err
	}
	defer kc.Close()
	deadline := time.Now().Add(within)
	proc := 1_000_000 // distinct from workload processes
	for p := int32(0); p < cfg.Partitions; p++ {
		from := int64(0)
		for {
			op := history.ClientOp{Process: proc, F: history.FRead, Topic: cfg.Topic, Partition: p, Offset: from, Final: true}
			inv := op
			inv.Type = history.OpInvoke
			w.Write(history.Event{Kind: history.KindOp, Op: &inv})
			fctx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
			res, err := fetch(fctx, kc, cfg.Topic, p, from, finalMaxBytes, 0)
			cancel()
			recs := res.records
			done := op
			res.note(&done)
			if err != nil {
				done.Type, done.Error = history.OpFail, err.Error()
				w.Write(history.Event{Kind: history.KindOp, Op: &done})
				if time.Now().After(deadline) || ctx.Err() != nil {
					return fmt.Errorf("final read of %s-%d from offset %d: %w", cfg.Topic, p, from, err)
				}
				time.Sleep(200 * time.Millisecond)
				continue
			}
			done.Type, done.Records = history.OpOK, recs
			w.Write(history.Event{Kind: history.KindOp, Op: &done})
			if len(recs) == 0 {
				break
			}
			from = recs[len(recs)-1].Offset + 1
		}
	}
	return w.Sync()
}
