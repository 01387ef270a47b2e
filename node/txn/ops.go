package txn

import (
	"context"
	"time"
)

// InitResult is an InitProducerId answer.
type InitResult struct {
	ProducerID    int64
	ProducerEpoch int16
	Error         int16
}

// ProducerIDAndEpoch is what an InitProducerId v3 may carry (KIP-360).
type ProducerIDAndEpoch struct {
	ID    int64
	Epoch int16
}

func initErr(code int16) InitResult {
	return InitResult{ProducerID: -1, ProducerEpoch: -1, Error: code}
}

// InitProducerID is handleInitProducerId for a transactional id: a new
// producer id for an unknown id; otherwise the epoch bumped, which fences
// every older producer of the id. An ongoing transaction is aborted first
// at a bumped epoch and CONCURRENT_TRANSACTIONS answered, so the client
// retries and gets an epoch above the abort's.
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeoutMs int32, expected *ProducerIDAndEpoch) InitResult {
	if id == "" {
		return initErr(errInvalidRequest)
	}
	if timeoutMs <= 0 || time.Duration(timeoutMs)*time.Millisecond > c.cfg.MaxTimeout {
		return initErr(errInvalidTimeout)
	}
	ch := make(chan InitResult, 1)
	for attempt := 0; ; attempt++ {
		// A producer id is claimed outside the lock (it may ask
		// ZooKeeper): for an id not yet known, and when the epochs of
		// the current one are exhausted.
		c.mu.Lock()
		m, _, code := c.stateLocked(id)
		needPID := code == errNone && (m == nil || (m.pending == nil && epochExhausted(m.producerEpoch) &&
			(m.state == Empty || m.state == CompleteCommit || m.state == CompleteAbort)))
		c.mu.Unlock()
		newPID := int64(-1)
		if needPID && attempt < 3 {
			pid, err := c.pids.NextProducerID(ctx)
			if err != nil {
				return initErr(errCoordinatorNotAvailable)
			}
			newPID = pid
		}
		c.mu.Lock()
		again := c.initLocked(id, timeoutMs, expected, newPID, func(r InitResult) { ch <- r })
		c.mu.Unlock()
		if !again {
			break
		}
	}
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return initErr(errCoordinatorNotAvailable)
	}
}

// initLocked runs handleInitProducerId with newPID claimed (-1: none);
// true asks the caller to claim one and run it again.
func (c *Coordinator) initLocked(id string, timeoutMs int32, expected *ProducerIDAndEpoch, newPID int64, reply func(InitResult)) bool {
	ev := Event{API: "InitProducerId", TransactionalID: id, ProducerID: -1, ProducerEpoch: -1, AssignedProducerID: -1, AssignedEpoch: -1, CoordinatorEpoch: -1}
	if expected != nil {
		ev.ProducerID, ev.ProducerEpoch = expected.ID, expected.Epoch
	}
	answer := func(r InitResult) {
		ev.Error, ev.AssignedProducerID, ev.AssignedEpoch = r.Error, r.ProducerID, r.ProducerEpoch
		c.emitLocked(ev)
		reply(r)
	}
	m, coordEpoch, code := c.stateLocked(id)
	ev.CoordinatorEpoch = coordEpoch
	if code != errNone {
		ev.CoordinatorEpoch = -1
		answer(initErr(code))
		return false
	}
	if m == nil {
		if newPID < 0 {
			return true
		}
		m = &meta{id: id, producerID: newPID, lastProducerID: noProducerID, producerEpoch: noEpoch, lastEpoch: noEpoch,
			timeoutMs: timeoutMs, state: Empty, partitions: map[TopicPartition]bool{}, startMs: -1, updateMs: c.nowMs()}
		c.txns[id] = m
		newPID = -1
	}
	validPID := func(e ProducerIDAndEpoch) bool {
		return m.producerEpoch == noEpoch || e.ID == m.producerID || (e.ID == m.lastProducerID && epochExhausted(e.Epoch))
	}
	var tr transit
	var err error
	switch {
	case m.pending != nil:
		answer(initErr(errConcurrentTransactions))
		return false
	case expected != nil && !validPID(*expected):
		answer(initErr(errInvalidProducerEpoch))
		return false
	case m.state == PrepareAbort || m.state == PrepareCommit:
		answer(initErr(errConcurrentTransactions))
		return false
	case m.state == Ongoing:
		// Fence: abort at a bumped epoch the client never sees.
		tr, err = m.prepareFence()
		if err != nil {
			c.logf("%v", err)
			answer(initErr(errUnknownServer))
			return false
		}
		c.endLocked(id, tr.producerID, tr.producerEpoch, false, false, 0, func(code int16) {
			if code == errNone {
				code = errConcurrentTransactions
			}
			answer(initErr(code))
		})
		return false
	case epochExhausted(m.producerEpoch) && (expected == nil || expected.Epoch == m.producerEpoch):
		if newPID < 0 {
			return true
		}
		tr, err = m.prepareRotation(newPID, timeoutMs, c.nowMs(), expected != nil)
	default:
		var exp *int16
		if expected != nil {
			exp = &expected.Epoch
		}
		var code int16
		tr, code, err = m.prepareIncrementEpoch(timeoutMs, exp, c.nowMs())
		if code != errNone {
			answer(initErr(code))
			return false
		}
	}
	if err != nil {
		c.logf("%v", err)
		answer(initErr(errUnknownServer))
		return false
	}
	c.appendLocked(m, coordEpoch, tr, nil, func(code int16) {
		if code != errNone {
			answer(initErr(code))
			return
		}
		answer(InitResult{ProducerID: tr.producerID, ProducerEpoch: tr.producerEpoch})
	})
	return false
}

