package checkers

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
)

// fenceWant is what one case expects of one fence; fences not named expect
// no input.
type fenceWant struct {
	inputs, rejected int
}

var fenceTP = history.TP("t", 0)

// control is a control_request by node with the fields a fence reads.
func control(api string, ctrl, ctrlEpoch int32, carried int64, known int32, own int64, verdict string, code int16, parts ...history.ControlPartition) history.Control {
	return history.Control{API: api, CorrelationID: 7, ControllerID: ctrl, ControllerEpoch: ctrlEpoch, BrokerEpoch: carried,
		KnownControllerEpoch: known, OwnBrokerEpoch: own, Verdict: verdict, ErrorCode: code, Partitions: parts}
}

func part(epoch int32, code int16) history.ControlPartition {
	return history.ControlPartition{Topic: fenceTP.Topic, Partition: fenceTP.Partition, Leader: 1, LeaderEpoch: epoch, ZkVersion: 4, ErrorCode: code}
}

func shutdownEv(b *historytest.Builder, node int32, sd history.Shutdown) {
	b.Add(history.Event{Kind: history.KindControlledShutdown, Node: node, Shutdown: &sd})
}

func fenceElected(b *historytest.Builder, node, epoch int32) {
	b.Add(history.Event{Kind: history.KindControllerElected, Node: node, Controller: &history.ControllerRun{Epoch: epoch, EpochZkVersion: epoch}})
}

func fenceZKWrite(b *historytest.Builder, node int32, w history.ZKWrite) {
	w.Start = b.Now()
	b.Add(history.Event{Kind: history.KindZKWrite, Node: node, ZKWrite: &w})
}

func readFenced(b *historytest.Builder, proc int, broker int32, sent *int32, code int16) {
	b.Read(proc, fenceTP, 0, false)
	typ := history.OpOK
	if code != 0 {
		typ = history.OpFail
	}
	b.Op(history.ClientOp{Type: typ, Process: proc, F: history.FRead, Topic: fenceTP.Topic, Partition: fenceTP.Partition,
		Broker: broker, LeaderEpoch: sent, ErrorCode: code})
}

func i32(v int32) *int32 { return &v }

// replicaFetch is broker node's record of a follower's fetch carrying
// current, judged against its replica's epoch.
func replicaFetch(b *historytest.Builder, node, current, epoch int32, code int16) {
	b.Add(history.Event{Kind: history.KindReplicaFetch, Node: node, ReplicaFetch: &history.ReplicaFetch{
		Topic: fenceTP.Topic, Partition: fenceTP.Partition, Replica: 2, CurrentLeaderEpoch: current, LeaderEpoch: epoch, ErrorCode: code}})
}

const fenceStatePath = "/brokers/topics/t/partitions/0/state"

