package dataplane

import (
	"context"
	"errors"
	"fmt"
	"github.com/twmb/franz-go/pkg/kerr"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/failpoint"
	"github.com/zkchaos/zkchaos/node/storage"
	"github.com/zkchaos/zkchaos/node/wire"
)

// replicaFetchMaxBytes is replica.fetch.max.bytes.
const replicaFetchMaxBytes = 1 << 20

// fetcher is one follower partition's ReplicaFetcherThread: it first
// truncates (KIP-101/KIP-279), then fetches from the leader with
// ReplicaID = own id and appends what it gets.
type fetcher struct {
	p      *partition
	leader int32
	epoch  int32
	addr   string

	cancel context.CancelFunc
	done   chan struct{}
	ctx    context.Context
}

func newFetcher(parent context.Context, p *partition, leader, epoch int32, addr string) *fetcher {
	ctx, cancel := context.WithCancel(parent)
	return &fetcher{p: p, leader: leader, epoch: epoch, addr: addr, done: make(chan struct{}), ctx: ctx, cancel: cancel}
}

func (f *fetcher) stop() {
	f.cancel()
	<-f.done
}

func (f *fetcher) logf(format string, args ...any) {
	f.p.m.log.Printf("fetcher %s (leader %d, epoch %d): %s", f.p.tp, f.leader, f.epoch, fmt.Sprintf(format, args...))
}

// run runs the fetcher until stop.
func (f *fetcher) run() {
	defer close(f.done)
	defer f.cancel()
	f.loop(f.ctx)
}

// current reports whether f is still the partition's fetcher; caller holds p.mu.
func (f *fetcher) currentLocked() bool {
	return f.p.fetcher == f && f.ctx.Err() == nil && f.p.role == history.RoleFollower && f.p.leaderEpoch == f.epoch
}

func (f *fetcher) loop(ctx context.Context) {
	m := f.p.m
	cl := (*wire.Client)(nil)
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	backoff := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(200 * time.Millisecond):
			return true
		}
	}
	truncated := false
	for ctx.Err() == nil {
		if cl == nil {
			addr := f.addr
			if addr == "" {
				if b, ok := m.meta.Broker(f.leader); ok {
					addr = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
				}
			}
			if addr == "" {
				if !backoff() {
					return
				}
				continue
			}
			cl = wire.NewClient(addr, fmt.Sprintf("replica-%d", m.cfg.BrokerID))
		}
		if !truncated {
			if err := f.truncate(ctx, cl); err != nil {
				if ctx.Err() == nil {
					f.logf("truncation: %v", err)
				}
				if !backoff() {
					return
				}
				continue
			}
			truncated = true
			if err := m.cfg.Failpoints.Eval(ctx, failpoint.FollowerAfterTruncation); err != nil {
				f.logf("%v: first fetch after truncation deferred by one backoff", err)
				if !backoff() {
					return
				}
				continue
			}
		}
		outOfRange, err := f.fetchOnce(ctx, cl)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			f.logf("%v", err)
		}
		if outOfRange {
			// ReplicaFetcherThread.handleOffsetOutOfRange: truncate to the
			// leader's log end offset if ours is beyond it.
			if err := f.handleOutOfRange(ctx, cl); err != nil && ctx.Err() == nil {
				f.logf("offset out of range: %v", err)
			}
		}
		if err != nil && !backoff() {
			return
		}
	}
}

