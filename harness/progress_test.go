package harness

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
	"github.com/zkchaos/zkchaos/rundir"
)

func TestStatusLine(t *testing.T) {
	tests := []struct {
		name  string
		s     status
		width int
		want  string
	}{
		{"setup, nothing yet", status{Phase: "setup", InPhase: 95 * time.Second, Run: 95 * time.Second}, 200,
			"setup 1m35s │ run 1m35s │ no fault active │ 0 ops/s, 0 ok, 0 fail, 0 unknown │ no violation so far"},
		{"workload with faults", status{Phase: "workload", InPhase: 12300 * time.Millisecond, Limit: 30 * time.Second, Run: 2*time.Minute + 25*time.Second,
			Faults: []string{"pause n2", "partition-halves n1,n3"}, Rate: 1532.4, OK: 12034, Fail: 3, Info: 12}, 200,
			"workload 12s/30s, 18s left │ run 2m25s │ faults: pause n2, partition-halves n1,n3 │ 1532 ops/s, 12034 ok, 3 fail, 12 unknown │ no violation so far"},
		{"past the limit, violation", status{Phase: "workload", InPhase: 31 * time.Second, Limit: 30 * time.Second, Run: 40 * time.Second,
			Violation: "controller-fencing"}, 200,
			"workload 31s/30s, 0s left │ run 40s │ no fault active │ 0 ops/s, 0 ok, 0 fail, 0 unknown │ VIOLATION controller-fencing"},
		{"short phase in tenths", status{Phase: "heal", InPhase: 2340 * time.Millisecond, Run: 50 * time.Second}, 200,
			"heal 2.3s │ run 50s │ no fault active │ 0 ops/s, 0 ok, 0 fail, 0 unknown │ no violation so far"},
		{"clipped to the terminal", status{Phase: "setup", InPhase: 5 * time.Second, Run: 5 * time.Second}, 30,
			"setup 5s │ run 5s │ no fault…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.s.line(tt.width)
			if got != tt.want {
				t.Errorf("line:\n got %q\nwant %q", got, tt.want)
			}
			if n := len([]rune(got)); n > tt.width-1 {
				t.Errorf("%d columns on a %d-column terminal", n, tt.width)
			}
		})
	}
}

// clock is a settable time for progress tests: nothing here waits.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func (c *clock) unixNano() int64         { return c.t.UnixNano() }

// writers opens history files in dir the way the run does.
func writers(t *testing.T, dir string, names ...string) map[string]*history.Writer {
	t.Helper()
	ws := map[string]*history.Writer{}
	for _, n := range names {
		w, err := history.Create(filepath.Join(dir, n+".jsonl"), n, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		ws[n] = w
	}
	return ws
}

// Without a terminal the output is whole lines only: one per phase begin,
// one per phase end with what happened in it (operations by outcome,
// faults), read from the history files as the run wrote them.
func TestProgressPlainLines(t *testing.T) {
	dir := t.TempDir()
	c := &clock{time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC)}
	var out bytes.Buffer
	p := newProgress(&out, dir, map[string]time.Duration{history.PhaseWorkload: 15 * time.Second})
	p.now = c.now
	p.start = c.now()
	defer p.stop()
	ws := writers(t, dir, "nemesis", "client-0", "client-1")
	op := func(w *history.Writer, proc int, typ history.OpType) {
		w.Write(history.Event{Time: c.unixNano(), Kind: history.KindOp, Op: &history.ClientOp{Type: history.OpInvoke, Process: proc, F: history.FProduce, Topic: "t", Value: "v"}})
		w.Write(history.Event{Time: c.unixNano(), Kind: history.KindOp, Op: &history.ClientOp{Type: typ, Process: proc, F: history.FProduce, Topic: "t"}})
	}
	fault := func(start bool, id, name string, targets ...string) {
		k := history.KindFaultStop
		if start {
			k = history.KindFaultStart
		}
		ws["nemesis"].Write(history.Event{Time: c.unixNano(), Kind: k, Fault: &history.Fault{ID: id, Name: name, Targets: targets}})
	}

	p.phaseMark(history.PhaseSetup, history.PhaseBegin)
	fmtLine := func(s string) { p.Write([]byte(s + "\n")) } // another part of the run printing
	fmtLine("zookeeper ensemble of 3 ready")
	c.advance(2*time.Minute + 13*time.Second)
	p.phaseMark(history.PhaseSetup, history.PhaseEnd)
	p.phaseMark(history.PhaseWorkload, history.PhaseBegin)
	c.advance(time.Second)
	for i := 0; i < 6; i++ {
		op(ws["client-0"], 0, history.OpOK)
	}
	fault(true, "f1", "pause", "n2")
	fault(true, "f2", "slow-link", "n1", "zk1")
	op(ws["client-1"], 1, history.OpFail)
	p.poll()
	if got := p.snapshot().Faults; strings.Join(got, "; ") != "pause n2; slow-link n1,zk1" {
		t.Errorf("active faults %q, want pause n2 and slow-link n1,zk1", got)
	}
	c.advance(4 * time.Second)
	fault(false, "f1", "pause", "n2")
	op(ws["client-1"], 1, history.OpInfo)
	op(ws["client-0"], 0, history.OpOK)
	c.advance(10 * time.Second)
	p.phaseMark(history.PhaseWorkload, history.PhaseEnd)
	p.phaseMark(history.PhaseHeal, history.PhaseBegin)
	c.advance(1500 * time.Millisecond)
	p.phaseMark(history.PhaseHeal, history.PhaseEnd)

	want := `[14:00:00.000] setup
zookeeper ensemble of 3 ready
[14:02:13.000] setup done in 2m13s
[14:02:13.000] workload (15s)
[14:02:28.000] workload done in 15s: 9 ops (1/s): 7 ok, 1 fail, 1 unknown; 2 faults injected
[14:02:28.000] heal
[14:02:29.500] heal done in 1.5s
`
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	if strings.ContainsAny(out.String(), "\r\x1b") {
		t.Error("terminal control characters without a terminal")
	}
	if got := p.snapshot().Faults; strings.Join(got, "; ") != "slow-link n1,zk1" {
		t.Errorf("active faults after the pause stopped: %q", got)
	}
}

