package checkers

import (
	"slices"
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/history"
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
