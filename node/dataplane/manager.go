// Package dataplane is the broker's data plane: the replicated partition
// logs (on node/storage), the Kafka client APIs that read and write them
// (Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, Metadata), follower
// fetchers, the leader's high watermark and ISR maintenance, and the
// replication-offset-checkpoint task. It mirrors Kafka's ReplicaManager,
// Partition and ReplicaFetcherThread (2.x, ZooKeeper mode, pre-2.7 ISR
// propagation: the leader writes the partition state znode itself, guarded
// by its zkVersion, and leaves an /isr_change_notification for the
// controller).
//
// It plugs into the control plane through broker.DataPlane: the broker's
// fencing checks decide, this package acts. It records what the checkers
// need in the event log: produce_append, produce_ack, hw_advance,
// isr_change (with the zk_write), hw_checkpoint (with Hosted) and
// truncation.
//
// The checkpoint task starts on the first LeaderAndIsr the process handles
// and writes only the partitions in the in-memory partition map — those
// that received a LeaderAndIsr in this process — as Kafka 2.6.3 does; with
// bug switch KAFKA-7235 that first request can be a stale, partial one, and
// the partitions it leaves out lose their high watermark. The
// checkpoint-hosted proposal writes every hosted log instead; one not yet in
// memory keeps its last checkpointed high watermark.
//
// An acks=all produce whose leader lost leadership after the append answers
// NOT_LEADER_OR_FOLLOWER, as Kafka's DelayedProduce does, although the
// record may survive on the new leader: a client must not take that answer
// to acks=all as a definite failure. The ack-timeout-on-leader-loss
// proposal answers REQUEST_TIMED_OUT (outcome unknown) there instead.
//
// Idempotent producers (KIP-98) are served: InitProducerId hands out ids
// from ZooKeeper blocks, the leader checks each producer's epoch and
// sequence per partition and answers a retried batch with its original
// offsets; the state is rebuilt from the log, so a new leader continues it
// (producers.go).
//
// The group coordinator (package group, wired by package node) writes
// __consumer_offsets through AppendAsCoordinator and loads it with
// ReadLocalLog (internal.go); clients may not produce to internal topics.
//
// Transactions (txnstate.go): each partition tracks its producers' open
// transactions and the markers' coordinator epochs, and answers
// read_committed fetches up to the last stable offset with the aborted
// transactions; the transaction coordinator (package txn) writes
// __transaction_state and the markers through AppendAsCoordinator.
//
// Not implemented: fetch sessions (every
// fetch is a full fetch; SessionID 0 answers tell clients so), timestamp
// lookups in ListOffsets (only earliest and latest), follower fetching by
// consumers, log retention.
package dataplane

import (
	"context"
	"errors"
	"fmt"
	"github.com/twmb/franz-go/pkg/kerr"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/broker"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/eventlog"
	"github.com/zkchaos/zkchaos/node/failpoint"
	"github.com/zkchaos/zkchaos/node/storage"
	"github.com/zkchaos/zkchaos/node/storage/checkpoint"
	"github.com/zkchaos/zkchaos/node/zkutil"
)

// Config tunes the data plane.
type Config struct {
	BrokerID int32
	DataDir  string
	Bugs     config.Bugs
	// Proposals turns on behaviours stricter than Kafka 2.6.3's.
	Proposals config.Proposals
	// MinISR is min.insync.replicas.
	MinISR int
	// HWNeedsMinISR holds the high watermark while the ISR is smaller than
	// MinISR (KIP-966's rule). The query-leo election needs it: without it a
	// leader alone in its ISR exposes records no follower has, and electing
	// the longest surviving log then loses records consumers already read.
	HWNeedsMinISR bool
	// LagTime is replica.lag.time.max.ms; the ISR is checked every LagTime/2.
	LagTime time.Duration
	// CheckpointInterval is replica.high.watermark.checkpoint.interval.ms.
	CheckpointInterval time.Duration
	// FetchMaxWait is replica.fetch.wait.max.ms, the followers' long poll.
	FetchMaxWait time.Duration
	// MaxMessageBytes is message.max.bytes (one batch).
	MaxMessageBytes int
	// SegmentBytes is log.segment.bytes (0: storage default).
	SegmentBytes int64
	// Failpoints holds the data plane's failpoints
	// (follower-after-truncation); nil: none.
	Failpoints *failpoint.Registry
}

