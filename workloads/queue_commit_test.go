package workloads

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
)

// commitResp is an OffsetCommit answer for partitions 0, 1, ... of topic q
// with the given codes.
func commitResp(codes ...int16) *kmsg.OffsetCommitResponse {
	resp := kmsg.NewPtrOffsetCommitResponse()
	t := kmsg.NewOffsetCommitResponseTopic()
	t.Topic = "q"
	for i, c := range codes {
		p := kmsg.NewOffsetCommitResponseTopicPartition()
		p.Partition, p.ErrorCode = int32(i), c
		t.Partitions = append(t.Partitions, p)
	}
	resp.Topics = append(resp.Topics, t)
	return resp
}

// A commit is fail only when no attempt of it can have been written to
// __consumer_offsets: none reached a broker, or the one that did was
// answered a code the coordinator gives only before it appends. Anything
// else, an answer after the local append or a retry after an earlier
// attempt the client heard nothing definite about, is info.
func TestCommitOutcome(t *testing.T) {
	code := func(e *kerr.Error) int16 { return e.Code }
	for _, tc := range []struct {
		name      string
		delivered int
		codes     []int16
		err       error
		want      history.OpType
		wantCode  int16
	}{
		{"accepted", 1, []int16{0, 0}, nil, history.OpOK, 0},
		{"accepted after a retry", 2, []int16{0}, nil, history.OpOK, 0},

		// Refusals GroupCoordinator.handleCommitOffsets and KafkaApis give
		// before storeOffsets appends anything.
		{"illegal generation", 1, []int16{code(kerr.IllegalGeneration)}, nil, history.OpFail, code(kerr.IllegalGeneration)},
		{"unknown member", 1, []int16{code(kerr.UnknownMemberID)}, nil, history.OpFail, code(kerr.UnknownMemberID)},
		{"rebalance in progress", 1, []int16{code(kerr.RebalanceInProgress), code(kerr.RebalanceInProgress)}, nil, history.OpFail, code(kerr.RebalanceInProgress)},
		{"fenced instance", 1, []int16{code(kerr.FencedInstanceID)}, nil, history.OpFail, code(kerr.FencedInstanceID)},
		{"coordinator loading", 1, []int16{code(kerr.CoordinatorLoadInProgress)}, nil, history.OpFail, code(kerr.CoordinatorLoadInProgress)},
		{"invalid group id", 1, []int16{code(kerr.InvalidGroupID)}, nil, history.OpFail, code(kerr.InvalidGroupID)},
		{"group authorization", 1, []int16{code(kerr.GroupAuthorizationFailed)}, nil, history.OpFail, code(kerr.GroupAuthorizationFailed)},
		{"topic authorization", 1, []int16{code(kerr.TopicAuthorizationFailed)}, nil, history.OpFail, code(kerr.TopicAuthorizationFailed)},
		{"unknown topic", 1, []int16{code(kerr.UnknownTopicOrPartition)}, nil, history.OpFail, code(kerr.UnknownTopicOrPartition)},
		{"metadata too large", 1, []int16{code(kerr.OffsetMetadataTooLarge)}, nil, history.OpFail, code(kerr.OffsetMetadataTooLarge)},
		{"batch too large", 1, []int16{code(kerr.InvalidCommitOffsetSize)}, nil, history.OpFail, code(kerr.InvalidCommitOffsetSize)},

		// Codes storeOffsets also answers after the local append, while
		// waiting for the followers (acks=-1): the record may survive.
		{"not coordinator", 1, []int16{code(kerr.NotCoordinator)}, nil, history.OpInfo, code(kerr.NotCoordinator)},
		{"coordinator not available", 1, []int16{code(kerr.CoordinatorNotAvailable)}, nil, history.OpInfo, code(kerr.CoordinatorNotAvailable)},
		{"request timed out", 1, []int16{code(kerr.RequestTimedOut)}, nil, history.OpInfo, code(kerr.RequestTimedOut)},
		{"unknown server error", 1, []int16{code(kerr.UnknownServerError)}, nil, history.OpInfo, code(kerr.UnknownServerError)},
		{"a code not known here", 1, []int16{code(kerr.KafkaStorageError)}, nil, history.OpInfo, code(kerr.KafkaStorageError)},

		// A definite refusal that answers a retry: the earlier attempt
		// reached a broker and may have been appended.
		{"illegal generation after a retry", 2, []int16{code(kerr.IllegalGeneration)}, nil, history.OpInfo, code(kerr.IllegalGeneration)},
		{"coordinator loading after a retry", 3, []int16{code(kerr.CoordinatorLoadInProgress)}, nil, history.OpInfo, code(kerr.CoordinatorLoadInProgress)},
		// One partition accepted: the commit was written in part.
		{"one partition accepted, one refused", 1, []int16{0, code(kerr.UnknownTopicOrPartition)}, nil, history.OpInfo, code(kerr.UnknownTopicOrPartition)},
		// The client answered without any request on the wire.
		{"refused by the client itself", 0, []int16{code(kerr.UnknownTopicID)}, nil, history.OpFail, code(kerr.UnknownTopicID)},

		// Errors instead of an answer.
		{"no broker reached", 0, nil, errors.New("unable to dial: connection refused"), history.OpFail, 0},
		{"not a group member's client", 0, nil, errors.New("invalid group function call when not assigned a group or looking for a group"), history.OpFail, 0},
		{"connection broke after the write", 1, nil, fmt.Errorf("read: %w", io.ErrUnexpectedEOF), history.OpInfo, 0},
		{"connection broke on every attempt", 3, nil, io.EOF, history.OpInfo, 0},
		// A timeout can end the wait while a write is under way, before
		// the write is counted.
		{"timed out before any write was counted", 0, nil, context.DeadlineExceeded, history.OpInfo, 0},
		{"timed out after a write", 1, nil, context.DeadlineExceeded, history.OpInfo, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var resp *kmsg.OffsetCommitResponse
			if tc.err == nil {
				resp = commitResp(tc.codes...)
			}
			typ, c, msg := commitOutcome(tc.delivered, resp, tc.err)
			if typ != tc.want || c != tc.wantCode {
				t.Errorf("%d delivered, codes %v, error %v: %s with code %d (%q), want %s with code %d", tc.delivered, tc.codes, tc.err, typ, c, msg, tc.want, tc.wantCode)
			}
			if typ != history.OpOK && msg == "" {
				t.Errorf("%s without an error message", typ)
			}
		})
	}
}

