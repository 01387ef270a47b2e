package txn

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
)

// State is TransactionState, with its byte in the log.
type State int8

// The transaction states (TransactionMetadata.scala).
const (
	Empty State = iota
	Ongoing
	PrepareCommit
	PrepareAbort
	CompleteCommit
	CompleteAbort
	Dead
	PrepareEpochFence
)

func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case Ongoing:
		return "Ongoing"
	case PrepareCommit:
		return "PrepareCommit"
	case PrepareAbort:
		return "PrepareAbort"
	case CompleteCommit:
		return "CompleteCommit"
	case CompleteAbort:
		return "CompleteAbort"
	case Dead:
		return "Dead"
	case PrepareEpochFence:
		return "PrepareEpochFence"
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// validPrevious is TransactionMetadata.validPreviousStates.
var validPrevious = map[State][]State{
	Empty:             {Empty, CompleteCommit, CompleteAbort},
	Ongoing:           {Ongoing, Empty, CompleteCommit, CompleteAbort},
	PrepareCommit:     {Ongoing},
	PrepareAbort:      {Ongoing, PrepareEpochFence},
	CompleteCommit:    {PrepareCommit},
	CompleteAbort:     {PrepareAbort},
	Dead:              {Empty, CompleteAbort, CompleteCommit},
	PrepareEpochFence: {Ongoing},
}