// Manager is the data plane of one broker process. It implements
// broker.DataPlane.
type Manager struct {
	cfg  Config
	log  *eventlog.Log
	meta *broker.MetadataCache

	sessMu sync.Mutex
	sess   *zkutil.Session
	// testISRStore, when set, takes the ISR writes instead of ZooKeeper.
	testISRStore isrStore

	mu    sync.Mutex
	parts map[history.TopicPartition]*partition // every log opened (on disk)

	ckptMu      sync.Mutex // serialises checkpoint writes, and partitions entering memory with them (enterMemory)
	lastCkpt    map[history.TopicPartition]int64
	ckptStarted bool
	// afterCkptSnapshot, when set (tests), runs in a checkpoint write
	// between reading the in-memory map and logging the write.
	afterCkptSnapshot func()

	// pidMu guards this broker's producer id block [pidNext, pidEnd].
	pidMu   sync.Mutex
	pidNext int64
	pidEnd  int64

	// isrCh holds the ISR changes not yet told to the controller.
	isrCh isrChanges

	// verifier asks transaction coordinators about a transactional
	// produce (txnverify.go); nil: never asked.
	verifier TxnVerifier

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed bool
}

var _ broker.DataPlane = (*Manager)(nil)

// Open opens every partition log found in cfg.DataDir (LogManager.loadLogs)
// and reads the checkpointed high watermarks. Recovery warnings (a log cut
// at its first invalid batch, as Kafka's log recovery cuts it) go to the
// event log as truncations; a corrupt checkpoint file, or with the
// refuse-mid-log-damage proposal damage before a log's torn tail, is an
// error naming the file.
func Open(cfg Config, log *eventlog.Log, meta *broker.MetadataCache) (*Manager, error) {
	if cfg.MinISR < 1 {
		cfg.MinISR = 1
	}
	if cfg.LagTime <= 0 {
		cfg.LagTime = 10 * time.Second
	}
	if cfg.CheckpointInterval <= 0 {
		cfg.CheckpointInterval = time.Second
	}
	if cfg.FetchMaxWait <= 0 {
		cfg.FetchMaxWait = 500 * time.Millisecond
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = 1048588
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{cfg: cfg, log: log, meta: meta, parts: map[history.TopicPartition]*partition{},
		lastCkpt: map[history.TopicPartition]int64{}, ctx: ctx, cancel: cancel}
	if cfg.DataDir == "" {
		return nil, errors.New("data plane: no data directory")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data plane: %w", err)
	}
	hws, _, err := checkpoint.ReadReplicationOffsets(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("data plane start-up: %w", err)
	}
	for tp, hw := range hws {
		m.lastCkpt[history.TP(tp.Topic, tp.Partition)] = hw
	}
	tps, err := storage.ListPartitions(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("data plane start-up: %w", err)
	}
	for _, ctp := range tps {
		tp := history.TP(ctp.Topic, ctp.Partition)
		if _, err := m.openLog(tp); err != nil {
			m.closeLogs()
			return nil, fmt.Errorf("data plane start-up: %w", err)
		}
	}
	m.every(m.cfg.LagTime/2, m.expireISRs)
	// ReplicaManager.startup schedules isr-change-propagation.
	m.isrCh.lastChange, m.isrCh.lastPropagation = time.Now(), time.Now()
	m.every(isrChangePropagationPeriod, func() { m.maybePropagateISRChanges(time.Now()) })
	return m, nil
}

func (m *Manager) storageOptions() storage.Options {
	return storage.Options{MaxBatchBytes: m.cfg.MaxMessageBytes, SegmentBytes: m.cfg.SegmentBytes,
		RefuseMidLogDamage: m.cfg.Proposals.On(config.ProposalRefuseMidLogDamage)}
}

// openLog opens tp's log and registers it (not yet in the in-memory map).
// Caller must not hold m.mu.
func (m *Manager) openLog(tp history.TopicPartition) (*partition, error) {
	dir := storage.PartitionDir(m.cfg.DataDir, tp.Topic, tp.Partition)
	l, warnings, err := storage.Open(dir, m.storageOptions())
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", tp, err)
	}
	for _, w := range warnings {
		m.log.Printf("log recovery %s: %s", tp, w)
		m.log.Emit(history.Event{Kind: history.KindTruncation, Truncation: &history.Truncation{
			Topic: tp.Topic, Partition: tp.Partition, From: w.Offset, To: w.Offset,
			Reason: "start-up recovery: " + w.String()}})
	}
	p := newPartition(m, tp, l)
	p.mu.Lock()
	err = p.rebuildProducersLocked()
	p.mu.Unlock()
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("open log %s: %w", tp, err)
	}
	m.mu.Lock()
	m.parts[tp] = p
	m.mu.Unlock()
	m.log.Printf("opened log %s: offsets [%d, %d), latest leader epoch %d", tp, l.LogStartOffset(), l.LogEndOffset(), l.LatestEpoch())
	return p, nil
}