func TestCountFences(t *testing.T) {
	accepted, rejected := history.VerdictAccepted, history.VerdictRejected
	lai, um := history.APILeaderAndIsr, history.APIUpdateMetadata
	cases := []struct {
		name  string
		build func(b *historytest.Builder)
		want  map[string]fenceWant
	}{
		{"clean run: current requests, reads and writes", func(b *historytest.Builder) {
			b.Start(1)
			b.Register(1, 100)
			fenceElected(b, 2, 1)
			b.Control(1, control(lai, 2, 1, 100, 0, 100, accepted, 0, part(1, 0)))
			b.Control(1, control(um, 2, 1, 100, 1, 100, accepted, 0))
			readFenced(b, 0, 1, i32(1), 0)
			fenceZKWrite(b, 2, history.ZKWrite{Path: fenceStatePath, Op: "set", Conditional: true, ControllerEpoch: 1, ExpectedVersion: 3, Outcome: history.ZKOK, NewVersion: 4,
				State: &history.PartitionState{Topic: "t", Leader: 1, LeaderEpoch: 1}})
			fenceZKWrite(b, 1, history.ZKWrite{Path: fenceStatePath, Op: "set", ExpectedVersion: 4, Outcome: history.ZKOK, NewVersion: 5,
				State: &history.PartitionState{Topic: "t", Leader: 1, LeaderEpoch: 1}})
			shutdownEv(b, 2, history.Shutdown{BrokerID: 1, BrokerEpoch: 100, CachedBrokerEpoch: 100, ControllerEpoch: 1, Verdict: accepted})
		}, nil},
		{"stale controller epoch accepted (KAFKA-532)", func(b *historytest.Builder) {
			b.Control(1, control(um, 2, 1, 100, 2, 100, accepted, 0))
		}, map[string]fenceWant{FenceBrokerControllerEpoch: {1, 0}}},
		{"stale controller epoch rejected", func(b *historytest.Builder) {
			b.Control(1, control(um, 2, 1, 100, 2, 100, rejected, history.ErrStaleControllerEpoch))
		}, map[string]fenceWant{FenceBrokerControllerEpoch: {1, 1}}},
		{"stale in both epochs: the broker-epoch check refuses it first", func(b *historytest.Builder) {
			b.Control(1, control(um, 2, 1, 90, 2, 100, rejected, history.ErrStaleBrokerEpoch))
		}, map[string]fenceWant{FenceBrokerBrokerEpoch: {1, 1}}},
		{"stale broker epoch accepted (KAFKA-7235)", func(b *historytest.Builder) {
			b.Control(1, control(um, 2, 1, 90, 1, 100, accepted, 0))
		}, map[string]fenceWant{FenceBrokerBrokerEpoch: {1, 0}}},
		{"no broker epoch carried, meant for the previous process", func(b *historytest.Builder) {
			sent := control(um, 2, 1, -1, 0, 0, "", 0)
			sent.TargetBroker, sent.MeantBrokerEpoch, sent.Attempt = 1, 90, 1
			b.Add(history.Event{Kind: history.KindControlSent, Node: 2, Control: &sent})
			b.Control(1, control(um, 2, 1, -1, 1, 100, accepted, 0))
		}, map[string]fenceWant{FenceBrokerBrokerEpoch: {1, 0}}},
		{"stale ControlledShutdown rejected", func(b *historytest.Builder) {
			shutdownEv(b, 2, history.Shutdown{BrokerID: 1, BrokerEpoch: 90, CachedBrokerEpoch: 100, ControllerEpoch: 1, Verdict: rejected, ErrorCode: history.ErrStaleBrokerEpoch})
		}, map[string]fenceWant{FenceControllerBrokerEpoch: {1, 1}}},
		{"ControlledShutdown without epoch from the previous process accepted", func(b *historytest.Builder) {
			shutdownEv(b, 1, history.Shutdown{BrokerID: 1, BrokerEpoch: -1, MeantBrokerEpoch: 90, Verdict: history.VerdictSent})
			shutdownEv(b, 2, history.Shutdown{BrokerID: 1, BrokerEpoch: -1, CachedBrokerEpoch: 100, ControllerEpoch: 1, Verdict: accepted})
		}, map[string]fenceWant{FenceControllerBrokerEpoch: {1, 0}}},
		{"ControlledShutdown to a controller that is not active: no cached epoch", func(b *historytest.Builder) {
			shutdownEv(b, 2, history.Shutdown{BrokerID: 1, BrokerEpoch: 90, CachedBrokerEpoch: -1, Verdict: rejected, ErrorCode: 41})
		}, nil},
		{"LeaderAndIsr at the replica's own leader epoch rejected", func(b *historytest.Builder) {
			b.Start(1)
			b.Control(1, control(lai, 2, 1, 100, 0, 100, accepted, 0, part(3, 0)))
			b.Control(1, control(lai, 2, 1, 100, 1, 100, accepted, 0, part(3, history.ErrStaleControllerEpoch)))
		}, map[string]fenceWant{FenceLeaderAndIsrLeaderEpoch: {1, 1}}},
		{"LeaderAndIsr at an older leader epoch applied", func(b *historytest.Builder) {
			b.Start(1)
			b.Control(1, control(lai, 2, 1, 100, 0, 100, accepted, 0, part(3, 0)))
			b.Control(1, control(lai, 2, 1, 100, 1, 100, accepted, 0, part(2, 0)))
		}, map[string]fenceWant{FenceLeaderAndIsrLeaderEpoch: {1, 0}}},
		{"LeaderAndIsr again at the epoch of one answered but not applied: not stale", func(b *historytest.Builder) {
			b.Start(1)
			b.Control(1, control(lai, 2, 1, 100, 0, 100, accepted, 0, part(2, 0)))
			notApplied := part(3, 0)
			notApplied.NotApplied = true
			b.Control(1, control(lai, 2, 1, 100, 1, 100, accepted, 0, notApplied))
			b.Control(1, control(lai, 2, 1, 100, 1, 100, accepted, 0, part(3, 0)))
		}, nil},
		{"LeaderAndIsr again at the epoch of one applied: stale", func(b *historytest.Builder) {
			b.Start(1)
			b.Control(1, control(lai, 2, 1, 100, 0, 100, accepted, 0, part(2, 0)))
			b.Control(1, control(lai, 2, 1, 100, 1, 100, accepted, 0, part(3, 0)))
			b.Control(1, control(lai, 2, 1, 100, 1, 100, accepted, 0, part(3, 0)))
		}, map[string]fenceWant{FenceLeaderAndIsrLeaderEpoch: {1, 0}}},
		{"LeaderAndIsr at an older leader epoch to a restarted process: not stale for it", func(b *historytest.Builder) {
			b.Start(1)
			b.Control(1, control(lai, 2, 1, 100, 0, 100, accepted, 0, part(3, 0)))
			b.Start(1)
			b.Control(1, control(lai, 2, 1, 100, 0, 100, accepted, 0, part(2, 0)))
		}, nil},
		{"read carrying an older leader epoch fenced", func(b *historytest.Builder) {
			readFenced(b, 0, 1, nil, history.ErrFencedLeaderEpoch)
		}, map[string]fenceWant{FenceFetchLeaderEpoch: {1, 1}}},
		{"read carrying an older leader epoch answered", func(b *historytest.Builder) {
			b.Start(1)
			b.Control(1, control(lai, 2, 1, 100, 0, 100, accepted, 0, part(2, 0)))
			readFenced(b, 0, 1, i32(1), 0)
		}, map[string]fenceWant{FenceFetchLeaderEpoch: {1, 0}}},
		{"follower's fetch at an older leader epoch fenced", func(b *historytest.Builder) {
			replicaFetch(b, 1, 2, 3, history.ErrFencedLeaderEpoch)
		}, map[string]fenceWant{FenceFetchLeaderEpoch: {1, 1}}},
		{"follower's fetch at an older leader epoch answered", func(b *historytest.Builder) {
			replicaFetch(b, 1, 2, 3, 0)
		}, map[string]fenceWant{FenceFetchLeaderEpoch: {1, 0}}},
		{"follower's fetch at a newer leader epoch: not stale", func(b *historytest.Builder) {
			replicaFetch(b, 1, 4, 3, history.ErrUnknownLeaderEpoch)
		}, nil},
		{"deposed controller's conditional write refused", func(b *historytest.Builder) {
			fenceElected(b, 1, 1)
			fenceElected(b, 2, 2)
			fenceZKWrite(b, 1, history.ZKWrite{Path: fenceStatePath, Op: "set", Conditional: true, ControllerEpoch: 1, ExpectedVersion: 3, Outcome: history.ZKBadVersion,
				Error: "controller moved: zk: version conflict"})
		}, map[string]fenceWant{FenceControllerZK: {1, 1}}},
		{"deposed controller's write refused before the history shows the election", func(b *historytest.Builder) {
			fenceElected(b, 1, 1)
			fenceZKWrite(b, 1, history.ZKWrite{Path: fenceStatePath, Op: "set", Conditional: true, ControllerEpoch: 1, ExpectedVersion: 3, Outcome: history.ZKBadVersion,
				Error: "controller moved: zk: version conflict"})
		}, map[string]fenceWant{FenceControllerZK: {1, 1}}},
		{"deposed controller's unconditional write lands", func(b *historytest.Builder) {
			fenceElected(b, 1, 1)
			fenceElected(b, 2, 2)
			fenceZKWrite(b, 1, history.ZKWrite{Path: fenceStatePath, Op: "set", ControllerEpoch: 1, ExpectedVersion: -1, Outcome: history.ZKOK, NewVersion: 5})
		}, map[string]fenceWant{FenceControllerZK: {1, 0}}},
		{"deposed controller's write with an unknown outcome: not counted", func(b *historytest.Builder) {
			fenceElected(b, 1, 1)
			fenceElected(b, 2, 2)
			fenceZKWrite(b, 1, history.ZKWrite{Path: fenceStatePath, Op: "set", Conditional: true, ControllerEpoch: 1, ExpectedVersion: 3, Outcome: history.ZKConnectionLoss})
		}, nil},
		{"leader's ISR write at a stale zkVersion refused", func(b *historytest.Builder) {
			fenceZKWrite(b, 1, history.ZKWrite{Path: fenceStatePath, Op: "set", ExpectedVersion: 4, Outcome: history.ZKBadVersion,
				State: &history.PartitionState{Topic: "t", Leader: 1, LeaderEpoch: 1}})
		}, map[string]fenceWant{FenceLeaderISRZK: {1, 1}}},
		{"leader's unconditional ISR write over a version it never held", func(b *historytest.Builder) {
			b.Start(1)
			b.Control(1, control(lai, 2, 1, 100, 0, 100, accepted, 0, part(2, 0))) // zkVersion 4
			fenceZKWrite(b, 1, history.ZKWrite{Path: fenceStatePath, Op: "set", ExpectedVersion: -1, Outcome: history.ZKOK, NewVersion: 7,
				State: &history.PartitionState{Topic: "t", Leader: 1, LeaderEpoch: 2}})
		}, map[string]fenceWant{FenceLeaderISRZK: {1, 0}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := historytest.New()
			tc.build(b)
			got := CountFences(b.History())
			if len(got) != len(Fences) {
				t.Fatalf("%d fences counted, want %d", len(got), len(Fences))
			}
			for i, f := range got {
				if f.Fence != Fences[i] {
					t.Errorf("fence %d is %q, want %q", i, f.Fence, Fences[i])
				}
				w := tc.want[f.Fence]
				if f.Inputs != w.inputs || f.Rejected != w.rejected {
					t.Errorf("%s: %d inputs, %d rejected; want %d, %d", f.Fence, f.Inputs, f.Rejected, w.inputs, w.rejected)
				}
				if obeyed := f.Inputs - f.Rejected; (obeyed > 0) != (len(f.Obeyed) > 0) {
					t.Errorf("%s: %d inputs obeyed but Obeyed lists %v", f.Fence, obeyed, f.Obeyed)
				}
			}
		})
	}
}

