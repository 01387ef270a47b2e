package workloads

// The queue workload: Jepsen's Kafka queue test (jepsen.tests.kafka) for
// this cluster. Producers send unique integers to a few keys (the
// partitions of the workload topic), one operation at a time; consumers
// poll, half of them as members of one consumer group and half with
// partitions they assign themselves (queue_consume.go); after the heal a
// drain reads every partition from offset 0 (queue_drain.go). Operations
// are history.QueueOp events; the queue checkers judge them.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/zkchaos/zkchaos/history"
)

// QueueConfig configures the queue workload.
type QueueConfig struct {
	Brokers    []string // host:port of the Kafka listeners
	Topic      string
	Partitions int32
	Producers  int // sending processes
	// Consumers are polling processes: even slots subscribe to Group,
	// odd slots assign partitions themselves.
	Consumers int
	// Transactional sends each operation's values (one to three) in one
	// Kafka transaction, aborting about one in eight on purpose, and
	// consumers read committed. Without it each operation sends one value
	// through an idempotent producer and consumers read uncommitted.
	Transactional bool
	Group         string        // consumer group; default DefaultQueueGroup
	OpTimeout     time.Duration // bounds one send or commit; default 5s
	// SendEvery and PollEvery pace each producer and consumer (defaults
	// DefaultSendEvery, DefaultPollEvery).
	SendEvery time.Duration
	PollEvery time.Duration
	// Churn is the mean time a consumer keeps its assignment: a group
	// member then leaves the group and joins again (a rebalance), an
	// assigning consumer picks other partitions. Default DefaultChurn.
	Churn time.Duration
	Seed  uint64
}

// Defaults of the queue workload.
const (
	DefaultQueueGroup = "queue"
	DefaultSendEvery  = 20 * time.Millisecond
	DefaultPollEvery  = 50 * time.Millisecond
	DefaultChurn      = 5 * time.Second
)

// Isolation is the isolation level cfg's consumers read at.
func (cfg QueueConfig) Isolation() string {
	if cfg.Transactional {
		return history.ReadCommitted
	}
	return history.ReadUncommitted
}

func (cfg QueueConfig) isolationLevel() kgo.IsolationLevel {
	if cfg.Transactional {
		return kgo.ReadCommitted()
	}
	return kgo.ReadUncommitted()
}

// Queue is the queue workload.
type Queue struct {
	cfg  QueueConfig
	open func(name string) (*history.Writer, error)
}

// NewQueue returns the workload; open creates the history writer of one
// client source.
func NewQueue(cfg QueueConfig, open func(name string) (*history.Writer, error)) (*Queue, error) {
	if len(cfg.Brokers) == 0 || cfg.Topic == "" || cfg.Partitions < 1 {
		return nil, errors.New("queue workload: brokers, topic and partitions are required")
	}
	if cfg.Producers < 0 || cfg.Consumers < 0 || cfg.Producers+cfg.Consumers == 0 {
		return nil, errors.New("queue workload: no processes")
	}
	cfg.Group = cmp.Or(cfg.Group, DefaultQueueGroup)
	cfg.OpTimeout = cmp.Or(cfg.OpTimeout, 5*time.Second)
	cfg.SendEvery = cmp.Or(cfg.SendEvery, DefaultSendEvery)
	cfg.PollEvery = cmp.Or(cfg.PollEvery, DefaultPollEvery)
	cfg.Churn = cmp.Or(cfg.Churn, DefaultChurn)
	return &Queue{cfg: cfg, open: open}, nil
}

