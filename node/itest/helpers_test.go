package itest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/clustertest"
	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/node/wire"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

// sessionTimeout is the nodes' ZooKeeper session timeout in these tests.
const sessionTimeout = 2 * time.Second

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

func nodeBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		binPath, binErr = docker.BuildGoBinary(ctx, "./cmd/kafkanode", "kafkanode-itest")
	})
	if binErr != nil {
		t.Fatalf("build node binary: %v", binErr)
	}
	return binPath
}

type env struct {
	t   *testing.T
	c   *cluster.Cluster
	zk  *zk.Conn
	bin string
}

// setup starts 3 ZooKeeper servers and nodes 1..3 with bugs switched on;
// nodeEnv adds environment variables per node (failpoints armed at start).
func setup(t *testing.T, bugs string, nodeEnv map[int]map[string]string) *env {
	t.Helper()
	var extra []string
	if bugs != "" {
		extra = append(extra, "--bugs="+bugs)
	}
	return setupArgs(t, extra, nodeEnv)
}

// setupArgs is setup with arbitrary extra node flags.
func setupArgs(t *testing.T, extra []string, nodeEnv map[int]map[string]string) *env {
	t.Helper()
	c, _ := clustertest.Start(t, cluster.Options{ZK: cluster.ZKOptions{Servers: 3, TickTime: 100 * time.Millisecond, SyncLimit: 5}})
	e := &env{t: t, c: c, bin: nodeBinary(t)}
	e.zk = clustertest.Connect(t, c.ZKConnect(), 10*time.Second, nil)
	clustertest.WaitConnected(t, e.zk, 15*time.Second)
	for id := 1; id <= 3; id++ {
		e.startNode(id, extra, nodeEnv[id])
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes() {
				if l, err := n.Container.Logs(context.Background(), 40); err == nil {
					t.Logf("--- n%d last log lines:\n%s", n.ID, l)
				}
			}
		}
	})
	return e
}

