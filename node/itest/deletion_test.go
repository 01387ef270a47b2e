package itest

import (
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/clustertest"
	"github.com/zkchaos/zkchaos/internal/dockertest"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

// A topic deleted while one of its replicas' brokers is paused (SIGSTOP,
// past its session) is not deleted until that broker is back and has
// deleted its logs (TopicDeletionManager: the replica is
// ReplicaDeletionIneligible while its broker is down, and the broker's
// start-up resumes the deletion). Created again at the same name, every
// partition comes back led, at leader epoch 0, and the checkers take it as
// a new topic.
func TestTopicDeletedAndRecreatedWhileABrokerIsPaused(t *testing.T) {
	dockertest.Require(t)
	if testing.Short() {
		t.Skip("container test")
	}
	e := setup(t, "", nil)
	ctrl := e.createTopicT()
	e.createTopic("d", 3)
	e.waitEvent(ctrl, 30*time.Second, "d's partition states", 0, func(ev history.Event) bool {
		return ev.Kind == history.KindZKWrite && ev.ZKWrite.Path == zkdata.PartitionStatePath("d", 2) && ev.ZKWrite.Outcome == history.ZKOK
	})
	paused := other(ctrl)
	ctx := ctxT(t)
	if err := e.node(paused).Container.Signal(ctx, "SIGSTOP"); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = e.node(paused).Container.Signal(ctx, "SIGCONT")
		}
	}()
	if _, err := e.zk.Create(zkdata.DeleteTopicPath("d"), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	// Past the paused broker's session: it is dead to the controller, and
	// the deletion waits for it.
	time.Sleep(3 * sessionTimeout)
	if _, _, err := e.get(zkdata.TopicPath("d")); err != nil {
		t.Fatalf("%s while broker %d, which holds a replica, was paused: %v", zkdata.TopicPath("d"), paused, err)
	}
	if _, ok := e.findEvent(ctrl, 0, func(ev history.Event) bool {
		return ev.Kind == history.KindTopicDeletion && ev.Deletion.Topic == "d" && ev.Deletion.Step == history.DeletionIneligible
	}); !ok {
		t.Fatalf("controller %d never halted the deletion of d while broker %d was paused", ctrl, paused)
	}
	if err := e.node(paused).Container.Signal(ctx, "SIGCONT"); err != nil {
		t.Fatal(err)
	}
	resumed = true
	clustertest.WaitFor(t, 60*time.Second, "d deleted", func() bool {
		_, _, err := e.get(zkdata.TopicPath("d"))
		return err == zk.ErrNoNode
	})
	for id := 1; id <= 3; id++ {
		for p := int32(0); p < 3; p++ {
			if _, ok := e.findEvent(id, 0, func(ev history.Event) bool {
				return ev.Kind == history.KindTopicDeletion && ev.Deletion.Step == history.PartitionDeleted && ev.Deletion.Topic == "d" && ev.Deletion.Partitions[0] == p
			}); !ok {
				t.Errorf("broker %d logged no deletion of d-%d", id, p)
			}
		}
	}
	e.createTopic("d", 3)
	for _, topic := range []string{"t", "d"} {
		for p := int32(0); p < 3; p++ {
			clustertest.WaitFor(t, 60*time.Second, "a leader of "+topic, func() bool {
				d, _, err := e.get(zkdata.PartitionStatePath(topic, p))
				if err != nil {
					return false
				}
				st, err := zkdata.DecodePartitionState(topic, p, d)
				return err == nil && st.Leader >= 0 && (topic != "d" || st.LeaderEpoch == 0)
			})
		}
	}
	for _, c := range []checkers.Checker{checkers.TopicDeletion{}, checkers.LeaderUniqueness{}, checkers.ControllerFencing{}, checkers.BrokerFencing{}} {
		r := e.checkHistory(c)
		t.Logf("%s: %s: %s", r.Checker, r.Verdict, r.Explanation)
		if r.Verdict != checkers.Valid || (c.Name() == "topic-deletion" && !strings.HasPrefix(r.Explanation, "1 topic deletions")) {
			t.Errorf("%s: %s: %s", r.Checker, r.Verdict, r.Explanation)
		}
	}
}
