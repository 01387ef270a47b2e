package reports

import (
	"fmt"
	"math/rand"
	"slices"

	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/rundir"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
)

// failover builds a small history with what the timeline draws: phases, a
// pause of the controller (n1) during which n2 is elected, a leader change
// of t-0 seen by ZooKeeper and acted on by two brokers at once, client
// operations with every outcome, a failpoint ended by a restart, and a
// fault that never stopped.
func failover() (*history.History, map[string]int) {
	b := historytest.New()
	tp := history.TP("t", 0)
	at := map[string]int{}
	b.Add(history.Event{Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseWorkload, Mark: history.PhaseBegin}})
	for n := int32(1); n <= 3; n++ {
		b.Start(n)
	}
	b.Add(history.Event{Kind: history.KindControllerElected, Node: 1, Controller: &history.ControllerRun{Epoch: 1, EpochZkVersion: 1}})
	b.Add(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: "/controller", Type: history.WatchCreated, ControllerID: ptr(int32(1))}})
	b.Add(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: "/controller_epoch", Type: history.WatchChanged, ControllerEpoch: ptr(int32(1))}})
	b.State(tp, 1, 1, 1, 100, 1, 2, 3)
	b.Add(history.Event{Kind: history.KindRoleChange, Node: 1, Role: &history.Role{Topic: "t", Role: history.RoleLeader, Leader: 1, LeaderEpoch: 1}})
	b.At(100)
	b.Produce(1, tp, "a")
	b.At(110)
	b.Complete(1, history.OpOK, tp, history.FProduce, 0)
	b.At(200)
	at["pause"] = b.Fault(true, "f1", "pause", "n1")
	b.Produce(2, tp, "b")
	b.Add(history.Event{Kind: history.KindFaultStart, Node: 3, Fault: &history.Fault{ID: "fp1", Name: "failpoint", Failpoint: "beforeLeaderAndIsr"}})
	b.At(300)
	b.Add(history.Event{Kind: history.KindControllerElected, Node: 2, Controller: &history.ControllerRun{Epoch: 2, EpochZkVersion: 2}})
	b.Add(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: "/controller", Type: history.WatchCreated, ControllerID: ptr(int32(2))}})
	b.Add(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: "/controller_epoch", Type: history.WatchChanged, ControllerEpoch: ptr(int32(2))}})
	b.State(tp, 2, 2, 2, 200, 2, 3)
	at["lead2"] = b.Add(history.Event{Kind: history.KindRoleChange, Node: 2, Role: &history.Role{Topic: "t", Role: history.RoleLeader, Leader: 2, LeaderEpoch: 2}})
	b.At(400)
	b.Complete(2, history.OpInfo, tp, history.FProduce, 0)
	b.Produce(3, tp, "c")
	b.At(420)
	b.Complete(3, history.OpFail, tp, history.FProduce, 0)
	b.At(500)
	b.Fault(false, "f1", "pause", "n1")
	b.Add(history.Event{Kind: history.KindControllerResigned, Node: 1, Controller: &history.ControllerRun{Epoch: 1, Reason: "session expired"}})
	b.Add(history.Event{Kind: history.KindRoleChange, Node: 1, Role: &history.Role{Topic: "t", Role: history.RoleFollower, Leader: 2, LeaderEpoch: 2}})
	b.At(600)
	b.Start(3) // restart ends n3's failpoint
	b.Fault(true, "f2", "partition-halves", "n1", "n2")
	b.Produce(4, tp, "d") // never completes
	b.At(1000)
	b.Add(history.Event{Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseWorkload, Mark: history.PhaseEnd}})
	return b.History(), at
}

func ptr[T any](v T) *T { return &v }

