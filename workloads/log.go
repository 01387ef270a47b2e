// Package workloads owns client traffic: processes that produce to and read
// from Kafka partitions through an unmodified Kafka client (franz-go kgo),
// recording every operation in Jepsen's shape (invoke, then ok, fail or info)
// into the run's history, and the final full reads made after healing; the
// queue workload (queue.go: Jepsen's Kafka queue test, with consumer
// groups, assigned consumers, transactions and a final drain); and the
// control-plane workload (admin.go): reassignments, preferred elections
// and topic creation through the znodes ZooKeeper-era operators' tools
// wrote, and controlled shutdowns through the caller's stop and start hooks.
//
// It must not look at the system under test any other way (no node event
// logs, no znodes beyond those the admin tools used) and must not judge
// results: checkers do that from history.
package workloads

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/zkchaos/zkchaos/history"
)

// Workload is one kind of client traffic; Run returns when ctx ends.
type Workload interface {
	Run(ctx context.Context) error
}

// LogConfig configures the log workload.
type LogConfig struct {
	Brokers    []string // host:port of the Kafka listeners
	Topic      string
	Partitions int32
	Producers  int // concurrent producer processes
	Readers    int // concurrent reader processes
	Acks       int // history.AcksAll, AcksLeader or AcksNone
	// OpTimeout bounds one operation; a produce that does not answer in
	// time is recorded as info (it may still happen).
	OpTimeout time.Duration
	// ProduceEvery and ReadEvery pace each process: a producer starts an
	// operation at most once per ProduceEvery, a reader once per
	// ReadEvery (defaults DefaultProduceEvery, DefaultReadEvery; negative:
	// back to back). Pacing makes the history's size a function of the
	// time limit and the process counts, not of how fast the machine
	// loops, and a rate like a real application's still leaves hundreds
	// of operations inside every fault window.
	ProduceEvery time.Duration
	ReadEvery    time.Duration
	Seed         uint64
	// NonIdempotent turns the idempotent producer off. By default the
	// producers are idempotent with acks=all, as every Kafka client's are
	// since 3.0; idempotence needs acks=all, so with other acks the
	// producers are never idempotent. Each produce records which it was
	// (history.ClientOp.Idempotent).
	NonIdempotent bool
}

// Idempotent reports whether the producers of cfg are idempotent (after
// NewLog's defaults: Acks 0 is acks=none there).
func (cfg LogConfig) Idempotent() bool {
	return !cfg.NonIdempotent && cfg.Acks == history.AcksAll
}

// Default pacing of the log workload: 100 produces/s per producer and 50
// reads/s per reader (with 4 producers and 2 readers, about 0.4 MB of history
// per second of workload, node events included).
const (
	DefaultProduceEvery = 10 * time.Millisecond
	DefaultReadEvery    = 20 * time.Millisecond
)

// A workload read is one consumer poll of one partition: at most
// readMaxBytes of record batches (Fetch PartitionMaxBytes) and at most
// readMaxRecords records recorded. That is enough for every check a read
// serves (the offset → value pairs it returned for durability and
// divergence, and its first and last offsets, which constrain the order for
// linearizability) while keeping a read's line near 1 KB. Final reads are not
// bounded: they must return every record.
const (
	readMaxBytes   = 4 << 10
	readMaxRecords = 64
	finalMaxBytes  = 1 << 20
)

// Log is the log workload: producers append unique values ("p3-17") to
// random partitions, one operation at a time per process as in Jepsen;
// readers alternate between tailing each partition (a consumer polling from
// where it stopped, which sees new records soon after they are acknowledged)
// and re-reading from a random offset below what they have seen (which sees
// committed records change). A process whose
// operation ended in info is considered crashed and continues under a new
// process number (the old one has an operation that may never end). Odd
// producer slots of an idempotent workload keep the client's record retries
// (newKafkaClient), so their resends meet new leaders.
type Log struct {
	cfg  LogConfig
	open func(name string) (*history.Writer, error)
}

