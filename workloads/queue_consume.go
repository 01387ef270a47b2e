package workloads

// The queue workload's consumers: group members, which commit what they
// polled, and assigning consumers.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
)

// Bounds of one poll: how long it waits for records and how many it takes.
const (
	pollWait       = 500 * time.Millisecond
	pollMaxRecords = 256
)

// queueConsumer is one polling process. A group member (subscribe) polls
// with rebalances blocked until it has recorded the poll and committed
// what it returned (kgo.BlockRebalanceOnPoll), so a poll's records, the
// generation and the partitions it records are one assignment's. An
// assigning consumer starts each assignment where its previous read of
// each partition stopped.
type queueConsumer struct {
	cfg       QueueConfig
	w         *history.Writer
	proc      int
	rng       *rand.Rand
	subscribe bool
	kc        *kgo.Client
	writes    commitWrites // a member's OffsetCommit requests written to a broker
	until     time.Time    // when the consumer next leaves or reassigns (zero: a member not yet given partitions)

	mu   sync.Mutex
	held map[int32]bool // a member's partitions, kept by kgo's callbacks

	epoch int
	keys  []int32         // an assigning consumer's partitions
	next  map[int32]int64 // an assigning consumer's next offset per partition
}

func (c *queueConsumer) write(op history.QueueOp) {
	c.w.Write(history.Event{Kind: history.KindQueueOp, Queue: &op})
}

func (c *queueConsumer) run(ctx context.Context) error {
	due := time.Now()
	defer c.close()
	for ctx.Err() == nil {
		if c.kc == nil {
			var err error
			if c.subscribe {
				err = c.join()
			} else {
				err = c.assign()
			}
			if err != nil {
				return err
			}
			c.until = time.Time{}
			if !c.subscribe {
				c.until = c.churnFrom(time.Now())
			}
		}
		asg := c.poll(ctx)
		if c.until.IsZero() && asg.Generation >= 0 && len(asg.Keys) > 0 {
			// A member's time in the group counts from its first
			// assignment: a join waits out the coordinator's initial
			// rebalance delay (3 s in Kafka) and every member's rejoin,
			// and a member that left before it was given partitions would
			// leave the group without a generation to judge.
			c.until = c.churnFrom(time.Now())
		}
		if !c.until.IsZero() && time.Now().After(c.until) {
			// Leave (a member's client leaves its group on close) and,
			// for a member, stay away a moment so the group rebalances
			// without it first.
			c.close()
			if c.subscribe {
				sleepCtx(ctx, time.Duration(200+c.rng.IntN(800))*time.Millisecond)
			}
		}
		pace(ctx, &due, c.cfg.PollEvery)
	}
	return nil
}

// churnFrom is when a consumer that got its assignment at t leaves it.
func (c *queueConsumer) churnFrom(t time.Time) time.Time {
	return t.Add(time.Duration((0.5 + c.rng.Float64()) * float64(c.cfg.Churn)))
}

func (c *queueConsumer) close() {
	if c.kc == nil {
		return
	}
	if c.subscribe {
		c.kc.CloseAllowingRebalance()
	} else {
		c.kc.Close()
	}
	c.kc = nil
	c.mu.Lock()
	clear(c.held)
	c.mu.Unlock()
}

// join makes a group member's client; it joins on its first poll.
func (c *queueConsumer) join() error {
	keep := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, p := range m[c.cfg.Topic] {
				if add {
					c.held[p] = true
				} else {
					delete(c.held, p)
				}
			}
		}
	}
	opts := append(queueClientOpts(c.cfg),
		kgo.ConsumerGroup(c.cfg.Group),
		kgo.ConsumeTopics(c.cfg.Topic),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		// An eager protocol: every rebalance revokes everything, and a
		// member resumes each partition it is given from the committed
		// offset, the position the checkers hold it to.
		kgo.Balancers(kgo.RangeBalancer()),
		kgo.OnPartitionsAssigned(keep(true)),
		kgo.OnPartitionsRevoked(keep(false)),
		kgo.OnPartitionsLost(keep(false)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(c.cfg.isolationLevel()),
		kgo.FetchMaxWait(pollWait),
		kgo.SessionTimeout(6*time.Second),
		kgo.HeartbeatInterval(time.Second),
		kgo.RebalanceTimeout(10*time.Second),
		kgo.WithHooks(&c.writes),
	)
	kc, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("queue consumer %d: %w", c.proc, err)
	}
	c.kc = kc
	return nil
}

