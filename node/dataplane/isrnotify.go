package dataplane

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/zkdata"
	"github.com/zkchaos/zkchaos/node/zkutil"
)

// Kafka 2.6.3's ISR change propagation constants (ReplicaManager): the task
// runs every 2.5 s and writes one notification for every partition changed
// since the last one, once no change came for 5 s, or 60 s after the last
// notification while changes keep coming. A lone change therefore reaches
// the controller (and its UpdateMetadata) 5 to 7.5 s after the ISR write.
const (
	isrChangePropagationPeriod   = 2500 * time.Millisecond
	isrChangePropagationBlackOut = 5 * time.Second
	isrChangePropagationInterval = 60 * time.Second
)

// isrChanges is ReplicaManager's isrChangeSet with lastIsrChangeMs and
// lastIsrPropagationMs.
type isrChanges struct {
	mu              sync.Mutex
	pending         map[history.TopicPartition]struct{}
	lastChange      time.Time
	lastPropagation time.Time
}

// recordISRChange is ReplicaManager.recordIsrChange: called after a
// successful leader ISR write.
func (m *Manager) recordISRChange(tp history.TopicPartition) { m.recordISRChangeAt(tp, time.Now()) }

func (m *Manager) recordISRChangeAt(tp history.TopicPartition, now time.Time) {
	m.isrCh.mu.Lock()
	defer m.isrCh.mu.Unlock()
	if m.isrCh.pending == nil {
		m.isrCh.pending = map[history.TopicPartition]struct{}{}
	}
	m.isrCh.pending[tp] = struct{}{}
	m.isrCh.lastChange = now
}

// maybePropagateISRChanges is ReplicaManager.maybePropagateIsrChanges at
// time now: one /isr_change_notification/isr_change_<seq> naming every
// pending partition (KafkaZkClient.propagateIsrChanges). A write that fails
// leaves them pending for the next run, as Kafka's exception skips the
// clear.
func (m *Manager) maybePropagateISRChanges(now time.Time) {
	c := &m.isrCh
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 ||
		!(c.lastChange.Add(isrChangePropagationBlackOut).Before(now) || c.lastPropagation.Add(isrChangePropagationInterval).Before(now)) {
		return
	}
	store := m.isrStore()
	if store == nil {
		return
	}
	tps := make([]zkdata.TopicPartition, 0, len(c.pending))
	for _, tp := range slices.SortedFunc(maps.Keys(c.pending), history.TopicPartition.Compare) {
		tps = append(tps, zkdata.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	ctx, cancel := context.WithTimeout(m.ctx, store.requestTimeout())
	defer cancel()
	note := zkdata.EncodeTopicPartitions(tps)
	npath := zkdata.ISRChangePath + "/" + zkdata.ISRChangePrefix
	start := time.Now()
	created, err := store.createSequential(ctx, npath, note)
	w := history.ZKWrite{Start: start.UnixNano(), Path: npath, Op: "create", ExpectedVersion: -1, Outcome: zkutil.Outcome(err), Data: string(note)}
	if err != nil {
		w.Error = err.Error()
	} else {
		w.Path = created
	}
	m.log.ZKWrite(w)
	if err != nil {
		m.log.Printf("ISR change notification for %d partitions: %v (kept for the next attempt)", len(tps), err)
		return
	}
	clear(c.pending)
	c.lastPropagation = now
}
