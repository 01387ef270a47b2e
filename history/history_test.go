package history

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

func opEvent(t OpType, proc int) Event {
	return Event{Kind: KindOp, Op: &ClientOp{Type: t, Process: proc, F: FProduce, Topic: "t", Partition: 0, Value: "v"}}
}

func TestWriterConcurrentLinesComplete(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	w := NewWriter(lockedWriter{&buf, &mu}, "client-0", 0)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if err := w.Write(opEvent(OpInvoke, g)); err != nil {
					t.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	evs, warns, err := Decode(&buf, "mem")
	if err != nil || len(warns) != 0 {
		t.Fatalf("decode: %v %v", err, warns)
	}
	if len(evs) != 1600 {
		t.Fatalf("got %d events, want 1600", len(evs))
	}
	seen := map[uint64]bool{}
	for _, e := range evs {
		if seen[e.Seq] {
			t.Fatalf("duplicate seq %d", e.Seq)
		}
		seen[e.Seq] = true
		if e.Source != "client-0" || e.V != SchemaVersion || e.Time == 0 {
			t.Fatalf("bad stamp: %+v", e)
		}
	}
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func TestWriterRejectsBadEvent(t *testing.T) {
	w := NewWriter(&bytes.Buffer{}, "n1", 1)
	if err := w.Write(Event{Kind: KindControlRequest}); err == nil {
		t.Fatal("event without payload was written")
	}
	if err := w.Write(Event{Kind: "bogus", Phase: &Phase{Name: "x"}}); err == nil {
		t.Fatal("unknown kind was written")
	}
}

func TestFileRoundTripAndSync(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "n2.jsonl")
	w, err := Create(p, "n2", 2)
	if err != nil {
		t.Fatal(err)
	}
	ev := Event{Kind: KindControlRequest, Control: &Control{API: APILeaderAndIsr, ControllerEpoch: 3, BrokerEpoch: 42,
		Verdict: VerdictAccepted, OwnBrokerEpoch: 42, KnownControllerEpoch: 2,
		Partitions: []ControlPartition{{Topic: "t", Partition: 1, Leader: 2, LeaderEpoch: 5, ISR: []int32{2, 3}}}}}
	if err := w.Write(ev); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	evs, _, err := ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	got := evs[0].Control
	if evs[0].Node != 2 || got.ControllerEpoch != 3 || got.Partitions[0].LeaderEpoch != 5 || got.Partitions[0].ISR[1] != 3 {
		t.Fatalf("round trip lost data: %+v %+v", evs[0], got)
	}
}

func TestDecodeBadInput(t *testing.T) {
	good := `{"v":1,"ts":5,"src":"n1","seq":0,"node":1,"kind":"phase","phase":{"name":"setup","mark":"begin"}}`
	tests := []struct {
		name      string
		in        string
		wantLine  int    // 0: no error
		wantErr   string // substring
		wantEvs   int
		wantWarns int
	}{
		{name: "good", in: good + "\n", wantEvs: 1},
		{name: "empty file", in: "", wantErr: "no events", wantLine: 0},
		{name: "malformed middle", in: good + "\n{not json\n" + good + "\n", wantLine: 2, wantErr: "invalid character"},
		{name: "unknown kind", in: good + "\n" + strings.Replace(good, `"phase","phase"`, `"warp","phase"`, 1) + "\n", wantLine: 2, wantErr: "unknown event kind"},
		{name: "future version", in: strings.Replace(good, `"v":1`, `"v":9`, 1) + "\n", wantLine: 1, wantErr: "from the future"},
		{name: "missing payload", in: strings.Replace(good, `"phase":{`, `"fault":{`, 1) + "\n", wantLine: 1, wantErr: "without its payload"},
		{name: "truncated last line", in: good + "\n" + good[:30], wantEvs: 1, wantWarns: 1},
		{name: "only truncated line", in: good[:30], wantErr: "no events", wantLine: 1},
		{name: "unterminated good last line", in: good + "\n" + good, wantEvs: 2},
		{name: "blank line", in: good + "\n\n" + good + "\n", wantEvs: 2, wantWarns: 1},
		{name: "missing ts", in: strings.Replace(good, `"ts":5`, `"ts":0`, 1) + "\n", wantLine: 1, wantErr: "timestamp"},
		{name: "bad op type", in: `{"v":1,"ts":5,"src":"c","kind":"op","op":{"type":"maybe","f":"produce"}}` + "\n", wantLine: 1, wantErr: "unknown type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, warns, err := Decode(strings.NewReader(tt.in), "x.jsonl")
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				if len(evs) != tt.wantEvs || len(warns) != tt.wantWarns {
					t.Fatalf("got %d events %d warnings (%v), want %d/%d", len(evs), len(warns), warns, tt.wantEvs, tt.wantWarns)
				}
				return
			}
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("want *LineError, got %v", err)
			}
			if le.File != "x.jsonl" || (tt.wantLine != 0 && le.Line != tt.wantLine) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %q (line %d), want line %d containing %q", err, le.Line, tt.wantLine, tt.wantErr)
			}
		})
	}
}