func TestFenceCoverageCheckIsNeverInvalid(t *testing.T) {
	b := historytest.New()
	b.Control(1, control(history.APIUpdateMetadata, 2, 1, 100, 2, 100, history.VerdictAccepted, 0))
	res := FenceCoverage{}.Check(b.History())
	if res.Verdict != Valid {
		t.Fatalf("verdict %s, want valid: %s", res.Verdict, res.Explanation)
	}
	if !strings.Contains(res.Explanation, "broker-controller-epoch 1 stale inputs, 0 rejected") ||
		!strings.Contains(res.Explanation, "untested (no stale input reached them): broker-broker-epoch") {
		t.Errorf("explanation %q", res.Explanation)
	}
	// Details survive results.json.
	blob, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(blob, &back); err != nil {
		t.Fatal(err)
	}
	for _, r := range []Result{res, back} {
		fc, ok := FencesOf(r)
		if !ok || len(fc) != len(Fences) || fc[0].Inputs != 1 || fc[0].Obeyed[0] != 0 {
			t.Errorf("FencesOf: %v, %+v", ok, fc)
		}
		// The group and transaction fences are not applicable to a
		// history without such traffic: not untested.
		if u := UntestedFences(fc); len(u) != len(Fences)-1-len(groupFences)-len(txnFences) || slices.Contains(u, FenceBrokerControllerEpoch) ||
			slices.Contains(u, FenceGroupGeneration) {
			t.Errorf("untested %v", u)
		}
	}
	if _, ok := FencesOf(Result{Details: map[string]any{"other": 1}}); ok {
		t.Error("FencesOf found counts in a result without them")
	}

	if !strings.Contains(res.Explanation, "Not applicable (no group or transaction traffic in the history): coordinator-generation, txn-producer-epoch") {
		t.Errorf("explanation %q", res.Explanation)
	}
	empty := FenceCoverage{}.Check(historytest.New().History())
	if empty.Verdict != Valid || !strings.HasPrefix(empty.Explanation, "No stale input reached any fence") {
		t.Errorf("empty history: %s %q", empty.Verdict, empty.Explanation)
	}
}

