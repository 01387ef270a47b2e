package itest

// Data-plane behaviours that follow Kafka 2.6.3 under faults, against a real
// ZooKeeper ensemble and three node-program containers.

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/history"
)

// Partition.isFollowerOutOfSync (Kafka 2.6.3): a follower whose log end
// offset equals the leader's stays in the ISR however long it has not
// fetched; it leaves only once the leader has appended something it lacks
// and it has not caught up for replica.lag.time.max.ms. Here the follower is
// cut off from the leader (its ZooKeeper session stays up) while nothing is
// produced, for four lag times: no shrink; then one record is produced and
// the leader drops it.
func TestDataPlaneIdleCaughtUpFollowerStaysInISR(t *testing.T) {
	const lag = time.Second
	e := setupArgs(t, []string{"--replica-lag-time-max=" + lag.String()}, nil)
	ctx := ctxT(t)
	md := e.healthyTopic(1)
	leader := int(md[0].Leader)
	follower := other(leader, e.controller(10*time.Second))
	kc := e.kgoClient(kgo.AllISRAcks(), 0, 3)
	produce := func(v string) {
		if err := kc.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	for i := range 5 {
		produce(fmt.Sprintf("before-%d", i))
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.logs(follower)[0].LEO != e.logs(leader)[0].LEO {
		if time.Now().After(deadline) {
			t.Fatalf("n%d never caught up with n%d", follower, leader)
		}
		time.Sleep(50 * time.Millisecond)
	}
	shrunk := func(ev history.Event) bool {
		return ev.Kind == history.KindISRChange && ev.ISR.Topic == dpTopic && ev.ISR.Partition == 0 &&
			ev.ISR.Action == history.ISRShrink && !slices.Contains(ev.ISR.New, int32(follower))
	}
	n0 := len(e.events(leader))
	e.partitioned(ctx, []*docker.Container{e.node(leader).Container}, []*docker.Container{e.node(follower).Container})
	time.Sleep(4 * lag)
	if ev, found := e.findEvent(leader, n0, shrunk); found {
		t.Fatalf("n%d dropped caught-up n%d from the ISR with nothing appended: %v → %v", leader, follower, ev.ISR.Old, ev.ISR.New)
	}
	if isr := e.logs(leader)[0].ISR; !slices.Contains(isr, int32(follower)) {
		t.Fatalf("ISR %v at n%d lost the caught-up n%d", isr, leader, follower)
	}
	kl := e.kgoClient(kgo.LeaderAck(), 0, 3)
	if err := kl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce acks=1: %v", err)
	}
	appended := time.Now()
	ev, _ := e.waitEvent(leader, 5*lag, "ISR shrink once the follower lacks a record", n0, shrunk)
	t.Logf("n%d left the ISR %s after the append (lag time %s): %v → %v", follower,
		time.Unix(0, ev.Time).Sub(appended).Round(time.Millisecond), lag, ev.ISR.Old, ev.ISR.New)
}
