package controller

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

// fakeZK is an in-memory ZooKeeper tree with the zkConn methods the
// controller uses: versions, czxid/mzxid, ephemeral owners, atomic Multi
// and one-shot watches. hook, if set, runs before every request and may
// fail it (a connection loss, an expiry) instead of letting it execute.
type fakeZK struct {
	mu      sync.Mutex
	zxid    int64
	nodes   map[string]*fakeNode
	session int64
	state   zk.State
	watches map[string][]chan zk.Event
	hook    func(op, path string) error
	// loseAnswer, if set, runs after a Multi has executed; true replaces
	// its answer with a connection loss (the write landed, the client
	// never heard).
	loseAnswer func(paths string) bool
	calls      []string // "op path" of every request, in order
}

type fakeNode struct {
	data  []byte
	stat  zk.Stat
	owner int64
}

func newFakeZK() *fakeZK {
	f := &fakeZK{nodes: map[string]*fakeNode{"/": {}}, session: 0x100, state: zk.StateHasSession, watches: map[string][]chan zk.Event{}}
	return f
}

func (f *fakeZK) State() zk.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state
}

func (f *fakeZK) SessionID() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.session
}

// enter records a request, fails it as a connection loss while there is
// no session, and runs the hook outside the lock.
func (f *fakeZK) enter(op, p string) error {
	f.mu.Lock()
	f.calls = append(f.calls, op+" "+p)
	h, connected := f.hook, f.state == zk.StateHasSession
	f.mu.Unlock()
	if !connected {
		return zk.ErrConnectionClosed
	}
	if h != nil {
		return h(op, p)
	}
	return nil
}

func (f *fakeZK) fire(p string, t zk.EventType) {
	for _, key := range []string{"d:" + p, "c:" + path.Dir(p)} {
		if strings.HasPrefix(key, "c:") && t == zk.EventNodeDataChanged {
			continue
		}
		et := t
		if strings.HasPrefix(key, "c:") {
			et = zk.EventNodeChildrenChanged
		}
		for _, ch := range f.watches[key] {
			ch <- zk.Event{Type: et, Path: p}
		}
		delete(f.watches, key)
	}
}

func (f *fakeZK) watch(key string) <-chan zk.Event {
	ch := make(chan zk.Event, 1)
	f.watches[key] = append(f.watches[key], ch)
	return ch
}