// SetSession gives the data plane the ZooKeeper session for ISR writes.
func (m *Manager) SetSession(s *zkutil.Session) {
	m.sessMu.Lock()
	defer m.sessMu.Unlock()
	m.sess = s
}

func (m *Manager) session() *zkutil.Session {
	m.sessMu.Lock()
	defer m.sessMu.Unlock()
	return m.sess
}

// get returns the partition for tp, or nil.
func (m *Manager) get(tp history.TopicPartition) *partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.parts[tp]
}

// hosted is ReplicaManager.getPartitionOrError with expectLeader, as a
// client's or follower's Produce, Fetch, ListOffsets and
// OffsetForLeaderEpoch find their partition: only one a LeaderAndIsr of
// this process put in memory is hosted (Kafka's allPartitions; a log its
// LogManager loaded at start-up is not, until then). Otherwise the answer
// is NOT_LEADER_FOR_PARTITION when the metadata cache knows the partition,
// which sends the client to refresh its metadata and find the leader, and
// UNKNOWN_TOPIC_OR_PARTITION when it does not.
func (m *Manager) hosted(tp history.TopicPartition) (*partition, int16) {
	if p := m.get(tp); p != nil {
		p.mu.Lock()
		in := p.inMemory
		p.mu.Unlock()
		if in {
			return p, 0
		}
	}
	if m.meta != nil {
		if _, ok := m.meta.Partition(tp); ok {
			return nil, kerr.NotLeaderForPartition.Code
		}
	}
	return nil, kerr.UnknownTopicOrPartition.Code
}

func (m *Manager) getOrCreate(tp history.TopicPartition) (*partition, error) {
	if p := m.get(tp); p != nil {
		return p, nil
	}
	return m.openLog(tp)
}

func (m *Manager) all() []*partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*partition, 0, len(m.parts))
	for _, p := range m.parts {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].tp, out[j].tp
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	return out
}

// checkpointedHW reads tp's high watermark from the checkpoint file as it is
// now, as Kafka's Partition does when it creates a replica: -1 if absent.
func (m *Manager) checkpointedHW(tp history.TopicPartition) int64 {
	hws, _, err := checkpoint.ReadReplicationOffsets(m.cfg.DataDir)
	if err != nil {
		m.log.Printf("read high watermark checkpoint: %v", err)
		return -1
	}
	if hw, ok := hws[checkpoint.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}]; ok {
		return hw
	}
	return -1
}

// BecomeLeader implements broker.DataPlane (Partition.makeLeader).
func (m *Manager) BecomeLeader(bp broker.Partition) error {
	p, err := m.getOrCreate(bp.TP())
	if err != nil {
		return err
	}
	m.enterMemory(p)
	p.stopFetcher()
	return p.makeLeader(bp)
}