// NewLog returns the workload. open creates the history writer of one client
// source (e.g. RUN_DIR/history/client-3.jsonl).
func NewLog(cfg LogConfig, open func(name string) (*history.Writer, error)) (*Log, error) {
	if len(cfg.Brokers) == 0 || cfg.Topic == "" || cfg.Partitions < 1 {
		return nil, errors.New("log workload: brokers, topic and partitions are required")
	}
	if cfg.Producers+cfg.Readers == 0 {
		return nil, errors.New("log workload: no processes")
	}
	cfg.OpTimeout = cmp.Or(cfg.OpTimeout, 5*time.Second)
	if cfg.Acks == 0 && cfg.Producers > 0 {
		cfg.Acks = history.AcksAll
	}
	cfg.ProduceEvery = cmp.Or(cfg.ProduceEvery, DefaultProduceEvery)
	cfg.ReadEvery = cmp.Or(cfg.ReadEvery, DefaultReadEvery)
	return &Log{cfg: cfg, open: open}, nil
}

// Run starts every process and waits for them.
func (l *Log) Run(ctx context.Context) error {
	nproc := l.cfg.Producers + l.cfg.Readers
	var wg sync.WaitGroup
	errs := make([]error, nproc)
	for i := 0; i < nproc; i++ {
		w, err := l.open(fmt.Sprintf("client-%d", i))
		if err != nil {
			return err
		}
		wg.Add(1)
		go func(i int, w *history.Writer) {
			defer wg.Done()
			defer w.Close()
			c := &client{cfg: l.cfg, w: w, proc: i, nproc: nproc, reader: i >= l.cfg.Producers,
				retrying: i%2 == 1 && l.cfg.Idempotent(),
				rng:      rand.New(rand.NewPCG(l.cfg.Seed, uint64(i)))}
			errs[i] = c.run(ctx)
		}(i, w)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// client is one logical client slot; proc changes after each crash (info).
type client struct {
	cfg    LogConfig
	w      *history.Writer
	proc   int
	nproc  int
	reader bool
	// retrying: an idempotent producer that keeps kgo's own record
	// retries (retriesFor).
	retrying bool
	rng      *rand.Rand
	kc       *kgo.Client
	seq      int
	next     map[int32]int64 // reader: offset after the last record read per partition
	reads    int
}

func (c *client) run(ctx context.Context) error {
	c.next = map[int32]int64{}
	every := c.cfg.ProduceEvery
	if c.reader {
		every = c.cfg.ReadEvery
	}
	due := time.Now()
	defer func() {
		if c.kc != nil {
			c.kc.Close()
		}
	}()
	for ctx.Err() == nil {
		if c.kc == nil {
			kc, err := newKafkaClient(c.cfg, c.retrying)
			if err != nil {
				return err
			}
			c.kc = kc
		}
		p := c.rng.Int32N(c.cfg.Partitions)
		var crashed bool
		if c.reader {
			crashed = c.read(ctx, p)
		} else {
			crashed = c.produce(ctx, p)
		}
		if crashed {
			// A fresh client and process number: the old process has an
			// operation whose outcome we will never learn.
			c.kc.Close()
			c.kc = nil
			c.proc += c.nproc
		}
		if every > 0 {
			// Start the next operation one interval after this one was
			// due; a process that fell behind (a slow operation) starts
			// again at once but does not burst to catch up.
			due = due.Add(every)
			if d := time.Until(due); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
				case <-t.C:
				}
				t.Stop()
			} else {
				due = time.Now()
			}
		}
	}
	return nil
}