func TestTimelineAggregates(t *testing.T) {
	h, _ := failover()
	tl := buildTimeline(h)
	ms := historytest.Ms
	type want struct {
		name string
		got  []span
		exp  []string // "from-to label" in ms from T0, open marked with *
	}
	str := func(ss []span) []string {
		var out []string
		for _, s := range ss {
			o := ""
			if s.open {
				o = "*"
			}
			out = append(out, fmt.Sprintf("%d-%d %s%s", (s.from-historytest.T0)/ms, (s.to-historytest.T0)/ms, s.label, o))
		}
		return out
	}
	tp := history.TP("t", 0)
	cases := []want{
		{"phases", tl.phases, []string{"0-1000 workload"}},
		{"faults", tl.faults, []string{"200-500 pause n1", "202-600 beforeLeaderAndIsr", "601-1000 partition-halves n1,n2*"}},
		{"n1 controller", tl.ctrl[1], []string{"4-501 e1"}},
		{"n2 controller", tl.ctrl[2], []string{"300-1000 e2*"}},
		{"zk controller", tl.zkCtrl, []string{"5-6 n1", "6-301 n1·e1", "301-302 n2·e1", "302-1000 n2·e2*"}},
		{"t-0 state", tl.state[tp], []string{"7-303 n1·e1", "303-1000 n2·e2*"}},
		{"t-0 n1 leads", tl.believed[tp][1], []string{"8-502 "}},
		{"t-0 n2 leads", tl.believed[tp][2], []string{"304-1000 *"}},
	}
	for _, c := range cases {
		if g := strings.Join(str(c.got), "; "); g != strings.Join(c.exp, "; ") {
			t.Errorf("%s: got %s\nwant %s", c.name, g, strings.Join(c.exp, "; "))
		}
	}
	if tl.counts != [nOutcomes]int{1, 1, 1} || tl.pending != 1 {
		t.Errorf("op counts %v pending %d", tl.counts, tl.pending)
	}
	if fmt.Sprint(tl.nodes) != "[1 2 3]" {
		t.Errorf("nodes %v", tl.nodes)
	}
}

func TestTimelineMarkersLinkViolations(t *testing.T) {
	h, at := failover()
	res := &rundir.Results{Results: []checkers.Result{{Checker: "leader-uniqueness", Verdict: "invalid",
		Violations: []checkers.Violation{{Explanation: "two leaders", Events: []int{at["lead2"], 99999, -3}}}}}}
	tl := buildTimeline(h)
	tl.addMarkers(histLookup{h}, res)
	if len(tl.markers) != 1 || tl.markers[0].anchor != "v0-0" || !strings.Contains(tl.markers[0].title, "two leaders") {
		t.Fatalf("markers %+v", tl.markers)
	}
	svg := tl.renderSVG()
	if !strings.Contains(svg, `href="#v0-0"`) {
		t.Fatal("marker does not link to its violation")
	}
}

// TestTimelineBoundedByPixels: flapping state and huge op counts cost a
// bounded number of SVG elements.
func TestTimelineBoundedByPixels(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	b := historytest.New()
	tp := history.TP("t", 0)
	for i := 0; i < 20_000; i++ { // a leader change every millisecond
		b.State(tp, int32(1+i%3), int32(i), 1, int64(i))
	}
	h := b.History()
	tl := buildTimeline(h)
	for i := 0; i < 300_000; i++ {
		tl.ops = append(tl.ops, opPoint{t: tl.t0 + rng.Int63n(tl.t1-tl.t0), lat: 1e5 + rng.Int63n(1e10), outcome: uint8(rng.Intn(nOutcomes))})
	}
	svg := tl.renderSVG()
	rects := strings.Count(svg, "<rect")
	squares := strings.Count(svg, "h") // upper bound on path squares
	t.Logf("svg %d bytes, %d rects", len(svg), rects)
	if rects > 1200 {
		t.Errorf("%d rects for 20k state changes", rects)
	}
	if squares > 3*maxPoints+5000 || len(svg) > 600_000 {
		t.Errorf("svg %d bytes", len(svg))
	}
	if !strings.Contains(svg, "short intervals") {
		t.Error("flapping not merged into a busy span")
	}
}

// longRun is a 60-second history: steady traffic, a controller pause from
// 30 s to 35 s with a failover at 32 s, and ops that fail during it.
func longRun() (*history.History, int) {
	b := historytest.New()
	tp := history.TP("t", 0)
	b.Add(history.Event{Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseWorkload, Mark: history.PhaseBegin}})
	b.Add(history.Event{Kind: history.KindControllerElected, Node: 1, Controller: &history.ControllerRun{Epoch: 1}})
	b.State(tp, 1, 1, 1, 10, 1, 2, 3)
	var bad int
	for ms := int64(100); ms < 60_000; ms += 100 {
		switch ms {
		case 30_000:
			b.At(ms).Fault(true, "f1", "pause-controller", "n1")
		case 32_000:
			b.At(ms).Add(history.Event{Kind: history.KindControllerElected, Node: 2, Controller: &history.ControllerRun{Epoch: 2}})
			b.State(tp, 2, 2, 2, 20, 2, 3)
		case 33_000:
			bad = b.At(ms).Add(history.Event{Kind: history.KindRoleChange, Node: 1, Role: &history.Role{Topic: "t", Role: history.RoleLeader, Leader: 1, LeaderEpoch: 1}})
		case 35_000:
			b.At(ms).Fault(false, "f1", "pause-controller", "n1")
		}
		b.At(ms).Produce(int(ms), tp, fmt.Sprint(ms))
		typ := history.OpOK
		if ms > 30_000 && ms < 35_000 {
			typ = history.OpInfo
		}
		b.At(ms+5+ms%37).Complete(int(ms), typ, tp, history.FProduce, ms)
	}
	b.At(60_000).Add(history.Event{Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseWorkload, Mark: history.PhaseEnd}})
	return b.History(), bad
}

