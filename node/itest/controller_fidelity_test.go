package itest

import (
	"context"
	"time"

	"testing"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/node/failpoint"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

// KafkaZkClient.retryRequestsUntilConnected: a controller request that
// cannot reach ZooKeeper waits for the connection (re-issued after a
// connection loss) instead of giving up after a request timeout. Here the
// controller, held before it reads /brokers/ids for a broker's death, is cut
// off from every ZooKeeper server for 0.8 s (well within its 6 s session:
// cutting and healing take a second more on a loaded machine, and the
// client's reconnection after the heal must still find the session) and
// its read starts inside that cut; with --zk-request-timeout=200ms the node
// before this change gave the BrokerChange up and the dead broker's
// partition kept its dead leader. Now the read waits and the partition gets
// a new leader.
func TestControllerWaitsForZooKeeper(t *testing.T) {
	e := setupArgs(t, []string{"--zk-request-timeout=200ms", "--zk-session-timeout=6s"}, nil)
	ctx := ctxT(t)
	c := e.createTopicT()
	v := other(c)
	// t-p is led by p%3+1 (createTopic's assignment, first replica).
	p := int32((v + 2) % 3)
	path := zkdata.PartitionStatePath("t", p)
	n0 := e.killHeldInBrokerChange(ctx, c, v)
	held := time.Now()
	time.Sleep(time.Until(held.Add(1200 * time.Millisecond)))
	net := e.cutFromZooKeeper(ctx, c)
	time.Sleep(800 * time.Millisecond)
	if err := net.HealAll(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("n%d cut off from ZooKeeper %s to %s after its BrokerChange hold began (the hold ends at 1.5s)",
		c, 1200*time.Millisecond, time.Since(held).Round(time.Millisecond))
	ev, _ := e.waitEvent(c, 15*time.Second, "the dead leader's partition re-elected", n0, func(ev history.Event) bool {
		return ev.Kind == history.KindZKWrite && ev.ZKWrite.Path == path && ev.ZKWrite.Outcome == history.ZKOK &&
			ev.ZKWrite.State != nil && ev.ZKWrite.State.Leader != int32(v)
	})
	if _, ok := e.findEvent(c, 0, isKind(history.KindControllerResigned)); ok {
		t.Fatalf("n%d resigned: the cut was meant to stay within its session", c)
	}
	t.Logf("t-%d: leader %d at epoch %d after n%d died", p, ev.ZKWrite.State.Leader, ev.ZKWrite.State.LeaderEpoch, v)
}

// KafkaController's beforeInitializingSession: when the client finds its
// session expired, the queued events are dropped and Expire resigns the
// controller before a new session is made; the event running then fails at
// its next ZooKeeper request (ZooKeeperClientExpiredException). Here the
// controller, held in a dead broker's BrokerChange, is cut off from every
// ZooKeeper server for twice its session timeout. Before, go-zookeeper made
// the new session at once and the held BrokerChange went on in it under the
// old controller epoch: it elected new leaders and wrote them (refused by
// the epoch fence, another broker being controller by then). Now no
// partition state is written at the old epoch once the cut began.
func TestControllerResignsAtSessionExpiry(t *testing.T) {
	e := setupArgs(t, nil, nil)
	ctx := ctxT(t)
	c := e.createTopicT()
	v := other(c)
	var epoch int32
	for _, ev := range e.events(c) {
		if ev.Kind == history.KindControllerElected {
			epoch = ev.Controller.Epoch
		}
	}
	n0 := e.killHeldInBrokerChange(ctx, c, v)
	cut := time.Now()
	net := e.cutFromZooKeeper(ctx, c)
	time.Sleep(2 * sessionTimeout)
	if err := net.HealAll(ctx); err != nil {
		t.Fatal(err)
	}
	resigned, _ := e.waitEvent(c, 20*time.Second, "the controller's resignation", n0, isKind(history.KindControllerResigned))
	// Room for a BrokerChange that went on to write.
	time.Sleep(2 * time.Second)
	for _, ev := range e.events(c)[n0:] {
		if w := ev.ZKWrite; ev.Kind == history.KindZKWrite && w.State != nil && w.ControllerEpoch == epoch && w.Start >= cut.UnixNano() {
			t.Fatalf("n%d wrote %s at its old controller epoch %d after its session was cut (outcome %s; resigned %q)",
				c, w.Path, epoch, w.Outcome, resigned.Controller.Reason)
		}
	}
	t.Logf("n%d resigned epoch %d: %q", c, resigned.Controller.Epoch, resigned.Controller.Reason)
}

// killHeldInBrokerChange arms controller c's BrokerChange failpoint with a
// 1.5 s sleep, kills broker v, and returns once the controller holds in
// the BrokerChange for v's death, with c's event count before the kill.
func (e *env) killHeldInBrokerChange(ctx context.Context, c, v int) (n0 int) {
	e.t.Helper()
	e.admin(c, "PUT", "/failpoints/"+failpoint.ControllerBeforeBrokerChange, "1*sleep(1500ms)")
	n0 = len(e.events(c))
	if err := nemesis.Kill(ctx, e.node(v).Container); err != nil {
		e.t.Fatal(err)
	}
	e.waitEvent(c, 20*time.Second, "failpoint "+failpoint.ControllerBeforeBrokerChange, n0, failpointStart(failpoint.ControllerBeforeBrokerChange))
	return n0
}