func (e *env) startNode(id int, extra []string, envv map[string]string) {
	e.t.Helper()
	c := e.c
	args := []string{
		"--id=" + strconv.Itoa(id),
		"--zk=" + strings.Join(c.ZKConnect(), ","),
		"--zk-session-timeout=" + sessionTimeout.String(),
		fmt.Sprintf("--listen=0.0.0.0:%d", cluster.NodeKafkaPort),
		fmt.Sprintf("--advertised=%s:%d", c.NodeIP(id), cluster.NodeKafkaPort),
		fmt.Sprintf("--admin-listen=%s:%d", c.NodeIP(id), cluster.NodeAdminPort),
		"--data-dir=" + cluster.NodeDir + "/data",
		fmt.Sprintf("--event-log=%s/n%d.jsonl", cluster.NodeHistoryDir, id),
	}
	args = append(args, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.StartNode(ctx, cluster.NodeSpec{ID: id, Binary: e.bin, Args: args, Env: envv}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) node(id int) *cluster.Node { return e.c.Node(id) }

// events reads node id's event log as it is now.
func (e *env) events(id int) []history.Event {
	evs, _, err := history.ReadFile(filepath.Join(e.c.RunDir, "history", fmt.Sprintf("n%d.jsonl", id)))
	if err != nil {
		return nil
	}
	return evs
}

// waitEvent polls node id's log for an event matching pred (after index
// from) and returns it with its index.
func (e *env) waitEvent(id int, within time.Duration, what string, from int, pred func(history.Event) bool) (history.Event, int) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		evs := e.events(id)
		for i := from; i < len(evs); i++ {
			if pred(evs[i]) {
				return evs[i], i
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("n%d: no %s within %s", id, what, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// findEvent returns the first matching event after from, if any.
func (e *env) findEvent(id int, from int, pred func(history.Event) bool) (history.Event, bool) {
	evs := e.events(id)
	for i := from; i < len(evs); i++ {
		if pred(evs[i]) {
			return evs[i], true
		}
	}
	return history.Event{}, false
}

func isKind(k history.Kind) func(history.Event) bool {
	return func(ev history.Event) bool { return ev.Kind == k }
}

// waitAllRegistered waits for broker_registered from every node and returns
// their broker epochs.
func (e *env) waitAllRegistered() map[int]int64 {
	e.t.Helper()
	out := map[int]int64{}
	for id := 1; id <= 3; id++ {
		ev, _ := e.waitEvent(id, 60*time.Second, "broker_registered", 0, isKind(history.KindBrokerRegistered))
		out[id] = ev.Registration.BrokerEpoch
	}
	return out
}

// controller returns the broker id in /controller, waiting for one.
func (e *env) controller(within time.Duration) int {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		if d, _, err := e.get(zkdata.ControllerPath); err == nil {
			if id, err := zkdata.DecodeController(d); err == nil {
				return int(id)
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no controller within %s", within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// bugModes runs test twice, as subtests: with every fix on ("fixed", bugs
// "") and with the bug switch bug on (named after it, bugs = bug); test
// sets up its own cluster with bugs.
func bugModes(t *testing.T, bug string, test func(t *testing.T, bugs string)) {
	for _, bugs := range []string{"", bug} {
		name := bugs
		if name == "" {
			name = "fixed"
		}
		t.Run(name, func(t *testing.T) { test(t, bugs) })
	}
}

// createTopicT waits for every broker to register, creates topic "t" with
// three partitions and returns the controller once it has written the last
// partition's state.
func (e *env) createTopicT() int {
	e.t.Helper()
	e.waitAllRegistered()
	e.createTopic("t", 3)
	c := e.controller(30 * time.Second)
	e.waitEvent(c, 30*time.Second, "partition state creation", 0, func(ev history.Event) bool {
		return ev.Kind == history.KindZKWrite && ev.ZKWrite.Path == zkdata.PartitionStatePath("t", 2) && ev.ZKWrite.Outcome == history.ZKOK
	})
	return c
}

// createTopic writes /brokers/topics/<name> with RF 3 round-robin over
// nodes 1..3, as ZooKeeper-era admin tools did.
func (e *env) createTopic(name string, partitions int) {
	e.t.Helper()
	as := map[int32][]int32{}
	for p := 0; p < partitions; p++ {
		as[int32(p)] = []int32{int32(p%3 + 1), int32((p+1)%3 + 1), int32((p+2)%3 + 1)}
	}
	if _, err := e.zk.Create(zkdata.TopicPath(name), zkdata.EncodeTopic(as), 0, zk.WorldACL(zk.PermAll)); err != nil {
		e.t.Fatalf("create topic %s: %v", name, err)
	}
}

// admin calls a node's admin HTTP endpoint.
func (e *env) admin(id int, method, path, body string) string {
	e.t.Helper()
	req, err := http.NewRequest(method, "http://"+e.node(id).AdminAddr()+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		e.t.Fatalf("admin %s %s on n%d: %v", method, path, id, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		e.t.Fatalf("admin %s %s on n%d: %s: %s", method, path, id, resp.Status, b)
	}
	return string(b)
}

// request sends one Kafka request to node id.
func (e *env) request(id int, req kmsg.Request) kmsg.Response {
	e.t.Helper()
	cl := wire.NewClient(e.node(id).KafkaAddr(), "itest")
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Request(ctx, req)
	if err != nil {
		e.t.Fatalf("%s to n%d: %v", kmsg.NameForKey(req.Key()), id, err)
	}
	return resp
}

func leaderAndIsr(controllerID, controllerEpoch int32, brokerEpoch int64, topic string, leader int32, leaderEpoch int32) *kmsg.LeaderAndISRRequest {
	req := kmsg.NewPtrLeaderAndISRRequest()
	req.SetVersion(4)
	req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = controllerID, controllerEpoch, brokerEpoch
	ts := kmsg.NewLeaderAndISRRequestTopicState()
	ts.Topic = topic
	p := kmsg.NewLeaderAndISRRequestTopicPartition()
	p.Partition, p.ControllerEpoch, p.Leader, p.LeaderEpoch = 0, controllerEpoch, leader, leaderEpoch
	p.ISR, p.Replicas, p.IsNew = []int32{leader}, []int32{leader}, true
	ts.PartitionStates = append(ts.PartitionStates, p)
	req.TopicStates = append(req.TopicStates, ts)
	return req
}

func other(not ...int) int {
	for id := 1; id <= 3; id++ {
		skip := false
		for _, n := range not {
			if n == id {
				skip = true
			}
		}
		if !skip {
			return id
		}
	}
	return -1
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// checkHistory merges the run's history and runs one checker over it: the
// node's events must be what the checkers read (one schema).
func (e *env) checkHistory(c checkers.Checker) checkers.Result {
	e.t.Helper()
	h, err := history.ReadDir(e.c.RunDir)
	if err != nil {
		e.t.Fatalf("history of the run: %v", err)
	}
	res, _ := checkers.Run(h, []checkers.Checker{c})
	return res[0]
}

func (e *env) expectVerdict(c checkers.Checker, bugs string) {
	e.t.Helper()
	r := e.checkHistory(c)
	want := checkers.Valid
	if bugs != "" {
		want = checkers.Invalid
	}
	e.t.Logf("%s: %s: %s", r.Checker, r.Verdict, r.Explanation)
	if r.Verdict != want {
		e.t.Fatalf("%s checker: %s, want %s (%s)", r.Checker, r.Verdict, want, r.Explanation)
	}
}

// get reads a znode after Sync: the test's session may sit on a follower
// that has not applied the latest write yet (ZooKeeper reads are not
// linearizable).
func (e *env) get(path string) ([]byte, *zk.Stat, error) {
	if _, err := e.zk.Sync(path); err != nil && err != zk.ErrNoNode {
		return nil, nil, err
	}
	return e.zk.Get(path)
}

// partitioned cuts the containers of a off from those of b and returns
// the Net that holds the cut; the test's end heals it.
func (e *env) partitioned(ctx context.Context, a, b []*docker.Container) *nemesis.Net {
	e.t.Helper()
	net := nemesis.NewNet()
	e.t.Cleanup(func() { net.HealAll(context.Background()) })
	if err := net.Partition(ctx, a, b); err != nil {
		e.t.Fatal(err)
	}
	return net
}

// cutFromZooKeeper partitions node c from every ZooKeeper server.
func (e *env) cutFromZooKeeper(ctx context.Context, c int) *nemesis.Net {
	e.t.Helper()
	var zks []*docker.Container
	for _, s := range e.c.ZKServers() {
		zks = append(zks, s.Container)
	}
	return e.partitioned(ctx, []*docker.Container{e.node(c).Container}, zks)
}
