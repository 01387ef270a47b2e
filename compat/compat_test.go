package compat

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/internal/clustertest"
	"github.com/zkchaos/zkchaos/internal/dockertest"
)

// env is one cluster shared by every client test: three nodes, a topic per
// test (one partition, replicas on all three nodes).
type env struct {
	t         *testing.T
	c         *cluster.Cluster
	zk        *zk.Conn
	bootstrap string
	python    string
	kcat      string
}

var topics = []string{"kcat-acks", "py-acks", "kcat-idem", "kgo-idem", "move"}

// tool finds a client program; missing, it fails under CI=true and skips
// elsewhere, like a missing Docker Engine.
func tool(t *testing.T, what string, candidates [][]string) string {
	t.Helper()
	for _, c := range candidates {
		if err := exec.Command(c[0], c[1:]...).Run(); err == nil {
			return c[0]
		}
	}
	msg := fmt.Sprintf("%s not found (bash scripts/setup.sh installs it from Debian)", what)
	if dockertest.InCI() {
		t.Fatal("CI=true: " + msg)
	}
	t.Skip(msg)
	return ""
}

func setup(t *testing.T) *env {
	t.Helper()
	dockertest.Require(t)
	e := &env{t: t}
	e.kcat = tool(t, "kcat", [][]string{{"kcat", "-V"}})
	e.python = tool(t, "python3 with kafka-python (python3-kafka)", [][]string{
		{"/usr/bin/python3", "-c", "import kafka"}, {"python3", "-c", "import kafka"}})
	c, _ := clustertest.Start(t, cluster.Options{ZK: cluster.ZKOptions{Servers: 3, TickTime: 100 * time.Millisecond, SyncLimit: 5}})
	e.c = c
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := docker.BuildGoBinary(ctx, "./cmd/kafkanode", "kafkanode-compat")
	if err != nil {
		t.Fatalf("build node binary: %v", err)
	}
	e.zk = clustertest.Connect(t, c.ZKConnect(), 10*time.Second, nil)
	clustertest.WaitConnected(t, e.zk, 15*time.Second)
	var addrs []string
	for id := 1; id <= 3; id++ {
		args := append(c.NodeFlags(id), "--zk-session-timeout=4s")
		n, err := c.StartNode(ctx, cluster.NodeSpec{ID: id, Binary: bin, Args: args})
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, n.KafkaAddr())
	}
	e.bootstrap = strings.Join(addrs, ",")
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes() {
				if l, err := n.Container.Logs(context.Background(), 30); err == nil {
					t.Logf("--- n%d last log lines:\n%s", n.ID, l)
				}
			}
		}
	})
	all := topics
	if os.Getenv("ZKCHAOS_COMPAT_BENCH") != "" {
		all = append(all, "bulk-kcat", "bulk-py")
	}
	for _, name := range all {
		e.createTopic(name)
	}
	for _, name := range all {
		e.waitLeader(t, name, 60*time.Second)
	}
	return e
}

func (e *env) createTopic(name string) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := e.zk.Create(topicPath(name), encodeTopic(map[int32][]int32{0: {1, 2, 3}}), 0, zk.WorldACL(zk.PermAll))
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("create topic %s: %v", name, err)
		}
		time.Sleep(200 * time.Millisecond) // /brokers/topics appears once a node has started
	}
}

// metadata asks node id (any node when 0) for topic's partition 0.
func (e *env) metadata(topic string) (*kmsg.MetadataResponse, error) {
	var last error
	for _, n := range e.c.Nodes() {
		req := metadataRequest(topic)
		resp, err := kafkaRequest(context.Background(), 5*time.Second, n.KafkaAddr(), req)
		if err != nil {
			last = err
			continue
		}
		return resp.(*kmsg.MetadataResponse), nil
	}
	return nil, last
}

