package faults

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/nemesis"
)

// crashWorld is three brokers and the operations crash-lose-unflushed
// uses on them, logged in order; cut is what its disks answer.
type crashWorld struct {
	callLog
	lagWorld
	heldNames []string
	cuts      []UnflushedCut
	cutErr    error
}

func (w *crashWorld) kill(_ context.Context, t Target) error {
	w.callLog.log("kill %s", t.Name)
	return nil
}
func (w *crashWorld) start(_ context.Context, t Target) error {
	w.callLog.log("start %s", t.Name)
	return nil
}
func (w *crashWorld) held(t Target) bool { return slices.Contains(w.heldNames, t.Name) }
func (w *crashWorld) LoseUnflushed(_ context.Context, node int) ([]UnflushedCut, error) {
	w.callLog.log("cut n%d", node)
	return w.cuts, w.cutErr
}

func TestCrashLoseUnflushed(t *testing.T) {
	cut := UnflushedCut{Topic: "chaos", Partition: 0, File: "00000000000000000000.log", Durable: 100, Size: 300, FirstOffset: 5, EndOffset: 15}
	for _, tt := range []struct {
		name      string
		pick      int
		held      []string
		cuts      []UnflushedCut
		cutErr    error
		want      []string
		startHas  string
		stopError string
		trunc     string // the truncation event recorded, if any
	}{
		{name: "kill, cut while down, start at heal", pick: 1, cuts: []UnflushedCut{cut},
			want:     []string{"kill n2", "cut n2", "start n2"},
			startHas: "dropped unflushed chaos-0 offsets [5, 15) (00000000000000000000.log 300 → 100 bytes)",
			trunc:    "n2 chaos-0 15→5 crash-lose-unflushed"},
		{name: "a broker another fault holds is skipped", pick: 0, held: []string{"n1"},
			want: []string{"kill n2", "cut n2", "start n2"}, startHas: "nothing unflushed"},
		{name: "every broker held: not applied", held: []string{"n1", "n2", "n3"}},
		{name: "a failed cut is the fault's error and the broker still starts", pick: 2, cutErr: errors.New("permission denied"),
			want: []string{"kill n3", "cut n3", "start n3"}, startHas: "nothing unflushed", stopError: "permission denied"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &crashWorld{heldNames: tt.held, cuts: tt.cuts, cutErr: tt.cutErr}
			if tt.want == nil {
				_, err := (&unflushedCrash{world: &w.lagWorld, ops: w, disks: w}).inject(t.Context(), tt.pick)
				if err == nil || !strings.Contains(err.Error(), "every broker is held") || len(w.callLog.calls) > 0 {
					t.Fatalf("inject with every broker held: %v, calls %q; want an error and nothing done", err, w.callLog.calls)
				}
				return
			}
			file := filepath.Join(t.TempDir(), "nemesis.jsonl")
			rec := nemesis.NewFileRecorder(file)
			f := &unflushedCrash{world: &w.lagWorld, ops: w, disks: w, rec: rec}
			heal, err := f.inject(t.Context(), tt.pick)
			if err != nil {
				t.Fatal(err)
			}
			if err := heal(t.Context()); err != nil {
				t.Fatal(err)
			}
			rec.Close()
			if !slices.Equal(w.callLog.calls, tt.want) {
				t.Errorf("calls %q, want %q", w.callLog.calls, tt.want)
			}
			start, stop := lastFaultEvents(t, file)
			if start == nil || stop == nil {
				t.Fatalf("recorded %+v / %+v, want a start and a stop", start, stop)
			}
			if start.Name != string(CrashLoseUnflushed) || fmt.Sprint(start.Targets) != "["+strings.Fields(tt.want[0])[1]+"]" {
				t.Errorf("start %s %v, want %s on the killed broker", start.Name, start.Targets, CrashLoseUnflushed)
			}
			if !strings.Contains(start.Detail, tt.startHas) {
				t.Errorf("start detail %q does not say %q", start.Detail, tt.startHas)
			}
			if tt.stopError != "" && !strings.Contains(stop.Error, tt.stopError) {
				t.Errorf("stop error %q, want %q", stop.Error, tt.stopError)
			}
			evs, _, err := history.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var truncs []string
			for _, e := range evs {
				if e.Kind == history.KindTruncation {
					tr := e.Truncation
					truncs = append(truncs, fmt.Sprintf("n%d %s %d→%d %s", e.Node, tr.TP(), tr.From, tr.To, tr.Reason))
				}
			}
			if got := strings.Join(truncs, "; "); got != tt.trunc {
				t.Errorf("truncations recorded %q, want %q", got, tt.trunc)
			}
			if tt.stopError == "" && stop.Error != "" {
				t.Errorf("stop error %q, want none", stop.Error)
			}
		})
	}
}

// A partition cut in two segments is one truncation, from the highest end
// to the first offset dropped; a cut without a whole batch is none.
func TestUnflushedTruncations(t *testing.T) {
	for _, tt := range []struct {
		name string
		cuts []UnflushedCut
		want string
	}{
		{"two segments of one partition", []UnflushedCut{
			{Topic: "a", Partition: 0, FirstOffset: 10, EndOffset: 20},
			{Topic: "a", Partition: 0, FirstOffset: 20, EndOffset: 31},
			{Topic: "a", Partition: 1, FirstOffset: 3, EndOffset: 4},
		}, "[a-0 31→10 a-1 4→3]"},
		{"a torn batch only", []UnflushedCut{{Topic: "a", Partition: 0, FirstOffset: -1, EndOffset: -1}}, "[]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, tr := range unflushedTruncations(tt.cuts) {
				if tr.Reason != history.TruncationUnflushedLoss {
					t.Errorf("reason %q", tr.Reason)
				}
				got = append(got, fmt.Sprintf("%s %d→%d", tr.TP(), tr.From, tr.To))
			}
			if fmt.Sprint(got) != tt.want {
				t.Errorf("truncations %v, want %s", got, tt.want)
			}
		})
	}
}
