package reports

import (
	"fmt"
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
)

// adminAndFailpointRun is a run's history with the events the nemesis's
// failpoint fault and the admin workload write: the nemesis's fault_start
// and fault_stop naming the window, the node's own report of reaching it,
// and one operation of each admin kind, the way workloads/admin.go records
// them (source "admin", a controlled shutdown on partition -1).
func adminAndFailpointRun() *history.History {
	b := historytest.New()
	b.Add(history.Event{Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseWorkload, Mark: history.PhaseBegin}})
	b.At(100).Add(history.Event{Kind: history.KindFaultStart, Fault: &history.Fault{ID: "f1", Name: "failpoint",
		Targets: []string{"n1"}, Failpoint: "controller-before-broker-change",
		Detail: "controller-before-broker-change on n1 (controller): 1*sigstop, provoked by bounce-other of n2"}})
	b.At(150).Add(history.Event{Kind: history.KindFaultStart, Node: 1, Fault: &history.Fault{ID: "fp1", Name: "failpoint",
		Failpoint: "controller-before-broker-change", Detail: "sigstop"}})
	b.At(700).Add(history.Event{Kind: history.KindFaultStop, Fault: &history.Fault{ID: "f1", Name: "failpoint",
		Targets: []string{"n1"}, Failpoint: "controller-before-broker-change", Detail: "window reached"}})
	admin := func(at int64, o history.ClientOp) {
		o.Process = 0
		b.At(at).Add(history.Event{Kind: history.KindOp, Source: "admin", Op: &o})
	}
	admin(200, history.ClientOp{Type: history.OpInvoke, F: history.FControlledShutdown, Broker: 2, Topic: "chaos", Partition: -1})
	admin(400, history.ClientOp{Type: history.OpOK, F: history.FControlledShutdown, Broker: 2, Topic: "chaos", Partition: -1,
		Value: "broker 2 registered again: broker epoch 4294967303 → 4294967350"})
	admin(410, history.ClientOp{Type: history.OpInvoke, F: history.FReassign, Topic: "chaos", Partition: 1, Value: "2,3,1"})
	admin(500, history.ClientOp{Type: history.OpOK, F: history.FReassign, Topic: "chaos", Partition: 1,
		Value: "replicas 2,3,1, leader 2, leader epoch 3, isr 2,3,1"})
	admin(510, history.ClientOp{Type: history.OpInvoke, F: history.FPreferredElection, Topic: "chaos", Partition: 0})
	admin(600, history.ClientOp{Type: history.OpInfo, F: history.FPreferredElection, Topic: "chaos", Partition: 0,
		Error: "preferred election not completed within 15s"})
	admin(610, history.ClientOp{Type: history.OpInvoke, F: history.FCreateTopic, Topic: "chaos-admin-1", Value: "0:1,2,3"})
	admin(650, history.ClientOp{Type: history.OpOK, F: history.FCreateTopic, Topic: "chaos-admin-1", Value: "leader 1, leader epoch 0, isr 1,2,3"})
	b.At(1000).Add(history.Event{Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseWorkload, Mark: history.PhaseEnd}})
	return b.History()
}

// The failpoint fault and the admin operations are on the fault lane, and
// the rendered report names what each acted on (a controlled shutdown names
// its broker, not a partition "chaos--1").
func TestAdminOpsAndFailpointOnTheFaultLane(t *testing.T) {
	h := adminAndFailpointRun()
	tl := buildTimeline(h)
	var lane []string
	for _, s := range tl.faults {
		lane = append(lane, fmt.Sprintf("%d-%d %s", (s.from-historytest.T0)/historytest.Ms, (s.to-historytest.T0)/historytest.Ms, s.label))
	}
	want := []string{
		"100-700 controller-before-broker-change n1",
		"150-1000 controller-before-broker-change",
		"200-400 controlled-shutdown n2",
		"410-500 reassign chaos-1",
		"510-600 preferred-election chaos-0 (info)",
		"610-650 create-topic topic chaos-admin-1",
	}
	if got := strings.Join(lane, "; "); got != strings.Join(want, "; ") {
		t.Fatalf("fault lane:\n got %s\nwant %s", got, strings.Join(want, "; "))
	}

	dir := t.TempDir()
	if err := history.WriteDir(dir, h.Events); err != nil {
		t.Fatal(err)
	}
	html := render(t, dir)
	for _, s := range []string{
		"controller-before-broker-change n1",
		"controlled-shutdown n2",
		"process 0 ok controlled-shutdown broker 2: broker 2 registered again",
		"reassign chaos-1",
		"create-topic topic chaos-admin-1",
	} {
		if !strings.Contains(html, s) {
			t.Errorf("report lacks %q", s)
		}
	}
	if strings.Contains(html, "chaos--1") {
		t.Error(`report names a controlled shutdown's partition "chaos--1"`)
	}
}

// delete-recreate-topic is a window on the fault lane in a colour of its
// own, its title naming the topic the nemesis deleted.
func TestDeleteRecreateTopicOnTheFaultLane(t *testing.T) {
	start := history.Event{Kind: history.KindFaultStart, Time: 100, Source: "nemesis",
		Fault: &history.Fault{ID: "f1", Name: "delete-recreate-topic", Detail: "deletion of topic chaos-rf2 asked for (assignment 0:1,2)"}}
	sp := faultSpan(history.FaultWindow{Start: start, End: 900})
	if sp.label != "delete-recreate-topic" || sp.color != "#7b4f9d" || !strings.Contains(sp.title, "chaos-rf2") {
		t.Fatalf("span %+v", sp)
	}
}

// A topic_deletion event reads as its step, topic and partitions.
func TestSummarizeTopicDeletion(t *testing.T) {
	e := history.Event{Kind: history.KindTopicDeletion, Deletion: &history.TopicDeletion{Topic: "chaos-rf2", Step: history.DeletionIneligible,
		Partitions: []int32{0, 1, 2}, ControllerEpoch: 3, Reason: "offline replicas"}}
	if got, want := Summarize(&e), "deletion of topic chaos-rf2 ineligible, partitions [0 1 2]; controller epoch 3: offline replicas"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