// A line written in two pieces (the reader caught the writer mid-line)
// is counted once, when it is complete.
func TestTailerCompletesPartialLines(t *testing.T) {
	dir := t.TempDir()
	var line bytes.Buffer
	w := history.NewWriter(&line, "client-0", 0)
	w.Write(history.Event{Time: historytest.T0, Kind: history.KindOp, Op: &history.ClientOp{Type: history.OpOK, Process: 0, F: history.FProduce, Topic: "t"}})
	b := line.Bytes()
	f, err := os.Create(filepath.Join(dir, "client-0.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tl := newTailer(dir)
	defer tl.close()
	for i, step := range []struct {
		bytes  []byte
		wantOK int
	}{{b[:20], 0}, {b[20:], 1}, {b, 2}} {
		f.Write(step.bytes)
		tl.poll()
		if tl.total.ok != step.wantOK || tl.skipped != 0 {
			t.Fatalf("step %d: %d ok, %d skipped, want %d ok", i, tl.total.ok, tl.skipped, step.wantOK)
		}
	}
}

// writeSources writes a merged history back as one file per source.
func writeSources(t testing.TB, dir string, h *history.History) {
	t.Helper()
	files := map[string]*os.File{}
	for _, e := range h.Events {
		f := files[e.Source]
		if f == nil {
			var err error
			if f, err = os.Create(filepath.Join(dir, e.Source+".jsonl")); err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			files[e.Source] = f
		}
		w := history.NewWriter(f, e.Source, e.Node)
		e.Seq = 0
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
}

// The live check finds the stored KAFKA-532 run's violation (the checker the
// full check names), and on generated clean histories says nothing at any
// point of the run.
func TestLiveCheck(t *testing.T) {
	clean := func(seed int64) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			writeSources(t, dir, historytest.Clean(historytest.GenConfig{Partitions: 3, Processes: 4, Ops: 300, UnknownRate: 0.1,
				ReadRate: 0.3, FinalReads: true, NodeEvents: true, Seed: seed}))
		}
	}
	tests := []struct {
		name string
		fill func(t *testing.T, dir string)
		want string // checker of the first violation; "" for none
	}{
		{"stored KAFKA-532 run", func(t *testing.T, dir string) {
			src := filepath.Join("..", "cmd", "chaos", "testdata", "kafka-532", rundir.HistoryDir)
			if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
				t.Fatal(err)
			}
		}, "controller-fencing"},
		{"clean, seed 1", clean(1), ""},
		{"clean, seed 2", clean(2), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.fill(t, dir)
			var out bytes.Buffer
			p := newProgress(&out, dir, nil)
			defer p.stop()
			p.poll()
			p.tmu.Lock()
			all := p.tail.controlUpTo(1<<63 - 1)
			p.tmu.Unlock()
			// Every prefix, cut at each tenth of the run: clean stays
			// clean, and the first violation is the full check's.
			first, last := int64(1<<63-1), int64(0)
			for _, src := range all {
				for _, e := range src {
					first, last = min(first, e.Time), max(last, e.Time)
				}
			}
			for k := 1; k <= 10; k++ {
				cut := first + (last-first)*int64(k)/10
				p.tmu.Lock()
				srcs := p.tail.controlUpTo(cut)
				p.tmu.Unlock()
				if c, why, ok := firstViolation(srcs); ok && c != tt.want {
					t.Errorf("prefix %d/10: %s: %s, want %q", k, c, why, tt.want)
				}
			}
			p.checkLive(time.Unix(0, last).Add(time.Hour))
			switch {
			case tt.want == "" && out.Len() > 0:
				t.Errorf("live check printed %q on a clean history", out.String())
			case tt.want != "" && !strings.Contains(out.String(), "] ! "+tt.want+", seen live in the node and ZooKeeper events so far (event numbers count those only"):
				t.Errorf("live check printed %q, want a %s violation", out.String(), tt.want)
			case tt.want != "" && p.snapshot().Violation != tt.want:
				t.Errorf("status names %q, want %s", p.snapshot().Violation, tt.want)
			}
		})
	}
}

