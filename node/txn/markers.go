package txn

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// currentLocked reports whether m is still the cached metadata of its id
// at coordEpoch: a marker round or completion of an older coordinator
// epoch stops (the loader of the new one finishes the transaction).
func (c *Coordinator) currentLocked(m *meta, coordEpoch int32) bool {
	cur, epoch, code := c.stateLocked(m.id)
	return code == errNone && cur == m && epoch == coordEpoch
}

// startMarkersLocked is addTxnMarkersToSend: markers go to the leaders of
// the transaction's partitions until each has written one, then the
// completion (done, CompleteCommit or CompleteAbort) is written.
func (c *Coordinator) startMarkersLocked(m *meta, coordEpoch int32, commit bool, done transit) {
	pid, epoch := m.producerID, m.producerEpoch
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.sendMarkers(m, coordEpoch, commit, pid, epoch, done)
	}()
}

// sendMarkers is the marker channel manager's work for one transaction:
// group the partitions left by leader, send each leader one
// WriteTxnMarkers, and handle the answers as
// TransactionMarkerRequestCompletionHandler does: success removes the
// partition; NOT_LEADER_OR_FOLLOWER and the other retriable errors (and a
// lost connection, or no known leader) send again after the backoff, to
// the leader the metadata cache names then; INVALID_PRODUCER_EPOCH and
// TRANSACTION_COORDINATOR_FENCED give the transaction up (a newer producer
// or coordinator decided it).
func (c *Coordinator) sendMarkers(m *meta, coordEpoch int32, commit bool, pid int64, epoch int16, done transit) {
	for {
		c.mu.Lock()
		if !c.currentLocked(m, coordEpoch) {
			c.mu.Unlock()
			return
		}
		left := sortedTPs(m.partitions)
		if len(left) == 0 {
			c.completeLocked(m, coordEpoch, commit, done)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		byBroker := map[int32][]TopicPartition{}
		retry := false
		for _, tp := range left {
			b, ok := c.markers.Leader(tp)
			if !ok {
				retry = true // markersQueueForUnknownBroker
				continue
			}
			byBroker[b] = append(byBroker[b], tp)
		}
		brokers := make([]int32, 0, len(byBroker))
		for b := range byBroker {
			brokers = append(brokers, b)
		}
		sort.Slice(brokers, func(i, j int) bool { return brokers[i] < brokers[j] })
		// Each broker's request goes out at once, as Kafka's
		// TransactionMarkerChannelManager queues markers per broker
		// (markersQueuePerBroker) and its InterBrokerSendThread sends every
		// broker's WriteTxnMarkers in the same poll: a leader that does not
		// answer holds back only its own partitions' markers.
		type outcome struct{ again, stop bool }
		outcomes := make([]outcome, len(brokers))
		var wg sync.WaitGroup
		for i, b := range brokers {
			mk := Marker{ProducerID: pid, ProducerEpoch: epoch, Commit: commit, CoordinatorEpoch: coordEpoch, Partitions: byBroker[b]}
			wg.Add(1)
			go func() {
				defer wg.Done()
				again, stop := c.markerRound(m, b, mk)
				outcomes[i] = outcome{again, stop}
			}()
		}
		wg.Wait()
		for _, o := range outcomes {
			if o.stop {
				return
			}
			retry = retry || o.again
		}
		if retry {
			select {
			case <-c.ctx.Done():
				return
			case <-time.After(c.cfg.RetryBackoff):
			}
		}
	}
}

// markerRound sends mk to broker and applies the answer.
func (c *Coordinator) markerRound(m *meta, broker int32, mk Marker) (retry, stop bool) {
	ctx, cancel := c.requestContext()
	errs, err := c.markers.Send(ctx, broker, mk)
	cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.currentLocked(m, mk.CoordinatorEpoch) {
		return false, true
	}
	ev := Event{API: APIMarkers, TransactionalID: m.id, ProducerID: mk.ProducerID, ProducerEpoch: mk.ProducerEpoch,
		CoordinatorEpoch: mk.CoordinatorEpoch, Commit: mk.Commit, Partitions: mk.Partitions, Broker: broker,
		AssignedProducerID: -1, AssignedEpoch: -1}
	defer func() { c.emitLocked(ev) }()
	if err != nil {
		ev.Error, ev.Detail = errCoordinatorNotAvailable, err.Error()
		return true, false
	}
	for _, tp := range mk.Partitions {
		code, ok := errs[tp]
		if !ok {
			code = errUnknownServer
		}
		ev.Errors = append(ev.Errors, PartitionError{TP: tp, Error: code})
		switch code {
		case errNone, kerr.UnsupportedForMessageFormat.Code, kerr.UnsupportedVersion.Code:
			delete(m.partitions, tp)
		case kerr.InvalidProducerEpoch.Code, kerr.TransactionCoordinatorFenced.Code:
			ev.Error = code
			stop = true
		default:
			// UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
			// NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT,
			// KAFKA_STORAGE_ERROR; Kafka treats anything else as fatal,
			// here it is retried too.
			if ev.Error == 0 {
				ev.Error = code
			}
			retry = true
		}
	}
	return retry, stop
}

// completeLocked is writeTxnCompletion → tryAppendToLog: write done; a
// COORDINATOR_NOT_AVAILABLE failure keeps the pending state and is tried
// again after the backoff.
func (c *Coordinator) completeLocked(m *meta, coordEpoch int32, commit bool, done transit) {
	retry := func(code int16) bool { return code == errCoordinatorNotAvailable }
	c.appendLocked(m, coordEpoch, done, retry, func(code int16) {
		c.emitLocked(Event{API: APIComplete, TransactionalID: m.id, ProducerID: done.producerID, ProducerEpoch: done.producerEpoch,
			CoordinatorEpoch: coordEpoch, Commit: commit, Error: code, AssignedProducerID: -1, AssignedEpoch: -1})
		if !retry(code) {
			return
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			select {
			case <-c.ctx.Done():
				return
			case <-time.After(c.cfg.RetryBackoff):
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.currentLocked(m, coordEpoch) {
				c.completeLocked(m, coordEpoch, commit, done)
			}
		}()
	})
}

// Record is one record of a __transaction_state partition, in log order.
type Record struct {
	Key, Value []byte
}

// BeginLoad is onElection's first half: partition p, now led at leader
// epoch coordEpoch, answers COORDINATOR_LOAD_IN_PROGRESS until FinishLoad.
// Whatever an earlier ownership left is dropped first.
func (c *Coordinator) BeginLoad(p, coordEpoch int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(p)
	c.loading[p] = coordEpoch
}

// FinishLoad is loadTransactionsForTxnTopicPartition's end: the records
// read (log start to end) become the cache of p, and every transaction
// found in PrepareCommit or PrepareAbort is completed: its markers are sent
// again at the new coordinator epoch. A load that Unload or a newer
// BeginLoad overtook is dropped.
func (c *Coordinator) FinishLoad(p, coordEpoch int32, recs []Record) error {
	loaded := map[string]*meta{}
	var bad error
	for i, r := range recs {
		id, err := decodeKey(r.Key)
		if err == nil && PartitionFor(id, c.cfg.NumPartitions) != p {
			err = fmt.Errorf("transactional id %s belongs to partition %d", id, PartitionFor(id, c.cfg.NumPartitions))
		}
		var m *meta
		if err == nil {
			m, err = decodeValue(id, r.Value)
		}
		if err != nil {
			if bad == nil {
				bad = fmt.Errorf("__transaction_state-%d record %d: %w", p, i, err)
			}
			continue
		}
		if m == nil {
			delete(loaded, id)
		} else {
			loaded[id] = m
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.loading[p]; !ok || e != coordEpoch || !c.active {
		return bad
	}
	delete(c.loading, p)
	c.owned[p] = coordEpoch
	ids := make([]string, 0, len(loaded))
	for id, m := range loaded {
		c.txns[id] = m
		ids = append(ids, id)
	}
	sort.Strings(ids)
	c.emitLocked(Event{API: APILoad, Partition: p, CoordinatorEpoch: coordEpoch, IDs: ids, ProducerID: -1, ProducerEpoch: -1, AssignedProducerID: -1, AssignedEpoch: -1})
	for _, id := range ids {
		m := loaded[id]
		if m.state != PrepareCommit && m.state != PrepareAbort {
			continue
		}
		done, err := m.prepareComplete(c.nowMs())
		if err != nil {
			c.logf("%v", err)
			continue
		}
		c.startMarkersLocked(m, coordEpoch, m.state == PrepareCommit, done)
	}
	return bad
}

// Unload is onResignation: this broker no longer leads p.
func (c *Coordinator) Unload(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, owned := c.owned[p]
	_, loading := c.loading[p]
	if !owned && !loading {
		return
	}
	ids := c.dropLocked(p)
	c.emitLocked(Event{API: APIUnload, Partition: p, CoordinatorEpoch: -1, IDs: ids, ProducerID: -1, ProducerEpoch: -1, AssignedProducerID: -1, AssignedEpoch: -1})
}

func (c *Coordinator) dropLocked(p int32) []string {
	delete(c.owned, p)
	delete(c.loading, p)
	var ids []string
	for id := range c.txns {
		if c.PartitionFor(id) == p {
			delete(c.txns, id)
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}