func (f *fakeZK) Get(p string) ([]byte, *zk.Stat, error) {
	if err := f.enter("get", p); err != nil {
		return nil, nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[p]
	if !ok {
		return nil, nil, zk.ErrNoNode
	}
	st := n.stat
	return slices.Clone(n.data), &st, nil
}

func (f *fakeZK) Exists(p string) (bool, *zk.Stat, error) {
	ok, st, _, err := f.exists("exists", p, false)
	return ok, st, err
}

func (f *fakeZK) ExistsW(p string) (bool, *zk.Stat, <-chan zk.Event, error) {
	return f.exists("existsw", p, true)
}

// exists serves both Exists and ExistsW; unlike getChildren, exists sets
// its watch on a missing node too, to hear of its creation.
func (f *fakeZK) exists(op, p string, watch bool) (bool, *zk.Stat, <-chan zk.Event, error) {
	if err := f.enter(op, p); err != nil {
		return false, nil, nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var ch <-chan zk.Event
	if watch {
		ch = f.watch("d:" + p)
	}
	n, ok := f.nodes[p]
	if !ok {
		return false, nil, ch, nil
	}
	st := n.stat
	return true, &st, ch, nil
}

func (f *fakeZK) ChildrenW(p string) ([]string, *zk.Stat, <-chan zk.Event, error) {
	return f.children("childrenw", p, true)
}

func (f *fakeZK) Children(p string) ([]string, *zk.Stat, error) {
	kids, st, _, err := f.children("children", p, false)
	return kids, st, err
}

// children serves both Children and ChildrenW; a watch is set only on a
// node that exists, as ZooKeeper sets none when getChildren fails.
func (f *fakeZK) children(op, p string, watch bool) ([]string, *zk.Stat, <-chan zk.Event, error) {
	if err := f.enter(op, p); err != nil {
		return nil, nil, nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[p]
	if !ok {
		return nil, nil, nil, zk.ErrNoNode
	}
	var kids []string
	for q := range f.nodes {
		if q != "/" && path.Dir(q) == p {
			kids = append(kids, path.Base(q))
		}
	}
	slices.Sort(kids)
	st := n.stat
	var ch <-chan zk.Event
	if watch {
		ch = f.watch("c:" + p)
	}
	return kids, &st, ch, nil
}

func (f *fakeZK) Sync(p string) (string, error) {
	if err := f.enter("sync", p); err != nil {
		return "", err
	}
	return p, nil
}

func (f *fakeZK) Create(p string, data []byte, flags int32, acl []zk.ACL) (string, error) {
	if err := f.enter("create", p); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkCreate(p); err != nil {
		return "", err
	}
	f.applyCreate(p, data, flags)
	return p, nil
}

func (f *fakeZK) Set(p string, data []byte, version int32) (*zk.Stat, error) {
	if err := f.enter("set", p); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkVersion(p, version); err != nil {
		return nil, err
	}
	st := f.applySet(p, data)
	return &st, nil
}

// Multi checks every op first and applies them only if all pass, as
// ZooKeeper's transaction does; the failing op carries the error.
func (f *fakeZK) Multi(ops ...any) ([]zk.MultiResponse, error) {
	if err := f.enter("multi", multiPaths(ops)); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	res := make([]zk.MultiResponse, len(ops))
	for i, op := range ops {
		var err error
		switch o := op.(type) {
		case *zk.CheckVersionRequest:
			err = f.checkVersion(o.Path, o.Version)
		case *zk.SetDataRequest:
			err = f.checkVersion(o.Path, o.Version)
		case *zk.CreateRequest:
			err = f.checkCreate(o.Path)
		case *zk.DeleteRequest:
			err = f.checkVersion(o.Path, o.Version)
		default:
			err = fmt.Errorf("fake multi: op %T", op)
		}
		if err != nil {
			res[i].Error = err
			return res, err
		}
	}
	for i, op := range ops {
		switch o := op.(type) {
		case *zk.SetDataRequest:
			st := f.applySet(o.Path, o.Data)
			res[i].Stat = &st
		case *zk.CreateRequest:
			f.applyCreate(o.Path, o.Data, o.Flags)
			res[i].String = o.Path
		case *zk.DeleteRequest:
			delete(f.nodes, o.Path)
			f.fire(o.Path, zk.EventNodeDeleted)
		}
	}
	if f.loseAnswer != nil && f.loseAnswer(multiPaths(ops)) {
		return nil, zk.ErrConnectionClosed
	}
	return res, nil
}

func multiPaths(ops []any) string {
	var ps []string
	for _, op := range ops {
		switch o := op.(type) {
		case *zk.CheckVersionRequest:
			ps = append(ps, o.Path)
		case *zk.SetDataRequest:
			ps = append(ps, o.Path)
		case *zk.CreateRequest:
			ps = append(ps, o.Path)
		case *zk.DeleteRequest:
			ps = append(ps, o.Path)
		}
	}
	return strings.Join(ps, ",")
}

func (f *fakeZK) checkVersion(p string, v int32) error {
	n, ok := f.nodes[p]
	if !ok {
		return zk.ErrNoNode
	}
	if v != -1 && n.stat.Version != v {
		return zk.ErrBadVersion
	}
	return nil
}

func (f *fakeZK) checkCreate(p string) error {
	if _, ok := f.nodes[p]; ok {
		return zk.ErrNodeExists
	}
	if _, ok := f.nodes[path.Dir(p)]; !ok {
		return zk.ErrNoNode
	}
	return nil
}

func (f *fakeZK) applyCreate(p string, data []byte, flags int32) {
	f.zxid++
	n := &fakeNode{data: slices.Clone(data), stat: zk.Stat{Czxid: f.zxid, Mzxid: f.zxid}}
	if flags&zk.FlagEphemeral != 0 {
		n.owner = f.session
		n.stat.EphemeralOwner = f.session
	}
	f.nodes[p] = n
	f.fire(p, zk.EventNodeCreated)
}

func (f *fakeZK) applySet(p string, data []byte) zk.Stat {
	f.zxid++
	n := f.nodes[p]
	n.data = slices.Clone(data)
	n.stat.Version++
	n.stat.Mzxid = f.zxid
	f.fire(p, zk.EventNodeDataChanged)
	return n.stat
}

// put writes a znode directly (parents included), as another client would.
func (f *fakeZK) put(p string, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		if _, ok := f.nodes[d]; !ok {
			f.zxid++
			f.nodes[d] = &fakeNode{stat: zk.Stat{Czxid: f.zxid, Mzxid: f.zxid}}
		}
	}
	if _, ok := f.nodes[p]; ok {
		f.applySet(p, data)
		return
	}
	f.applyCreate(p, data, 0)
}

// remove deletes a znode directly, as its session's end would.
func (f *fakeZK) remove(p string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.nodes, p)
	f.fire(p, zk.EventNodeDeleted)
}

// state0 decodes tp's state znode (leader -2: none).
func (f *fakeZK) state0(tp history.TopicPartition) (zkdata.PartitionState, int32) {
	f.mu.Lock()
	n := f.nodes[zkdata.PartitionStatePath(tp.Topic, tp.Partition)]
	f.mu.Unlock()
	if n == nil {
		return zkdata.PartitionState{Leader: -2}, -1
	}
	st, err := zkdata.DecodePartitionState(tp.Topic, tp.Partition, n.data)
	if err != nil {
		// Undecodable (an empty ISR): leader -3 and no ISR, which no
		// test expects.
		return zkdata.PartitionState{Leader: -3}, n.stat.Version
	}
	return st, n.stat.Version
}

func (f *fakeZK) count(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// testCluster is a controller on a fakeZK whose send queues have no send
// threads: what the controller sends stays queued for the test to read.
type testCluster struct {
	t  *testing.T
	zk *fakeZK
	c  *Controller
}

// registerBroker writes /brokers/ids/<id>; its czxid is the broker epoch.
func (tc *testCluster) registerBroker(id int32) int64 {
	tc.zk.put(zkdata.BrokerPath(id), zkdata.EncodeBroker("127.0.0.1", 9000+id, testTime))
	_, st, _ := tc.zk.Get(zkdata.BrokerPath(id))
	return st.Czxid
}

// newTestCluster starts a controller with the given bugs on a tree holding
// brokers live, topic "t" with the given assignment and, per partition,
// the given state (nil: none yet). The controller is elected (epoch 1) and
// its failover done.
func newTestCluster(t *testing.T, bugs string, live []int32, assign map[int32][]int32, states map[int32]*zkdata.PartitionState) *testCluster {
	t.Helper()
	f := newFakeZK()
	tc := &testCluster{t: t, zk: f}
	for _, p := range zkdata.PersistentPaths {
		f.put(p, nil)
	}
	f.put(zkdata.ControllerEpochPath, zkdata.EncodeControllerEpoch(0))
	for _, id := range live {
		tc.registerBroker(id)
	}
	f.put(zkdata.TopicPath("t"), zkdata.EncodeTopic(assign))
	for p, st := range states {
		if st != nil {
			f.put(zkdata.PartitionStatePath("t", p), zkdata.EncodePartitionState(*st))
		}
	}
	b, err := config.ParseBugs(bugs)
	if err != nil {
		t.Fatal(err)
	}
	tc.c = &Controller{cfg: Config{BrokerID: 1, Bugs: b, OfflinePolicy: config.PolicyOffline, MinInsync: 2}, zk: f,
		events: newQueue[event](), stop: make(chan struct{}), done: make(chan struct{})}
	tc.c.newChans = func(c *Controller) *channelManager {
		m := newChannelManager(c)
		m.manual = true
		return m
	}
	t.Cleanup(func() { close(tc.c.stop) })
	return tc
}

// drain empties broker id's queue.
func (tc *testCluster) drain(id int32) []kmsg.Request {
	var out []kmsg.Request
	if tc.c.chans == nil {
		return nil
	}
	tc.c.chans.mu.Lock()
	sq := tc.c.chans.queues[id]
	tc.c.chans.mu.Unlock()
	if sq == nil {
		return nil
	}
	for _, q := range sq.q.drain() {
		out = append(out, q.req)
	}
	return out
}

// drainAll empties every queue.
func (tc *testCluster) drainAll() {
	if tc.c.chans == nil {
		return
	}
	tc.c.chans.mu.Lock()
	ids := sortedKeys(tc.c.chans.queues)
	tc.c.chans.mu.Unlock()
	for _, id := range ids {
		tc.drain(id)
	}
}

// laiPartitions lists the partitions of the LeaderAndIsr requests in reqs.
func laiPartitions(reqs []kmsg.Request) []int32 {
	var out []int32
	for _, r := range reqs {
		if l, ok := r.(*kmsg.LeaderAndISRRequest); ok {
			for _, ts := range l.TopicStates {
				for _, p := range ts.PartitionStates {
					out = append(out, p.Partition)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

var testTime = time.Unix(1700000000, 0)

// process runs one event on the test's goroutine, as the event loop would.
func (tc *testCluster) process(ev event) {
	tc.t.Helper()
	tc.c.process(context.Background(), ev)
	tc.c.publish()
}

// elect makes the controller active (epoch 1) and runs the events its
// failover queued.
func (tc *testCluster) elect() {
	tc.t.Helper()
	tc.process(evElect{reason: "test"})
	if !tc.c.active {
		tc.t.Fatal("controller not elected")
	}
	tc.runQueued()
}

// runQueued processes the events queued so far.
func (tc *testCluster) runQueued() {
	for _, ev := range tc.c.events.drain() {
		tc.process(ev)
	}
}

// shutdown sends broker id's ControlledShutdown with its current broker
// epoch and returns the answer's error code.
func (tc *testCluster) shutdown(id int32) int16 {
	tc.t.Helper()
	_, st, err := tc.zk.Get(zkdata.BrokerPath(id))
	if err != nil {
		tc.t.Fatal(err)
	}
	reply := make(chan *kmsg.ControlledShutdownResponse, 1)
	tc.process(evShutdown{id: id, epoch: st.Czxid, reply: reply})
	return (<-reply).ErrorCode
}

// bounce re-registers broker id (a new czxid) and delivers the broker change.
func (tc *testCluster) bounce(id int32) {
	tc.zk.remove(zkdata.BrokerPath(id))
	tc.registerBroker(id)
	tc.process(evBrokerChange{gen: tc.c.gen})
}

// kill removes broker id's registration and delivers the broker change.
func (tc *testCluster) kill(id int32) {
	tc.zk.remove(zkdata.BrokerPath(id))
	tc.process(evBrokerChange{gen: tc.c.gen})
}

// isrChange writes a partition state as its leader would and notifies the
// controller (Partition.expandIsr plus the ISR change notification).
func (tc *testCluster) isrChange(p int32, st zkdata.PartitionState) {
	tc.zk.put(zkdata.PartitionStatePath("t", p), zkdata.EncodePartitionState(st))
	tc.zk.put(zkdata.ISRChangePath+"/isr_change_0000000001", zkdata.EncodeTopicPartitions([]zkdata.TopicPartition{{Topic: "t", Partition: p}}))
	tc.process(evISRChange{gen: tc.c.gen})
}