// AddPartitions is handleAddPartitionsToTransaction (AddOffsetsToTxn adds
// the group's __consumer_offsets partition the same way; group names it
// for the event).
func (c *Coordinator) AddPartitions(ctx context.Context, api string, version int16, id string, pid int64, epoch int16, parts []TopicPartition, group string) int16 {
	ch := make(chan int16, 1)
	c.mu.Lock()
	m, coordEpoch, code := c.stateLocked(id)
	ev := Event{API: api, Version: version, TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: coordEpoch,
		Partitions: parts, Group: group, AssignedProducerID: -1, AssignedEpoch: -1}
	answer := func(code int16) {
		ev.Error = code
		c.emitLocked(ev)
		ch <- code
	}
	switch {
	case id == "":
		answer(errInvalidRequest)
	case code != errNone:
		ev.CoordinatorEpoch = -1
		answer(code)
	case m == nil || m.producerID != pid:
		answer(errInvalidPIDMapping)
	case m.producerEpoch != epoch:
		ev.KnownEpoch = known(m.producerEpoch)
		answer(errInvalidProducerEpoch)
	case m.pending != nil, m.state == PrepareCommit, m.state == PrepareAbort:
		ev.KnownEpoch = known(m.producerEpoch)
		answer(errConcurrentTransactions)
	case m.state == Ongoing && subset(parts, m.partitions):
		ev.KnownEpoch = known(m.producerEpoch)
		answer(errNone)
	default:
		ev.KnownEpoch = known(m.producerEpoch)
		tr, err := m.prepareAddPartitions(parts, c.nowMs())
		if err != nil {
			c.logf("%v", err)
			answer(errUnknownServer)
			break
		}
		c.appendLocked(m, coordEpoch, tr, nil, answer)
	}
	c.mu.Unlock()
	return awaitCode(ctx, ch)
}

// awaitCode is a client's wait for its answer: a client that stops waiting
// is told the coordinator is not available, and the answer, when it comes,
// goes to ch's buffer unread.
func awaitCode(ctx context.Context, ch <-chan int16) int16 {
	select {
	case code := <-ch:
		return code
	case <-ctx.Done():
		return errCoordinatorNotAvailable
	}
}

func subset(parts []TopicPartition, of map[TopicPartition]bool) bool {
	for _, tp := range parts {
		if !of[tp] {
			return false
		}
	}
	return true
}

// EndTxn is handleEndTransaction from a client.
func (c *Coordinator) EndTxn(ctx context.Context, version int16, id string, pid int64, epoch int16, commit bool) int16 {
	ch := make(chan int16, 1)
	c.mu.Lock()
	c.endLocked(id, pid, epoch, commit, true, version, func(code int16) { ch <- code })
	c.mu.Unlock()
	return awaitCode(ctx, ch)
}