// BecomeFollower implements broker.DataPlane (Partition.makeFollower, then
// ReplicaFetcherManager.addFetcherForPartitions).
func (m *Manager) BecomeFollower(bp broker.Partition) error {
	p, err := m.getOrCreate(bp.TP())
	if err != nil {
		return err
	}
	m.enterMemory(p)
	p.stopFetcher()
	p.makeFollower(bp)
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if !closed && bp.Leader >= 0 && bp.Leader != m.cfg.BrokerID {
		p.startFetcher(m.ctx)
	}
	return nil
}

// enterMemory puts p into the in-memory map (initLocked) under the
// checkpoint lock, which a checkpoint write holds from reading the map to
// logging its event. Kafka's createLogIfNotExists reads the checkpoint file
// under the lock CheckpointFile.write holds; the node holds it over the
// write's read of the map as well, so the write is logged either with p or
// before the LeaderAndIsr that put p in memory (the broker logs a request's
// role changes after applying it). A write that left p out is then never
// logged after p's role change, which would read as a high watermark
// dropped from memory.
func (m *Manager) enterMemory(p *partition) {
	p.mu.Lock()
	in := p.inMemory
	p.mu.Unlock()
	if in {
		return
	}
	m.ckptMu.Lock()
	defer m.ckptMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.initLocked()
}

// StopReplica implements broker.DataPlane (ReplicaManager.stopReplica): the
// fetcher stops; with delete the log is removed and the partition leaves the
// map, otherwise it stays (with its high watermark) as Kafka keeps it.
func (m *Manager) StopReplica(tp history.TopicPartition, del bool) error {
	p := m.get(tp)
	if p == nil {
		return nil
	}
	p.stopFetcher()
	p.mu.Lock()
	if !del && p.role == history.RoleLeader {
		// Kafka 2.6.3's stopReplicas without delete removes fetchers and
		// completes what delayed operations can complete; the partition
		// keeps its role and epoch, so a leader goes on leading until a
		// LeaderAndIsr changes it.
		p.notifyLocked()
		p.mu.Unlock()
		return nil
	}
	if p.role == history.RoleLeader {
		p.leaderGen++
	}
	p.role = history.RoleStopped
	p.notifyLocked()
	p.mu.Unlock()
	if !del {
		return nil
	}
	m.mu.Lock()
	delete(m.parts, tp)
	m.mu.Unlock()
	if err := p.log.Close(); err != nil {
		m.log.Printf("close log %s: %v", tp, err)
	}
	if err := os.RemoveAll(p.log.Dir()); err != nil {
		return fmt.Errorf("delete log %s: %w", tp, err)
	}
	return nil
}

// StartHWCheckpoint implements broker.DataPlane: the periodic checkpoint
// task (ReplicaManager.startHighWatermarkCheckPointThread), started by the
// first LeaderAndIsr.
func (m *Manager) StartHWCheckpoint() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ckptStarted || m.closed {
		return
	}
	m.ckptStarted = true
	m.log.Printf("high watermark checkpoint task started (every %s)", m.cfg.CheckpointInterval)
	m.every(m.cfg.CheckpointInterval, func() {
		if err := m.WriteCheckpoint(); err != nil {
			m.log.Printf("high watermark checkpoint: %v", err)
		}
	})
}

// every runs task every d, on a goroutine of its own, until the manager
// stops (Close waits for it): the periodic tasks of ReplicaManager's
// scheduler.
func (m *Manager) every(d time.Duration, task func()) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-m.ctx.Done():
				return
			case <-t.C:
				task()
			}
		}
	}()
}

