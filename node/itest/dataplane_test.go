package itest

// What the data plane must show (produce, fetch and replication through the
// Kafka protocol): a real kgo client against 3 nodes and 3 ZooKeeper servers.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/node/failpoint"
	"github.com/zkchaos/zkchaos/node/storage"
	"github.com/zkchaos/zkchaos/node/storage/checkpoint"
	"github.com/zkchaos/zkchaos/node/wire"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

const dpTopic = "dp"

func (e *env) brokers() []string {
	var out []string
	for id := 1; id <= 3; id++ {
		out = append(out, e.node(id).KafkaAddr())
	}
	return out
}

// kgoClient is configured as workloads/log.go configures its clients, with
// the given acks, linger and retries.
func (e *env) kgoClient(acks kgo.Acks, linger time.Duration, retries int) *kgo.Client {
	e.t.Helper()
	kc, err := kgo.NewClient(
		kgo.SeedBrokers(e.brokers()...),
		kgo.DefaultProduceTopic(dpTopic),
		kgo.RequiredAcks(acks),
		kgo.DisableIdempotentWrite(),
		kgo.ProducerLinger(linger),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordRetries(retries),
		kgo.RecordDeliveryTimeout(30*time.Second),
		kgo.ProduceRequestTimeout(10*time.Second),
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.MaxVersions(kversion.V3_0_0()),
	)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(kc.Close)
	return kc
}

// partitionMeta is one partition as Metadata reports it.
type partitionMeta struct {
	Leader int32
	Epoch  int32
	ISR    []int32
}

// metadata asks node id (any broker answers from its cache).
func (e *env) metadata(id int, topic string) (map[int32]partitionMeta, error) {
	cl := wire.NewClient(e.node(id).KafkaAddr(), "itest")
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9)
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	resp, err := cl.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	out := map[int32]partitionMeta{}
	for _, mt := range resp.(*kmsg.MetadataResponse).Topics {
		for _, mp := range mt.Partitions {
			out[mp.Partition] = partitionMeta{mp.Leader, mp.LeaderEpoch, slices.Sorted(slices.Values(mp.ISR))}
		}
	}
	return out, nil
}

// healthyTopic waits for every broker to register, creates dpTopic with
// parts partitions and waits (up to a minute) until they are healthy.
func (e *env) healthyTopic(parts int) map[int32]partitionMeta {
	e.t.Helper()
	e.waitAllRegistered()
	e.createTopic(dpTopic, parts)
	return e.waitHealthy(dpTopic, parts, 60*time.Second)
}

// waitHealthy waits until every node's metadata shows every partition with
// a leader and a full ISR, and returns the metadata.
func (e *env) waitHealthy(topic string, parts int, within time.Duration) map[int32]partitionMeta {
	e.t.Helper()
	deadline := time.Now().Add(within)
	var last map[int32]partitionMeta
	for {
		ok := true
		for id := 1; id <= 3 && ok; id++ {
			md, err := e.metadata(id, topic)
			if err != nil || len(md) != parts {
				ok = false
				break
			}
			for _, pm := range md {
				if pm.Leader < 0 || len(pm.ISR) != 3 {
					ok = false
				}
			}
			last = md
		}
		if ok {
			return last
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("topic %s not healthy within %s: %+v", topic, within, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// logInfo is a node's admin view of one log.
type logInfo struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Role      string  `json:"role"`
	ISR       []int32 `json:"isr"`
	HW        int64   `json:"hw"`
	LEO       int64   `json:"leo"`
}

func (e *env) logs(id int) map[int32]logInfo {
	var st struct {
		Logs []logInfo `json:"logs"`
	}
	if err := json.Unmarshal([]byte(e.admin(id, "GET", "/state", "")), &st); err != nil {
		e.t.Fatal(err)
	}
	out := map[int32]logInfo{}
	for _, l := range st.Logs {
		if l.Topic == dpTopic {
			out[l.Partition] = l
		}
	}
	return out
}

// consume reads partition p from its leader as a consumer (ReplicaID -1),
// from offset 0 up to the high watermark.
func (e *env) consume(leader int, p int32) map[int64]string {
	e.t.Helper()
	cl := wire.NewClient(e.node(leader).KafkaAddr(), "itest-reader")
	defer cl.Close()
	out := map[int64]string{}
	from := int64(0)
	for {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.MaxBytes = 1 << 20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = dpTopic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, from, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := cl.Request(ctx, req)
		cancel()
		if err != nil {
			e.t.Fatalf("fetch %s-%d@%d from n%d: %v", dpTopic, p, from, leader, err)
		}
		part := &resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if part.ErrorCode != 0 {
			e.t.Fatalf("fetch %s-%d@%d from n%d: error %d", dpTopic, p, from, leader, part.ErrorCode)
		}
		fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: dpTopic, Partition: p, Offset: from}, part, kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			e.t.Fatalf("decode fetch: %v", fp.Err)
		}
		for _, r := range fp.Records {
			out[r.Offset] = string(r.Value)
			from = r.Offset + 1
		}
		if from >= part.HighWatermark || len(fp.Records) == 0 {
			return out
		}
	}
}

// committedBytes returns the bytes of node id's log of p holding offsets
// below hw, read from the segment files on the host.
func (e *env) committedBytes(id int, p int32, hw int64) []byte {
	e.t.Helper()
	dir := storage.PartitionDir(filepath.Join(e.node(id).Dir, "data"), dpTopic, p)
	names, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	sort.Strings(names)
	var all []byte
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			e.t.Fatal(err)
		}
		all = append(all, b...)
	}
	headers, complete, err := storage.SplitBatches(all)
	if err != nil {
		e.t.Fatalf("n%d %s-%d: %v", id, dpTopic, p, err)
	}
	all = all[:complete]
	pos := int64(0)
	for _, h := range headers {
		if h.LastOffset() >= hw {
			break
		}
		pos += h.Size()
	}
	return all[:pos]
}