// TopicPartition names a partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Compare orders partitions by topic, then partition number.
func (tp TopicPartition) Compare(o TopicPartition) int {
	return cmp.Or(cmp.Compare(tp.Topic, o.Topic), cmp.Compare(tp.Partition, o.Partition))
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// noEpoch is RecordBatch.NO_PRODUCER_EPOCH; noProducerID NO_PRODUCER_ID.
const (
	noEpoch      int16 = -1
	noProducerID int64 = -1
)

// epochExhausted is TransactionMetadata.isEpochExhausted: the last epoch
// is kept so the coordinator can always fence the producer once more.
func epochExhausted(e int16) bool { return e >= math.MaxInt16-1 }

// meta is TransactionMetadata: one transactional id's state. pending is
// the state a transit is being written for (pendingState); a transit is
// applied only after its record is committed.
type meta struct {
	id                         string
	producerID, lastProducerID int64
	producerEpoch, lastEpoch   int16
	timeoutMs                  int32
	state                      State
	partitions                 map[TopicPartition]bool
	startMs, updateMs          int64
	pending                    *State
	failedFence                bool
}

// transit is TxnTransitMetadata: the state a record describes.
type transit struct {
	producerID, lastProducerID int64
	producerEpoch, lastEpoch   int16
	timeoutMs                  int32
	state                      State
	partitions                 []TopicPartition // sorted
	startMs, updateMs          int64
}

// sortedTPs lists the map's partitions in Compare order; an empty map
// gives an empty slice, not nil, as every caller has always been given.
func sortedTPs(set map[TopicPartition]bool) []TopicPartition {
	out := slices.AppendSeq(make([]TopicPartition, 0, len(set)), maps.Keys(set))
	slices.SortFunc(out, TopicPartition.Compare)
	return out
}

// prepare is prepareTransitionTo: it sets the pending state. A transition
// that TransactionMetadata would throw on is a bug here too; it is
// returned as an error rather than a panic.
func (m *meta) prepare(to State, pid int64, epoch, lastEpoch int16, timeoutMs int32, parts []TopicPartition, startMs, nowMs int64) (transit, error) {
	if m.pending != nil {
		return transit{}, fmt.Errorf("transactional id %s: transition to %s while %s is pending", m.id, to, *m.pending)
	}
	ok := false
	for _, s := range validPrevious[to] {
		ok = ok || s == m.state
	}
	if !ok || pid < 0 || epoch < 0 {
		return transit{}, fmt.Errorf("transactional id %s: illegal transition from %s to %s (producer %d epoch %d)", m.id, m.state, to, pid, epoch)
	}
	p := to
	m.pending = &p
	return transit{producerID: pid, lastProducerID: m.producerID, producerEpoch: epoch, lastEpoch: lastEpoch, timeoutMs: timeoutMs,
		state: to, partitions: parts, startMs: startMs, updateMs: nowMs}, nil
}

// prepareFence is prepareFenceProducerEpoch.
func (m *meta) prepareFence() (transit, error) {
	if m.producerEpoch == math.MaxInt16 {
		return transit{}, fmt.Errorf("transactional id %s: cannot fence producer %d at epoch %d", m.id, m.producerID, m.producerEpoch)
	}
	bumped := m.producerEpoch + 1
	if m.failedFence {
		bumped = m.producerEpoch
	}
	return m.prepare(PrepareEpochFence, m.producerID, bumped, noEpoch, m.timeoutMs, sortedTPs(m.partitions), m.startMs, m.updateMs)
}

// prepareIncrementEpoch is prepareIncrementProducerEpoch; expected is the
// epoch an InitProducerId carried (nil: none). A code answers the client.
func (m *meta) prepareIncrementEpoch(timeoutMs int32, expected *int16, nowMs int64) (transit, int16, error) {
	if epochExhausted(m.producerEpoch) {
		return transit{}, 0, fmt.Errorf("transactional id %s: producer %d epochs exhausted", m.id, m.producerID)
	}
	next, last := m.producerEpoch+1, noEpoch
	if expected != nil {
		switch {
		case m.producerEpoch == noEpoch || *expected == m.producerEpoch:
			last = m.producerEpoch
		case *expected == m.lastEpoch:
			// A retry of a bump whose answer was lost.
			next, last = m.producerEpoch, m.lastEpoch
		default:
			return transit{}, errInvalidProducerEpoch, nil
		}
	}
	tr, err := m.prepare(Empty, m.producerID, next, last, timeoutMs, nil, -1, nowMs)
	return tr, 0, err
}

// prepareRotation is prepareProducerIdRotation.
func (m *meta) prepareRotation(newPID int64, timeoutMs int32, nowMs int64, recordLast bool) (transit, error) {
	last := noEpoch
	if recordLast {
		last = m.producerEpoch
	}
	return m.prepare(Empty, newPID, 0, last, timeoutMs, nil, -1, nowMs)
}

// prepareAddPartitions is prepareAddPartitions.
func (m *meta) prepareAddPartitions(add []TopicPartition, nowMs int64) (transit, error) {
	start := m.startMs
	if m.state == Empty || m.state == CompleteAbort || m.state == CompleteCommit {
		start = nowMs
	}
	all := map[TopicPartition]bool{}
	for tp := range m.partitions {
		all[tp] = true
	}
	for _, tp := range add {
		all[tp] = true
	}
	return m.prepare(Ongoing, m.producerID, m.producerEpoch, m.lastEpoch, m.timeoutMs, sortedTPs(all), start, nowMs)
}

// prepareAbortOrCommit is prepareAbortOrCommit.
func (m *meta) prepareAbortOrCommit(to State, nowMs int64) (transit, error) {
	return m.prepare(to, m.producerID, m.producerEpoch, m.lastEpoch, m.timeoutMs, sortedTPs(m.partitions), m.startMs, nowMs)
}

// prepareComplete is prepareComplete.
func (m *meta) prepareComplete(nowMs int64) (transit, error) {
	to := CompleteAbort
	if m.state == PrepareCommit {
		to = CompleteCommit
	}
	m.failedFence = false
	return m.prepare(to, m.producerID, m.producerEpoch, m.lastEpoch, m.timeoutMs, nil, m.startMs, nowMs)
}

// complete is completeTransitionTo: the record of tr is committed.
func (m *meta) complete(tr transit) error {
	if m.pending == nil || *m.pending != tr.state {
		return fmt.Errorf("transactional id %s: completing %s without it pending", m.id, tr.state)
	}
	switch tr.state {
	case Empty:
		m.timeoutMs, m.producerEpoch, m.lastEpoch = tr.timeoutMs, tr.producerEpoch, tr.lastEpoch
		m.producerID, m.lastProducerID = tr.producerID, tr.lastProducerID
	case Ongoing:
		m.startMs = tr.startMs
		for _, tp := range tr.partitions {
			m.partitions[tp] = true
		}
	case PrepareCommit, PrepareAbort:
	case CompleteCommit, CompleteAbort:
		m.startMs = tr.startMs
		m.partitions = map[TopicPartition]bool{}
	default:
		return fmt.Errorf("transactional id %s: cannot complete a transition to %s", m.id, tr.state)
	}
	m.updateMs = tr.updateMs
	m.pending = nil
	m.state = tr.state
	return nil
}
