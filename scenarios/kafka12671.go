package scenarios

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/ctxsleep"
	"github.com/zkchaos/zkchaos/rundir"
)

// kafka12671 is KAFKA-12671: a transactional produce that reaches the
// partition leader after its transaction was aborted (the abort marker
// already written) opens a new transaction on the partition that no
// coordinator knows of. No marker ever ends it, so the partition's last
// stable offset stays at that batch and read_committed consumers stall:
// the hanging transaction of KIP-890. A kgo producer begins a transaction
// and sends one record to chaos-0; the leader holds the produce after
// taking it (and, with the fix, after verifying it) and before appending
// it; meanwhile the transaction is aborted with an EndTxn for the
// producer's id and epoch, the request a client whose EndTxn overtakes its
// own produce sends (the report's story), and the abort marker is written
// and the abort completed. Released, the produce is appended with the
// switch on; with the fix (Kafka 3.6's verification) the marker has ended
// its verification and the leader refuses it with INVALID_TXN_STATE.
func kafka12671() Scenario {
	check := checkers.DefaultConfig()
	check.LSOGrace = kafka12671Grace
	return oneSwitch(Scenario{
		Bug:     "KAFKA-12671",
		Summary: "a transactional produce delayed past its transaction's abort opens a transaction no coordinator knows; the partition's last stable offset hangs",
		Fix:     "the leader verifies a batch that starts a transaction with the coordinator (AddPartitionsToTxn v4 VerifyOnly) and appends it only if no marker ended that verification (KIP-890, Kafka 3.6)",
		Catches: checkers.LSO{Grace: check.LSOGrace},
		Check:   check,
	}, harness.RunConfig{
		RunSpec: rundir.RunSpec{
			Nodes:      3,
			Topic:      kafka12671Topic,
			Partitions: 1,
			TimeLimit:  60 * time.Second,
			Settle:     time.Second,
			// The scenario's producer is the only client: other traffic
			// would move the high watermark without changing the story.
			NoWorkload: true,
		},
		Driver: kafka12671Driver{grace: check.LSOGrace},
	})
}

const (
	// kafka12671Grace: how long after the late append (and every fault
	// healed) the partition's LSO must stay stuck to count as hanging.
	kafka12671Grace = 2 * time.Second
	kafka12671TxnID = "zkchaos-kafka-12671"
	kafka12671Topic = "chaos"

	failpointBeforeTxnAppend = history.FailpointLeaderBeforeTxnAppend
)

type kafka12671Driver struct{ grace time.Duration }