// assign picks a new set of partitions, each read from where this
// process's last read of it stopped (offset 0 at first), recorded as an
// assign operation.
func (c *queueConsumer) assign() error {
	c.keys = c.keys[:0]
	for p := range c.cfg.Partitions {
		if c.rng.IntN(2) == 0 {
			c.keys = append(c.keys, p)
		}
	}
	if len(c.keys) == 0 {
		c.keys = append(c.keys, c.rng.Int32N(c.cfg.Partitions))
	}
	c.epoch++
	inv := history.QueueOp{Type: history.OpInvoke, Process: c.proc, F: history.QueueAssign, Topic: c.cfg.Topic}
	from := map[int32]kgo.Offset{}
	for _, p := range c.keys {
		inv.Offsets = append(inv.Offsets, history.QueueOffset{Key: p, Offset: c.next[p]})
		from[p] = kgo.NewOffset().At(c.next[p])
	}
	c.write(inv)
	opts := append(queueClientOpts(c.cfg),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.cfg.Topic: from}),
		kgo.FetchIsolationLevel(c.cfg.isolationLevel()),
		kgo.FetchMaxWait(pollWait),
	)
	done := inv
	kc, err := kgo.NewClient(opts...)
	if err != nil {
		done.Type, done.Error = history.OpFail, err.Error()
		c.write(done)
		return fmt.Errorf("queue consumer %d: %w", c.proc, err)
	}
	done.Type = history.OpOK
	c.write(done)
	c.kc = kc
	return nil
}

// assignment is what the consumer holds now.
func (c *queueConsumer) assignment() *history.QueueAssignment {
	if !c.subscribe {
		return &history.QueueAssignment{Mode: history.QueueAssigned, Generation: -1, Epoch: c.epoch, Keys: slices.Clone(c.keys)}
	}
	member, gen := c.kc.GroupMetadata()
	c.mu.Lock()
	keys := make([]int32, 0, len(c.held))
	for p := range c.held {
		keys = append(keys, p)
	}
	c.mu.Unlock()
	slices.Sort(keys)
	return &history.QueueAssignment{Mode: history.QueueSubscribed, Group: c.cfg.Group, Member: member, Generation: gen, Keys: keys}
}

// poll records one poll, always as ok with whatever kgo returned: a poll
// changes nothing in the cluster, but it moves the consumer's position,
// so records it returned must be in the history even when it also
// reported errors. A member then commits what it polled and lets a
// rebalance proceed. It returns the assignment it recorded.
func (c *queueConsumer) poll(ctx context.Context) *history.QueueAssignment {
	inv := history.QueueOp{Type: history.OpInvoke, Process: c.proc, F: history.QueueTxn, Topic: c.cfg.Topic,
		Mops: []history.QueueMop{{F: history.MopPoll}}, Isolation: c.cfg.Isolation()}
	c.write(inv)
	pctx, cancel := context.WithTimeout(ctx, pollWait)
	fs := c.kc.PollRecords(pctx, pollMaxRecords)
	cancel()
	done := inv
	done.Type = history.OpOK
	done.Mops = []history.QueueMop{{F: history.MopPoll, Polled: polledOf(fs, c.cfg.Topic)}}
	for _, fe := range fs.Errors() {
		if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
			continue
		}
		if done.Error == "" {
			done.Error = fe.Err.Error()
			noteCode(&done, fe.Err)
		}
		var dl *kgo.ErrDataLoss
		if errors.As(fe.Err, &dl) && dl.Topic == c.cfg.Topic {
			done.DataLoss = append(done.DataLoss, history.QueueDataLoss{Key: dl.Partition,
				ConsumedTo: dl.ConsumedTo, ConsumedToEpoch: dl.ConsumedToEpoch, ResetTo: dl.ResetTo, ResetToEpoch: dl.ResetToEpoch})
		}
	}
	done.Assignment = c.assignment()
	c.write(done)
	polled := done.Mops[0].Polled
	if !c.subscribe {
		for _, p := range polled {
			c.next[p.Key] = p.Records[len(p.Records)-1].Offset + 1
		}
		return done.Assignment
	}
	if len(polled) > 0 {
		c.commit(ctx, polled, done.Assignment)
	}
	c.kc.AllowRebalance()
	return done.Assignment
}

// polledOf is what a poll returned of topic, per partition in the order
// kgo returned them; a value that is not an integer is recorded as -1.
func polledOf(fs kgo.Fetches, topic string) []history.QueuePoll {
	var out []history.QueuePoll
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if p.Topic != topic || len(p.Records) == 0 {
			return
		}
		qp := history.QueuePoll{Key: p.Partition}
		for _, r := range p.Records {
			qp.Records = append(qp.Records, history.QueueRecord{Offset: r.Offset, Value: parseValue(r.Value)})
		}
		out = append(out, qp)
	})
	return out
}

func parseValue(b []byte) int64 {
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return -1
	}
	return v
}