// A member's commit against kfake, its attempts answered in turn: the
// client retries after NOT_COORDINATOR, and the hook counts every attempt,
// so a definite refusal of a retry is recorded as info, and only a lone
// refused attempt as fail.
func TestQueueCommitRetriedRefusal(t *testing.T) {
	const drop = -100 // close the connection instead of answering
	for _, tc := range []struct {
		name    string
		answers []int16
		want    history.OpType
		// retried: the client may stop before using every answer (how
		// many times kgo retries a cut-off answer depends on whether the
		// connection was new).
		retried bool
	}{
		{"accepted", []int16{0}, history.OpOK, false},
		{"refused once", []int16{kerr.IllegalGeneration.Code}, history.OpFail, false},
		{"refused after NOT_COORDINATOR", []int16{kerr.NotCoordinator.Code, kerr.IllegalGeneration.Code}, history.OpInfo, false},
		// kgo does not retry a new connection's first answer cut off
		// (ErrFirstReadEOF) but retries one on a connection that had
		// answered before (the join's), so every attempt is cut off: the
		// client's error comes after at least one write.
		{"connection broken after the write", []int16{drop, drop, drop, drop, drop, drop, drop, drop, drop, drop}, history.OpInfo, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "q"))
			if err != nil {
				t.Fatal(err)
			}
			defer fake.Close()
			var mu sync.Mutex
			attempts := 0
			fake.ControlKey(int16(kmsg.OffsetCommit), func(r kmsg.Request) (kmsg.Response, error, bool) {
				fake.KeepControl()
				mu.Lock()
				defer mu.Unlock()
				if attempts >= len(tc.answers) {
					return nil, nil, false
				}
				a := tc.answers[attempts]
				attempts++
				if a == drop {
					return nil, errors.New("connection dropped"), true
				}
				req := r.(*kmsg.OffsetCommitRequest)
				resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
				resp.Version = req.Version
				for _, rt := range req.Topics {
					t := kmsg.NewOffsetCommitResponseTopic()
					t.Topic = rt.Topic
					for _, rp := range rt.Partitions {
						p := kmsg.NewOffsetCommitResponseTopicPartition()
						p.Partition, p.ErrorCode = rp.Partition, a
						t.Partitions = append(t.Partitions, p)
					}
					resp.Topics = append(resp.Topics, t)
				}
				return resp, nil, true
			})
			dir, open := historyDir(t)
			w, err := open("client-1")
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			cfg := QueueConfig{Brokers: fake.ListenAddrs(), Topic: "q", Partitions: 1, Group: DefaultQueueGroup, OpTimeout: 5 * time.Second, Seed: 1}
			c := &queueConsumer{cfg: cfg, w: w, proc: 1, subscribe: true, held: map[int32]bool{}}
			if err := c.join(); err != nil {
				t.Fatal(err)
			}
			defer c.close()
			c.commit(context.Background(), []history.QueuePoll{{Key: 0, Records: []history.QueueRecord{{Offset: 4, Value: 4}}}},
				&history.QueueAssignment{Mode: history.QueueSubscribed, Group: DefaultQueueGroup, Generation: -1, Keys: []int32{0}})
			w.Close()
			h, err := history.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			ops := history.QueueOperations(h)
			if len(ops) != 1 {
				t.Fatalf("%d queue ops, want the commit", len(ops))
			}
			mu.Lock()
			defer mu.Unlock()
			if got := ops[0].Outcome(); got != tc.want || attempts != len(tc.answers) && !(tc.retried && attempts >= 1) {
				t.Errorf("commit %s (%s) after %d attempts, want %s after %d", got, ops[0].Op().Error, attempts, tc.want, len(tc.answers))
			}
		})
	}
}