// endLocked is TransactionCoordinator.endTransaction: write PrepareCommit
// or PrepareAbort, answer, then send the markers and write the completion.
// fromClient false is the coordinator's own abort (a fence or a timeout),
// whose epoch is the bumped one of a PrepareEpochFence.
func (c *Coordinator) endLocked(id string, pid int64, epoch int16, commit, fromClient bool, version int16, reply func(int16)) {
	m, coordEpoch, code := c.stateLocked(id)
	api := "EndTxn"
	if !fromClient {
		api = APITimeout
	}
	ev := Event{API: api, Version: version, TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: coordEpoch,
		Commit: commit, AssignedProducerID: -1, AssignedEpoch: -1}
	answer := func(code int16) {
		ev.Error = code
		c.emitLocked(ev)
		reply(code)
	}
	if code != errNone {
		ev.CoordinatorEpoch = -1
		answer(code)
		return
	}
	if id == "" {
		answer(errInvalidRequest)
		return
	}
	if m == nil || m.producerID != pid {
		answer(errInvalidPIDMapping)
		return
	}
	if fromClient {
		ev.KnownEpoch = known(m.producerEpoch)
	}
	if (fromClient && epoch != m.producerEpoch) || epoch < m.producerEpoch {
		answer(errInvalidProducerEpoch)
		return
	}
	fencing := m.pending != nil && *m.pending == PrepareEpochFence
	if m.pending != nil && !fencing {
		answer(errConcurrentTransactions)
		return
	}
	ev.Partitions = sortedTPs(m.partitions)
	decided := func(want bool) int16 {
		if commit == want {
			return errNone
		}
		return errInvalidTxnState
	}
	switch m.state {
	case Ongoing:
	case CompleteCommit:
		answer(decided(true))
		return
	case CompleteAbort:
		answer(decided(false))
		return
	case PrepareCommit:
		if commit {
			answer(errConcurrentTransactions)
		} else {
			answer(errInvalidTxnState)
		}
		return
	case PrepareAbort:
		if !commit {
			answer(errConcurrentTransactions)
		} else {
			answer(errInvalidTxnState)
		}
		return
	default:
		answer(errInvalidTxnState)
		return
	}
	next := PrepareAbort
	if commit {
		next = PrepareCommit
	}
	isFence := false
	if next == PrepareAbort && fencing {
		isFence = true
		m.pending = nil
		m.producerEpoch, m.lastEpoch = epoch, noEpoch
	}
	tr, err := m.prepareAbortOrCommit(next, c.nowMs())
	if err != nil {
		c.logf("%v", err)
		answer(errUnknownServer)
		return
	}
	c.appendLocked(m, coordEpoch, tr, nil, func(code int16) {
		if code != errNone {
			if isFence {
				if cur, e, sc := c.stateLocked(id); sc == errNone && cur == m && e == coordEpoch {
					m.failedFence = true
				}
			}
			answer(code)
			return
		}
		cur, e, sc := c.stateLocked(id)
		switch {
		case sc != errNone || cur != m || e != coordEpoch:
			answer(errNotCoordinator)
			return
		case m.producerID != pid:
			answer(errInvalidPIDMapping)
			return
		case m.producerEpoch != epoch:
			if fromClient {
				ev.KnownEpoch = known(m.producerEpoch)
			}
			answer(errInvalidProducerEpoch)
			return
		case m.pending != nil:
			answer(errConcurrentTransactions)
			return
		case m.state != next:
			answer(errInvalidTxnState)
			return
		}
		done, err := m.prepareComplete(c.nowMs())
		if err != nil {
			c.logf("%v", err)
			answer(errUnknownServer)
			return
		}
		answer(errNone)
		c.startMarkersLocked(m, coordEpoch, commit, done)
	})
}

// AbortTimedOut is abortTimedOutTransactions: every Ongoing transaction
// older than its timeout is fenced and aborted.
func (c *Coordinator) AbortTimedOut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.nowMs()
	for id, m := range c.txns {
		if _, owned := c.owned[c.PartitionFor(id)]; !owned || m.pending != nil || m.state != Ongoing {
			continue
		}
		if m.startMs+int64(m.timeoutMs) >= now {
			continue
		}
		tr, err := m.prepareFence()
		if err != nil {
			c.logf("%v", err)
			continue
		}
		c.endLocked(id, tr.producerID, tr.producerEpoch, false, false, 0, func(int16) {})
	}
}
