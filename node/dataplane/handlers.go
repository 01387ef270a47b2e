package dataplane

import (
	"context"
	"errors"
	"github.com/twmb/franz-go/pkg/kerr"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/storage"
	"github.com/zkchaos/zkchaos/node/wire"
)

// maxFetchWait caps a client's MaxWaitMillis.
const maxFetchWait = 5 * time.Second

// Routes registers the client APIs on s, by kmsg's API keys, with the
// versions served. Produce from v3 and Fetch from v4 (record batch v2 only,
// as storage keeps); the maxima are Kafka 3.0's, the last release whose Fetch
// names topics rather than topic ids.
func (m *Manager) Routes(s *wire.Server) {
	s.Handle(kmsg.Produce.Int16(), 3, 9, func(ctx context.Context, _ *wire.ConnInfo, _ wire.RequestHeader, req kmsg.Request) (kmsg.Response, error) {
		return m.Produce(ctx, req.(*kmsg.ProduceRequest)), nil
	})
	s.Handle(kmsg.Fetch.Int16(), 4, 12, func(ctx context.Context, _ *wire.ConnInfo, _ wire.RequestHeader, req kmsg.Request) (kmsg.Response, error) {
		return m.Fetch(ctx, req.(*kmsg.FetchRequest)), nil
	})
	s.Handle(kmsg.ListOffsets.Int16(), 1, 6, func(_ context.Context, _ *wire.ConnInfo, _ wire.RequestHeader, req kmsg.Request) (kmsg.Response, error) {
		return m.ListOffsets(req.(*kmsg.ListOffsetsRequest)), nil
	})
	s.Handle(kmsg.Metadata.Int16(), 0, 11, func(_ context.Context, _ *wire.ConnInfo, _ wire.RequestHeader, req kmsg.Request) (kmsg.Response, error) {
		return m.Metadata(req.(*kmsg.MetadataRequest)), nil
	})
	// Kafka 2.4's versions: v3 (KIP-360 epoch bumps) needs a transaction
	// coordinator's state; the node registers v0-3 over this with the
	// transaction coordinator behind it (node/txns.go).
	s.Handle(kmsg.InitProducerID.Int16(), 0, 2, func(ctx context.Context, _ *wire.ConnInfo, _ wire.RequestHeader, req kmsg.Request) (kmsg.Response, error) {
		return m.InitProducerID(ctx, req.(*kmsg.InitProducerIDRequest)), nil
	})
	s.Handle(kmsg.OffsetForLeaderEpoch.Int16(), 0, 3, func(_ context.Context, _ *wire.ConnInfo, _ wire.RequestHeader, req kmsg.Request) (kmsg.Response, error) {
		return m.OffsetForLeaderEpoch(req.(*kmsg.OffsetForLeaderEpochRequest)), nil
	})
}

// checkEpochLocked is Partition.checkCurrentLeaderEpoch: -1 skips the check.
func (p *partition) checkEpochLocked(current int32) int16 {
	switch {
	case current < 0 || current == p.leaderEpoch:
		return 0
	case current < p.leaderEpoch:
		return kerr.FencedLeaderEpoch.Code
	default:
		return kerr.UnknownLeaderEpoch.Code
	}
}

// leaderCheckLocked is what a request only the leader serves checks first
// (Partition.getLocalLog, KIP-320): the client's current leader epoch, then
// that this replica leads. A client behind a follower's epoch is told its
// epoch is fenced, not that this replica does not lead.
func (p *partition) leaderCheckLocked(current int32) int16 {
	return p.localLogCheckLocked(current, true)
}

// localLogCheckLocked is Partition.getLocalLog(currentLeaderEpoch,
// requireLeader): the epoch check applies to every caller, leadership only
// when requireLeader (false only for the debugging replica id -2).
func (p *partition) localLogCheckLocked(current int32, requireLeader bool) int16 {
	if code := p.checkEpochLocked(current); code != 0 {
		return code
	}
	if requireLeader && p.role != history.RoleLeader {
		return kerr.NotLeaderForPartition.Code
	}
	return 0
}

