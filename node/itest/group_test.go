package itest

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/dockertest"
	"github.com/zkchaos/zkchaos/nemesis"
)

const groupRecords = 60

// Consumer groups against three brokers (Kafka 2.6.3's GroupCoordinator on
// __consumer_offsets, created by the first FindCoordinator): a franz-go
// group of two members and a sarama ConsumerGroup of two members (protocol
// version 2.6.0) each consume every record of a three-partition topic and
// commit, and the coordinators log every request they answered.
func TestGroupConsumersReadEveryRecord(t *testing.T) {
	dockertest.Require(t)
	if testing.Short() {
		t.Skip("starts containers")
	}
	e := setupArgs(t, []string{"--group-initial-rebalance-delay=500ms"}, nil)
	ctx := ctxT(t)
	e.healthyTopic(3)
	kc := e.kgoClient(kgo.AllISRAcks(), time.Millisecond, 10)
	for i := 0; i < groupRecords; i++ {
		if err := kc.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 3), Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}

	t.Run("franz-go", func(t *testing.T) {
		seen := newSeen()
		newMember := func() *kgo.Client {
			cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers()...), kgo.MaxVersions(kversion.V2_6_0()),
				kgo.ConsumerGroup("kgo-group"), kgo.ConsumeTopics(dpTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.DisableAutoCommit(), kgo.SessionTimeout(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			return cl
		}
		a, b := newMember(), newMember()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, cl := range []*kgo.Client{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					pctx, cancel := context.WithTimeout(ctx, time.Second)
					fs := cl.PollFetches(pctx)
					cancel()
					fs.EachRecord(func(r *kgo.Record) { seen.add(string(r.Value)) })
					if len(fs.Records()) > 0 {
						if err := cl.CommitUncommittedOffsets(ctx); err != nil {
							t.Logf("commit: %v", err)
						}
					}
				}
			}()
		}
		seen.wait(t, ctx, "franz-go group")
		close(stop)
		wg.Wait()
		// The committed offsets, asked of the coordinator, cover every record.
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = "kgo-group"
		resp, err := a.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for _, rt := range resp.(*kmsg.OffsetFetchResponse).Topics {
			for _, rp := range rt.Partitions {
				sum += rp.Offset
			}
		}
		a.Close()
		b.Close()
		if sum != groupRecords {
			t.Fatalf("committed offsets add up to %d, want %d", sum, groupRecords)
		}
	})

	t.Run("sarama", func(t *testing.T) {
		seen := newSeen()
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V2_6_0_0
		cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
		cfg.Consumer.Offsets.AutoCommit.Interval = 200 * time.Millisecond
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
		var wg sync.WaitGroup
		cctx, cancel := context.WithCancel(ctx)
		for m := 0; m < 2; m++ {
			g, err := sarama.NewConsumerGroup(e.brokers(), "sarama-group", cfg)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer g.Close()
				for cctx.Err() == nil {
					if err := g.Consume(cctx, []string{dpTopic}, saramaHandler{seen}); err != nil && cctx.Err() == nil {
						t.Logf("sarama member %d: %v", m, err)
						time.Sleep(200 * time.Millisecond)
					}
				}
			}()
		}
		seen.wait(t, ctx, "sarama group")
		cancel()
		wg.Wait()
	})

	// The franz-go group's coordinator stops (SIGSTOP); its
	// __consumer_offsets partition moves to another broker, which loads
	// the group's commits from its log: a new member resumes where the
	// group left off and reads only records produced since.
	t.Run("coordinator paused", func(t *testing.T) {
		for i := groupRecords; i < 2*groupRecords; i++ {
			if err := kc.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 3), Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey = "kgo-group"
		resp, err := kc.Request(ctx, fc)
		if err != nil || resp.(*kmsg.FindCoordinatorResponse).ErrorCode != 0 {
			t.Fatalf("FindCoordinator: %+v %v", resp, err)
		}
		coord := int(resp.(*kmsg.FindCoordinatorResponse).NodeID)
		if err := nemesis.Pause(ctx, e.node(coord).Container); err != nil {
			t.Fatal(err)
		}
		defer nemesis.Resume(context.Background(), e.node(coord).Container)
		t.Logf("paused n%d, the coordinator of kgo-group", coord)
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers()...), kgo.MaxVersions(kversion.V2_6_0()),
			kgo.ConsumerGroup("kgo-group"), kgo.ConsumeTopics(dpTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DisableAutoCommit(), kgo.SessionTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		got := map[int]int{}
		deadline := time.Now().Add(90 * time.Second)
		for len(got) < groupRecords && time.Now().Before(deadline) {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			fs := cl.PollFetches(pctx)
			cancel()
			fs.EachRecord(func(r *kgo.Record) {
				v, _ := strconv.Atoi(string(r.Value))
				got[v]++
			})
		}
		for v, n := range got {
			if v < groupRecords {
				t.Errorf("record %d, committed before the coordinator stopped, read again (%d times)", v, n)
			}
		}
		if len(got) != groupRecords {
			t.Fatalf("read %d of the %d records produced since the commits", len(got), groupRecords)
		}
	})

	// Every coordinator answer is in the event log; the groups' commits
	// went through, and each group's coordinator loaded its partition.
	apis := map[string]int{}
	for id := 1; id <= 3; id++ {
		for _, ev := range e.events(id) {
			if ev.Kind == history.KindGroupRequest && ev.Group.ErrorCode == 0 {
				apis[ev.Group.API]++
			}
		}
	}
	t.Logf("group requests answered without error: %v", apis)
	for _, api := range []string{history.GroupAPIFindCoordinator, history.GroupAPIJoin, history.GroupAPISync, history.GroupAPIOffsetCommit,
		history.GroupAPIOffsetFetch, history.GroupAPIHeartbeat, history.GroupLoadPartition} {
		if apis[api] == 0 {
			t.Errorf("no %s answered without error", api)
		}
	}
}

// seen is the set of record values a group consumed.
type seen struct {
	mu sync.Mutex
	m  map[string]bool
}

func newSeen() *seen { return &seen{m: map[string]bool{}} }

func (s *seen) add(v string) {
	s.mu.Lock()
	s.m[v] = true
	s.mu.Unlock()
}

func (s *seen) wait(t *testing.T, ctx context.Context, who string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		s.mu.Lock()
		n := len(s.m)
		s.mu.Unlock()
		if n == groupRecords {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			var missing []string
			s.mu.Lock()
			for i := 0; i < groupRecords && len(missing) < 10; i++ {
				if !s.m[strconv.Itoa(i)] {
					missing = append(missing, strconv.Itoa(i))
				}
			}
			s.mu.Unlock()
			t.Fatalf("%s consumed %d of %d records (missing %v)", who, n, groupRecords, missing)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// saramaHandler records and marks every message it is given.
type saramaHandler struct{ s *seen }

func (saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		h.s.add(string(msg.Value))
		sess.MarkMessage(msg, "")
	}
	return nil
}