func TestTallyFences(t *testing.T) {
	run := func(in map[string]fenceWant) []FenceCount {
		var out []FenceCount
		for _, f := range Fences {
			out = append(out, FenceCount{Fence: f, Inputs: in[f].inputs, Rejected: in[f].rejected})
		}
		return out
	}
	notApplicable := func(fc []FenceCount, names ...string) []FenceCount {
		for i := range fc {
			fc[i].NotApplicable = slices.Contains(names, fc[i].Fence)
		}
		return fc
	}
	runs := [][]FenceCount{
		run(map[string]fenceWant{FenceBrokerControllerEpoch: {3, 3}, FenceFetchLeaderEpoch: {2, 2}, FenceGroupGeneration: {2, 1}}),
		notApplicable(run(map[string]fenceWant{FenceBrokerControllerEpoch: {1, 0}}), FenceGroupGeneration),
		run(nil),
		{{Fence: "a-new-fence", Inputs: 1, Rejected: 1}}, // a run that lists other fences only
	}
	got := TallyFences(runs)
	// A fence the last run does not list is untested in it, but a group
	// or transaction fence not applicable; the group fence is not
	// applicable in the second run either.
	want := map[string]FenceTally{
		FenceBrokerControllerEpoch: {RunsWithInput: 2, RunsWithRejection: 1, Inputs: 4, Rejected: 3},
		FenceFetchLeaderEpoch:      {RunsWithInput: 1, RunsWithRejection: 1, Inputs: 2, Rejected: 2},
		FenceGroupGeneration:       {RunsWithInput: 1, RunsWithRejection: 1, Inputs: 2, Rejected: 1, RunsNotApplicable: 2},
		"a-new-fence":              {RunsWithInput: 1, RunsWithRejection: 1, Inputs: 1, Rejected: 1},
	}
	if len(got) != len(Fences)+1 || got[len(got)-1].Fence != "a-new-fence" {
		t.Fatalf("tally lists %d fences, last %q", len(got), got[len(got)-1].Fence)
	}
	for i, g := range got {
		if i < len(Fences) && g.Fence != Fences[i] {
			t.Errorf("row %d is %q, want %q", i, g.Fence, Fences[i])
		}
		w, named := want[g.Fence]
		w.Fence, w.Runs = g.Fence, len(runs)
		if !named && (slices.Contains(groupFences, g.Fence) || slices.Contains(txnFences, g.Fence)) {
			w.RunsNotApplicable = 1
		}
		if g != w {
			t.Errorf("%s: %+v, want %+v", g.Fence, g, w)
		}
		if g.Untested() != (w.RunsWithInput == 0) {
			t.Errorf("%s: Untested %v", g.Fence, g.Untested())
		}
	}
}