// commit commits the position after what a member polled, recorded as
// commitOutcome judges the client's answer and the number of OffsetCommit
// requests the client wrote for it (c.writes, counted by a hook on the
// member's client; only this commit writes OffsetCommit there meanwhile:
// autocommit is off and the process commits synchronously).
func (c *queueConsumer) commit(ctx context.Context, polled []history.QueuePoll, asg *history.QueueAssignment) {
	inv := history.QueueOp{Type: history.OpInvoke, Process: c.proc, F: history.QueueCommit, Topic: c.cfg.Topic, Assignment: asg}
	offs := map[int32]kgo.EpochOffset{}
	for _, p := range polled {
		o := p.Records[len(p.Records)-1].Offset + 1
		inv.Offsets = append(inv.Offsets, history.QueueOffset{Key: p.Key, Offset: o})
		offs[p.Key] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	c.write(inv)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.OpTimeout)
	defer cancel()
	done := inv
	before := c.writes.n.Load()
	c.kc.CommitOffsetsSync(cctx, map[string]map[int32]kgo.EpochOffset{c.cfg.Topic: offs},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			done.Type, done.ErrorCode, done.Error = commitOutcome(int(c.writes.n.Load()-before), resp, err)
		})
	c.write(done)
}

// commitWrites counts the OffsetCommit requests a client wrote to a broker,
// whole or in part (kgo.HookBrokerWrite; the hook runs before the
// request's response can be read, so before the commit's answer).
type commitWrites struct{ n atomic.Int64 }

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (w *commitWrites) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, bytesWritten int, _, _ time.Duration, _ error) {
	if key == int16(kmsg.OffsetCommit) && bytesWritten > 0 {
		w.n.Add(1)
	}
}

// definiteCommitRefusals are the OffsetCommit partition codes a group
// coordinator answers only before it appends anything to
// __consumer_offsets (Kafka 2.6.3; the node's group.Coordinator does the
// same): KafkaApis.handleOffsetCommitRequest's authorization and unknown
// topic answers; GroupCoordinator.validateGroupStatus's
// COORDINATOR_LOAD_IN_PROGRESS and INVALID_GROUP_ID; handleCommitOffsets'
// generation, member and rebalance checks; storeOffsets' metadata limit;
// and INVALID_COMMIT_OFFSET_SIZE, the append's own size validation
// refusing the batch. NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
// REQUEST_TIMED_OUT and UNKNOWN_SERVER_ERROR are not here: storeOffsets
// also answers them after the leader appended the commit and the wait for
// its followers (acks=-1) failed (NOT_LEADER_OR_FOLLOWER and
// KAFKA_STORAGE_ERROR become NOT_COORDINATOR,
// NOT_ENOUGH_REPLICAS_AFTER_APPEND becomes COORDINATOR_NOT_AVAILABLE, the
// wait's timeout is REQUEST_TIMED_OUT), and the appended record can still
// be replicated and read back.
var definiteCommitRefusals = map[int16]bool{
	kerr.TopicAuthorizationFailed.Code:  true,
	kerr.GroupAuthorizationFailed.Code:  true,
	kerr.UnknownTopicOrPartition.Code:   true,
	kerr.CoordinatorLoadInProgress.Code: true,
	kerr.InvalidGroupID.Code:            true,
	kerr.IllegalGeneration.Code:         true,
	kerr.UnknownMemberID.Code:           true,
	kerr.RebalanceInProgress.Code:       true,
	kerr.FencedInstanceID.Code:          true,
	kerr.OffsetMetadataTooLarge.Code:    true,
	kerr.InvalidCommitOffsetSize.Code:   true,
}

// commitOutcome is a commit's Jepsen type, the code that refused it and
// the error, from the client's answer (resp or err) and the number of its
// OffsetCommit requests the client wrote to a broker (delivered). kgo
// answers only the last attempt: it retries a request whose connection
// broke, and one whose first partition was answered NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS
// (handleReqWithCoordinator), and an earlier attempt may have been
// appended. So a commit is ok when every partition was accepted; fail only
// when nothing of it can have been written: no request reached a broker
// (the client's own refusals, a coordinator it could not reach), or the
// only one that did was refused with a definite refusal on every
// partition; info otherwise. A context error is info whatever was
// counted: it can end the wait while a write is under way.
func commitOutcome(delivered int, resp *kmsg.OffsetCommitResponse, err error) (history.OpType, int16, string) {
	if err != nil {
		if delivered == 0 && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			return history.OpFail, 0, err.Error()
		}
		return history.OpInfo, 0, err.Error()
	}
	var code int16
	var msg string
	accepted, definite := false, true
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 {
				accepted = true
				continue
			}
			if code == 0 {
				code, msg = p.ErrorCode, fmt.Sprintf("partition %d: error code %d", p.Partition, p.ErrorCode)
			}
			definite = definite && definiteCommitRefusals[p.ErrorCode]
		}
	}
	switch {
	case code == 0:
		return history.OpOK, 0, ""
	case delivered == 0 || (delivered == 1 && definite && !accepted):
		return history.OpFail, code, msg
	}
	return history.OpInfo, code, msg
}