// logConsumerOutOfRangeLocked logs a consumer's fetch this leader answers
// OFFSET_OUT_OF_RANGE: the consumer then resets its position by its reset
// policy, and a checker that sees it read backwards must know which broker
// sent it there, at which leader epoch and with which log end.
func (p *partition) logConsumerOutOfRangeLocked(in *kmsg.FetchRequestTopicPartition) {
	p.m.log.Emit(history.Event{Kind: history.KindReplicaFetch, ReplicaFetch: &history.ReplicaFetch{
		Topic: p.tp.Topic, Partition: p.tp.Partition, Replica: -1,
		CurrentLeaderEpoch: in.CurrentLeaderEpoch, LeaderEpoch: p.leaderEpoch, ErrorCode: kerr.OffsetOutOfRange.Code,
		FetchOffset: in.FetchOffset, LogStartOffset: p.log.LogStartOffset(), LogEndOffset: p.log.LogEndOffset()}})
}

// logConsumerListOffsetsLocked logs a consumer's ListOffsets answer: a
// client that assigns a partition from an exact offset moves it into the
// listed bounds, so a checker that sees it read backwards must know which
// broker answered which offset, at which leader epoch.
func (p *partition) logConsumerListOffsetsLocked(in kmsg.ListOffsetsRequestTopicPartition, out *kmsg.ListOffsetsResponseTopicPartition) {
	p.m.log.Emit(history.Event{Kind: history.KindListOffsets, Listed: &history.ListOffsets{
		Topic: p.tp.Topic, Partition: p.tp.Partition, Timestamp: in.Timestamp,
		CurrentLeaderEpoch: in.CurrentLeaderEpoch, LeaderEpoch: p.leaderEpoch, ErrorCode: out.ErrorCode,
		Offset: out.Offset, HighWatermark: p.hw, LogEndOffset: p.log.LogEndOffset()}})
}

// debuggingReplicaID is ListOffsetRequest.DEBUGGING_REPLICA_ID: the one
// replica id that any replica answers (the controller's query-leo uses it).
const debuggingReplicaID = -2

type pendingAck struct {
	p     *partition
	resp  *kmsg.ProduceResponseTopicPartition
	gen   uint64
	epoch int32
	base  int64
	last  int64
}

// Produce is KafkaApis.handleProduceRequest + ReplicaManager.appendRecords.
// acks=0 returns nil (no response is sent).
func (m *Manager) Produce(ctx context.Context, req *kmsg.ProduceRequest) kmsg.Response {
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(req.Version)
	validAcks := req.Acks == -1 || req.Acks == 0 || req.Acks == 1
	var pending []pendingAck
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		ot := kmsg.NewProduceResponseTopic()
		ot.Topic = rt.Topic
		ot.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			op := &ot.Partitions[pi]
			*op = kmsg.NewProduceResponseTopicPartition()
			op.Partition, op.BaseOffset, op.LogAppendTime, op.LogStartOffset = rp.Partition, -1, -1, -1
			if !validAcks {
				op.ErrorCode = kerr.InvalidRequiredAcks.Code
				continue
			}
			if IsInternal(rt.Topic) {
				// ReplicaManager.appendToLocalLog: only the coordinators
				// write internal topics (internalTopicsAllowed is false for
				// a client's produce).
				op.ErrorCode = kerr.InvalidTopicException.Code
				continue
			}
			p, code := m.hosted(history.TP(rt.Topic, rp.Partition))
			if p == nil {
				op.ErrorCode = code
				continue
			}
			if h, ok := storage.PeekHeader(rp.Records); ok && h.IsControl() {
				// LogValidator.validateBatch: clients may not write
				// control records; only WriteTxnMarkers does.
				op.ErrorCode = kerr.InvalidRecord.Code
				continue
			}
			guard, code := m.verifyTxn(ctx, req.TransactionID, p, rp.Records)
			if code != 0 {
				op.ErrorCode = code
				continue
			}
			code, info, epoch, gen := p.appendAsLeader(rp.Records, req.Acks, false, guard, nil)
			op.ErrorCode = code
			if code != 0 {
				continue
			}
			op.BaseOffset, op.LogStartOffset = info.FirstOffset, p.log.LogStartOffset()
			if req.Acks == -1 {
				pending = append(pending, pendingAck{p: p, resp: op, gen: gen, epoch: epoch, base: info.FirstOffset, last: info.LastOffset})
			} else if req.Acks == 1 {
				m.logAck(p, info.FirstOffset, info.LastOffset, epoch, 1)
			}
		}
		resp.Topics = append(resp.Topics, ot)
	}
	if req.Acks == 0 {
		return nil
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	deadline := time.Now().Add(timeout)
	for _, pa := range pending {
		code := pa.p.waitCommitted(ctx, pa.gen, pa.last, deadline)
		if pa.resp != nil {
			pa.resp.ErrorCode = code
			if code != 0 {
				pa.resp.BaseOffset = -1
			}
		}
		if code == 0 {
			m.logAck(pa.p, pa.base, pa.last, pa.epoch, -1)
		}
	}
	return resp
}