// A fence that applied to no run is neither tested nor untested; one that
// applied to some is untested when none of those brought it an input.
func TestFenceTallyApplicability(t *testing.T) {
	cases := []struct {
		tally                   FenceTally
		untested, notApplicable bool
	}{
		{FenceTally{Runs: 20, RunsNotApplicable: 20}, false, true},
		{FenceTally{Runs: 20, RunsNotApplicable: 19}, true, false},
		{FenceTally{Runs: 20}, true, false}, // stored before the field: every run applied
		{FenceTally{Runs: 20, RunsWithInput: 3}, false, false},
	}
	for _, tc := range cases {
		if tc.tally.Untested() != tc.untested || tc.tally.NotApplicable() != tc.notApplicable {
			t.Errorf("%+v: untested %v, not applicable %v; want %v, %v", tc.tally, tc.tally.Untested(), tc.tally.NotApplicable(), tc.untested, tc.notApplicable)
		}
	}
	// A power.json row stored before the field reads as applicable.
	var old FenceTally
	if err := json.Unmarshal([]byte(`{"fence":"broker-controller-epoch","runs":20,"runs_with_input":0}`), &old); err != nil {
		t.Fatal(err)
	}
	if !old.Untested() || old.NotApplicable() {
		t.Errorf("old tally %+v reads as not applicable", old)
	}
}