// newKafkaClient makes one process's client. retrying keeps kgo's record
// retries (until the delivery timeout), as an application's producer has by
// default: a batch whose leader failed or moved is sent again, with the same
// producer id, epoch and sequence, to the next leader, which must answer it
// from its producer state (KIP-98) and not append it twice. Without retries
// such a batch ends the process in info and the next one takes a new
// producer id, so no resend ever meets a new leader; the log workload runs
// one producer slot in two each way (odd slots retry).
func newKafkaClient(cfg LogConfig, retrying bool) (*kgo.Client, error) {
	acks := kgo.AllISRAcks()
	switch cfg.Acks {
	case history.AcksLeader:
		acks = kgo.LeaderAck()
	case history.AcksNone:
		acks = kgo.NoAck()
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RequiredAcks(acks),
		kgo.ProducerLinger(0),
		// The workload picks the partition; kgo's default partitioner would
		// silently send the record elsewhere.
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(cfg.OpTimeout),
		kgo.ProduceRequestTimeout(cfg.OpTimeout),
		kgo.RequestRetries(2),
		kgo.RetryTimeout(cfg.OpTimeout),
		kgo.MetadataMinAge(250 * time.Millisecond),
		// ZooKeeper-era protocol: Kafka 3.0 is the last release whose
		// requests all name topics (Fetch v13 switched to topic ids).
		kgo.MaxVersions(kversion.V3_0_0()),
	}
	if !retrying {
		// One try per record (kgo counts retries after the first: 0 means a
		// single try): an error from the broker is then a definite answer
		// about that one request, which lets us record fail, not info. kgo
		// still resends a request it is unsure about (no response), so a
		// non-idempotent record can land twice; the linearizability checker
		// reports such duplicates as the known anomaly duplicate-append. An
		// idempotent producer ignores this limit where a failed batch would
		// break its sequence numbers and resends until the delivery timeout;
		// the leader's sequence check keeps those resends from appending
		// twice (the idempotence checker verifies it).
		opts = append(opts, kgo.RecordRetries(0))
	}
	if !cfg.Idempotent() {
		// kgo refuses idempotence without acks=all.
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	kc, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	return kc, nil
}

func (c *client) record(op history.ClientOp) {
	c.w.Write(history.Event{Kind: history.KindOp, Op: &op})
}

// produce appends one unique value; it returns true when the outcome is
// unknown (the process is then crashed).
func (c *client) produce(ctx context.Context, p int32) bool {
	c.seq++
	val := fmt.Sprintf("p%d-%d", c.proc, c.seq)
	base := history.ClientOp{Process: c.proc, F: history.FProduce, Topic: c.cfg.Topic, Partition: p, Value: val, Acks: c.cfg.Acks,
		Idempotent: c.cfg.Idempotent()}
	inv := base
	inv.Type = history.OpInvoke
	c.record(inv)

	// The produce's own context does not end with the workload: a record
	// still waiting in the client (for its producer id, say) would be
	// failed at once, an outcome lost. produceOne gives it endGrace after
	// the workload's end instead.
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.OpTimeout)
	defer cancel()
	r, err := c.produceOne(ctx, octx, &kgo.Record{Topic: c.cfg.Topic, Partition: p, Value: []byte(val)})
	done := base
	switch {
	case err == nil:
		done.Type, done.Offset = history.OpOK, r.Offset
	case definiteFailure(err, base.Idempotent, c.cfg.Acks):
		done.Type = history.OpFail
	default:
		done.Type = history.OpInfo
	}
	if err != nil {
		done.Error = err.Error()
		var ke *kerr.Error
		if errors.As(err, &ke) {
			done.ErrorCode = ke.Code
		}
	}
	c.record(done)
	return done.Type == history.OpInfo
}

// errNoAnswer ends a produce whose promise did not fire within its timeout.
var errNoAnswer = errors.New("no answer within the operation timeout")

// endGrace is how long a produce in flight when the workload ends may still
// take to answer: an answer in time is an outcome known, and a produce held
// by a broker that does not answer keeps the end waiting no longer.
const endGrace = 200 * time.Millisecond

// produceOne produces rec under ctx (the operation's timeout) and waits for
// its promise until ctx ends, plus a grace for kgo to fail the record
// itself; when the workload ends first (end), it waits endGrace more. kgo's
// delivery timeout is checked only between requests, so a request to a
// broker frozen with SIGSTOP (its connection open, never answering) can
// hold ProduceSync past any context: a CI run waited 72 minutes. The caller
// then records the outcome unknown and closes the client, which fails the
// record.
func (c *client) produceOne(end, ctx context.Context, rec *kgo.Record) (*kgo.Record, error) {
	type result struct {
		r   *kgo.Record
		err error
	}
	ch := make(chan result, 1)
	c.kc.Produce(ctx, rec, func(r *kgo.Record, err error) { ch <- result{r, err} })
	grace := 2 * time.Second
	select {
	case res := <-ch:
		return res.r, res.err
	case <-ctx.Done():
	case <-end.Done():
		grace = endGrace
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case res := <-ch:
		return res.r, res.err
	case <-t.C:
		return nil, errNoAnswer
	}
}

