package regressions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/wanterr"
	"github.com/zkchaos/zkchaos/rundir/rundirtest"
)

// keptDir is where `chaos keep` puts regressions by default (relative to
// the repository root).
const keptDir = "../testdata/regressions"

// TestKeptRegressions re-checks every kept failing run: each checker must
// give the verdict recorded when the run was kept, and the checker that
// failed must still fail. No Docker: the history is all there is.
func TestKeptRegressions(t *testing.T) {
	ents, err := os.ReadDir(keptDir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		n++
		t.Run(e.Name(), func(t *testing.T) {
			if err := Recheck(filepath.Join(keptDir, e.Name()), checkers.DefaultConfig()); err != nil {
				t.Error(err)
			}
		})
	}
	if n == 0 {
		t.Fatalf("no kept runs in %s", keptDir)
	}
}

// Recheck must notice a verdict that moved, so TestKeptRegressions can fail.
func TestRecheckNoticesAMovedVerdict(t *testing.T) {
	src := filepath.Join(keptDir, "kafka-532-zombie-controller")
	tests := []struct {
		name   string
		mutate func(ex *Expected)
		want   string
	}{
		{"kept failure expected valid", func(ex *Expected) { ex.Verdicts[ex.Checker] = checkers.Valid }, "expects valid"},
		{"other checker expected invalid", func(ex *Expected) { ex.Verdicts["hw-checkpoint"] = checkers.Invalid }, "hw-checkpoint says valid"},
		{"checker that no longer exists", func(ex *Expected) { ex.Verdicts["gone"] = checkers.Valid }, "no longer exists"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := rundirtest.Copy(t, src)
			ex, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			tt.mutate(&ex)
			b, _ := json.Marshal(ex)
			if err := os.WriteFile(filepath.Join(dir, ExpectedFile), b, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := Recheck(dir, checkers.DefaultConfig()); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Recheck = %v, want an error with %q", err, tt.want)
			}
		})
	}
	// And a history that lost the failure.
	dir := rundirtest.Copy(t, src)
	for _, f := range []string{"n1.jsonl", "n2.jsonl", "n3.jsonl", "zk.jsonl"} {
		if err := os.Remove(filepath.Join(dir, history.HistoryDir, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := Recheck(dir, checkers.DefaultConfig()); err == nil || !strings.Contains(err.Error(), "is gone") {
		t.Fatalf("Recheck without the brokers and watcher events = %v, want the failure gone", err)
	}
}

// syntheticRun is the hand-made KAFKA-532 history (a zombie controller's
// stale epoch obeyed) with a quiet broker's noise and a client's traffic
// added around it, the shape a real run has.
func syntheticRun(t *testing.T) *history.History {
	t.Helper()
	h, err := history.ReadDir(rundirtest.Stored(rundirtest.Kafka532))
	if err != nil {
		t.Fatal(err)
	}
	base := h.Events[0].Time
	var noise []history.Event
	for i := 0; i < 200; i++ {
		noise = append(noise, history.Event{V: 1, Time: base + int64(i)*1e6, Source: "n9", Node: 9, Kind: history.KindHWAdvance,
			HW: &history.HWAdvance{Topic: "other", Partition: 0, Old: int64(i), New: int64(i + 1)}})
	}
	evs := append([]history.Event(nil), h.Events...)
	return history.Merge(evs, noise)
}

func TestTrim(t *testing.T) {
	h := syntheticRun(t)
	tests := []struct {
		name    string
		opt     Options
		wantErr string
		checker string
	}{
		{name: "first invalid checker", checker: "controller-fencing"},
		{name: "named checker", opt: Options{Checker: "durability"}, checker: "durability"},
		{name: "valid checker", opt: Options{Checker: "hw-checkpoint"}, wantErr: "says valid"},
		{name: "unknown checker", opt: Options{Checker: "nope"}, wantErr: "unknown checker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opt.Config = checkers.DefaultConfig()
			tt.opt.Context = 1
			tr, err := Trim(context.Background(), h, tt.opt)
			if wanterr.Check(t, err, tt.wantErr) {
				return
			}
			if tr.Expected.Checker != tt.checker || tr.Expected.Verdict != checkers.Invalid {
				t.Fatalf("kept %s %s, want %s invalid", tr.Expected.Checker, tr.Expected.Verdict, tt.checker)
			}
			// Only noise within Context of a blamed event may stay.
			noise := 0
			for _, e := range tr.Events {
				if e.Source == "n9" {
					noise++
				}
			}
			if noise > 20 {
				t.Fatalf("kept %d of the unrelated broker's 200 events", noise)
			}
			// A kept fault start keeps its stop, a kept op its other half.
			if err := pairsIntact(h, tr.Events); err != nil {
				t.Fatal(err)
			}
			// Stored and read back, it fails the same way.
			dir := filepath.Join(t.TempDir(), "kept")
			if err := Save(dir, t.TempDir(), tr); err != nil {
				t.Fatal(err)
			}
			if err := Recheck(dir, checkers.DefaultConfig()); err != nil {
				t.Fatal(err)
			}
			if err := Save(dir, t.TempDir(), tr); err == nil {
				t.Fatal("Save over an existing regression succeeded")
			}
		})
	}
}

// A fault that starts right next to a blamed event is kept with its stop,
// even when the stop is far away and nothing else needs it.
func TestTrimKeepsAFaultWhole(t *testing.T) {
	base := syntheticRun(t)
	r := checkers.ControllerFencing{}.Check(base)
	if len(r.Events) == 0 {
		t.Fatal("fixture has no blamed events")
	}
	at := base.Events[r.Events[0]].Time
	last := base.Events[len(base.Events)-1].Time
	f := func(kind history.Kind, ts int64) history.Event {
		return history.Event{V: 1, Time: ts, Source: "nemesis-x", Kind: kind, Fault: &history.Fault{ID: "fx", Name: "pause", Targets: []string{"n2"}}}
	}
	h := history.Merge(base.Events, []history.Event{f(history.KindFaultStart, at), f(history.KindFaultStop, last+1e9)})
	tr, err := Trim(context.Background(), h, Options{Config: checkers.DefaultConfig(), Context: 1})
	if err != nil {
		t.Fatal(err)
	}
	var start, stop bool
	for _, e := range tr.Events {
		start = start || e.Source == "nemesis-x" && e.Kind == history.KindFaultStart
		stop = stop || e.Source == "nemesis-x" && e.Kind == history.KindFaultStop
	}
	if !start || !stop {
		t.Fatalf("fault next to the violation: start kept %v, stop kept %v; want both", start, stop)
	}
	if err := pairsIntact(h, tr.Events); err != nil {
		t.Fatal(err)
	}
}

// Ctrl-C during keep stops the trimming and keeps nothing.
func TestTrimStopsWhenCancelled(t *testing.T) {
	h, err := history.ReadDir(rundirtest.Stored(rundirtest.Kafka532))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if tr, err := Trim(ctx, h, Options{Config: checkers.DefaultConfig()}); !errors.Is(err, context.Canceled) || tr != nil {
		t.Fatalf("Trim with a cancelled context = %v, %v; want context.Canceled and nothing", tr, err)
	}
}

func TestTrimRefusesAValidRun(t *testing.T) {
	evs := []history.Event{{V: 1, Time: 1, Source: "n1", Node: 1, Kind: history.KindHWAdvance,
		HW: &history.HWAdvance{Topic: "t", Partition: 0, Old: 0, New: 1}}}
	if _, err := Trim(context.Background(), history.New(evs), Options{Config: checkers.DefaultConfig()}); !errors.Is(err, ErrNothingToKeep) {
		t.Fatalf("Trim of a valid run = %v, want ErrNothingToKeep", err)
	}
}

func TestValidName(t *testing.T) {
	for name, ok := range map[string]bool{"kafka-532": true, "a.b_c-1": true, "": false, "../x": false, "Upper": false, "-x": false, "a/b": false} {
		if err := ValidName(name); (err == nil) != ok {
			t.Errorf("ValidName(%q) = %v", name, err)
		}
	}
}

// pairsIntact checks that every kept fault_start whose stop is in the full
// history kept that stop too, and every kept client op its partner.
func pairsIntact(full *history.History, kept []history.Event) error {
	type id struct {
		src string
		seq uint64
	}
	in := map[id]bool{}
	for _, e := range kept {
		in[id{e.Source, e.Seq}] = true
	}
	starts := map[string]history.Event{}
	for _, e := range full.Events {
		if e.Fault == nil {
			continue
		}
		k := e.Source + "/" + e.Fault.ID
		if e.Kind == history.KindFaultStart {
			starts[k] = e
		} else if st, ok := starts[k]; ok && in[id{st.Source, st.Seq}] != in[id{e.Source, e.Seq}] {
			return fmt.Errorf("fault %s: start kept %v, stop kept %v", k, in[id{st.Source, st.Seq}], in[id{e.Source, e.Seq}])
		}
	}
	ops, _ := history.Operations(full)
	for _, o := range ops {
		if o.Complete != nil && in[id{o.Invoke.Source, o.Invoke.Seq}] != in[id{o.Complete.Source, o.Complete.Seq}] {
			return fmt.Errorf("operation at event %d kept without its other half", o.Invoke.Index)
		}
	}
	return nil
}