func (m *Manager) logAck(p *partition, base, last int64, epoch int32, acks int) {
	m.log.Emit(history.Event{Kind: history.KindProduceAck, Append: &history.Append{
		Topic: p.tp.Topic, Partition: p.tp.Partition, BaseOffset: base, LastOffset: last, LeaderEpoch: epoch, Acks: acks}})
}

// appendAsLeader is Partition.appendRecordsToLeader. fromCoordinator is
// AppendOrigin.Coordinator: the group coordinator's transactional offset
// commits carry base sequence 0 every time, so only their producer epoch
// is checked, never their sequence. guard is the verification a
// transactional produce carries (nil: none). seen, when not nil, gets
// what the producer state held for a marker's producer when it was
// checked.
func (p *partition) appendAsLeader(records []byte, acks int16, fromCoordinator bool, guard *verificationGuard, seen *ProducerView) (code int16, info storage.AppendInfo, epoch int32, gen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role != history.RoleLeader {
		return kerr.NotLeaderForPartition.Code, info, 0, 0
	}
	if acks == -1 && len(p.isr) < p.m.cfg.MinISR {
		return kerr.NotEnoughReplicas.Code, info, 0, 0
	}
	h, ok := storage.PeekHeader(records)
	if ok && h.IsControl() {
		m, _, err := storage.DecodeMarker(records)
		if err != nil {
			return kerr.CorruptMessage.Code, info, 0, 0
		}
		if e := p.producers[m.ProducerID]; e != nil && seen != nil {
			*seen = ProducerView{Known: true, Epoch: e.epoch, CoordinatorEpoch: e.coordinatorEpoch}
		}
		if code, reason := p.producers.checkMarker(m); code != 0 {
			p.m.log.Printf("%s: marker rejected: %s", p.tp, reason)
			return code, info, 0, 0
		}
	} else if ok && fromCoordinator {
		if code, reason := p.producers.checkFromCoordinator(h); code != 0 {
			p.m.log.Printf("%s: coordinator append rejected: %s", p.tp, reason)
			return code, info, 0, 0
		}
	} else if ok {
		dup, code, reason := p.producers.check(h)
		if code != 0 {
			p.m.log.Printf("%s: produce rejected: %s", p.tp, reason)
			if code == kerr.InvalidProducerEpoch.Code {
				p.logRefusalLocked(h, history.ProduceRefusal{Check: history.RefusedProducerEpoch,
					KnownProducerEpoch: p.producers[h.ProducerID].epoch, ErrorCode: code, Detail: reason})
			}
			return code, info, 0, 0
		}
		if dup != nil {
			// A retry of an appended batch: the original offsets, nothing
			// appended (Kafka answers a duplicate the same way since 1.0).
			info.FirstOffset, info.LastOffset = dup.firstOffset, dup.lastOffset
			return 0, info, p.leaderEpoch, p.leaderGen
		}
		if code, reason := p.checkVerifiedLocked(h, guard); code != 0 {
			p.m.log.Printf("%s: produce rejected: %s", p.tp, reason)
			p.logRefusalLocked(h, history.ProduceRefusal{Check: history.RefusedVerification, ErrorCode: code, Detail: reason})
			return code, info, 0, 0
		}
	}
	info, err := p.log.AppendAsLeader(records, p.leaderEpoch)
	switch {
	case err == nil:
	case errors.Is(err, storage.ErrCorruptBatch):
		return kerr.CorruptMessage.Code, info, 0, 0
	case errors.Is(err, storage.ErrBatchTooLarge):
		return kerr.MessageTooLarge.Code, info, 0, 0
	default:
		p.m.log.Printf("%s: append: %v", p.tp, err)
		return kerr.KafkaStorageError.Code, info, 0, 0
	}
	for _, w := range info.Warnings {
		p.m.log.Printf("%s: %s", p.tp, w)
	}
	if err := p.applyLocked(info.Headers, records); err != nil {
		// The batch was validated before the append: only a marker the
		// check above decoded can get here, so this cannot happen.
		p.m.log.Printf("%s: producer state after append: %v", p.tp, err)
	}
	ap := &history.Append{Topic: p.tp.Topic, Partition: p.tp.Partition, BaseOffset: info.FirstOffset, LastOffset: info.LastOffset,
		LeaderEpoch: p.leaderEpoch, Acks: int(acks)}
	// The producer's id and sequences and the record values say whose
	// batch this is, so that a checker can follow a producer's sequence
	// across leaders (KIP-98's promise that a new leader continues it).
	if ok && idempotent(h) {
		ap.Producer = &history.ProducerBatch{ID: h.ProducerID, Epoch: h.ProducerEpoch, FirstSeq: h.BaseSequence, LastSeq: lastSeqOf(h),
			Transactional: h.IsTransactional()}
	}
	// An internal topic's values are the coordinator's binary records, not
	// a client's: nothing a checker matches.
	if vs, vok := storage.RecordValues(records); vok && !IsInternal(p.tp.Topic) && !h.IsControl() {
		ap.Values = vs
	}
	p.m.log.Emit(history.Event{Kind: history.KindProduceAppend, Append: ap})
	p.maybeIncrementHWLocked()
	p.notifyLocked()
	return 0, info, p.leaderEpoch, p.leaderGen
}