// benchRun writes a generated clean history of 3 partitions × ops
// operations, with node events, as the run's files.
func benchRun(b *testing.B, ops int) string {
	dir := b.TempDir()
	writeSources(b, dir, historytest.Clean(historytest.GenConfig{Partitions: 3, Processes: 6, Ops: ops, UnknownRate: 0.05,
		ReadRate: 0.3, FinalReads: true, NodeEvents: true, Seed: 1}))
	return dir
}

// BenchmarkTailerPoll reads a whole run's files from the start, as the
// first poll after a long pause would.
func BenchmarkTailerPoll(b *testing.B) {
	dir := benchRun(b, 20_000)
	var size int64
	paths, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			size += fi.Size()
		}
	}
	b.SetBytes(size)
	for b.Loop() {
		tl := newTailer(dir)
		tl.poll()
		tl.close()
	}
}

// BenchmarkLiveCheck is one live check over every control-plane event.
func BenchmarkLiveCheck(b *testing.B) {
	tl := newTailer(benchRun(b, 20_000))
	defer tl.close()
	tl.poll()
	b.Logf("%d control-plane events", tl.controlEvents())
	for b.Loop() {
		firstViolation(tl.controlUpTo(1<<63 - 1))
	}
}

// On a terminal the status line is drawn in place and taken away before
// any other line, so the lines above it stay whole; the run directory's
// copy gets the lines and never the status line.
func TestProgressTerminalRedraw(t *testing.T) {
	c := &clock{time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC)}
	var out, log bytes.Buffer
	p := newProgress(&out, t.TempDir(), nil)
	p.log = &log
	p.tty, p.now, p.start = true, c.now, c.now()
	p.width = func() int { return 40 }
	defer p.stop()
	const clear = "\r\x1b[K"
	steps := []struct {
		do   func()
		want string
	}{
		{func() { c.advance(3 * time.Second); p.tick() }, clear + "starting 3s │ run 3s │ no fault active…"},
		{func() { p.Write([]byte("zookeeper ")) }, clear + "zookeeper "},
		{func() { p.tick() }, ""}, // mid-line: no status until the line ends
		{func() { p.Write([]byte("ready\n")); p.tick() }, "ready\n" + clear + "starting 3s │ run 3s │ no fault active…"},
		{func() { p.phaseMark(history.PhaseSetup, history.PhaseBegin) }, clear + "[14:00:03.000] setup\n"},
		{func() { p.stop() }, ""},
	}
	for i, s := range steps {
		out.Reset()
		s.do()
		if out.String() != s.want {
			t.Errorf("step %d: wrote %q, want %q", i, out.String(), s.want)
		}
	}
	if want := "zookeeper ready\n[14:00:03.000] setup\n"; log.String() != want {
		t.Errorf("log %q, want %q", log.String(), want)
	}
}

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
			t.Parallel() // each its own directory; one case waits out 500ms
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
			type at struct {
				source string
				seq    uint64
			}
			seen := map[at]int{}      // calls of match per event
			within := 5 * time.Second // ample for the pieces to arrive
			if tt.wantErr != "" {
				within = 500 * time.Millisecond
			}
			l := &Live{RunDir: dir}
			e, err := l.WaitEvent(context.Background(), since, within, "the election", func(e *history.Event) bool {
				seen[at{e.Source, e.Seq}]++
				return elected(e)
			})
			for k, n := range seen {
				if n != 1 {
					t.Errorf("match saw %s seq %d %d times, want once", k.source, k.seq, n)
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