// Must show (1): acks=all, RF=3, min.insync.replicas=2: 10,000 unique records
// to 3 partitions, SIGKILL one partition's leader midway and restart it;
// every acknowledged record is read back at its acknowledged offset and all
// replicas agree byte for byte on the committed prefix.
func TestDataPlaneAckedWritesSurviveLeaderKill(t *testing.T) {
	e := setupArgs(t, []string{"--min-insync-replicas=2", "--replica-lag-time-max=3s"}, nil)
	ctx := ctxT(t)
	md := e.healthyTopic(3)
	kc := e.kgoClient(kgo.AllISRAcks(), 2*time.Millisecond, 10)

	const total = 10000
	type ack struct {
		p   int32
		off int64
	}
	var mu sync.Mutex
	acked := map[string]ack{}
	failed := 0
	var wg sync.WaitGroup
	victim := int(md[0].Leader)
	start := time.Now()
	for i := 0; i < total; i++ {
		if i == total/2 {
			// Midway, with records in flight: SIGKILL partition 0's
			// leader, then restart it.
			t.Logf("killing n%d (leader of %s-0) after %d records", victim, dpTopic, i)
			if err := nemesis.Kill(ctx, e.node(victim).Container); err != nil {
				t.Fatal(err)
			}
			go func() {
				time.Sleep(2 * time.Second)
				if err := e.node(victim).Container.Start(ctx); err != nil {
					t.Errorf("restart n%d: %v", victim, err)
				}
			}()
		}
		val := fmt.Sprintf("v-%05d", i)
		p := int32(i % 3)
		wg.Add(1)
		kc.Produce(ctx, &kgo.Record{Partition: p, Value: []byte(val)}, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				return
			}
			acked[val] = ack{r.Partition, r.Offset}
		})
	}
	wg.Wait()
	t.Logf("%d acknowledged, %d failed in %s", len(acked), failed, time.Since(start).Round(time.Millisecond))
	if len(acked) < total/2 {
		t.Fatalf("only %d of %d records acknowledged", len(acked), total)
	}

	md = e.waitHealthy(dpTopic, 3, 90*time.Second)
	for p := int32(0); p < 3; p++ {
		leader := int(md[p].Leader)
		got := e.consume(leader, p)
		n := 0
		for val, a := range acked {
			if a.p != p {
				continue
			}
			n++
			if got[a.off] != val {
				t.Errorf("%s-%d: acknowledged %q at offset %d, read %q", dpTopic, p, val, a.off, got[a.off])
			}
		}
		// Replicas agree byte for byte below the leader's HW once caught up.
		hw := e.logs(leader)[p].HW
		deadline := time.Now().Add(30 * time.Second)
		for id := 1; id <= 3; id++ {
			for e.logs(id)[p].LEO < hw && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
			}
		}
		ref := e.committedBytes(leader, p, hw)
		for id := 1; id <= 3; id++ {
			if b := e.committedBytes(id, p, hw); !bytes.Equal(b, ref) {
				t.Errorf("%s-%d: n%d's committed prefix (%d bytes) differs from leader n%d's (%d bytes) below HW %d", dpTopic, p, id, len(b), leader, len(ref), hw)
			}
		}
		t.Logf("%s-%d: leader n%d, HW %d, %d acknowledged records read back, %d committed bytes identical on 3 replicas", dpTopic, p, leader, hw, n, len(ref))
	}
	e.expectVerdict(checkers.LeaderUniqueness{}, "")
	e.expectVerdict(checkers.HWCheckpoint{}, "")
}

