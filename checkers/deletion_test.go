package checkers

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
)

// A topic deleted and created again at the same name (leader epochs,
// offsets and znode versions back at 0, its partition without a leader for
// seconds while being deleted, the new leader outside the old incarnation's
// last ISR) is a new partition to every checker: the whole run is valid.
func TestEveryCheckerTakesARecreatedTopicAsNew(t *testing.T) {
	h := deletionRun(false)
	rs, v := Run(h, All(DefaultConfig()))
	for _, r := range rs {
		if r.Verdict != Valid {
			t.Errorf("%s: %s: %s", r.Checker, r.Verdict, r.Explanation)
		}
	}
	if v != Valid {
		t.Fatalf("verdict %s", v)
	}
}

// A broker that goes on appending to the log of a partition it deleted
// (StopReplica with delete) acts on an incarnation that no longer exists:
// topic-deletion names the deletion and the append.
func TestTopicDeletionFlagsABrokerServingADeletedPartition(t *testing.T) {
	r := TopicDeletion{}.Check(deletionRun(true))
	if r.Verdict != Invalid || !strings.Contains(r.Explanation, "broker 3 deleted its replica of d-0") ||
		!strings.Contains(r.Explanation, "appended offsets 5-5 at leader epoch 2") {
		t.Fatalf("%s: %s", r.Verdict, r.Explanation)
	}
}

// TopicDeletionManager.completeDeleteTopic runs only once every replica is
// ReplicaDeletionSuccessful: a completion with a replica that logged no
// deletion since the deletion began is invalid, naming it.
func TestTopicDeletionFlagsACompletionBeforeEveryReplica(t *testing.T) {
	h := deletionRun(false)
	evs := slices.Clone(h.Events)
	drop := -1
	for i, e := range evs {
		if e.Kind == history.KindTopicDeletion && e.Deletion.Step == history.PartitionDeleted && e.Node == 3 && drop < 0 {
			drop = i
		}
	}
	if drop < 0 {
		t.Fatal("no partition_deleted of broker 3")
	}
	evs = slices.Delete(evs, drop, drop+1)
	for i := range evs {
		evs[i].Index = i
	}
	r := TopicDeletion{}.Check(history.New(evs))
	if r.Verdict != Invalid || !strings.Contains(r.Explanation, "completed the deletion of topic d") || !strings.Contains(r.Explanation, "d-0 on broker 3") {
		t.Fatalf("%s: %s", r.Verdict, r.Explanation)
	}
	if r := (TopicDeletion{}).Check(deletionRun(false)); r.Verdict != Valid {
		t.Fatalf("clean deletion: %s: %s", r.Verdict, r.Explanation)
	}
}

// A topic deleted, created again, and deleted a second time without being
// created again: the second deletion opens its own window, which stays
// open (the partition is gone, no leader is owed), and a controller that
// resumes it at its failover (ineligible, then started) opens none.
func TestSecondDeletionOfATopicOpensItsOwnWindow(t *testing.T) {
	ms := historytest.Ms
	d := newDeletionEvents()
	t0 := historytest.T0
	d.state(t0, 1, 0)
	d.step(t0+100*ms, 3, history.DeletionStarted)
	d.state(t0+101*ms, -1, 1)
	d.step(t0+120*ms, 3, history.DeletionCompleted)
	d.state(t0+200*ms, 1, 0) // created again: the second incarnation
	d.step(t0+600*ms, 3, history.DeletionStarted)
	d.state(t0+601*ms, -1, 1)
	d.step(t0+900*ms, 1, history.DeletionIneligible) // the next controller resumes it
	d.step(t0+1000*ms, 1, history.DeletionStarted)
	d.step(t0+1020*ms, 1, history.DeletionCompleted)
	h := d.history()
	dw := findDeletionWindows(h)
	if n := len(dw["d"]); n != 2 {
		t.Fatalf("%d windows, want 2: %+v", n, dw["d"])
	}
	for _, tc := range []struct {
		at   int64
		want bool
	}{
		{t0 + 50*ms, false}, {t0 + 150*ms, true}, {t0 + 300*ms, false}, {t0 + 700*ms, true}, {t0 + 5000*ms, true},
	} {
		if got := dw.during("d", tc.at); got != tc.want {
			t.Errorf("during at +%dms: %v, want %v", (tc.at-t0)/ms, got, tc.want)
		}
	}
}

