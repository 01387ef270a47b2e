package eventlog

import (
	"bytes"
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/history"
)

func TestEventsAreValidHistory(t *testing.T) {
	var file, text bytes.Buffer
	l := New(history.NewWriter(&file, "n2", 2), 2, &text)
	l.Emit(history.Event{Kind: history.KindNodeStart, Process: &history.Process{Incarnation: 1, Bugs: []string{"KAFKA-532"}}})
	l.Emit(history.Event{Kind: history.KindBrokerRegistered, Registration: &history.Registration{BrokerID: 2, BrokerEpoch: 77}})
	l.Emit(history.Event{Kind: history.KindControllerElected, Controller: &history.ControllerRun{Epoch: 3, EpochZkVersion: 3}})
	l.ZKWrite(history.ZKWrite{Path: "/x", Op: "set", Outcome: history.ZKBadVersion})
	l.Emit(history.Event{Kind: history.KindControlRequest, Control: &history.Control{API: history.APILeaderAndIsr, Verdict: history.VerdictRejected, ErrorCode: 11}})
	l.Emit(history.Event{Kind: history.KindControlSent, Control: &history.Control{API: history.APIStopReplica, TargetBroker: 1}})
	l.Emit(history.Event{Kind: history.KindControlledShutdown, Shutdown: &history.Shutdown{BrokerID: 1, Verdict: history.VerdictAccepted}})
	l.Emit(history.Event{Kind: history.KindRoleChange, Role: &history.Role{Topic: "t", Role: history.RoleLeader}})
	l.Failpoint(true, "fp-1", "broker-before-register", "pause")
	l.Failpoint(false, "fp-1", "broker-before-register", "")
	l.Emit(history.Event{Kind: history.KindControllerResigned, Controller: &history.ControllerRun{Epoch: 3, Reason: "controller moved"}})
	l.Emit(history.Event{Kind: history.KindNodeStop, Process: &history.Process{Incarnation: 1}})
	evs, warns, err := history.Decode(&file, "n2.jsonl")
	if err != nil || len(warns) != 0 {
		t.Fatalf("decode: %v %v", err, warns)
	}
	if len(evs) != 12 {
		t.Fatalf("%d events, want 12", len(evs))
	}
	for i, ev := range evs {
		if ev.Node != 2 || ev.Source != "n2" || ev.Seq != uint64(i) || ev.Time == 0 {
			t.Fatalf("event %d header %+v", i, ev)
		}
	}
	if evs[8].Fault.Failpoint != "broker-before-register" || evs[8].Kind != history.KindFaultStart {
		t.Fatalf("failpoint event %+v", evs[8])
	}
	if !strings.Contains(text.String(), `{"kind":"controller_elected"`) {
		t.Fatalf("text log:\n%s", text.String())
	}
}

func TestNilLogIsANoOp(t *testing.T) {
	var l *Log
	l.Emit(history.Event{Kind: history.KindNodeStart, Process: &history.Process{}})
	l.Printf("x")
	l.Sync()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