// waitLeader waits until the nodes agree that topic's partition 0 has a
// live leader and its ISR holds all three replicas; it returns the leader.
func (e *env) waitLeader(t *testing.T, topic string, within time.Duration) int32 {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r, err := e.metadata(topic)
		if err == nil && len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
			p := r.Topics[0].Partitions[0]
			if p.ErrorCode == 0 && p.Leader > 0 && len(p.ISR) == 3 {
				return p.Leader
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s: no leader with a full ISR within %s (last: %+v, %v)", topic, within, r, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// controller waits for /controller and returns its broker id.
func (e *env) controller(t *testing.T) int32 {
	deadline := time.Now().Add(30 * time.Second)
	for {
		e.zk.Sync(controllerPath)
		if d, _, err := e.zk.Get(controllerPath); err == nil {
			if id, err := decodeController(d); err == nil {
				return id
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("no controller within 30s")
			return -1
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *env) controllerEpoch(t *testing.T) int64 {
	e.zk.Sync(controllerEpochPath)
	d, _, err := e.zk.Get(controllerEpochPath)
	if err != nil {
		t.Errorf("read %s: %v", controllerEpochPath, err)
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(d)), 10, 64)
	if err != nil {
		t.Errorf("%s %q: %v", controllerEpochPath, d, err)
	}
	return n
}

func (e *env) run(timeout time.Duration, stdin string, name string, args ...string) (string, error) {
	return e.runIn(timeout, strings.NewReader(stdin), name, args...)
}

func (e *env) runIn(timeout time.Duration, stdin io.Reader, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\nstderr:\n%s", name, strings.Join(args, " "), err, tail(errb.String(), 3000))
	}
	return out.String(), nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// kcatRun runs kcat against the cluster.
func (e *env) kcatRun(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := e.run(time.Minute, stdin, e.kcat, append([]string{"-b", e.bootstrap}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// pyResult is client.py's answer.
type pyResult struct {
	Partitions []int32    `json:"partitions"`
	Brokers    []int32    `json:"brokers"`
	APIVersion []int      `json:"api_version"`
	Acked      [][2]int64 `json:"acked"`
	Failed     [][]any    `json:"failed"`
	Records    [][2]any   `json:"records"`
	Earliest   int64      `json:"earliest"`
	Latest     int64      `json:"latest"`
	Errors     []string   `json:"errors_seen"`
	// Committed is group_consume's committed offset per partition.
	Committed map[string]int64 `json:"committed"`
}

func (e *env) py(t *testing.T, action string, kv ...string) pyResult {
	t.Helper()
	script, err := filepath.Abs("testdata/client.py")
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{script, action, "bootstrap=" + e.bootstrap}, kv...)
	out, err := e.run(2*time.Minute, "", e.python, args...)
	if err != nil {
		t.Fatal(err)
	}
	var r pyResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("kafka-python %s: %v in %q", action, err, out)
	}
	return r
}

// kcatRecords reads topic's partition 0 from offset with kcat; count < 0
// reads to the end.
func (e *env) kcatRecords(t *testing.T, topic string, offset int64, count int) map[int64]string {
	t.Helper()
	args := []string{"-C", "-t", topic, "-p", "0", "-o", strconv.FormatInt(offset, 10), "-e", "-q", "-f", "%o %s\n"}
	if count >= 0 {
		args = append(args, "-c", strconv.Itoa(count))
	}
	out := e.kcatRun(t, "", args...)
	recs := map[int64]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		off, val, ok := strings.Cut(line, " ")
		o, err := strconv.ParseInt(off, 10, 64)
		if !ok || err != nil {
			t.Fatalf("kcat consumer line %q", line)
		}
		recs[o] = val
	}
	return recs
}

func pyRecords(r pyResult) map[int64]string {
	recs := map[int64]string{}
	for _, rec := range r.Records {
		recs[int64(rec[0].(float64))] = rec[1].(string)
	}
	return recs
}

// expectOnce checks that every value appears exactly once among recs.
func expectOnce(t *testing.T, what string, recs map[int64]string, values []string) {
	t.Helper()
	count := map[string]int{}
	for _, v := range recs {
		count[v]++
	}
	for _, v := range values {
		if count[v] != 1 {
			t.Errorf("%s: %q read back %d times, want once", what, v, count[v])
		}
	}
}

func expectAtLeastOnce(t *testing.T, what string, recs map[int64]string, values []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, v := range recs {
		seen[v] = true
	}
	for _, v := range values {
		if !seen[v] {
			t.Errorf("%s: acknowledged %q not read back", what, v)
		}
	}
}

func values(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

func TestClients(t *testing.T) {
	e := setup(t)
	// In order, on one cluster: later steps read what earlier ones wrote.
	t.Run("metadata", e.checkMetadata)
	t.Run("produce-acks", e.produceAcks)
	t.Run("fetch-from-offset", e.fetchFromOffset)
	t.Run("list-offsets", e.listOffsets)
	t.Run("idempotent-kcat", e.idempotentKcat)
	t.Run("idempotent-kgo", e.idempotentKgo)
	if os.Getenv("ZKCHAOS_COMPAT_BENCH") != "" {
		t.Run("bulk", e.bulk)
	}
	t.Run("consumer-groups", e.consumerGroups)
	t.Run("leader-change", e.leaderChange)
}

// checkMetadata: both clients see the three brokers and the topic's leader and ISR.
func (e *env) checkMetadata(t *testing.T) {
	var md struct {
		Brokers []struct {
			ID int32 `json:"id"`
		} `json:"brokers"`
		Topics []struct {
			Topic      string `json:"topic"`
			Partitions []struct {
				Partition int32 `json:"partition"`
				Leader    int32 `json:"leader"`
				ISRs      []any `json:"isrs"`
			} `json:"partitions"`
		} `json:"topics"`
	}
	if err := json.Unmarshal([]byte(e.kcatRun(t, "", "-L", "-J", "-t", "kcat-acks")), &md); err != nil {
		t.Fatalf("kcat -L -J: %v", err)
	}
	if len(md.Brokers) != 3 || len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 1 ||
		md.Topics[0].Partitions[0].Leader < 1 || len(md.Topics[0].Partitions[0].ISRs) != 3 {
		t.Errorf("kcat metadata: %+v", md)
	}
	r := e.py(t, "metadata", "topic=py-acks")
	if !slices.Equal(r.Partitions, []int32{0}) || !slices.Equal(r.Brokers, []int32{1, 2, 3}) {
		t.Errorf("kafka-python metadata: partitions %v brokers %v", r.Partitions, r.Brokers)
	}
	// kafka-python infers the broker version from ApiVersions; below
	// 0.11 it would fall back to message format v1, which the node
	// does not store.
	if len(r.APIVersion) < 2 || r.APIVersion[0] < 1 && r.APIVersion[1] < 11 {
		t.Errorf("kafka-python inferred broker version %v, want at least 0.11", r.APIVersion)
	}
}

// produceAcks: both clients produce with acks 0, 1 and all, and read every record back once.
func (e *env) produceAcks(t *testing.T) {
	var kcatVals, pyVals []string
	for _, acks := range []string{"0", "1", "all"} {
		vs := values("kcat-acks"+acks, 50)
		e.kcatRun(t, strings.Join(vs, "\n")+"\n", "-P", "-t", "kcat-acks", "-p", "0", "-X", "acks="+acks)
		kcatVals = append(kcatVals, vs...)
		r := e.py(t, "produce", "topic=py-acks", "acks="+acks, "count=50", "prefix=py-acks"+acks)
		if len(r.Failed) > 0 {
			t.Errorf("kafka-python acks=%s: failed %v", acks, r.Failed)
		}
		if acks != "0" && len(r.Acked) != 50 {
			t.Errorf("kafka-python acks=%s: %d acknowledged, want 50", acks, len(r.Acked))
		}
		pyVals = append(pyVals, values("py-acks"+acks, 50)...)
	}
	expectOnce(t, "kcat", e.kcatRecords(t, "kcat-acks", 0, -1), kcatVals)
	expectOnce(t, "kafka-python", pyRecords(e.py(t, "consume", "topic=py-acks")), pyVals)
}

// fetchFromOffset: both clients fetch from a given offset what the log holds there.
func (e *env) fetchFromOffset(t *testing.T) {
	all := e.kcatRecords(t, "kcat-acks", 0, -1)
	if len(all) < 20 {
		t.Fatalf("kcat-acks holds %d records; produce-acks must run first", len(all))
	}
	for name, got := range map[string]map[int64]string{
		"kcat":         e.kcatRecords(t, "kcat-acks", 10, 5),
		"kafka-python": pyRecords(e.py(t, "consume", "topic=kcat-acks", "offset=10", "count=5")),
	} {
		if len(got) != 5 {
			t.Errorf("%s from offset 10: %d records %v, want 5", name, len(got), got)
		}
		for o := int64(10); o < 15; o++ {
			if got[o] != all[o] {
				t.Errorf("%s offset %d: %q, want %q", name, o, got[o], all[o])
			}
		}
	}
}

// listOffsets: both clients' earliest and latest offsets match the log.
func (e *env) listOffsets(t *testing.T) {
	n := int64(len(e.kcatRecords(t, "kcat-acks", 0, -1)))
	for ts, want := range map[string]int64{"-2": 0, "-1": n} {
		out := strings.TrimSpace(e.kcatRun(t, "", "-Q", "-t", "kcat-acks:0:"+ts))
		// kcat -Q prints "<topic> [<partition>] offset <offset>".
		f := strings.Fields(out)
		if len(f) < 4 || f[len(f)-1] != strconv.FormatInt(want, 10) {
			t.Errorf("kcat -Q %s: %q, want offset %d", ts, out, want)
		}
	}
	r := e.py(t, "offsets", "topic=kcat-acks")
	if r.Earliest != 0 || r.Latest != n {
		t.Errorf("kafka-python offsets: earliest %d latest %d, want 0 and %d", r.Earliest, r.Latest, n)
	}
}

// idempotentKcat: kcat's idempotent producer writes each record once.
func (e *env) idempotentKcat(t *testing.T) {
	vs := values("idem", 2000)
	e.kcatRun(t, strings.Join(vs, "\n")+"\n", "-P", "-t", "kcat-idem", "-p", "0", "-X", "enable.idempotence=true")
	recs := e.kcatRecords(t, "kcat-idem", 0, -1)
	if len(recs) != len(vs) {
		t.Errorf("kcat idempotent: %d records, want %d", len(recs), len(vs))
	}
	expectOnce(t, "kcat idempotent", recs, vs)
	for i, v := range vs { // one partition, in order
		if recs[int64(i)] != v {
			t.Fatalf("offset %d: %q, want %q", i, recs[int64(i)], v)
		}
	}
}

// idempotentKgo: franz-go's idempotent producer writes each record once.
func (e *env) idempotentKgo(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.bootstrap, ",")...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic("kgo-idem"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vs := values("kgo", 2000)
	var recs []*kgo.Record
	for _, v := range vs {
		recs = append(recs, &kgo.Record{Value: []byte(v), Partition: 0})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("kgo idempotent produce: %v", err)
	}
	for _, r := range recs {
		if r.ProducerID < 0 {
			t.Fatalf("record %q produced without a producer id: idempotence was not used", r.Value)
		}
	}
	got := e.kcatRecords(t, "kgo-idem", 0, -1)
	expectOnce(t, "kgo idempotent", got, vs)
}

// leaderChange: both clients keep producing through a leader change.
func (e *env) leaderChange(t *testing.T) {
	before := e.waitLeader(t, "move", 30*time.Second)
	type pyOut struct {
		r   pyResult
		err error
	}
	done := make(chan pyOut, 1)
	go func() {
		script, _ := filepath.Abs("testdata/client.py")
		out, err := e.run(3*time.Minute, "", e.python, script, "produce", "bootstrap="+e.bootstrap, "topic=move",
			"acks=all", "count=300", "gap=0.02", "prefix=move")
		var r pyResult
		if err == nil {
			err = json.Unmarshal([]byte(out), &r)
		}
		done <- pyOut{r, err}
	}()
	time.Sleep(2 * time.Second)
	// The controller moves leadership off the leader, which stays up
	// and answers produce requests with NOT_LEADER_OR_FOLLOWER.
	var resp kmsg.Response
	var err error
	var controller int32
	for try := 0; try < 20; try++ { // a controller elected just now may not have taken over yet
		controller = e.controller(t)
		req := kmsg.NewPtrControlledShutdownRequest()
		req.SetVersion(1)
		req.BrokerID = before
		resp, err = kafkaRequest(context.Background(), 30*time.Second, e.c.Node(int(controller)).KafkaAddr(), req)
		if err != nil || resp.(*kmsg.ControlledShutdownResponse).ErrorCode != kerr.NotController.Code {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err != nil || resp.(*kmsg.ControlledShutdownResponse).ErrorCode != 0 {
		t.Fatalf("ControlledShutdown of n%d at controller n%d: %+v %v", before, controller, resp, err)
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	if len(res.r.Failed) > 0 || len(res.r.Acked) != 300 {
		t.Errorf("kafka-python through the leader change: %d acknowledged, failed %v", len(res.r.Acked), res.r.Failed)
	}
	if !slices.Contains(res.r.Errors, "NotLeaderForPartitionError") {
		t.Errorf("kafka-python never met NOT_LEADER_OR_FOLLOWER from n%d (errors seen: %v)", before, res.r.Errors)
	}
	md, err := e.metadata("move")
	if err != nil {
		t.Fatal(err)
	}
	after := md.Topics[0].Partitions[0].Leader
	if after == before || after < 1 {
		t.Fatalf("leader after the controlled shutdown of n%d: %d", before, after)
	}
	// The old leader itself answers a produce as Kafka does.
	preq := kmsg.NewPtrProduceRequest()
	preq.SetVersion(8)
	preq.Acks, preq.TimeoutMillis = -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "move"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = oneBatch("direct")
	pt.Partitions = append(pt.Partitions, pp)
	preq.Topics = append(preq.Topics, pt)
	presp, err := kafkaRequest(context.Background(), 10*time.Second, e.c.Node(int(before)).KafkaAddr(), preq)
	if err != nil {
		t.Fatal(err)
	}
	if code := presp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Errorf("produce to the old leader n%d: error %d, want NOT_LEADER_OR_FOLLOWER (6)", before, code)
	}
	// kcat, started with the old leader first in its bootstrap list,
	// finds the new one.
	vs := values("move-kcat", 100)
	out, err := e.run(2*time.Minute, strings.Join(vs, "\n")+"\n", e.kcat, "-b", e.c.Node(int(before)).KafkaAddr(),
		"-P", "-t", "move", "-p", "0", "-X", "enable.idempotence=true")
	if err != nil {
		t.Fatalf("kcat after the leader change: %v (%s)", err, out)
	}
	recs := e.kcatRecords(t, "move", 0, -1)
	// kafka-python 2.0.2 has no idempotent producer: a retry after an
	// answer it did not get may write a record twice, as against any
	// Kafka broker (at least once). kcat's idempotent records: once.
	expectAtLeastOnce(t, "kafka-python through the leader change", recs, values("move", 300))
	expectOnce(t, "kcat idempotent after the leader change", recs, vs)
}

// oneBatch is an uncompressed v2 record batch of one record, as a
// non-idempotent producer sends it.
func oneBatch(v string) []byte {
	r := kmsg.Record{Value: []byte(v)}
	body := r.AppendTo(nil)[1:]
	r.Length = int32(len(body))
	recs := r.AppendTo(nil)
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, FirstTimestamp: time.Now().UnixMilli(), MaxTimestamp: time.Now().UnixMilli(),
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: recs}
	b.Length = int32(61 - 12 + len(recs))
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// bulk is the measurement BENCHMARKS.md reports (ZKCHAOS_COMPAT_BENCH=1):
// an idempotent kcat producer and kafka-python each write 10,000 acks=all
// records while the controller fails over (its /controller znode deleted,
// as operators force a re-election), then every acknowledged record is
// read back.
func (e *env) bulk(t *testing.T) {
	const n = 10000
	for _, c := range []struct {
		client, topic string
		produce       func(vs []string) (acked int, err error)
	}{
		{"kcat (librdkafka 2.0.2), enable.idempotence=true", "bulk-kcat", func(vs []string) (int, error) {
			// 200 lines every 100 ms: the production spans the failover.
			pr, pw := io.Pipe()
			go func() {
				for i := 0; i < len(vs); i += 200 {
					io.WriteString(pw, strings.Join(vs[i:min(i+200, len(vs))], "\n")+"\n")
					time.Sleep(100 * time.Millisecond)
				}
				pw.Close()
			}()
			_, err := e.runIn(5*time.Minute, pr, e.kcat, "-b", e.bootstrap, "-P", "-t", "bulk-kcat", "-p", "0",
				"-X", "enable.idempotence=true", "-X", "linger.ms=5")
			if err != nil {
				return 0, err
			}
			return len(vs), nil // kcat exits non-zero if any record was not acknowledged
		}},
		{"kafka-python 2.0.2, acks=all", "bulk-py", func(vs []string) (int, error) {
			r := e.py(t, "produce", "topic=bulk-py", "acks=all", "count=10000", "prefix=bulk-py", "linger=5", "gap=0.0005")
			if len(r.Failed) > 0 {
				return len(r.Acked), fmt.Errorf("%d records failed, first %v", len(r.Failed), r.Failed[0])
			}
			return len(r.Acked), nil
		}},
	} {
		prefix := "bulk-kcat"
		if c.topic == "bulk-py" {
			prefix = "bulk-py"
		}
		vs := values(prefix, n)
		epochBefore := e.controllerEpoch(t)
		failedOver := make(chan int32, 1)
		go func() {
			time.Sleep(time.Second)
			if err := e.zk.Delete(controllerPath, -1); err != nil {
				t.Errorf("delete /controller: %v", err)
			}
			failedOver <- e.controller(t)
		}()
		start := time.Now()
		acked, err := c.produce(vs)
		took := time.Since(start)
		if err != nil {
			t.Fatalf("%s: %v", c.client, err)
		}
		newController := <-failedOver
		epochAfter := e.controllerEpoch(t)
		if epochAfter <= epochBefore {
			t.Errorf("%s: controller epoch %d after the failover, was %d", c.client, epochAfter, epochBefore)
		}
		rstart := time.Now()
		recs := e.kcatRecords(t, c.topic, 0, -1)
		rtook := time.Since(rstart)
		if c.topic == "bulk-py" {
			expectAtLeastOnce(t, c.client, recs, vs[:acked]) // no idempotence in kafka-python 2.0.2
		} else {
			expectOnce(t, c.client, recs, vs[:acked])
		}
		t.Logf("%s: %d/%d acks=all records acknowledged in %s (%.0f records/s) while the controller failed over (epoch %d -> %d, new controller n%d); read back %d records (%d distinct acknowledged values present) in %s",
			c.client, acked, n, took.Round(time.Millisecond), float64(acked)/took.Seconds(), epochBefore, epochAfter, newController,
			len(recs), acked, rtook.Round(time.Millisecond))
	}
}