func TestTimelineZoomOnFirstViolation(t *testing.T) {
	h, bad := longRun()
	res := &rundir.Results{Results: []checkers.Result{
		{Checker: "availability", Verdict: "valid"},
		{Checker: "leader-uniqueness", Verdict: "invalid", Violations: []checkers.Violation{{Explanation: "n1 leads at epoch 1 after epoch 2", Events: []int{bad}}}},
	}}
	tl := buildTimeline(h)
	tl.addMarkers(histLookup{h}, res)
	from, to, caption, ok := tl.zoomWindow(histLookup{h}, res)
	if !ok {
		t.Fatal("no zoom window")
	}
	// From a second before the pause (30 s) to a second after the event (33 s).
	rel := func(x int64) int64 { return (x - historytest.T0) / historytest.Ms }
	if rel(from) != 29_000 || rel(to) != 34_000 || !strings.Contains(caption, "leader-uniqueness") {
		t.Fatalf("window %d..%d ms %q", rel(from), rel(to), caption)
	}
	svg := tl.renderWindow(from, to)
	for _, w := range []string{`href="#v1-0"`, "+30s", "+33s", "pause-controller n1"} {
		if !strings.Contains(svg, w) {
			t.Errorf("zoom lacks %q", w)
		}
	}
	if strings.Contains(svg, "+40s") {
		t.Error("zoom draws outside its window")
	}
	// No violation, or one spanning most of the run: no zoom.
	if _, _, _, ok := tl.zoomWindow(histLookup{h}, &rundir.Results{}); ok {
		t.Error("zoom without violations")
	}
	wide := &rundir.Results{Results: []checkers.Result{{Checker: "x", Verdict: "invalid", Violations: []checkers.Violation{{Events: []int{0, len(h.Events) - 1}}}}}}
	if _, _, _, ok := tl.zoomWindow(histLookup{h}, wide); ok {
		t.Error("zoom on a violation spanning the run")
	}
}

// freshMachine is a first run on a fresh machine: set-up (image build,
// ensemble, brokers) takes 133 s, the workload 15 s, with a pause from 5 s
// to 8 s into it. inSetup is an event during set-up, workload one during
// the pause.
func freshMachine() (h *history.History, inSetup, workload int) {
	b := historytest.New()
	tp := history.TP("t", 0)
	b.Add(history.Event{Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseSetup, Mark: history.PhaseBegin}})
	b.At(125_000).Start(1)
	inSetup = b.Add(history.Event{Kind: history.KindControllerElected, Node: 1, Controller: &history.ControllerRun{Epoch: 1}})
	b.State(tp, 1, 1, 1, 10, 1)
	const setupEnd = 133_000
	b.At(setupEnd).Add(history.Event{Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseSetup, Mark: history.PhaseEnd}})
	b.Add(history.Event{Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseWorkload, Mark: history.PhaseBegin}})
	for ms := int64(setupEnd + 100); ms < setupEnd+15_000; ms += 100 {
		switch ms {
		case setupEnd + 5_000:
			b.At(ms).Fault(true, "f1", "pause", "n1")
		case setupEnd + 6_000:
			workload = b.At(ms).Add(history.Event{Kind: history.KindRoleChange, Node: 1, Role: &history.Role{Topic: "t", Role: history.RoleLeader, Leader: 1, LeaderEpoch: 1}})
		case setupEnd + 8_000:
			b.At(ms).Fault(false, "f1", "pause", "n1")
		}
		b.At(ms).Produce(int(ms), tp, fmt.Sprint(ms))
		b.At(ms+7).Complete(int(ms), history.OpOK, tp, history.FProduce, ms)
	}
	b.At(setupEnd + 15_000).Add(history.Event{Kind: history.KindPhase, Phase: &history.Phase{Name: history.PhaseWorkload, Mark: history.PhaseEnd}})
	return b.History(), inSetup, workload
}

