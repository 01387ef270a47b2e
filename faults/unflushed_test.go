package faults

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
	cut := UnflushedCut{Partition: "chaos-0", File: "00000000000000000000.log", Durable: 100, Size: 300, FirstOffset: 5, EndOffset: 15}
	for _, tt := range []struct {
		name      string
		pick      int
		held      []string
		cuts      []UnflushedCut
		cutErr    error
		want      []string
		startHas  string
		stopError string
	}{
		{name: "kill, cut while down, start at heal", pick: 1, cuts: []UnflushedCut{cut},
			want:     []string{"kill n2", "cut n2", "start n2"},
			startHas: "dropped unflushed chaos-0 offsets [5, 15) (00000000000000000000.log 300 → 100 bytes)"},
		{name: "a broker another fault holds is skipped", pick: 0, held: []string{"n1"},
			want: []string{"kill n2", "cut n2", "start n2"}, startHas: "nothing unflushed"},
		{name: "a failed cut is the fault's error and the broker still starts", pick: 2, cutErr: errors.New("permission denied"),
			want: []string{"kill n3", "cut n3", "start n3"}, startHas: "nothing unflushed", stopError: "permission denied"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &crashWorld{heldNames: tt.held, cuts: tt.cuts, cutErr: tt.cutErr}
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
			if tt.stopError == "" && stop.Error != "" {
				t.Errorf("stop error %q, want none", stop.Error)
			}
		})
	}
}
