package workloads

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/clustertest"
	"github.com/zkchaos/zkchaos/zklayout"
	"github.com/zkchaos/zkchaos/zklayout/zkio"
)

func TestNewAdminRejectsBadConfig(t *testing.T) {
	good := AdminConfig{ZKServers: []string{"zk:2181"}, Topic: "t", Partitions: 1, Brokers: []int{1}}
	stop := func(context.Context, int) error { return nil }
	tests := []struct {
		name string
		mod  func(*AdminConfig)
		want string // "" means accepted
	}{
		{"good", func(*AdminConfig) {}, ""},
		{"no zk", func(c *AdminConfig) { c.ZKServers = nil }, "required"},
		{"no brokers", func(c *AdminConfig) { c.Brokers = nil }, "required"},
		{"unknown op", func(c *AdminConfig) { c.Ops = []string{"alter-configs"} }, `unknown operation "alter-configs"`},
		{"shutdown without hooks", func(c *AdminConfig) { c.Ops = []string{history.FControlledShutdown} }, "needs StopBroker"},
		{"half hooks", func(c *AdminConfig) { c.StopBroker = stop }, "go together"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.mod(&c)
			_, err := NewAdmin(c, nil)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("NewAdmin: %v, want %q", err, tt.want)
			}
		})
	}
}

// Without broker hooks the default op set leaves controlled shutdown out;
// with them it is in.
func TestAdminDefaultOps(t *testing.T) {
	c := AdminConfig{ZKServers: []string{"zk:2181"}, Topic: "t", Partitions: 1, Brokers: []int{1}}
	a, err := NewAdmin(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(a.ops, history.FControlledShutdown) {
		t.Fatalf("ops %v include controlled-shutdown without hooks", a.ops)
	}
	hook := func(context.Context, int) error { return nil }
	c.StopBroker, c.StartBroker = hook, hook
	if a, _ = NewAdmin(c, nil); !slices.Equal(a.ops, AdminOps) {
		t.Fatalf("ops %v, want %v", a.ops, AdminOps)
	}
}

func TestPickOpIsSeededAndWeighted(t *testing.T) {
	draw := func(seed uint64) []string {
		r := rand.New(rand.NewPCG(seed, 0xad317))
		var out []string
		for range 400 {
			out = append(out, pickOp(r, AdminOps))
		}
		return out
	}
	a, b := draw(7), draw(7)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed drew different operations")
	}
	if slices.Equal(a, draw(8)) {
		t.Fatal("different seeds drew the same 400 operations")
	}
	n := map[string]int{}
	for _, o := range a {
		n[o]++
	}
	// Weights 3:3:1:1:1 of 400: expected 133, 133, 44, 44, 44.
	if n[history.FReassign] < 90 || n[history.FPreferredElection] < 90 || n[history.FCreateTopic] > 90 || n[history.FControlledShutdown] > 90 ||
		n[history.FCreateTopic] == 0 || n[history.FDeleteTopic] == 0 || n[history.FDeleteTopic] > 90 {
		t.Fatalf("draw counts %v do not follow the weights", n)
	}
}

func TestRotate(t *testing.T) {
	if got := rotate([]int{1, 2, 3}); !slices.Equal(got, []int{2, 3, 1}) {
		t.Fatalf("rotate = %v", got)
	}
	in := []int{1, 2}
	rotate(in)
	if !slices.Equal(in, []int{1, 2}) {
		t.Fatal("rotate changed its argument")
	}
}

func TestCreateCertainlyFailed(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{zk.ErrNodeExists, true},
		{fmt.Errorf("wrapped: %w", zk.ErrNoNode), true},
		{zk.ErrConnectionClosed, false},
		{context.DeadlineExceeded, false},
	}
	for _, tt := range tests {
		if got := createCertainlyFailed(tt.err); got != tt.want {
			t.Errorf("createCertainlyFailed(%v) = %v", tt.err, got)
		}
	}
}