// Must show (2): a follower partitioned from its leader leaves the ISR within
// the lag time; healed, it catches up and rejoins.
func TestDataPlaneLaggingFollowerLeavesAndRejoinsISR(t *testing.T) {
	const lag = 2 * time.Second
	e := setupArgs(t, []string{"--min-insync-replicas=2", "--replica-lag-time-max=" + lag.String()}, nil)
	ctx := ctxT(t)
	md := e.healthyTopic(3)
	leader := int(md[0].Leader)
	follower := other(leader, e.controller(10*time.Second))
	kc := e.kgoClient(kgo.LeaderAck(), 0, 1)
	produce := func(n int) {
		for i := 0; i < n; i++ {
			if err := kc.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(fmt.Sprintf("x-%d", time.Now().UnixNano()))}).FirstErr(); err != nil {
				t.Fatalf("produce acks=1: %v", err)
			}
		}
	}
	produce(10)
	n0 := len(e.events(leader))
	cut := time.Now()
	net := e.partitioned(ctx, []*docker.Container{e.node(leader).Container}, []*docker.Container{e.node(follower).Container})
	produce(10) // the leader moves on without the follower
	ev, _ := e.waitEvent(leader, 4*lag, "ISR shrink", n0, func(ev history.Event) bool {
		return ev.Kind == history.KindISRChange && ev.ISR.Partition == 0 && ev.ISR.Action == history.ISRShrink &&
			!slices.Contains(ev.ISR.New, int32(follower)) && ev.ISR.Outcome == history.ZKOK
	})
	took := time.Unix(0, ev.Time).Sub(cut)
	t.Logf("n%d left the ISR of %s-0 after %s (lag time %s, checked every %s): %v → %v", follower, dpTopic, took.Round(time.Millisecond), lag, lag/2, ev.ISR.Old, ev.ISR.New)
	if took > lag+lag/2+time.Second {
		t.Fatalf("shrink took %s, more than lag %s + check interval %s", took, lag, lag/2)
	}
	produce(10)
	n1 := len(e.events(leader))
	if err := net.HealAll(ctx); err != nil {
		t.Fatal(err)
	}
	healed := time.Now()
	ev, _ = e.waitEvent(leader, 30*time.Second, "ISR expand", n1, func(ev history.Event) bool {
		return ev.Kind == history.KindISRChange && ev.ISR.Partition == 0 && ev.ISR.Action == history.ISRExpand &&
			slices.Contains(ev.ISR.New, int32(follower)) && ev.ISR.Outcome == history.ZKOK
	})
	t.Logf("n%d rejoined the ISR %s after healing: %v → %v", follower, time.Unix(0, ev.Time).Sub(healed).Round(time.Millisecond), ev.ISR.Old, ev.ISR.New)
	ll, fl := e.logs(leader)[0], e.logs(follower)[0]
	if fl.LEO < ll.HW {
		t.Fatalf("rejoined follower LEO %d below leader HW %d", fl.LEO, ll.HW)
	}
	// The ISR znode and the metadata agree.
	d, _, err := e.get(zkdata.PartitionStatePath(dpTopic, 0))
	if err != nil {
		t.Fatal(err)
	}
	st, err := zkdata.DecodePartitionState(dpTopic, 0, d)
	if err != nil || !slices.Contains(st.ISR, int32(follower)) {
		t.Fatalf("state znode after rejoin: %+v (%v)", st, err)
	}
}