// TestTimelineLeavesSetupOut: the whole-run drawing starts at the end of
// set-up, every relative time counts from there, and the page says how long
// set-up took. A violation event inside set-up pulls the drawing back so it
// stays visible, and the note says that negative times are set-up.
func TestTimelineLeavesSetupOut(t *testing.T) {
	h, inSetup, workload := freshMachine()
	rel := func(x int64) int64 { return (x - historytest.T0) / historytest.Ms }
	tests := []struct {
		name      string
		event     int
		wantFrom  int64  // ms from the first event
		wantAxis  string // a label the axis must have
		noAxis    string // and one it must not
		wantNote  string
		wantFault string // the pause's start, relative
	}{
		{"violation in the workload", workload, 133_000, "+14s", "-", "took 2m13s (image build, ZooKeeper ensemble, brokers, topic) and is not drawn", "+5.000s"},
		{"violation in set-up", inSetup, 125_001, "-5s", "-10s", "negative times are during set-up", "+5.000s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := &rundir.Results{Results: []checkers.Result{{Checker: "leader-uniqueness", Verdict: "invalid",
				Violations: []checkers.Violation{{Explanation: "x", Events: []int{tt.event}}}}}}
			tl := buildTimeline(h)
			tl.addMarkers(histLookup{h}, res)
			if rel(tl.origin) != 133_000 {
				t.Errorf("origin at %d ms, want the end of set-up (133000)", rel(tl.origin))
			}
			if got := rel(tl.runFrom()); got != tt.wantFrom {
				t.Errorf("drawing starts at %d ms, want %d", got, tt.wantFrom)
			}
			svg := tl.renderSVG()
			labels := axisLabels(svg)
			if !slices.Contains(labels, tt.wantAxis) {
				t.Errorf("axis %v lacks %s", labels, tt.wantAxis)
			}
			for _, l := range labels {
				if strings.HasPrefix(l, tt.noAxis) {
					t.Errorf("axis %v has %s: set-up is drawn", labels, l)
					break
				}
			}
			if note := tl.timeNote(); !strings.Contains(note, tt.wantNote) {
				t.Errorf("note %q lacks %q", note, tt.wantNote)
			}
			if got := relTime(tl.faults[0].from, tl.origin); got != tt.wantFault {
				t.Errorf("pause starts at %s, want %s", got, tt.wantFault)
			}
		})
	}
}

// axisLabels returns the distinct time labels of a drawing's axis.
func axisLabels(svg string) []string {
	var out []string
	for _, part := range strings.Split(svg, `class="ax" text-anchor="middle">`)[1:] {
		l := part[:strings.Index(part, "<")]
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// The queue workload's operations are drawn in the operations scatter,
// paired by source and process: a send and a poll of two processes with
// the same number, a refused commit, an unknown send and one never
// completed; a completion without an invoke is not drawn.
func TestTimelineDrawsQueueOps(t *testing.T) {
	b := historytest.New()
	q := func(src string, ms int64, op history.QueueOp) {
		b.At(ms)
		op.Topic = "chaos"
		b.Add(history.Event{Kind: history.KindQueueOp, Source: src, Queue: &op})
	}
	send := history.QueueOp{Process: 0, F: history.QueueTxn, Mops: []history.QueueMop{{F: history.MopSend, Key: 0, Value: 1}}}
	poll := history.QueueOp{Process: 0, F: history.QueueTxn, Mops: []history.QueueMop{{F: history.MopPoll}}}
	commit := history.QueueOp{Process: 0, F: history.QueueCommit}
	with := func(op history.QueueOp, typ history.OpType) history.QueueOp { op.Type = typ; return op }
	q("client-0", 0, with(send, history.OpInvoke))
	q("client-1", 5, with(poll, history.OpInvoke))
	q("client-0", 20, with(send, history.OpOK))
	q("client-1", 40, with(poll, history.OpOK))
	q("client-1", 41, with(commit, history.OpInvoke))
	q("client-1", 60, with(commit, history.OpFail))
	q("client-0", 70, with(send, history.OpInvoke))
	q("client-0", 90, with(send, history.OpInfo))
	q("client-0", 100, with(send, history.OpInvoke))
	q("client-2", 110, with(poll, history.OpOK))
	tl := buildTimeline(b.History())
	if tl.counts != [nOutcomes]int{2, 1, 1} || tl.queueOps != 4 || tl.pending != 1 {
		t.Fatalf("counts %v, queue ops %d, pending %d; want [2 1 1], 4, 1", tl.counts, tl.queueOps, tl.pending)
	}
	var lats []int64
	for _, p := range tl.ops {
		lats = append(lats, p.lat/historytest.Ms)
	}
	if fmt.Sprint(lats) != "[20 35 19 20]" {
		t.Errorf("latencies %v ms, want [20 35 19 20]", lats)
	}
	if svg := tl.renderSVG(); !strings.Contains(svg, "4 of the queue workload") {
		t.Errorf("the scatter's title does not name the queue operations:\n%s", svg)
	}
}
