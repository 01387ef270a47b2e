package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
	"github.com/zkchaos/zkchaos/rundir"
)

// electedLine is a controller_elected event of source as one history line.
func electedLine(t *testing.T, source string, node int32, at int64, epoch int32) []byte {
	t.Helper()
	var b bytes.Buffer
	w := history.NewWriter(&b, source, node)
	if err := w.Write(history.Event{Time: at, Kind: history.KindControllerElected, Controller: &history.ControllerRun{Epoch: epoch}}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// WaitEvent reads the node event logs only, from since on, takes a line
// written in pieces once it is whole, shows match each event once however
// many polls it lasts, and names what it waited for when it gives up.
func TestWaitEvent(t *testing.T) {
	const since = historytest.T0 + 1000*historytest.Ms
	elected := func(e *history.Event) bool { return e.Kind == history.KindControllerElected }
	tests := []struct {
		name string
		// before: file name → content present when the wait starts;
		// later: appended to n2.jsonl piece by piece while it waits.
		before    map[string][]byte
		later     [][]byte
		wantEpoch int32  // 0: no event found
		wantErr   string // part of the error when none is found
	}{
		{
			name: "in a node log already",
			before: map[string][]byte{
				"n1.jsonl": electedLine(t, "n1", 1, since, 7),
			},
			wantEpoch: 7,
		},
		{
			name: "only before since, in a client history and in final reads",
			before: map[string][]byte{
				"n1.jsonl":       electedLine(t, "n1", 1, since-1, 5),
				"client-0.jsonl": electedLine(t, "client-0", 0, since, 6),
				"final.jsonl":    electedLine(t, "final", 0, since, 6),
			},
			wantErr: "waited 500ms for the election",
		},
		{
			name:   "written while waiting, in two pieces",
			before: map[string][]byte{"n1.jsonl": electedLine(t, "n1", 1, since-1, 5)},
			later: func() [][]byte {
				b := electedLine(t, "n2", 2, since+1, 8)
				return [][]byte{b[:17], b[17:]}
			}(),
			wantEpoch: 8,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			hdir := filepath.Join(dir, rundir.HistoryDir)
			if err := os.Mkdir(hdir, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, b := range tt.before {
				if err := os.WriteFile(filepath.Join(hdir, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if len(tt.later) > 0 {
				f, err := os.Create(filepath.Join(hdir, "n2.jsonl"))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				go func() {
					for _, piece := range tt.later {
						time.Sleep(120 * time.Millisecond)
						f.Write(piece)
					}
				}()
			}
			seen := map[string]int{}  // source/seq → calls of match
			within := 5 * time.Second // ample for the pieces to arrive
			if tt.wantErr != "" {
				within = 500 * time.Millisecond
			}
			l := &Live{RunDir: dir}
			e, err := l.WaitEvent(context.Background(), since, within, "the election", func(e *history.Event) bool {
				seen[fmt.Sprintf("%s seq %d", e.Source, e.Seq)]++
				return elected(e)
			})
			for k, n := range seen {
				if n != 1 {
					t.Errorf("match saw %s %d times, want once", k, n)
				}
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, %v; want error with %q", e, err, tt.wantErr)
				}
				if len(seen) != 0 {
					t.Errorf("match saw %v; want nothing (before since or not a node log)", seen)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if e.Controller.Epoch != tt.wantEpoch {
				t.Errorf("found epoch %d, want %d", e.Controller.Epoch, tt.wantEpoch)
			}
		})
	}
}

// A cancelled wait says what it waited for and wraps the context's error.
func TestWaitEventCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l := &Live{RunDir: t.TempDir()}
	_, err := l.WaitEvent(ctx, 0, time.Minute, "nothing", func(*history.Event) bool { return true })
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "waiting for nothing") {
		t.Fatalf("got %v, want a wrapped context.Canceled naming the wait", err)
	}
}