// Must show (3): with the ISR below min.insync.replicas an acks=all produce
// fails with NOT_ENOUGH_REPLICAS (19) and an acks=1 produce still succeeds.
func TestDataPlaneMinInsyncReplicas(t *testing.T) {
	e := setupArgs(t, []string{"--min-insync-replicas=2", "--replica-lag-time-max=2s"}, nil)
	ctx := ctxT(t)
	md := e.healthyTopic(3)
	leader := int(md[0].Leader)
	// Both clients connect (and learn the leader) while all nodes are up.
	all := e.kgoClient(kgo.AllISRAcks(), 0, 0)
	one := e.kgoClient(kgo.LeaderAck(), 0, 0)
	if err := all.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatalf("acks=all with a full ISR: %v", err)
	}
	if err := one.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("before-1")}).FirstErr(); err != nil {
		t.Fatalf("acks=1 with a full ISR: %v", err)
	}
	for id := 1; id <= 3; id++ {
		if id != leader {
			if err := nemesis.Kill(ctx, e.node(id).Container); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = all.ProduceSync(pctx, &kgo.Record{Partition: 0, Value: []byte("all")}).FirstErr()
		cancel()
		if errors.Is(err, kerr.NotEnoughReplicas) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with the ISR below min.insync.replicas: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	t.Logf("acks=all: %v", err)
	r, err := one.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("one")}).First()
	if err != nil {
		t.Fatalf("acks=1 with the ISR below min.insync.replicas: %v", err)
	}
	t.Logf("acks=1: ok at offset %d; leader n%d's ISR: %v", r.Offset, leader, e.logs(leader)[0].ISR)
}

func readCheckpoint(t *testing.T, e *env, id int) map[checkpoint.TopicPartition]int64 {
	t.Helper()
	hws, ok, err := checkpoint.ReadReplicationOffsets(filepath.Join(e.node(id).Dir, "data"))
	if err != nil || !ok {
		t.Fatalf("n%d checkpoint: exists %v, %v", id, ok, err)
	}
	return hws
}