// Drive walks the window: hold the producer's first batch at the leader,
// abort its transaction behind it, wait for the abort marker and the
// completion, release the batch, then wait out the checker's grace.
func (d kafka12671Driver) Drive(ctx context.Context, l *harness.Live) error {
	start := time.Now().UnixNano()
	topic := kafka12671Topic
	leader, err := l.World.PartitionLeader(ctx, topic, 0)
	if err != nil {
		return fmt.Errorf("KAFKA-12671: find the leader of %s-0: %w", topic, err)
	}
	l.Note("%s-0 is led by n%d; arming %s there", topic, leader, failpointBeforeTxnAppend)
	if err := l.ArmFailpoint(ctx, leader, failpointBeforeTxnAppend, "1*pause"); err != nil {
		return err
	}
	var seeds []string
	for _, n := range l.Cluster.Nodes() {
		seeds = append(seeds, n.KafkaAddr())
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID(kafka12671TxnID), kgo.TransactionTimeout(time.Minute),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableClientMetrics())
	if err != nil {
		return fmt.Errorf("KAFKA-12671: producer: %w", err)
	}
	defer prod.Close()
	if err := prod.BeginTransaction(); err != nil {
		return fmt.Errorf("KAFKA-12671: begin transaction: %w", err)
	}
	produced := make(chan error, 1)
	prod.Produce(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("late")}, func(_ *kgo.Record, err error) { produced <- err })
	if _, err := l.WaitEvent(ctx, start, 30*time.Second, "the produce held at the leader", func(e *history.Event) bool {
		return e.Kind == history.KindFaultStart && e.Fault != nil && e.Fault.Failpoint == failpointBeforeTxnAppend && int(e.Node) == leader
	}); err != nil {
		return err
	}
	init, err := l.WaitEvent(ctx, start, 5*time.Second, "the producer's id", func(e *history.Event) bool {
		return e.Kind == history.KindTxnRequest && e.Txn.API == history.TxnAPIInitProducerID && e.Txn.TransactionalID == kafka12671TxnID &&
			e.Txn.ErrorCode == 0 && e.Txn.AssignedProducerID != nil && *e.Txn.AssignedProducerID >= 0
	})
	if err != nil {
		return err
	}
	pid, epoch := *init.Txn.AssignedProducerID, *init.Txn.AssignedEpoch
	l.Note("n%d holds producer %d epoch %d's first batch; aborting its transaction behind it", leader, pid, epoch)
	since := time.Now().UnixNano()
	if err := endTxnAbort(ctx, seeds, pid, epoch); err != nil {
		return err
	}
	mk, err := l.WaitEvent(ctx, since, 30*time.Second, "the abort marker on the leader", func(e *history.Event) bool {
		m := e.TxnMarker
		return e.Kind == history.KindTxnMarker && int(e.Node) == leader && m.Topic == topic && m.Partition == 0 &&
			m.ProducerID == pid && !m.Commit && m.ErrorCode == 0
	})
	if err != nil {
		return err
	}
	if _, err := l.WaitEvent(ctx, since, 30*time.Second, "the abort completed", func(e *history.Event) bool {
		return e.Kind == history.KindTxnRequest && e.Txn.API == history.TxnAPIComplete && e.Txn.TransactionalID == kafka12671TxnID && e.Txn.ErrorCode == 0
	}); err != nil {
		return err
	}
	l.Note("abort marker at offset %d and CompleteAbort written; releasing the held produce", mk.TxnMarker.Offset)
	if err := l.ReleaseFailpoint(ctx, leader, failpointBeforeTxnAppend); err != nil {
		return err
	}
	select {
	case err := <-produced:
		switch {
		case err == nil:
			l.Note("the late produce was appended: producer %d has a transaction open on %s-0 that its coordinator completed", pid, topic)
		case errors.Is(err, kerr.InvalidTxnState):
			l.Note("the late produce was refused (INVALID_TXN_STATE): the abort marker ended its verification")
		default:
			l.Note("the late produce failed: %v", err)
		}
	case <-time.After(30 * time.Second):
		return fmt.Errorf("KAFKA-12671: no answer to the released produce within 30s")
	case <-ctx.Done():
		return ctx.Err()
	}
	// The producer ends its transaction as a client that saw its records
	// fail or succeed would: the coordinator has it CompleteAbort at this
	// epoch already and writes nothing for an abort, so no marker comes.
	ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if err := prod.EndTransaction(ectx, kgo.TryAbort); err != nil {
		l.Note("the producer's own abort: %v", err)
	}
	cancel()
	// The LSO checker judges the partition the grace after the late
	// append; the history must reach past it.
	if !ctxsleep.For(ctx, d.grace+time.Second) {
		return ctx.Err()
	}
	return nil
}

// endTxnAbort sends EndTxn(abort) for the producer's id and epoch to its
// coordinator, as the producer's own EndTxn would.
func endTxnAbort(ctx context.Context, seeds []string, pid int64, epoch int16) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DisableClientMetrics())
	if err != nil {
		return fmt.Errorf("KAFKA-12671: abort client: %w", err)
	}
	defer cl.Close()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = kafka12671TxnID, pid, epoch, false
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return fmt.Errorf("KAFKA-12671: EndTxn abort: %w", err)
		}
		err = kerr.ErrorForCode(resp.ErrorCode)
		if err == nil {
			return nil
		}
		if !kerr.IsRetriable(err) {
			return fmt.Errorf("KAFKA-12671: EndTxn abort for producer %d epoch %d: %w", pid, epoch, err)
		}
		if !ctxsleep.For(ctx, 100*time.Millisecond) {
			return fmt.Errorf("KAFKA-12671: EndTxn abort: %w", err)
		}
	}
}