// truncate is the follower's truncation on becoming follower
// (AbstractFetcherThread.maybeTruncate, KIP-101/KIP-279): ask the leader for
// the end offset of our latest epoch (OffsetForLeaderEpoch) and cut the log
// as getOffsetTruncationState says, round after round while the leader
// answers with an epoch we do not have; without epoch information, cut at
// the high watermark (truncateToHighWatermark).
func (f *fetcher) truncate(ctx context.Context, cl *wire.Client) error {
	p := f.p
	for {
		latest := p.log.LatestEpoch()
		var target int64
		var reason string
		done := true
		if latest == storage.UndefinedEpoch {
			p.mu.Lock()
			target, reason = p.hw, "high-watermark (no local leader epoch)"
			p.mu.Unlock()
		} else {
			req := offsetForLeaderEpochRequest(p.m.cfg.BrokerID, p.tp, f.epoch, latest)
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			resp, err := cl.Request(rctx, req)
			cancel()
			if err != nil {
				return fmt.Errorf("OffsetForLeaderEpoch: %w", err)
			}
			r := resp.(*kmsg.OffsetForLeaderEpochResponse)
			if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
				return errors.New("OffsetForLeaderEpoch: malformed response")
			}
			pr := r.Topics[0].Partitions[0]
			if pr.ErrorCode != 0 {
				return fmt.Errorf("OffsetForLeaderEpoch: error %d", pr.ErrorCode)
			}
			target, reason, done = f.truncationTarget(latest, pr.LeaderEpoch, pr.EndOffset)
		}
		p.mu.Lock()
		if !f.currentLocked() {
			p.mu.Unlock()
			return context.Canceled
		}
		from := p.log.LogEndOffset()
		// Partition.truncateTo is called whatever the target: Log.truncateTo
		// at or past the LEO still drops epoch entries starting at the LEO
		// (an epoch this replica led without appending), which the next
		// round must not ask about again.
		err := f.truncateLocked(from, target, reason)
		if err == nil && p.log.LogEndOffset() < from {
			p.notifyLocked()
		}
		p.mu.Unlock()
		if err != nil || done {
			return err
		}
		if now := p.log.LatestEpoch(); now >= latest {
			// Each round cuts the log at the start of an epoch after the
			// one the leader answered, so the latest epoch falls. If it
			// did not (unreachable with a sound epoch cache), Kafka would
			// ask the same question forever; stop and fetch instead.
			f.logf("truncation to %d left latest epoch %d (asked about %d): truncation ends here", target, now, latest)
			return nil
		}
	}
}

// truncationTarget is AbstractFetcherThread.getOffsetTruncationState: where
// to cut the log after the leader answered (leaderEpoch, leaderEnd) for our
// latest epoch asked, and whether that completes truncation.
func (f *fetcher) truncationTarget(asked, leaderEpoch int32, leaderEnd int64) (target int64, reason string, done bool) {
	p := f.p
	leo := p.log.LogEndOffset()
	switch {
	case leaderEnd < 0:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.hw, "high-watermark (leader has no epoch information)", true
	case leaderEpoch < 0:
		return min(leaderEnd, leo), fmt.Sprintf("leader-epoch (leader's offset %d without an epoch)", leaderEnd), true
	}
	ownEpoch, ownEnd := p.log.EndOffsetFor(leaderEpoch)
	switch {
	case ownEnd < 0:
		// We track no epoch at or below the leader's: its offset is safe.
		return min(leaderEnd, leo), fmt.Sprintf("leader-epoch (leader answered epoch %d end offset %d for our epoch %d, below every epoch we have)",
			leaderEpoch, leaderEnd, asked), true
	case ownEpoch != leaderEpoch:
		return min(ownEnd, leo), fmt.Sprintf("leader-epoch (leader answered epoch %d, unknown here, for our epoch %d: cut at the end %d of our epoch %d and ask again)",
			leaderEpoch, asked, ownEnd, ownEpoch), false
	default:
		return min(ownEnd, leaderEnd, leo), fmt.Sprintf("leader-epoch (leader's end offset %d for epoch %d, ours %d)", leaderEnd, leaderEpoch, ownEnd), true
	}
}

// truncateLocked cuts the log, which ends at from, back to target for
// reason: the truncation is recorded, the producer states are rebuilt
// from what is left and the high watermark lowered to the new end. The
// record is written before the log is cut, not after: a SIGKILL landing
// while the cut is under way (TruncateTo fsyncs four files) would
// otherwise leave a restarted broker with a shorter log than its history
// shows and no truncation to say why, and the checkers would judge it by
// records it no longer has. p.mu is held.
func (f *fetcher) truncateLocked(from, target int64, reason string) error {
	p := f.p
	to, err := p.log.TruncateToRecording(target, func(to int64) {
		f.logf("truncating log from %d to %d: %s", from, to, reason)
		p.m.log.Emit(history.Event{Kind: history.KindTruncation, Truncation: &history.Truncation{
			Topic: p.tp.Topic, Partition: p.tp.Partition, From: from, To: to, Reason: reason, LeaderEpoch: f.epoch}})
	})
	if err != nil {
		return fmt.Errorf("truncate to %d: %w", target, err)
	}
	if to >= from {
		return nil
	}
	if err := p.rebuildProducersLocked(); err != nil {
		return err
	}
	if p.hw > to {
		p.setHWLocked(to)
	}
	return nil
}