// Must show (4): after a clean restart the checkpoint holds every hosted
// partition with its HW; with KAFKA-7235 a bounce in the window (the
// controller held before it lists /brokers/ids, a stale LeaderAndIsr for
// one partition reaching the new process first) leaves a hosted partition
// out of the file.
func TestDataPlaneHWCheckpoint(t *testing.T) {
	bugModes(t, "KAFKA-7235", func(t *testing.T, bugs string) {
		var extra []string
		if bugs != "" {
			extra = append(extra, "--bugs="+bugs)
		}
		e := setupArgs(t, append(extra, "--hw-checkpoint-interval=200ms"), nil)
		ctx := ctxT(t)
		regs := e.waitAllRegistered()
		e.createTopic(dpTopic, 3)
		md := e.waitHealthy(dpTopic, 3, 60*time.Second)
		kc := e.kgoClient(kgo.AllISRAcks(), 0, 3)
		for i := 0; i < 30; i++ {
			if err := kc.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 3), Value: []byte(fmt.Sprintf("c-%d", i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		c := e.controller(10 * time.Second)
		b := other(c)
		// HWs are 10 everywhere once the followers have fetched again.
		time.Sleep(time.Second)

		// Clean restart: SIGTERM, the last checkpoint, then start.
		if err := e.node(b).Container.Signal(ctx, "SIGTERM"); err != nil {
			t.Fatal(err)
		}
		if err := e.node(b).Container.WaitExited(ctx); err != nil {
			t.Fatal(err)
		}
		hws := readCheckpoint(t, e, b)
		for p := int32(0); p < 3; p++ {
			if hw, ok := hws[checkpoint.TopicPartition{Topic: dpTopic, Partition: p}]; !ok || hw != 10 {
				t.Fatalf("n%d's checkpoint after a clean shutdown: %s-%d = %d (present %v), want 10; file %v", b, dpTopic, p, hw, ok, hws)
			}
		}
		t.Logf("n%d's checkpoint after clean shutdown: %v", b, hws)
		n0 := len(e.events(b))
		if err := e.node(b).Container.Start(ctx); err != nil {
			t.Fatal(err)
		}
		reg, _ := e.waitEvent(b, 30*time.Second, "re-registration", n0, isKind(history.KindBrokerRegistered))
		regs[b] = reg.Registration.BrokerEpoch
		e.waitHealthy(dpTopic, 3, 60*time.Second)
		_, idx := e.waitEvent(b, 10*time.Second, "hw_checkpoint after restart", n0, isKind(history.KindHWCheckpoint))
		time.Sleep(500 * time.Millisecond)
		hws = readCheckpoint(t, e, b)
		if len(hws) != 3 {
			t.Fatalf("n%d's checkpoint after the clean restart (write at event %d): %v, want 3 partitions", b, idx, hws)
		}

		// The KAFKA-7235 window: hold the controller before it handles
		// the BrokerChange, bounce b, and hand the new process a
		// LeaderAndIsr of b's previous generation for one partition.
		e.admin(c, "PUT", "/failpoints/"+failpoint.ControllerBeforeBrokerChange, "1*pause")
		n1 := len(e.events(b))
		if _, err := nemesis.Bounce(ctx, e.node(b).Container); err != nil {
			t.Fatal(err)
		}
		e.waitEvent(c, 30*time.Second, "failpoint "+failpoint.ControllerBeforeBrokerChange, 0, failpointStart(failpoint.ControllerBeforeBrokerChange))
		_, regIdx := e.waitEvent(b, 30*time.Second, "re-registration", n1, isKind(history.KindBrokerRegistered))
		// One partition b does not lead: b becomes its follower.
		part := int32(-1)
		for p := int32(0); p < 3 && part < 0; p++ {
			if md[p].Leader != int32(b) {
				part = p
			}
		}
		d, st, err := e.get(zkdata.PartitionStatePath(dpTopic, part))
		if err != nil {
			t.Fatal(err)
		}
		ps, _ := zkdata.DecodePartitionState(dpTopic, part, d)
		var elected history.Event
		for _, ev := range e.events(c) {
			if ev.Kind == history.KindControllerElected {
				elected = ev
			}
		}
		req := leaderAndIsr(int32(c), elected.Controller.Epoch, regs[b], dpTopic, ps.Leader, ps.LeaderEpoch)
		tp := &req.TopicStates[0].PartitionStates[0]
		tp.Partition, tp.ISR, tp.Replicas, tp.ZKVersion, tp.IsNew = part, ps.ISR, []int32{1, 2, 3}, st.Version, false
		resp := e.request(b, req).(*kmsg.LeaderAndISRResponse)
		t.Logf("stale LeaderAndIsr (broker epoch %d) for %s-%d to the new n%d: error %d", regs[b], dpTopic, part, b, resp.ErrorCode)
		time.Sleep(time.Second) // a few checkpoint intervals
		hws = readCheckpoint(t, e, b)
		missing := 0
		for p := int32(0); p < 3; p++ {
			if _, ok := hws[checkpoint.TopicPartition{Topic: dpTopic, Partition: p}]; !ok {
				missing++
			}
		}
		e.admin(c, "POST", "/failpoints/"+failpoint.ControllerBeforeBrokerChange+"/release", "")
		released := time.Now().UnixNano()
		if bugs == "" {
			if resp.ErrorCode != kerr.StaleBrokerEpoch.Code {
				t.Fatalf("fixed: stale LeaderAndIsr answered %d, want 77", resp.ErrorCode)
			}
			if missing != 0 {
				t.Fatalf("fixed: n%d's checkpoint lost %d hosted partitions: %v", b, missing, hws)
			}
			e.waitHealthy(dpTopic, 3, 60*time.Second)
			time.Sleep(time.Second)
			if hws = readCheckpoint(t, e, b); len(hws) != 3 {
				t.Fatalf("fixed: n%d's checkpoint after the bounce: %v", b, hws)
			}
		} else {
			if resp.ErrorCode != 0 || missing != 2 {
				t.Fatalf("KAFKA-7235: stale LeaderAndIsr answered %d and the checkpoint is %v; want accepted and only %s-%d left", resp.ErrorCode, hws, dpTopic, part)
			}
			ev, _ := e.waitEvent(b, 5*time.Second, "hw_checkpoint", regIdx, isKind(history.KindHWCheckpoint))
			t.Logf("KAFKA-7235: n%d wrote %v while hosting %v", b, ev.Checkpoint.Entries, ev.Checkpoint.Hosted)
			// hw-checkpoint owes the new process the LeaderAndIsr that
			// would have told it only once the released controller acted
			// in its reach for the registered-elect grace: judge a
			// history that reaches past it.
			after := released + int64(checkers.DefaultConfig().RegisteredElectGrace+500*time.Millisecond)
			e.waitEvent(b, 10*time.Second, "hw_checkpoint past the grace", regIdx, func(ev history.Event) bool {
				return ev.Kind == history.KindHWCheckpoint && ev.Time >= after
			})
		}
		t.Logf("n%d's checkpoint after the bounce: %v", b, hws)
		e.expectVerdict(checkers.HWCheckpoint{TellGrace: checkers.DefaultConfig().RegisteredElectGrace}, bugs)
	})
}

// TestDataPlaneBenchmark is the BENCHMARKS.md data-plane figure, not a timed
// test: ZKCHAOS_BENCH=1 go test ./node/itest -run TestDataPlaneBenchmark -v.
// Acknowledged-produce throughput and latency with acks=all, RF=3,
// min.insync.replicas=2, through kgo with batching; ZKCHAOS_BENCH_PROFILE
// names a file for a CPU profile of partition 0's leader taken meanwhile.
func TestDataPlaneBenchmark(t *testing.T) {
	if os.Getenv("ZKCHAOS_BENCH") == "" {
		t.Skip("set ZKCHAOS_BENCH=1")
	}
	e := setupArgs(t, []string{"--min-insync-replicas=2"}, nil)
	ctx := ctxT(t)
	md := e.healthyTopic(3)
	envInt := func(name string, def int) int {
		var v int
		if _, err := fmt.Sscan(os.Getenv(name), &v); err == nil && v > 0 {
			return v
		}
		return def
	}
	total := envInt("ZKCHAOS_BENCH_RECORDS", 2000000)
	inflight := envInt("ZKCHAOS_BENCH_INFLIGHT", 10000) // records the producer may have outstanding
	const valueLen = 100
	linger := time.Duration(envInt("ZKCHAOS_BENCH_LINGER_MS", 5)) * time.Millisecond
	if os.Getenv("ZKCHAOS_BENCH_LINGER_MS") == "0" {
		linger = 0
	}
	kc := e.kgoClient(kgo.AllISRAcks(), linger, 10)
	// Warm up connections and metadata.
	for p := int32(0); p < 3; p++ {
		if err := kc.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("warm")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	profDone := make(chan struct{})
	if path := os.Getenv("ZKCHAOS_BENCH_PROFILE"); path != "" {
		go func() {
			defer close(profDone)
			resp, err := (&http.Client{Timeout: time.Minute}).Get("http://" + e.node(int(md[0].Leader)).AdminAddr() + "/debug/pprof/profile?seconds=10")
			if err != nil {
				t.Errorf("profile: %v", err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			os.WriteFile(path, b, 0o644)
		}()
	} else {
		close(profDone)
	}
	value := bytes.Repeat([]byte("v"), valueLen)
	lat := make([]time.Duration, 0, total)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, inflight)
	failed := 0
	start := time.Now()
	for i := 0; i < total; i++ {
		sem <- struct{}{}
		wg.Add(1)
		t0 := time.Now()
		kc.Produce(ctx, &kgo.Record{Partition: int32(i % 3), Value: value}, func(_ *kgo.Record, err error) {
			d := time.Since(t0)
			mu.Lock()
			if err != nil {
				failed++
			} else {
				lat = append(lat, d)
			}
			mu.Unlock()
			<-sem
			wg.Done()
		})
	}
	wg.Wait()
	el := time.Since(start)
	<-profDone
	slices.Sort(lat)
	pct := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	t.Logf("acks=all RF=3 min.insync=2, %d-byte values, linger %s, %d in flight: %d acknowledged (%d failed) in %s = %.0f records/s (%.1f MB/s of values); latency p50 %s p99 %s max %s",
		valueLen, linger, inflight, len(lat), failed, el.Round(time.Millisecond), float64(len(lat))/el.Seconds(),
		float64(len(lat)*valueLen)/el.Seconds()/1e6, pct(0.5).Round(100*time.Microsecond), pct(0.99).Round(100*time.Microsecond), lat[len(lat)-1].Round(time.Millisecond))
}

// KAFKA-3861 on real logs: the followers are partitioned from the leader
// (still registered in ZooKeeper), the leader shrinks the ISR to itself
// (acks=all then fails with 19), and the leader dies. offline and query-leo
// leaves the partition offline although the followers hold every
// acknowledged write; unclean elects a follower, and so does query-leo (the
// ISR [leader] is below min.insync.replicas, so the dead leader is excused
// from answering); the new leader serves them all.
func TestDataPlaneShrunkISRLeaderCrash(t *testing.T) {
	for _, policy := range []string{"offline", "unclean", "query-leo"} {
		t.Run(policy, func(t *testing.T) {
			e := setupArgs(t, []string{"--offline-election=" + policy, "--min-insync-replicas=2", "--replica-lag-time-max=2s"}, nil)
			ctx := ctxT(t)
			md := e.healthyTopic(1)
			leader := int(md[0].Leader)
			kc := e.kgoClient(kgo.AllISRAcks(), 0, 0)
			acked := map[int64]string{}
			for i := 0; i < 20; i++ {
				v := fmt.Sprintf("a-%d", i)
				r, err := kc.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(v)}).First()
				if err != nil {
					t.Fatal(err)
				}
				acked[r.Offset] = v
			}
			var followers []*docker.Container
			for id := 1; id <= 3; id++ {
				if id != leader {
					followers = append(followers, e.node(id).Container)
				}
			}
			net := nemesis.NewNet()
			t.Cleanup(func() { net.HealAll(context.Background()) })
			n0 := len(e.events(leader))
			if err := net.Partition(ctx, []*docker.Container{e.node(leader).Container}, followers); err != nil {
				t.Fatal(err)
			}
			// A leader shrinks only followers that lack records it has
			// (Partition.isFollowerOutOfSync): one acks=1 record the cut
			// followers cannot fetch.
			k1 := e.kgoClient(kgo.LeaderAck(), 0, 0)
			if err := k1.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("leader-only")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			k1.Close()
			e.waitEvent(leader, 20*time.Second, "ISR shrunk to the leader", n0, func(ev history.Event) bool {
				return ev.Kind == history.KindISRChange && ev.ISR.Outcome == history.ZKOK && len(ev.ISR.New) == 1 && ev.ISR.New[0] == int32(leader)
			})
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := kc.ProduceSync(pctx, &kgo.Record{Partition: 0, Value: []byte("rejected")}).FirstErr()
			cancel()
			if !errors.Is(err, kerr.NotEnoughReplicas) {
				t.Fatalf("acks=all with ISR [%d]: %v, want NOT_ENOUGH_REPLICAS", leader, err)
			}
			if err := nemesis.Kill(ctx, e.node(leader).Container); err != nil {
				t.Fatal(err)
			}
			if err := net.HealAll(ctx); err != nil {
				t.Fatal(err)
			}
			path := zkdata.PartitionStatePath(dpTopic, 0)
			var st zkdata.PartitionState
			deadline := time.Now().Add(30 * time.Second)
			for {
				if d, _, err := e.get(path); err == nil {
					st, _ = zkdata.DecodePartitionState(dpTopic, 0, d)
					if st.Leader != int32(leader) {
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("leader n%d still in the state znode: %+v", leader, st)
				}
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(3 * time.Second) // let any further election land
			d, _, _ := e.get(path)
			st, _ = zkdata.DecodePartitionState(dpTopic, 0, d)
			t.Logf("%s: state after the leader died: %s", policy, d)
			for _, f := range []int{other(leader), other(leader, other(leader))} {
				t.Logf("%s: n%d holds [%d, %d) of %s-0", policy, f, 0, e.logs(f)[0].LEO, dpTopic)
				if e.logs(f)[0].LEO < int64(len(acked)) {
					t.Fatalf("follower n%d lacks acknowledged records: LEO %d", f, e.logs(f)[0].LEO)
				}
			}
			if policy == "offline" {
				if st.Leader != -1 {
					t.Fatalf("%s: leader %d, want offline (-1)", policy, st.Leader)
				}
				return
			}
			// The elected leader starts with ISR [itself]; the other
			// follower may have rejoined since.
			if st.Leader < 0 || st.Leader == int32(leader) || !slices.Contains(st.ISR, st.Leader) || slices.Contains(st.ISR, int32(leader)) {
				t.Fatalf("%s: state %+v, want a follower leading", policy, st)
			}
			e.waitEvent(int(st.Leader), 15*time.Second, "became leader", 0, func(ev history.Event) bool {
				return ev.Kind == history.KindRoleChange && ev.Role.Role == history.RoleLeader && ev.Role.LeaderEpoch == st.LeaderEpoch
			})
			got := e.consume(int(st.Leader), 0)
			for off, v := range acked {
				if got[off] != v {
					t.Fatalf("%s: leader n%d: offset %d = %q, acknowledged %q", policy, st.Leader, off, got[off], v)
				}
			}
			t.Logf("%s: n%d leads and serves all %d acknowledged records", policy, st.Leader, len(acked))
		})
	}
}