// waitCommitted is DelayedProduce: wait until the HW passes last. If the ISR
// is then below min.insync.replicas the answer is
// NOT_ENOUGH_REPLICAS_AFTER_APPEND (Partition.checkEnoughReplicasReachOffset).
// The deadline answers REQUEST_TIMED_OUT. Losing leadership (a new leader
// epoch while still leading is fine: a leader never truncates) answers
// NOT_LEADER_OR_FOLLOWER, as checkEnoughReplicasReachOffset does without a
// leader log, although the record may survive on the new leader; the
// ack-timeout-on-leader-loss proposal answers REQUEST_TIMED_OUT there.
func (p *partition) waitCommitted(ctx context.Context, gen uint64, last int64, deadline time.Time) int16 {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for {
		p.mu.Lock()
		if p.role != history.RoleLeader || p.leaderGen != gen {
			p.mu.Unlock()
			if p.m.cfg.Proposals.On(config.ProposalAckTimeoutOnLeaderLoss) {
				return kerr.RequestTimedOut.Code
			}
			return kerr.NotLeaderForPartition.Code
		}
		if p.hw > last {
			code := int16(0)
			if len(p.isr) < p.m.cfg.MinISR {
				code = kerr.NotEnoughReplicasAfterAppend.Code
			}
			p.mu.Unlock()
			return code
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-t.C:
			return kerr.RequestTimedOut.Code
		case <-ctx.Done():
			return kerr.RequestTimedOut.Code
		}
	}
}

