package compat

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/internal/clustertest"
	"github.com/zkchaos/zkchaos/internal/dockertest"
)

// upRecords is how many records each part of TestUpClientsUnderFaults
// writes to its input topic.
const upRecords = 300

// chaosUp is a `chaos up` process as a user starts it: the built CLI, its
// run directory, and the addresses it printed.
type chaosUp struct {
	bin, dir  string
	bootstrap string
	zk        []string
	stderr    string // file holding up's progress lines
	// stop ends `chaos up` as Ctrl-C does and waits for it (once).
	stop func(t *testing.T)
}

// startChaosUp builds bin/chaos, starts `chaos up` with three ZooKeeper
// servers and three brokers, and reads the bootstrap and ZooKeeper
// addresses it prints. Ctrl-C (SIGINT) stops it when the test ends, and
// whatever is left carries the run's label and is removed.
func startChaosUp(t *testing.T) *chaosUp {
	t.Helper()
	eng, err := docker.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	runID := "t-cup-" + cluster.NewRunID()[16:]
	t.Cleanup(func() {
		eng.RemoveLabelled(context.Background(), runID)
		eng.Close()
	})
	bin, err := docker.BuildGoBinary(t.Context(), "./cmd/chaos", "chaos-compat")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	// ZKCHAOS_COMPAT_KEEP=DIR keeps the run directory (the histories
	// `chaos check` judged) under DIR.
	if keep := os.Getenv("ZKCHAOS_COMPAT_KEEP"); keep != "" {
		tmp = filepath.Join(keep, runID)
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	u := &chaosUp{bin: bin, dir: filepath.Join(tmp, "run"), stderr: filepath.Join(tmp, "up.stderr")}
	errf, err := os.Create(u.stderr)
	if err != nil {
		t.Fatal(err)
	}
	up := exec.Command(bin, "up", "--zk", "3", "--brokers", "3", "--partitions", "3", "--run-id", runID, "--dir", u.dir)
	up.Stderr = errf
	out, err := up.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- up.Wait()
	}()
	var once sync.Once
	u.stop = func(t *testing.T) {
		once.Do(func() {
			up.Process.Signal(syscall.SIGINT)
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("chaos up exited with %v after Ctrl-C", err)
				}
			case <-time.After(2 * time.Minute):
				up.Process.Kill()
				t.Errorf("chaos up still running 2m after Ctrl-C")
			}
			errf.Close()
		})
	}
	t.Cleanup(func() {
		u.stop(t)
		if t.Failed() {
			b, _ := os.ReadFile(u.stderr)
			t.Logf("chaos up's progress:\n%s", tail(string(b), 6000))
		}
	})
	deadline := time.After(15 * time.Minute) // includes a cold image build
	for u.bootstrap == "" || u.zk == nil {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("chaos up exited before it printed its addresses")
			}
			t.Logf("chaos up: %s", l)
			if b, ok := strings.CutPrefix(l, "bootstrap "); ok {
				u.bootstrap = b
			}
			if z, ok := strings.CutPrefix(l, "zookeeper "); ok {
				u.zk = strings.Split(z, ",")
			}
		case <-deadline:
			t.Fatal("chaos up printed no bootstrap address in time")
		}
	}
	go func() { // keep reading, so up never blocks on a full pipe
		for range lines {
		}
	}()
	return u
}

