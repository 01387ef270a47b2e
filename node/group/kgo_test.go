package group

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

type kfakeCluster struct{ leader Node }

func (kfakeCluster) PartitionExists(string, int32) bool { return true }
func (k kfakeCluster) OffsetsLeader(context.Context, int32) (Node, bool) {
	return k.leader, true
}

// TestKgoConsumerGroup runs franz-go consumer groups, capped at Kafka
// 2.6's request versions, against this coordinator: kfake serves the data
// APIs and hands every group API to Handlers.
func TestKgoConsumerGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real clients for a few seconds")
	}
	const total = 40
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	host, port, _ := net.SplitHostPort(kc.ListenAddrs()[0])
	p, _ := strconv.Atoi(port)

	log := newMemLog()
	var evMu sync.Mutex
	var events []Event
	c := New(Options{Config: Config{NumPartitions: testPartitions, InitialRebalanceDelay: 200 * time.Millisecond}, Log: log,
		OnEvent: func(e Event) { evMu.Lock(); events = append(events, e); evMu.Unlock() }})
	defer c.Close()
	for q := int32(0); q < testPartitions; q++ {
		if err := c.Load(q, nil); err != nil {
			t.Fatal(err)
		}
	}
	h := &Handlers{C: c, Cluster: kfakeCluster{Node{ID: 0, Host: host, Port: int32(p)}}}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for _, r := range Routes() {
		kc.ControlKey(r.Key, func(req kmsg.Request) (kmsg.Response, error, bool) {
			kc.KeepControl()
			var resp kmsg.Response
			var err error
			done := make(chan struct{})
			go func() {
				defer close(done)
				resp, err = h.Handle(ctx, "kgo", "/127.0.0.1", req)
			}()
			// A parked JoinGroup must not stop kfake serving the others.
			kc.SleepControl(func() { <-done })
			return resp, err, true
		})
	}

	prod, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.MaxVersions(kversion.V2_6_0()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < total; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: int32(i % 4), Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	prod.Close()

	var mu sync.Mutex
	seen := map[string]bool{}
	consume := func(cl *kgo.Client, stop <-chan struct{}) {
		for {
			select {
			case <-stop:
				return
			default:
			}
			pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
			fs := cl.PollFetches(pctx)
			pcancel()
			fs.EachRecord(func(r *kgo.Record) {
				mu.Lock()
				seen[string(r.Value)] = true
				mu.Unlock()
			})
			if len(fs.Records()) > 0 {
				if err := cl.CommitUncommittedOffsets(ctx); err != nil {
					t.Errorf("commit: %v", err)
				}
			}
		}
	}
	newConsumer := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.MaxVersions(kversion.V2_6_0()),
			kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	a, b := newConsumer(), newConsumer()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, cl := range []*kgo.Client{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); consume(cl, stop) }()
	}
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n == total {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", n, total)
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	a.Close() // LeaveGroup
	b.Close()

	var fetched []FetchedOffset
	c.run(func() { _, fetched = c.handleFetchOffsets("g", false, nil) })
	var sum int64
	for _, f := range fetched {
		sum += f.Offset
	}
	if len(fetched) != 4 || sum != total {
		t.Fatalf("committed offsets %+v (sum %d), want every partition at its end (sum %d)", fetched, sum, total)
	}
	evMu.Lock()
	defer evMu.Unlock()
	apis := map[string]bool{}
	for _, e := range events {
		apis[e.API] = true
	}
	for _, api := range []string{"FindCoordinator", "JoinGroup", "SyncGroup", "OffsetFetch", "OffsetCommit", "LeaveGroup"} {
		if !apis[api] {
			t.Errorf("no %s event; saw %v", api, apis)
		}
	}
	if g := c.groups["g"]; g == nil || g.state != Empty {
		t.Errorf("group after both members left: %+v", g)
	}
}