// handleOutOfRange asks the leader for its log start and end offsets
// (ListOffsets with our replica id) and truncates to its end if our log is
// longer, or restarts the log at its start if ours ends before it.
func (f *fetcher) handleOutOfRange(ctx context.Context, cl *wire.Client) error {
	p := f.p
	ask := func(ts int64) (int64, error) {
		req := listOffsetsRequest(p.m.cfg.BrokerID, p.tp, ts, f.epoch)
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := cl.Request(rctx, req)
		if err != nil {
			return 0, err
		}
		r := resp.(*kmsg.ListOffsetsResponse)
		if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			return 0, errors.New("ListOffsets: malformed response")
		}
		if c := r.Topics[0].Partitions[0].ErrorCode; c != 0 {
			return 0, fmt.Errorf("ListOffsets: error %d", c)
		}
		return r.Topics[0].Partitions[0].Offset, nil
	}
	leaderEnd, err := ask(-1)
	if err != nil {
		return err
	}
	leaderStart, err := ask(-2)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !f.currentLocked() {
		return context.Canceled
	}
	from := p.log.LogEndOffset()
	switch {
	case from > leaderEnd:
		reason := fmt.Sprintf("offset-out-of-range (leader's log end offset %d)", leaderEnd)
		if err := f.truncateLocked(from, leaderEnd, reason); err != nil {
			return err
		}
	case from < leaderStart:
		// Recorded before the log is emptied, as truncateLocked records.
		reason := fmt.Sprintf("offset-out-of-range (behind the leader's log start %d)", leaderStart)
		f.logf("restarting log at %d (was [.., %d)): %s", leaderStart, from, reason)
		p.m.log.Emit(history.Event{Kind: history.KindTruncation, Truncation: &history.Truncation{
			Topic: p.tp.Topic, Partition: p.tp.Partition, From: from, To: leaderStart, Reason: reason, LeaderEpoch: f.epoch}})
		if err := p.log.TruncateFullyAndStartAt(leaderStart); err != nil {
			return err
		}
		p.producers, p.txns = producerStates{}, partitionTxns{}
		if p.hw < leaderStart {
			p.setHWLocked(leaderStart)
		}
	}
	p.notifyLocked()
	return nil
}

// fetchOnce sends one replica fetch and appends its records. outOfRange
// reports that the leader does not have our fetch offset.
func (f *fetcher) fetchOnce(ctx context.Context, cl *wire.Client) (outOfRange bool, err error) {
	p := f.p
	req := fetchRequest(12, p.m.cfg.BrokerID, p.tp, p.log.LogEndOffset(), replicaFetchMaxBytes)
	req.MaxWaitMillis = int32(p.m.cfg.FetchMaxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = replicaFetchMaxBytes
	req.SessionID, req.SessionEpoch = 0, -1
	rp := &req.Topics[0].Partitions[0]
	rp.CurrentLeaderEpoch = f.epoch
	rp.LogStartOffset = p.log.LogStartOffset()
	rctx, cancel := context.WithTimeout(ctx, p.m.cfg.FetchMaxWait+10*time.Second)
	resp, err := cl.Request(rctx, req)
	cancel()
	if err != nil {
		return false, fmt.Errorf("fetch at %d: %w", rp.FetchOffset, err)
	}
	r := resp.(*kmsg.FetchResponse)
	if r.ErrorCode != 0 {
		return false, fmt.Errorf("fetch: error %d", r.ErrorCode)
	}
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return false, errors.New("fetch: malformed response")
	}
	pr := &r.Topics[0].Partitions[0]
	switch pr.ErrorCode {
	case 0:
	case kerr.OffsetOutOfRange.Code:
		return true, fmt.Errorf("fetch at %d: offset out of range on the leader", rp.FetchOffset)
	default:
		return false, fmt.Errorf("fetch at %d: error %d", rp.FetchOffset, pr.ErrorCode)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !f.currentLocked() {
		return false, context.Canceled
	}
	if p.log.LogEndOffset() != rp.FetchOffset {
		return false, nil // truncated meanwhile; fetch again from the new end
	}
	if len(pr.RecordBatches) > 0 {
		info, err := p.log.AppendAsFollower(pr.RecordBatches)
		if err != nil {
			return false, err
		}
		if err := p.applyLocked(info.Headers, pr.RecordBatches); err != nil {
			return false, err
		}
	}
	// Follower HW = min(leader HW, own LEO); it moves with the leader's,
	// which only grows while this leader leads.
	hw := min(pr.HighWatermark, p.log.LogEndOffset())
	if hw > p.hw {
		p.setHWLocked(hw)
	}
	if len(pr.RecordBatches) > 0 || hw != p.hw {
		p.notifyLocked()
	}
	return false, nil
}