// fault runs `chaos fault --dir RUN_DIR args...` and returns its answer.
func (u *chaosUp) fault(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, u.bin, append([]string{"fault", "--dir", u.dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("chaos fault %s: %v: %s", strings.Join(args, " "), err, b)
	}
	msg := strings.TrimSpace(string(b))
	t.Logf("%s chaos fault %s: %s", time.Now().Format("15:04:05.000"), strings.Join(args, " "), msg)
	return msg
}

// brokers is the bootstrap list as client libraries take it.
func (u *chaosUp) brokers() []string { return strings.Split(u.bootstrap, ",") }

// createTopic writes /brokers/topics/<name> with three partitions led by
// three different brokers, as `kafka-topics.sh --zookeeper` does, and waits
// until every partition has a leader and a full ISR.
func (u *chaosUp) createTopic(t *testing.T, conn *zk.Conn, name string) {
	t.Helper()
	assign := map[int32][]int32{0: {1, 2, 3}, 1: {2, 3, 1}, 2: {3, 1, 2}}
	if _, err := conn.Create(topicPath(name), encodeTopic(assign), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	u.waitLeaders(t, name)
}

// waitLeaders waits until every partition of the three of topic has a
// leader and all three replicas in its ISR.
func (u *chaosUp) waitLeaders(t *testing.T, topic string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var last string
		for _, addr := range u.brokers() {
			req := metadataRequest(topic)
			resp, err := kafkaRequest(t.Context(), 5*time.Second, addr, req)
			if err != nil {
				last = err.Error()
				continue
			}
			r := resp.(*kmsg.MetadataResponse)
			ok := len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 3
			for i := 0; ok && i < 3; i++ {
				p := r.Topics[0].Partitions[i]
				ok = p.ErrorCode == 0 && p.Leader > 0 && len(p.ISR) == 3
			}
			if ok {
				return
			}
			last = fmt.Sprintf("%+v", r.Topics)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s: no leaders with full ISRs within 60s (last: %s)", topic, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// coordinator asks the brokers, as a client does, which one coordinates
// key (keyType 0: a group, 1: a transactional id).
func (u *chaosUp) coordinator(t *testing.T, key string, keyType int8) int32 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		for _, addr := range u.brokers() {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.SetVersion(2)
			req.CoordinatorKey, req.CoordinatorType = key, keyType
			resp, err := kafkaRequest(t.Context(), 5*time.Second, addr, req)
			if err != nil {
				last = err.Error()
				continue
			}
			r := resp.(*kmsg.FindCoordinatorResponse)
			if r.ErrorCode == 0 {
				return r.NodeID
			}
			last = kerr.ErrorForCode(r.ErrorCode).Error()
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("FindCoordinator %q: no coordinator within 60s (last: %s)", key, last)
	return -1
}

// produceInput writes values to topic with franz-go's idempotent producer
// (acks=all), value i to partition i%3, in batches of batch records one
// gap apart (0: all at once).
func produceInput(ctx context.Context, cl *kgo.Client, topic string, vals []string, batch int, gap time.Duration) error {
	for i := 0; i < len(vals); i += batch {
		var recs []*kgo.Record
		for j := i; j < min(i+batch, len(vals)); j++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(j % 3), Value: []byte(vals[j])})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("produce %s from %s: %w", topic, vals[i], err)
		}
		if gap > 0 {
			time.Sleep(gap)
		}
	}
	return nil
}

func newKgo(t *testing.T, u *chaosUp, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(u.brokers()...), kgo.MaxVersions(kversion.V2_6_0()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Clients nobody here wrote, against the cluster `chaos up` starts, the way
// a user drives it: the CLI's printed addresses, topics created through
// ZooKeeper, faults through `chaos fault`. Three group consumers (sarama,
// kcat -G, kafka-python) each read every record of a 3-partition topic
// once; a franz-go transactional consume-transform-produce pipeline copies
// it, aborting every third transaction, and a read_committed reader sees
// each input record once and nothing aborted; then the same pipeline runs
// while its group coordinator is paused past its ZooKeeper session and
// another broker is restarted.
func TestUpClientsUnderFaults(t *testing.T) {
	dockertest.Require(t)
	e := &env{t: t}
	e.kcat = tool(t, "kcat", [][]string{{"kcat", "-V"}})
	e.python = tool(t, "python3 with kafka-python (python3-kafka)", [][]string{
		{"/usr/bin/python3", "-c", "import kafka"}, {"python3", "-c", "import kafka"}})
	start := time.Now()
	u := startChaosUp(t)
	e.bootstrap = u.bootstrap
	t.Logf("chaos up ready in %s", time.Since(start).Round(time.Millisecond))
	conn := clustertest.Connect(t, u.zk, 10*time.Second, nil)
	clustertest.WaitConnected(t, conn, 15*time.Second)
	u.waitLeaders(t, "chaos")
	// franz-go compresses with snappy by default, which Debian's
	// kafka-python cannot read without python3-snappy; the node stores
	// and serves batches as sent, as Kafka does.
	plain := newKgo(t, u, kgo.ProducerBatchCompression(kgo.NoCompression()))
	vals := values("in", upRecords)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	if err := produceInput(ctx, plain, "chaos", vals, 50, 0); err != nil {
		t.Fatal(err)
	}

	t.Run("groups", func(t *testing.T) { groupsReadEverything(t, e, u, vals) })
	t.Run("transactions", func(t *testing.T) {
		u.createTopic(t, conn, "pipe-out")
		p := &pipeline{u: u, in: "chaos", out: "pipe-out", group: "pipe", txnID: "pipe-tx", inputDone: closedChan()}
		if err := p.run(ctx, t); err != nil {
			t.Fatal(err)
		}
		p.verify(ctx, t, vals, inputPartition)
	})
	t.Run("transactions under faults", func(t *testing.T) {
		u.createTopic(t, conn, "pipe-in2")
		u.createTopic(t, conn, "pipe-out2")
		vals2 := values("in2", upRecords)
		p := &pipeline{u: u, in: "pipe-in2", out: "pipe-out2", group: "pipe2", txnID: "pipe2-tx", inputDone: make(chan struct{})}
		pctx, stop := context.WithCancel(ctx)
		// The input arrives over about 15 s, so the pipeline is busy
		// through the faults.
		go func() {
			defer close(p.inputDone)
			if err := produceInput(pctx, plain, "pipe-in2", vals2, 20, time.Second); err != nil {
				t.Errorf("input under faults: %v", err)
			}
		}()
		ran := make(chan error, 1)
		go func() { ran <- p.run(pctx, t) }()
		running := true
		defer func() { // nothing of the pipeline may log after the test
			stop()
			if running {
				<-ran
			}
			<-p.inputDone
		}()
		p.faults(t)
		err := <-ran
		running = false
		if err != nil {
			t.Fatal(err)
		}
		p.verify(ctx, t, vals2, inputPartition)
	})
	// The broker-side history of all this (group and transaction
	// requests, markers, the faults) is judged by the project's checkers
	// as `chaos check` judges any run: invalid would name a broken
	// guarantee, exit 2 a history the checkers cannot read.
	u.stop(t)
	cctx, ccancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer ccancel()
	out, err := exec.CommandContext(cctx, u.bin, "check", u.dir).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.ExitCode() == 3:
		t.Logf("chaos check: unknown (exit 3)")
	default:
		// The checkers that found the run invalid first, whole: the tail
		// alone can cut off the explanation a failure needs.
		var invalid []string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, " invalid ") {
				invalid = append(invalid, l)
			}
		}
		t.Errorf("chaos check %s: %v:\n%s\n...\n%s", u.dir, err, strings.Join(invalid, "\n"), tail(string(out), 4000))
	}
	t.Logf("chaos check: %s", lastLine(string(out)))
	t.Logf("whole test %s", time.Since(start).Round(time.Millisecond))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// inputPartition is the partition produceInput wrote value "<prefix>-<i>" to.
func inputPartition(v string) int32 {
	i, _ := strconv.Atoi(v[strings.LastIndexByte(v, '-')+1:])
	return int32(i % 3)
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// groupsReadEverything: sarama's ConsumerGroup, kcat -G and kafka-python's
// group consumer, each in a group of its own and side by side, read every
// record of the topic `chaos` once from the earliest offset.
func groupsReadEverything(t *testing.T, e *env, u *chaosUp, vals []string) {
	t.Run("sarama", func(t *testing.T) {
		t.Parallel()
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V2_6_0_0
		cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
		g, err := sarama.NewConsumerGroup(u.brokers(), "sarama-grp", cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		h := &collect{want: len(vals), done: make(chan struct{})}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		go func() {
			for ctx.Err() == nil {
				if err := g.Consume(ctx, []string{"chaos"}, h); err != nil && ctx.Err() == nil {
					t.Logf("sarama: %v", err)
					time.Sleep(200 * time.Millisecond)
				}
			}
		}()
		select {
		case <-h.done:
		case <-ctx.Done():
		}
		cancel()
		expectOnce(t, "sarama ConsumerGroup", h.values(), vals)
	})
	t.Run("kcat -G", func(t *testing.T) {
		t.Parallel()
		expectOnce(t, "kcat -G", e.kcatGroup(t, u.bootstrap, "kcat-grp", "chaos", len(vals)), vals)
	})
	t.Run("kafka-python group", func(t *testing.T) {
		t.Parallel()
		r := e.py(t, "group_consume", "topic=chaos", "group=py-grp", "count="+strconv.Itoa(len(vals)))
		got := map[int64]string{}
		for i, rec := range r.Records {
			got[int64(i)] = rec[1].(string)
		}
		expectOnce(t, "kafka-python group", got, vals)
	})
}

// collect is a sarama group handler that keeps every value it is given
// and closes done once it has want of them.
type collect struct {
	want int
	done chan struct{}
	mu   sync.Mutex
	got  []string
}

func (*collect) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (*collect) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (c *collect) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		c.mu.Lock()
		c.got = append(c.got, string(msg.Value))
		if len(c.got) == c.want {
			close(c.done)
		}
		c.mu.Unlock()
		sess.MarkMessage(msg, "")
	}
	return nil
}

func (c *collect) values() map[int64]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[int64]string{}
	for i, v := range c.got {
		out[int64(i)] = v
	}
	return out
}