func TestReadDirMergesDeterministically(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, HistoryDir), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, lines ...string) {
		if err := os.WriteFile(filepath.Join(dir, HistoryDir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ph := func(src string, ts, seq int, name string) string {
		return fmt.Sprintf(`{"v":1,"ts":%d,"src":%q,"seq":%d,"kind":"phase","phase":{"name":%q,"mark":"begin"}}`, ts, src, seq, name)
	}
	write("b.jsonl", ph("b", 10, 0, "b0"), ph("b", 10, 1, "b1"), ph("b", 30, 2, "b2"))
	write("a.jsonl", ph("a", 20, 0, "a0"), ph("a", 10, 1, "a1"))
	write("notes.txt", "ignored")
	h, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, e := range h.Events {
		if e.Index != i {
			t.Fatalf("index %d at position %d", e.Index, i)
		}
		got = append(got, e.Phase.Name)
	}
	want := "a1 b0 b1 a0 b2"
	if strings.Join(got, " ") != want {
		t.Fatalf("order %v, want %s", got, want)
	}
	if len(h.Files) != 2 {
		t.Fatalf("files %v", h.Files)
	}
}

func TestReadDirErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadDir(dir); err == nil {
		t.Fatal("missing history dir accepted")
	}
	if err := os.Mkdir(filepath.Join(dir, HistoryDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDir(dir); err == nil || !strings.Contains(err.Error(), "no *.jsonl") {
		t.Fatalf("empty history dir: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, HistoryDir, "n1.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadDir(dir)
	if err == nil || !strings.Contains(err.Error(), "n1.jsonl") {
		t.Fatalf("empty file: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"v":1,"ts":5,"src":"n1","seq":0,"node":1,"kind":"phase","phase":{"name":"setup","mark":"begin"}}` + "\n"))
	f.Add([]byte(`{"v":1,"ts":5,"src":"c","kind":"op","op":{"type":"ok","f":"read","records":[{"offset":1,"value":"x"}]}}`))
	f.Add([]byte("{\n\n}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, _, err := Decode(bytes.NewReader(data), "fuzz")
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error is not a *LineError: %v", err)
			}
			return
		}
		for i := range evs {
			if verr := evs[i].Validate(); verr != nil {
				t.Fatalf("decoded an invalid event: %v", verr)
			}
		}
	})
}

// Every kind must map to a payload in Validate (a kind added to Kinds but
// not to payloads would be unreadable).
func TestEveryKindHasAPayload(t *testing.T) {
	for _, k := range Kinds {
		e := Event{V: 1, Time: 1, Kind: k, Op: &ClientOp{Type: OpInvoke, F: FRead}, Process: &Process{}, Registration: &Registration{},
			Controller: &ControllerRun{}, ZKWrite: &ZKWrite{}, Control: &Control{}, Shutdown: &Shutdown{}, Role: &Role{},
			Append: &Append{}, HW: &HWAdvance{}, ISR: &ISRChange{}, Checkpoint: &Checkpoint{}, Truncation: &Truncation{},
			Watch: &Watch{}, Fault: &Fault{}, Phase: &Phase{}}
		if want, n := e.payloads(); !want || n != 16 {
			t.Errorf("kind %s: payload known %v, %d payloads counted", k, want, n)
		}
	}
}

// Merge must equal a stable sort by (Time, Source, source position, line),
// whatever the order inside each source.
func TestMergeMatchesReferenceOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var sources [][]Event
	for s := 0; s < 5; s++ {
		var evs []Event
		for i := 0; i < 200; i++ {
			evs = append(evs, Event{Time: int64(rng.Intn(50)), Source: fmt.Sprintf("s%d", rng.Intn(3)), Seq: uint64(s*1000 + i), Kind: KindPhase})
		}
		sources = append(sources, evs)
	}
	type ref struct {
		e        Event
		src, pos int
	}
	var all []ref
	for si, s := range sources {
		for pi, e := range s {
			all = append(all, ref{e, si, pi})
		}
	}
	sort.SliceStable(all, func(a, b int) bool {
		x, y := all[a], all[b]
		if x.e.Time != y.e.Time {
			return x.e.Time < y.e.Time
		}
		if x.e.Source != y.e.Source {
			return x.e.Source < y.e.Source
		}
		return x.src < y.src
	})
	h := Merge(sources...)
	for i := range all {
		if h.Events[i].Seq != all[i].e.Seq || h.Events[i].Index != i {
			t.Fatalf("position %d: got seq %d, want %d", i, h.Events[i].Seq, all[i].e.Seq)
		}
	}
}