// definiteFailure is true for errors that prove the record was not appended:
// the broker answered our only try with an error raised before the append.
// NOT_ENOUGH_REPLICAS_AFTER_APPEND and REQUEST_TIMED_OUT come after the
// append, and anything without a broker answer (timeout, connection lost) may
// have reached the log, so those are unknown.
//
// With acks=all, NOT_LEADER_OR_FOLLOWER and KAFKA_STORAGE_ERROR are unknown
// too: Kafka's DelayedProduce answers a produce it appended and then held
// for the ISR with what ReplicaManager.getPartitionOrError or
// Partition.checkEnoughReplicasReachOffset says once the broker no longer
// leads the partition (2.6.3), and the appended record may survive on the
// new leader. With acks=1 the leader answers right after the append, so
// those errors come before it.
//
// An idempotent producer's error never proves it: kgo resends a batch as
// often as the sequence numbers require (RecordRetries does not bound it), so
// the error that ends the record answers only its last try, and an earlier
// try without an answer may have been appended (for example by a leader
// that was then cut off). Every idempotent failure is unknown.
func definiteFailure(err error, idempotent bool, acks int) bool {
	if idempotent {
		return false
	}
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return false
	}
	switch ke {
	case kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
		return false
	case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
		return acks != history.AcksAll
	}
	return true
}

// read polls one partition: every other read continues from where this
// process's previous read of the partition stopped (the tail), the others
// start at a random offset below that. A read has no effect, so a failed
// read is a fail, never an info.
func (c *client) read(ctx context.Context, p int32) bool {
	from := c.next[p]
	c.reads++
	if c.reads%2 == 0 && from > 0 {
		from = c.rng.Int64N(from)
	}
	base := history.ClientOp{Process: c.proc, F: history.FRead, Topic: c.cfg.Topic, Partition: p, Offset: from}
	inv := base
	inv.Type = history.OpInvoke
	c.record(inv)
	octx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	defer cancel()
	res, err := fetch(octx, c.kc, c.cfg.Topic, p, from, readMaxBytes, readMaxRecords)
	done := base
	res.note(&done)
	if err != nil {
		done.Type, done.Error = history.OpFail, err.Error()
		var ke *kerr.Error
		if errors.As(err, &ke) {
			done.ErrorCode = ke.Code
		}
		if errors.Is(err, kerr.OffsetOutOfRange) && from == c.next[p] {
			// The log ends below where this process stopped (it was
			// truncated): step the tail back a poll at a time until it
			// is inside the log again.
			c.next[p] = max(0, from-readMaxRecords)
		}
	} else {
		done.Type, done.Records = history.OpOK, res.records
		if n := len(res.records); n > 0 && res.records[n-1].Offset >= c.next[p] {
			c.next[p] = res.records[n-1].Offset + 1
		}
	}
	c.record(done)
	return false
}

// fetched is what one Fetch returned and who answered it.
type fetched struct {
	records []history.Record
	broker  int32 // the broker the request went to; -1 before one was chosen
	epoch   int32 // the leader epoch sent as CurrentLeaderEpoch (accepted when the fetch succeeded)
	hw      int64 // the response's high watermark; -1 without a response
}

// note records who answered on the read's completion: the broker whenever
// the request was sent, the accepted leader epoch and the high watermark
// only when the broker answered without error.
func (f fetched) note(op *history.ClientOp) {
	if f.broker >= 0 {
		op.Broker = f.broker
	}
	if f.hw >= 0 {
		ep, hw := f.epoch, f.hw
		op.LeaderEpoch, op.HW = &ep, &hw
	}
}