// Run starts every process and waits for them.
func (q *Queue) Run(ctx context.Context) error {
	n := q.cfg.Producers + q.cfg.Consumers
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		w, err := q.open(fmt.Sprintf("client-%d", i))
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		rng := rand.New(rand.NewPCG(q.cfg.Seed, uint64(i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Close()
			if i < q.cfg.Producers {
				p := &queueProducer{cfg: q.cfg, w: w, slot: i, proc: i, nslots: n, rng: rng}
				errs[i] = p.run(ctx)
				return
			}
			c := &queueConsumer{cfg: q.cfg, w: w, proc: i, rng: rng, subscribe: (i-q.cfg.Producers)%2 == 0,
				next: map[int32]int64{}, held: map[int32]bool{}}
			errs[i] = c.run(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// pace waits until one interval after *due, as the log workload paces: a
// process that fell behind starts again at once but does not burst.
func pace(ctx context.Context, due *time.Time, every time.Duration) {
	*due = due.Add(every)
	d := time.Until(*due)
	if d <= 0 {
		*due = time.Now()
		return
	}
	sleepCtx(ctx, d)
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// queueClientOpts are the options every queue client shares.
func queueClientOpts(cfg QueueConfig) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.RequestRetries(2),
		kgo.RetryTimeout(cfg.OpTimeout),
		// ZooKeeper-era protocol, as the log workload's.
		kgo.MaxVersions(kversion.V3_0_0()),
	}
}

// queueProducer is one sending slot; proc changes after each crash (info).
type queueProducer struct {
	cfg    QueueConfig
	w      *history.Writer
	slot   int
	proc   int
	nslots int
	rng    *rand.Rand
	kc     *kgo.Client
	seq    int64
}

func (p *queueProducer) run(ctx context.Context) error {
	due := time.Now()
	defer func() {
		if p.kc != nil {
			p.kc.Close()
		}
	}()
	for ctx.Err() == nil {
		if p.kc == nil {
			kc, err := p.newClient()
			if err != nil {
				return err
			}
			p.kc = kc
		}
		if p.send(ctx) {
			// A fresh client (with the same transactional id, which fences
			// the old one's transaction) and process number.
			p.kc.Close()
			p.kc = nil
			p.proc += p.nslots
		}
		pace(ctx, &due, p.cfg.SendEvery)
	}
	return nil
}

func (p *queueProducer) newClient() (*kgo.Client, error) {
	opts := append(queueClientOpts(p.cfg),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(p.cfg.OpTimeout),
		kgo.ProduceRequestTimeout(p.cfg.OpTimeout),
	)
	if p.cfg.Transactional {
		opts = append(opts, kgo.TransactionalID(queueTxnID(p.cfg.Group, p.proc)),
			kgo.TransactionTimeout(2*p.cfg.OpTimeout))
	}
	kc, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("queue producer %d: %w", p.slot, err)
	}
	return kc, nil
}

// queueTxnID is the transactional id of process proc: one per process,
// as Kafka Streams' exactly-once v2 names its producers after the process
// (a UUID drawn at start-up), so a process that restarts after an unknown
// outcome comes back with a new producer id. Its previous producer id
// writes nothing more, and a transaction the previous process left open
// is ended by its coordinator's timeout abort (TransactionTimeout).
func queueTxnID(group string, proc int) string { return fmt.Sprintf("%s-txn-%d", group, proc) }

// value returns the next value of this slot, unique in the run.
func (p *queueProducer) value() int64 {
	p.seq++
	return p.seq*int64(p.nslots) + int64(p.slot) + 1
}

func (p *queueProducer) write(op history.QueueOp) {
	p.w.Write(history.Event{Kind: history.KindQueueOp, Queue: &op})
}

// send runs one operation: one value, or one to three in a transaction.
// It returns true when the outcome is unknown (the process then crashes).
func (p *queueProducer) send(ctx context.Context) bool {
	n := 1
	if p.cfg.Transactional {
		n += p.rng.IntN(3)
	}
	inv := history.QueueOp{Type: history.OpInvoke, Process: p.proc, F: history.QueueTxn, Topic: p.cfg.Topic,
		Transactional: p.cfg.Transactional}
	recs := make([]*kgo.Record, n)
	for i := range n {
		m := history.QueueMop{F: history.MopSend, Key: p.rng.Int32N(p.cfg.Partitions), Value: p.value()}
		inv.Mops = append(inv.Mops, m)
		recs[i] = &kgo.Record{Topic: p.cfg.Topic, Partition: m.Key, Value: []byte(strconv.FormatInt(m.Value, 10))}
	}
	p.write(inv)
	done := inv
	done.Mops = append([]history.QueueMop(nil), inv.Mops...)
	if p.cfg.Transactional {
		p.txn(ctx, recs, &done)
	} else {
		octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.OpTimeout)
		res := produceAll(p.kc, ctx, octx, recs)
		cancel()
		done.Type = history.OpOK
		if err := noteSends(&done, res); err != nil {
			// An idempotent producer's error never proves the record
			// absent (definiteFailure).
			done.Type = history.OpInfo
		}
	}
	p.write(done)
	return done.Type == history.OpInfo
}

// txn sends recs in one transaction and ends it: committed (ok), aborted
// (fail: about one in eight on purpose, and every one whose sends failed)
// or unknown (info: the end was not answered, the transaction could not
// begin, or it was aborted with a send still in flight).
func (p *queueProducer) txn(ctx context.Context, recs []*kgo.Record, done *history.QueueOp) {
	if err := p.kc.BeginTransaction(); err != nil {
		done.Type, done.Error = history.OpInfo, err.Error()
		for i := range done.Mops {
			done.Mops[i].Offset = -1
		}
		return
	}
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.OpTimeout)
	defer cancel()
	res := produceAll(p.kc, ctx, octx, recs)
	serr := noteSends(done, res)
	if serr != nil || p.rng.IntN(8) == 0 {
		p.abort(ctx, done, serr)
		return
	}
	done.CommitStart = time.Now().UnixNano()
	if err := p.kc.EndTransaction(octx, kgo.TryCommit); err != nil {
		done.Type, done.Error = history.OpInfo, err.Error()
		noteCode(done, err)
		return
	}
	done.Type = history.OpOK
}

// abortDrain bounds the wait for the answers of sends still in flight
// before a transaction is aborted: they had the operation's timeout and
// produceAll's grace already.
const abortDrain = 2 * time.Second

// abort ends done's transaction with an abort, after a failed send (serr)
// or on purpose, as an application gives up on a transaction: records kgo
// still buffers are failed first, waiting at most abortDrain for the
// sends in flight to be answered (AbortBufferedRecords), and then,
// answered or not, EndTxn(abort) goes to the coordinator, so that read
// committed consumers are not held up until the transaction's timeout.
// kgo's EndTransaction does not wait for produce requests in flight, and
// the Java producer's abortTransaction after delivery.timeout.ms expired
// a batch in flight does not either: the abort is at the producer's
// current epoch, and a produce still held at its leader may be appended
// after the abort marker (KAFKA-12671). A send still unanswered may yet
// land, so that operation is unknown (info) and the process restarts.
func (p *queueProducer) abort(ctx context.Context, done *history.QueueOp, serr error) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortDrain)
	derr := p.kc.AbortBufferedRecords(dctx)
	cancel()
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.OpTimeout)
	err := p.kc.EndTransaction(ectx, kgo.TryAbort)
	cancel()
	switch {
	case derr != nil:
		done.Type = history.OpInfo
		done.Error = fmt.Sprintf("sends still in flight after %s (%v); aborted: %v", abortDrain, derr, errOrOK(err))
		if serr != nil {
			done.Error = serr.Error() + "; " + done.Error
		}
	case err != nil:
		done.Type, done.Error = history.OpInfo, err.Error()
		noteCode(done, err)
	default:
		done.Type = history.OpFail
		if serr != nil {
			done.Error = serr.Error()
			noteCode(done, serr)
		}
	}
}