// A partition offline when its topic's deletion begins, and gone at the
// end, was owed a leader only until the deletion began: briefly offline
// before it, valid; offline past the grace before it, invalid.
func TestAvailabilityOwesADeletedPartitionOnlyUntilItsDeletion(t *testing.T) {
	ms := historytest.Ms
	t0 := historytest.T0
	build := func(deleteAt int64) *history.History {
		d := newDeletionEvents()
		d.state(t0, 1, 0)
		d.state(t0+1000*ms, -1, 1)
		d.step(deleteAt, 3, history.DeletionStarted)
		d.step(t0+40_000*ms, 3, history.DeletionCompleted)
		return d.history()
	}
	for _, tc := range []struct {
		name     string
		deleteAt int64
		want     Verdict
	}{
		{"deleted 1 s after it went offline", t0 + 2000*ms, Valid},
		{"offline 19 s before its deletion began", t0 + 20_000*ms, Invalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Availability{Grace: 10 * time.Second}.Check(build(tc.deleteAt))
			if r.Verdict != tc.want {
				t.Fatalf("%s, want %s: %s", r.Verdict, tc.want, r.Explanation)
			}
		})
	}
}

// deletionEvents builds a history of topic d's one partition (ISR [3]):
// its state znode as the watcher saw it, and the deletion steps the
// controllers logged.
type deletionEvents struct {
	evs  []history.Event
	zxid int64
}

func newDeletionEvents() *deletionEvents { return &deletionEvents{zxid: 100} }

func (d *deletionEvents) state(at int64, leader int32, ver int32) {
	d.zxid++
	d.evs = append(d.evs, history.Event{Time: at, Source: "zk", Kind: history.KindZKWatch, Watch: &history.Watch{
		Path: "/brokers/topics/d/partitions/0/state", Type: history.WatchChanged, Mzxid: d.zxid, Version: ver,
		State: &history.PartitionState{Topic: "d", Partition: 0, Leader: leader, ISR: []int32{3}}}})
}

func (d *deletionEvents) step(at int64, node int32, s string) {
	d.evs = append(d.evs, history.Event{Time: at, Source: fmt.Sprintf("n%d", node), Node: node, Kind: history.KindTopicDeletion,
		Deletion: &history.TopicDeletion{Topic: "d", Step: s, Partitions: []int32{0}}})
}

func (d *deletionEvents) history() *history.History {
	h := &history.History{Events: d.evs}
	for i := range h.Events {
		h.Events[i].Index = i
	}
	return h
}

// The replicas a completed deletion owes are those of the LeaderAndIsr of
// the highest leader epoch: a reassignment that removed broker 1 ends at
// epoch 4 with replicas [3 2], and broker 1's receipt of the epoch 2
// request ([3 2 1]) logged after it (delivered late) names a replica the
// partition no longer had. Taking the last receipt logged owed broker 1 a
// deletion.
func TestTopicDeletionOwesTheNewestReplicaSet(t *testing.T) {
	lai := func(node, epoch int32, replicas ...int32) history.Event {
		return history.Event{Source: fmt.Sprintf("n%d", node), Node: node, Kind: history.KindControlRequest, Control: &history.Control{
			API: history.APILeaderAndIsr, ControllerID: 3, ControllerEpoch: 1, Verdict: history.VerdictAccepted,
			Partitions: []history.ControlPartition{{Topic: "d", Partition: 0, Leader: 3, LeaderEpoch: epoch, ISR: replicas, Replicas: replicas}}}}
	}
	step := func(node int32, s string) history.Event {
		return history.Event{Source: fmt.Sprintf("n%d", node), Node: node, Kind: history.KindTopicDeletion,
			Deletion: &history.TopicDeletion{Topic: "d", Step: s, Partitions: []int32{0}, ControllerEpoch: 1}}
	}
	evs := []history.Event{
		lai(3, 4, 3, 2), lai(2, 4, 3, 2), lai(1, 2, 3, 2, 1),
		step(3, history.DeletionStarted), step(2, history.PartitionDeleted), step(3, history.PartitionDeleted), step(3, history.DeletionCompleted),
	}
	for i := range evs {
		evs[i].Index, evs[i].Time = i, historytest.T0+int64(i)*historytest.Ms
	}
	if r := (TopicDeletion{}).Check(history.New(evs)); r.Verdict != Valid {
		t.Fatalf("%s: %s", r.Verdict, r.Explanation)
	}
}