// WriteCheckpoint writes replication-offset-checkpoint once
// (ReplicaManager.checkpointHighWatermarks) and records it. As in Kafka
// 2.6.3 it holds the partitions in the in-memory map, and with none there
// nothing is written; the checkpoint-hosted proposal writes every hosted
// log, one not yet in memory with the high watermark the file had.
func (m *Manager) WriteCheckpoint() error {
	m.ckptMu.Lock()
	defer m.ckptMu.Unlock()
	all := m.cfg.Proposals.On(config.ProposalCheckpointHosted)
	entries := map[checkpoint.TopicPartition]int64{}
	inMemory := 0
	for _, p := range m.all() {
		p.mu.Lock()
		mem, hw := p.inMemory, p.hw
		p.mu.Unlock()
		ctp := checkpoint.TopicPartition{Topic: p.tp.Topic, Partition: p.tp.Partition}
		switch {
		case mem:
			inMemory++
			entries[ctp] = hw
		case all:
			if old, ok := m.lastCkpt[p.tp]; ok {
				entries[ctp] = old
			} else {
				entries[ctp] = p.log.LogStartOffset()
			}
		}
	}
	if m.afterCkptSnapshot != nil {
		m.afterCkptSnapshot()
	}
	if !all && inMemory == 0 {
		// Kafka writes one file per log dir holding in-memory partitions;
		// with none, nothing is written.
		return nil
	}
	if err := checkpoint.WriteReplicationOffsets(m.cfg.DataDir, entries); err != nil {
		return err
	}
	hosted, herr := storage.ListPartitions(m.cfg.DataDir)
	if herr != nil {
		m.log.Printf("list hosted partitions: %v", herr)
	}
	ev := &history.Checkpoint{Path: m.cfg.DataDir + "/" + checkpoint.ReplicationOffsetFile, Entries: []history.CheckpointEntry{}, Hosted: []history.TopicPartition{}}
	m.lastCkpt = map[history.TopicPartition]int64{}
	for tp, hw := range entries {
		ev.Entries = append(ev.Entries, history.CheckpointEntry{Topic: tp.Topic, Partition: tp.Partition, HW: hw})
		m.lastCkpt[history.TP(tp.Topic, tp.Partition)] = hw
	}
	sort.Slice(ev.Entries, func(i, j int) bool {
		a, b := ev.Entries[i], ev.Entries[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	for _, tp := range hosted {
		ev.Hosted = append(ev.Hosted, history.TP(tp.Topic, tp.Partition))
	}
	m.log.Emit(history.Event{Kind: history.KindHWCheckpoint, Checkpoint: ev})
	return nil
}

// Close stops fetchers and tasks, writes a last checkpoint if the task ran
// (clean shutdown, as ReplicaManager.shutdown(checkpointHW = true)) and
// closes the logs. Calling it twice is a no-op.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	started := m.ckptStarted
	m.mu.Unlock()
	m.cancel()
	for _, p := range m.all() {
		p.stopFetcher()
		p.mu.Lock()
		p.notifyLocked()
		p.mu.Unlock()
	}
	m.wg.Wait()
	if started {
		if err := m.WriteCheckpoint(); err != nil {
			m.log.Printf("high watermark checkpoint on shutdown: %v", err)
		}
	}
	m.closeLogs()
}

func (m *Manager) closeLogs() {
	for _, p := range m.all() {
		if err := p.log.Close(); err != nil {
			m.log.Printf("close log %s: %v", p.tp, err)
		}
	}
}

// expireISRs is ReplicaManager's isr-expiration task, run every LagTime/2:
// each led partition drops followers not caught up for LagTime
// (Partition.maybeShrinkIsr).
func (m *Manager) expireISRs() {
	for _, p := range m.all() {
		p.maybeShrinkISR(time.Now())
	}
}

// Hosted returns every partition with a log, sorted (for admin /state).
func (m *Manager) Hosted() []PartitionInfo {
	var out []PartitionInfo
	for _, p := range m.all() {
		p.mu.Lock()
		out = append(out, PartitionInfo{Topic: p.tp.Topic, Partition: p.tp.Partition, Role: p.role, LeaderEpoch: p.leaderEpoch,
			ISR: slices.Clone(p.isr), HW: p.hw, LEO: p.log.LogEndOffset(), LogStart: p.log.LogStartOffset(), InMemory: p.inMemory})
		p.mu.Unlock()
	}
	return out
}

// PartitionInfo is one log's state for the admin endpoint.
type PartitionInfo struct {
	Topic       string  `json:"topic"`
	Partition   int32   `json:"partition"`
	Role        string  `json:"role,omitempty"`
	LeaderEpoch int32   `json:"leader_epoch"`
	ISR         []int32 `json:"isr,omitempty"`
	HW          int64   `json:"hw"`
	LEO         int64   `json:"leo"`
	LogStart    int64   `json:"log_start"`
	InMemory    bool    `json:"in_memory"`
}