// Against a real ensemble and three node programs with every fix on, every
// admin operation the workload invokes is completed by the controller (ok),
// each kind at least once, and the history it writes is valid.
func TestAdminOpsCompleteOnRealCluster(t *testing.T) {
	c, _ := clustertest.Start(t, cluster.Options{ZK: cluster.ZKOptions{Servers: 1}})
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	bin, err := docker.BuildGoBinary(ctx, "./cmd/kafkanode", "kafkanode-admintest")
	if err != nil {
		t.Fatal(err)
	}
	const topic, parts = "chaos", 3
	args := func(id int) []string {
		return append(c.NodeFlags(id), "--zk-session-timeout=6s")
	}
	for id := 1; id <= 3; id++ {
		if _, err := c.StartNode(ctx, cluster.NodeSpec{ID: id, Binary: bin, Args: args(id)}); err != nil {
			t.Fatal(err)
		}
	}
	conn := clustertest.Connect(t, c.ZKConnect(), 10*time.Second, nil)
	clustertest.WaitConnected(t, conn, 30*time.Second)
	clustertest.WaitFor(t, 30*time.Second, "three registered brokers", func() bool {
		kids, _, err := conn.Children(zklayout.BrokerIDsPath)
		return err == nil && len(kids) == 3
	})
	if err := zkio.CreateTopic(conn, topic, zklayout.Assignment{0: {1, 2, 3}, 1: {2, 3, 1}, 2: {3, 1, 2}}); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, 60*time.Second, "partition leaders", func() bool {
		for p := 0; p < parts; p++ {
			s, _, err := zkio.ReadPartitionState(conn, topic, int32(p))
			if err != nil || s.Leader < 0 {
				return false
			}
		}
		return true
	})

	hdir := filepath.Join(c.RunDir, "history")
	stop := func(ctx context.Context, id int) error {
		n := c.Node(id)
		if err := n.Container.Signal(ctx, "SIGTERM"); err != nil {
			return err
		}
		return n.Container.WaitExited(ctx)
	}
	start := func(ctx context.Context, id int) error { return c.Node(id).Container.Start(ctx) }
	a, err := NewAdmin(AdminConfig{
		ZKServers: c.ZKConnect(), Topic: topic, Partitions: parts, Brokers: []int{1, 2, 3},
		Interval: 300 * time.Millisecond, OpTimeout: 20 * time.Second, Seed: 3,
		StopBroker: stop, StartBroker: start,
	}, func(name string) (*history.Writer, error) {
		return history.Create(filepath.Join(hdir, name+".jsonl"), name, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 40*time.Second)
	defer rcancel()
	if err := a.Run(rctx); err != nil {
		t.Fatal(err)
	}

	f, err := os.Open(filepath.Join(hdir, "admin.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, _, err := history.Decode(f, "admin.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	h := &history.History{Events: evs}
	ops, orphans := history.Operations(h)
	if len(orphans) > 0 {
		t.Fatalf("completions without invoke at %v", orphans)
	}
	okBy := map[string]int{}
	for i, op := range ops {
		o := op.Op()
		last := i == len(ops)-1 // may have been cut short by the end of the run
		switch {
		case op.Outcome() == history.OpOK:
			okBy[o.F]++
			t.Logf("%s %s-%d broker %d: %s", o.F, o.Topic, o.Partition, o.Broker, op.Complete.Op.Value)
		case last && op.Outcome() == history.OpInfo && strings.Contains(op.Complete.Op.Error, "workload ended"):
		default:
			msg := ""
			if op.Complete != nil {
				msg = op.Complete.Op.Error
			}
			t.Errorf("%s %s-%d broker %d: %s %s", o.F, o.Topic, o.Partition, o.Broker, op.Outcome(), msg)
		}
	}
	for _, f := range AdminOps {
		if okBy[f] == 0 {
			t.Errorf("no %s completed (ok counts %v)", f, okBy)
		}
	}
}

// A controlled shutdown drawn for a broker a fault holds is left out: no
// invoke in the history, no stop, and the generator moves on as the seed
// gives it (no ZooKeeper needed: it returns before asking).
func TestControlledShutdownLeavesAHeldBrokerAlone(t *testing.T) {
	var buf bytes.Buffer
	stops := 0
	cfg := AdminConfig{Brokers: []int{2}, Topic: "chaos", Partitions: 1,
		StopBroker:  func(context.Context, int) error { stops++; return nil },
		StartBroker: func(context.Context, int) error { return nil },
		Held:        func(id int) bool { return id == 2 }}
	o := &adminOp{cfg: cfg, w: history.NewWriter(&buf, "admin", 0), rng: rand.New(rand.NewPCG(1, 2))}
	o.controlledShutdown(t.Context())
	if stops != 0 || buf.Len() != 0 {
		t.Fatalf("held broker: %d stops, history %q", stops, buf.String())
	}
}

// A reassignment or preferred election drawn for a partition a fault holds
// is left out: no invoke, no znode written (no ZooKeeper needed: it returns
// before asking); other partitions are not held.
func TestPartitionOpsLeaveAHeldPartitionAlone(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   func(*adminOp, context.Context)
	}{
		{"reassign", (*adminOp).reassign},
		{"preferred-election", (*adminOp).preferred},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			asked := []int32{}
			cfg := AdminConfig{Brokers: []int{1, 2, 3}, Topic: "chaos", Partitions: 3,
				HeldPartition: func(p int32) bool { asked = append(asked, p); return true }}
			o := &adminOp{cfg: cfg, w: history.NewWriter(&buf, "admin", 0), rng: rand.New(rand.NewPCG(1, 2))}
			tc.op(o, t.Context())
			if buf.Len() != 0 || len(asked) != 1 {
				t.Fatalf("held partition: asked %v, history %q", asked, buf.String())
			}
		})
	}
}

// Before the workload created a topic there is nothing it may delete: the
// workload topic is never deleted, so no operation is invoked (no
// ZooKeeper needed: it returns before asking).
func TestDeleteTopicNeedsATopicOfItsOwn(t *testing.T) {
	var buf bytes.Buffer
	o := &adminOp{cfg: AdminConfig{Brokers: []int{1}, Topic: "chaos", Partitions: 1}, w: history.NewWriter(&buf, "admin", 0), rng: rand.New(rand.NewPCG(1, 2))}
	o.deleteAndRecreate(t.Context())
	if buf.Len() != 0 {
		t.Fatalf("history %q, want nothing invoked", buf.String())
	}
}