// Fetch is KafkaApis.handleFetchRequest: a replica fetch (ReplicaID >= 0)
// reads up to the LEO and updates the leader's view of that follower; a
// consumer fetch reads up to the HW. Both long-poll up to MaxWaitMillis when
// there is nothing to return.
func (m *Manager) Fetch(ctx context.Context, req *kmsg.FetchRequest) kmsg.Response {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(req.Version)
	replica := req.ReplicaID >= 0
	if req.Version >= 7 && req.SessionID != 0 {
		// No fetch sessions are ever created (every answer carries
		// SessionID 0), so any session a client names is unknown.
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp
	}
	now := time.Now()
	type slot struct {
		p   *partition
		in  *kmsg.FetchRequestTopicPartition
		out *kmsg.FetchResponseTopicPartition
	}
	var slots []slot
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		ot := kmsg.NewFetchResponseTopic()
		ot.Topic = rt.Topic
		ot.Partitions = make([]kmsg.FetchResponseTopicPartition, len(rt.Partitions))
		resp.Topics = append(resp.Topics, ot)
	}
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		for pi := range rt.Partitions {
			in := &rt.Partitions[pi]
			out := &resp.Topics[ti].Partitions[pi]
			*out = kmsg.NewFetchResponseTopicPartition()
			out.Partition, out.HighWatermark, out.LastStableOffset, out.LogStartOffset = in.Partition, -1, -1, -1
			p, code := m.hosted(history.TP(rt.Topic, in.Partition))
			if p == nil {
				out.ErrorCode = code
				continue
			}
			p.mu.Lock()
			code = p.leaderCheckLocked(in.CurrentLeaderEpoch)
			if replica && in.CurrentLeaderEpoch >= 0 && in.CurrentLeaderEpoch != p.leaderEpoch {
				// The KIP-320 check had something to judge: the harness
				// counts these as the fetch-leader-epoch fence's inputs.
				p.m.log.Emit(history.Event{Kind: history.KindReplicaFetch, ReplicaFetch: &history.ReplicaFetch{
					Topic: rt.Topic, Partition: in.Partition, Replica: req.ReplicaID,
					CurrentLeaderEpoch: in.CurrentLeaderEpoch, LeaderEpoch: p.leaderEpoch, ErrorCode: code}})
			}
			if code == 0 && (in.FetchOffset < p.log.LogStartOffset() || in.FetchOffset > p.log.LogEndOffset()) {
				code = kerr.OffsetOutOfRange.Code
				if !replica {
					p.logConsumerOutOfRangeLocked(in)
				}
			}
			if code == 0 && replica {
				if _, ok := p.followers[req.ReplicaID]; ok {
					p.updateFollowerLocked(req.ReplicaID, in.FetchOffset, now)
				}
			}
			p.mu.Unlock()
			out.ErrorCode = code
			if code == 0 {
				slots = append(slots, slot{p, in, out})
			}
		}
	}
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 1 << 20
	}
	read := func() int {
		total := 0
		for _, s := range slots {
			s.p.mu.Lock()
			// ReplicaManager.readFromLocalLog checks leadership and the
			// epoch on every read, so a long poll that outlives this
			// replica's leadership, or the client's leader epoch, is
			// answered with the error (DelayedFetch.tryComplete completes
			// it at once), not with the next leadership's records.
			code := s.p.leaderCheckLocked(s.in.CurrentLeaderEpoch)
			hw, lso, start := s.p.hw, s.p.lsoLocked(), s.p.log.LogStartOffset()
			s.p.mu.Unlock()
			if code != 0 {
				s.out.ErrorCode, s.out.RecordBatches = code, nil
				s.out.HighWatermark, s.out.LastStableOffset, s.out.LogStartOffset = -1, -1, -1
				s.out.AbortedTransactions = nil
				continue
			}
			// Kafka's FetchIsolation: a replica reads to the log end, a
			// read_uncommitted consumer to the HW, a read_committed one
			// to the LSO and is told which transactions below it aborted.
			limit := hw
			committed := !replica && req.IsolationLevel == 1
			switch {
			case replica:
				limit = -1
			case committed:
				limit = lso
			}
			pmax := min(int(s.in.PartitionMaxBytes), maxBytes-total)
			s.out.HighWatermark, s.out.LastStableOffset, s.out.LogStartOffset = hw, lso, start
			s.out.AbortedTransactions = nil
			if committed {
				s.out.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			}
			if total > 0 && pmax <= 0 {
				// Only the response's first batch may exceed the limits (KIP-74).
				s.out.RecordBatches = nil
				continue
			}
			data, err := s.p.log.Read(s.in.FetchOffset, pmax, limit)
			if err != nil {
				if errors.Is(err, storage.ErrOffsetOutOfRange) {
					s.out.ErrorCode = kerr.OffsetOutOfRange.Code
					if !replica {
						s.p.mu.Lock()
						s.p.logConsumerOutOfRangeLocked(s.in)
						s.p.mu.Unlock()
					}
				} else {
					s.out.ErrorCode = kerr.KafkaStorageError.Code
				}
				s.out.RecordBatches = nil
				continue
			}
			s.out.RecordBatches = data
			total += len(data)
			if committed && len(data) > 0 {
				s.out.AbortedTransactions = s.p.abortedFetched(s.in.FetchOffset, data)
			}
		}
		return total
	}
	defer func() {
		// Kafka never sends null records (kafka-python cannot read them).
		for ti := range resp.Topics {
			for pi := range resp.Topics[ti].Partitions {
				if o := &resp.Topics[ti].Partitions[pi]; o.RecordBatches == nil {
					o.RecordBatches = []byte{}
				}
			}
		}
	}()
	wait := min(time.Duration(req.MaxWaitMillis)*time.Millisecond, maxFetchWait)
	deadline := time.Now().Add(wait)
	for {
		var chans []chan struct{}
		for _, s := range slots {
			s.p.mu.Lock()
			chans = append(chans, s.p.changed)
			s.p.mu.Unlock()
		}
		n, failed := read(), false
		for _, s := range slots {
			failed = failed || s.out.ErrorCode != 0
		}
		if n > 0 || n >= int(req.MinBytes) || len(slots) == 0 || failed || !time.Now().Before(deadline) {
			break
		}
		if !waitAny(ctx, chans, deadline) {
			read()
			break
		}
	}
	return resp
}