// fetch asks the partition's leader, as the client's metadata names it, for
// records from offset, as a consumer does (ReplicaID -1: only records below
// the high watermark). It sends the leader epoch from the same metadata as
// CurrentLeaderEpoch, so a broker that is no longer (or not yet) leader at
// that epoch refuses with FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH
// instead of answering from a stale role. At most maxRecords records are
// returned (0: no limit).
func fetch(ctx context.Context, kc *kgo.Client, topic string, p int32, from int64, maxBytes int32, maxRecords int) (fetched, error) {
	res := fetched{broker: -1, epoch: -1, hw: -1}
	pf, err := fetchPartition(ctx, kc, topic, p, from, maxBytes, kgo.ReadUncommitted(), false)
	res.broker, res.epoch = pf.leader, pf.epoch
	if err != nil {
		return res, err
	}
	res.hw = pf.hw
	for _, r := range pf.records {
		if r.Offset >= from {
			res.records = append(res.records, history.Record{Offset: r.Offset, Value: string(r.Value)})
			if maxRecords > 0 && len(res.records) == maxRecords {
				break
			}
		}
	}
	return res, nil
}

// partitionFetch is one Fetch of one partition from its leader, decoded.
type partitionFetch struct {
	leader  int32 // -1 when the leader was not found
	epoch   int32 // the leader epoch sent as CurrentLeaderEpoch; -1 likewise
	hw      int64
	records []*kgo.Record // may start below the offset asked for (a batch's first records)
}

// fetchPartition is the one Fetch both the log workload's reads and the
// queue drain send: to the leader the metadata names, as a consumer
// (ReplicaID -1), with that metadata's leader epoch as CurrentLeaderEpoch.
func fetchPartition(ctx context.Context, kc *kgo.Client, topic string, p int32, from int64, maxBytes int32, iso kgo.IsolationLevel, keepControl bool) (partitionFetch, error) {
	res := partitionFetch{leader: -1, epoch: -1, hw: -1}
	leader, epoch, err := leaderOf(ctx, kc, topic, p)
	if err != nil {
		return res, err
	}
	res.leader, res.epoch = leader, epoch
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 1
	req.MaxBytes = maxBytes
	if iso == kgo.ReadCommitted() {
		req.IsolationLevel = 1
	}
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = p
	rp.FetchOffset = from
	rp.PartitionMaxBytes = maxBytes
	rp.CurrentLeaderEpoch = epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := kc.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		return res, fmt.Errorf("fetch %s-%d@%d from broker %d: %w", topic, p, from, leader, err)
	}
	fr := resp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(fr.ErrorCode); err != nil {
		return res, err
	}
	for i := range fr.Topics {
		for j := range fr.Topics[i].Partitions {
			part := &fr.Topics[i].Partitions[j]
			if fr.Topics[i].Topic != topic || part.Partition != p {
				continue
			}
			if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
				return res, err
			}
			fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: topic, Partition: p,
				KeepControlRecords: keepControl, Offset: from, IsolationLevel: iso}, part, kgo.DefaultDecompressor(), nil)
			if fp.Err != nil {
				return res, fmt.Errorf("decode fetch %s-%d: %w", topic, p, fp.Err)
			}
			res.hw = part.HighWatermark
			res.records = fp.Records
			return res, nil
		}
	}
	return res, fmt.Errorf("fetch %s-%d: partition missing from response", topic, p)
}

// leaderOf asks the cluster for the partition's leader and leader epoch (any
// broker answers from its metadata cache).
func leaderOf(ctx context.Context, kc *kgo.Client, topic string, p int32) (leader, epoch int32, err error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, kc)
	if err != nil {
		return 0, 0, fmt.Errorf("metadata for %s: %w", topic, err)
	}
	for _, mt := range resp.Topics {
		if mt.Topic == nil || *mt.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
			return 0, 0, fmt.Errorf("metadata for %s: %w", topic, err)
		}
		for _, mp := range mt.Partitions {
			if mp.Partition == p {
				if err := kerr.ErrorForCode(mp.ErrorCode); err != nil {
					return 0, 0, fmt.Errorf("metadata for %s-%d: %w", topic, p, err)
				}
				if mp.Leader < 0 {
					return 0, 0, kerr.LeaderNotAvailable
				}
				return mp.Leader, mp.LeaderEpoch, nil
			}
		}
	}
	return 0, 0, fmt.Errorf("metadata for %s-%d: %w", topic, p, kerr.UnknownTopicOrPartition)
}