// errOrOK names an error, or "ok" for none.
func errOrOK(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// noteSends sets each send's offset (-1 for a send without an answer) and
// returns the first error.
func noteSends(op *history.QueueOp, res []produced) error {
	var first error
	for i, r := range res {
		op.Mops[i].Offset = -1
		if r.err == nil {
			op.Mops[i].Offset = r.r.Offset
		} else if first == nil {
			first = r.err
		}
	}
	if first != nil {
		op.Error = first.Error()
		noteCode(op, first)
	}
	return first
}

func noteCode(op *history.QueueOp, err error) {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		op.ErrorCode = ke.Code
	}
}

// produced is one record's answer.
type produced struct {
	r   *kgo.Record
	err error
}

// produceAll produces recs under ctx (the operation's timeout) and waits
// for every promise as produceOne waits for one: until ctx ends plus a
// grace for kgo to fail the records itself, or endGrace once the workload
// has ended (end).
func produceAll(kc *kgo.Client, end, ctx context.Context, recs []*kgo.Record) []produced {
	out := make([]produced, len(recs))
	ch := make(chan struct{}, len(recs))
	var mu sync.Mutex
	answered := make([]bool, len(recs))
	for i, rec := range recs {
		kc.Produce(ctx, rec, func(r *kgo.Record, err error) {
			mu.Lock()
			out[i], answered[i] = produced{r, err}, true
			mu.Unlock()
			ch <- struct{}{}
		})
	}
	n := 0
	grace := 2 * time.Second
waiting:
	for n < len(recs) {
		select {
		case <-ch:
			n++
		case <-ctx.Done():
			break waiting
		case <-end.Done():
			grace = endGrace
			break waiting
		}
	}
	if n < len(recs) {
		t := time.NewTimer(grace)
	graced:
		for n < len(recs) {
			select {
			case <-ch:
				n++
			case <-t.C:
				break graced
			}
		}
		t.Stop()
	}
	mu.Lock()
	defer mu.Unlock()
	res := make([]produced, len(recs))
	for i := range recs {
		res[i] = out[i]
		if !answered[i] {
			res[i].err = errNoAnswer
		}
	}
	return res
}