// waitAny waits until one of chans is closed (true) or the deadline or ctx
// (false).
func waitAny(ctx context.Context, chans []chan struct{}, deadline time.Time) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	if len(chans) == 1 {
		select {
		case <-chans[0]:
			return true
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	any := make(chan struct{})
	stop := make(chan struct{})
	defer close(stop)
	for _, c := range chans {
		go func(c chan struct{}) {
			select {
			case <-c:
				select {
				case any <- struct{}{}:
				case <-stop:
				}
			case <-stop:
			}
		}(c)
	}
	select {
	case <-any:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// answerLocked is the part of a one-partition answer ListOffsets and
// OffsetForLeaderEpoch share: hosted's error for a partition this process
// does not host, else answer's error code, answer run under the
// partition's lock. anyLog serves a log loaded at start-up that no
// LeaderAndIsr has put in memory yet: the debugging replica id's
// ListOffsets, which only the node's query-leo election (not Kafka's) asks.
func (m *Manager) answerLocked(tp history.TopicPartition, anyLog bool, answer func(p *partition) int16) int16 {
	p, code := m.hosted(tp)
	if p == nil && anyLog {
		p = m.get(tp)
	}
	if p == nil {
		return code
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return answer(p)
}

// ListOffsets is KafkaApis.handleListOffsetRequestV1AndAbove →
// Partition.fetchOffsetForTimestamp: earliest (-2) and latest (-1) only.
// Every replica id but the debugging id -2 (the controller's query-leo) must
// ask the leader (fetchOnlyFromLeader), and every caller's current leader
// epoch is checked; a consumer (ReplicaID -1) gets the HW as latest, any
// other id the LEO. A follower handling an out-of-range fetch therefore
// never truncates to the LEO of a replica that has stopped leading.
func (m *Manager) ListOffsets(req *kmsg.ListOffsetsRequest) kmsg.Response {
	resp := kmsg.NewPtrListOffsetsResponse()
	resp.SetVersion(req.Version)
	for _, rt := range req.Topics {
		ot := kmsg.NewListOffsetsResponseTopic()
		ot.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			op := kmsg.NewListOffsetsResponseTopicPartition()
			op.Partition, op.Timestamp, op.Offset, op.LeaderEpoch = rp.Partition, -1, -1, -1
			op.ErrorCode = m.answerLocked(history.TP(rt.Topic, rp.Partition), req.ReplicaID == debuggingReplicaID, func(p *partition) int16 {
				consumer := req.ReplicaID == -1
				op.ErrorCode = p.localLogCheckLocked(rp.CurrentLeaderEpoch, req.ReplicaID != debuggingReplicaID)
				if op.ErrorCode == 0 {
					op.LeaderEpoch = p.leaderEpoch
					if op.LeaderEpoch < 0 {
						op.LeaderEpoch = p.log.LatestEpoch()
					}
					switch rp.Timestamp {
					case -2:
						op.Offset = p.log.LogStartOffset()
					case -1:
						op.Offset = p.log.LogEndOffset()
						if consumer {
							op.Offset = p.hw
						}
						if consumer && req.Version >= 2 && req.IsolationLevel == 1 {
							// read_committed: latest is the LSO.
							op.Offset = p.lsoLocked()
						}
						if consumer && p.hw < p.epochStart {
							// KIP-207: a new leader whose HW has not yet reached
							// the start of its epoch would answer an offset
							// that can move backwards; the client retries.
							op.ErrorCode, op.Offset, op.LeaderEpoch = kerr.OffsetNotAvailable.Code, -1, -1
						}
					default:
						// No time index: no offset for a timestamp.
					}
					if req.Version == 0 && op.Offset >= 0 {
						op.OldStyleOffsets = []int64{op.Offset}
					}
				}
				if consumer {
					p.logConsumerListOffsetsLocked(rp, &op)
				}
				return op.ErrorCode
			})
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp
}

// OffsetForLeaderEpoch is KafkaApis.handleOffsetForLeaderEpochRequest →
// ReplicaManager.lastOffsetForLeaderEpoch: Kafka 2.6.3 serves it from the
// leader only, whatever replica id the request carries
// (fetchOnlyFromLeader = true), after the current-leader-epoch check.
func (m *Manager) OffsetForLeaderEpoch(req *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	resp.SetVersion(req.Version)
	for _, rt := range req.Topics {
		ot := kmsg.NewOffsetForLeaderEpochResponseTopic()
		ot.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			op := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			op.Partition, op.LeaderEpoch, op.EndOffset = rp.Partition, -1, -1
			op.ErrorCode = m.answerLocked(history.TP(rt.Topic, rp.Partition), false, func(p *partition) int16 {
				op.ErrorCode = p.leaderCheckLocked(rp.CurrentLeaderEpoch)
				if op.ErrorCode == 0 {
					op.LeaderEpoch, op.EndOffset = p.log.EndOffsetFor(rp.LeaderEpoch)
				}
				return op.ErrorCode
			})
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp
}

// Metadata answers from the metadata cache UpdateMetadata fills
// (MetadataCache.getTopicMetadata).
func (m *Manager) Metadata(req *kmsg.MetadataRequest) kmsg.Response {
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(req.Version)
	brokers, parts := m.meta.Snapshot()
	resp.ControllerID = m.meta.Controller()
	ids := make([]int32, 0, len(brokers))
	for id := range brokers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		b := brokers[id]
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = b.ID, b.Host, b.Port
		resp.Brokers = append(resp.Brokers, mb)
	}
	byTopic := map[string][]history.PartitionState{}
	for _, ps := range parts {
		byTopic[ps.Topic] = append(byTopic[ps.Topic], ps)
	}
	var topics []string
	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		for t := range byTopic {
			topics = append(topics, t)
		}
		sort.Strings(topics)
	} else {
		for _, t := range req.Topics {
			if t.Topic != nil {
				topics = append(topics, *t.Topic)
			}
		}
	}
	for _, t := range topics {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = kmsg.StringPtr(t)
		mt.IsInternal = IsInternal(t)
		ps := byTopic[t]
		if len(ps) == 0 {
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i].Partition < ps[j].Partition })
		for _, s := range ps {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.Leader, mp.LeaderEpoch = s.Partition, s.Leader, s.LeaderEpoch
			mp.Replicas, mp.ISR = slices.Clone(s.Replicas), slices.Clone(s.ISR)
			if mp.Replicas == nil {
				mp.Replicas = []int32{}
			}
			if mp.ISR == nil {
				mp.ISR = []int32{}
			}
			for _, r := range s.Replicas {
				if _, live := brokers[r]; !live {
					mp.OfflineReplicas = append(mp.OfflineReplicas, r)
				}
			}
			if s.Leader < 0 {
				mp.ErrorCode = kerr.LeaderNotAvailable.Code
			} else if _, live := brokers[s.Leader]; !live {
				mp.ErrorCode = kerr.LeaderNotAvailable.Code
				mp.Leader = -1
			}
			mt.Partitions = append(mt.Partitions, mp)
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp
}
