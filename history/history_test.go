package history

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
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
	ev := Event{Kind: KindControlRequest, Control: &Control{API: APILeaderAndIsr, ControllerEpoch: 3, BrokerEpoch: 42,
		Verdict: VerdictAccepted, OwnBrokerEpoch: 42, KnownControllerEpoch: 2,
		Partitions: []ControlPartition{{Topic: "t", Partition: 1, Leader: 2, LeaderEpoch: 5, ISR: []int32{2, 3}}}}}
	back := throughFile(t, 2, ev)
	got := back.Control
	if back.Node != 2 || got.ControllerEpoch != 3 || got.Partitions[0].LeaderEpoch != 5 || got.Partitions[0].ISR[1] != 3 {
		t.Fatalf("round trip lost data: %+v %+v", back, got)
	}
}

// readInvoke is a read invoke line of source c (seq 0) by process proc.
func readInvoke(proc int) string {
	return fmt.Sprintf(`{"v":1,"ts":8,"src":"c","seq":0,"kind":"op","op":{"type":"invoke","process":%d,"f":"read","topic":"t","partition":0,"offset":4}}`, proc)
}

// readOK is a read completion line of source c with the given record fields.
func readOK(fields string) string {
	return `{"v":1,"ts":9,"src":"c","seq":0,"kind":"op","op":{"type":"ok","process":1,"f":"read","topic":"t","partition":0,"offset":4,` + fields + `}}`
}

func TestDecodeBadInput(t *testing.T) {
	good := `{"v":1,"ts":5,"src":"n1","seq":0,"node":1,"kind":"phase","phase":{"name":"setup","mark":"begin"}}`
	good1 := strings.Replace(good, `"seq":0`, `"seq":1`, 1)
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
		{name: "malformed middle", in: good + "\n{not json\n" + good + "\n", wantLine: 2, wantErr: "json: expected"},
		{name: "unknown kind", in: good + "\n" + strings.Replace(good, `"phase","phase"`, `"warp","phase"`, 1) + "\n", wantLine: 2, wantErr: "unknown event kind"},
		{name: "future version", in: strings.Replace(good, `"v":1`, `"v":9`, 1) + "\n", wantLine: 1, wantErr: "from the future"},
		{name: "missing payload", in: strings.Replace(good, `"phase":{`, `"fault":{`, 1) + "\n", wantLine: 1, wantErr: "without its payload"},
		{name: "truncated last line", in: good + "\n" + good[:30], wantEvs: 1, wantWarns: 1},
		{name: "only truncated line", in: good[:30], wantErr: "no events", wantLine: 1},
		{name: "unterminated good last line", in: good + "\n" + good1, wantEvs: 2},
		{name: "blank line", in: good + "\n\n" + good1 + "\n", wantEvs: 2, wantWarns: 1},
		{name: "clock steps back", in: good + "\n" + strings.Replace(good1, `"ts":5`, `"ts":3`, 1) + "\n", wantEvs: 2, wantWarns: 1},
		{name: "repeated seq", in: good + "\n" + good + "\n", wantLine: 2, wantErr: "seq 0 after seq 0"},
		{name: "seq goes back", in: good1 + "\n" + good + "\n", wantLine: 2, wantErr: "unique and increasing"},
		{name: "invalid UTF-8 value", in: good + "\n" + readOK(`"values":["p1-`+"\xff"+`"]`) + "\n", wantLine: 2, wantErr: "not valid UTF-8"},
		{name: "lone surrogate escape", in: readOK(`"values":["p1-\ud800"]`) + "\n", wantLine: 1, wantErr: "lone UTF-16 surrogate"},
		{name: "lone low surrogate escape", in: readOK(`"values":["\udc00x"]`) + "\n", wantLine: 1, wantErr: "lone UTF-16 surrogate"},
		{name: "surrogate pair escape", in: readInvoke(1) + "\n" + strings.Replace(readOK(`"values":["\ud83d\ude00","a\\udc00"]`), `"seq":0`, `"seq":1`, 1) + "\n", wantEvs: 2},
		// The schema: per process, one invoke, then exactly one completion.
		{name: "completion without an invoke", in: good + "\n" + strings.Replace(readOK(`"values":["a"]`), `"seq":0`, `"seq":1`, 1) + "\n", wantLine: 2,
			wantErr: "completion without an invoke: read ok of process 1 on t-0, and process 1 has no invoke pending"},
		{name: "completion after another process's invoke", in: readInvoke(2) + "\n" + strings.Replace(readOK(`"values":["a"]`), `"seq":0`, `"seq":1`, 1) + "\n", wantLine: 2,
			wantErr: "completion without an invoke"},
		{name: "second completion of one invoke", in: readInvoke(1) + "\n" + strings.Replace(readOK(`"values":["a"]`), `"seq":0`, `"seq":1`, 1) + "\n" +
			strings.Replace(readOK(`"values":["a"]`), `"seq":0`, `"seq":2`, 1) + "\n", wantLine: 3, wantErr: "completion without an invoke"},
		{name: "invoke then completion", in: readInvoke(1) + "\n" + strings.Replace(readOK(`"values":["a"]`), `"seq":0`, `"seq":1`, 1) + "\n", wantEvs: 2},
		{name: "negative read offset", in: strings.Replace(readOK(`"values":["a"]`), `"offset":4`, `"offset":-4`, 1) + "\n", wantLine: 1, wantErr: "negative offset -4"},
		{name: "negative record offset", in: readOK(`"records":[{"offset":-1,"value":"a"}]`) + "\n", wantLine: 1, wantErr: "negative record offset"},
		{name: "negative from", in: readOK(`"from":-2,"values":["a"]`) + "\n", wantLine: 1, wantErr: "negative record offset"},
		{name: "negative hw", in: readOK(`"values":["a"],"hw":-1`) + "\n", wantLine: 1, wantErr: "negative hw"},
		{name: "negative append offset", in: `{"v":1,"ts":5,"src":"n1","seq":0,"node":1,"kind":"produce_append","append":{"topic":"t","partition":0,"base_offset":-3,"last_offset":0,"leader_epoch":0,"acks":-1}}` + "\n", wantLine: 1, wantErr: "negative base_offset"},
		{name: "negative truncation", in: `{"v":1,"ts":5,"src":"n1","seq":0,"node":1,"kind":"truncation","truncation":{"topic":"t","partition":0,"from":5,"to":-1}}` + "\n", wantLine: 1, wantErr: "negative to offset"},
		{name: "negative checkpoint hw", in: `{"v":1,"ts":5,"src":"n1","seq":0,"node":1,"kind":"hw_checkpoint","checkpoint":{"entries":[{"topic":"t","partition":0,"hw":-7}]}}` + "\n", wantLine: 1, wantErr: "negative checkpoint hw"},
		{name: "from without values", in: readOK(`"from":2`) + "\n", wantLine: 1, wantErr: `"from" without "values"`},
		{name: "records and values", in: readOK(`"values":["a"],"records":[{"offset":4,"value":"a"}]`) + "\n", wantLine: 1, wantErr: `both "records" and "values"`},
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
	// a's clock stepped back between a0 and a1: its file order stands,
	// and the step is a warning naming the line and its size.
	want := "b0 b1 a0 a1 b2"
	if strings.Join(got, " ") != want {
		t.Fatalf("order %v, want %s", got, want)
	}
	if len(h.Files) != 2 {
		t.Fatalf("files %v", h.Files)
	}
	if len(h.Warnings) != 1 || h.Warnings[0].Line != 2 || h.Warnings[0].ClockStepBack != 10 ||
		!strings.HasSuffix(h.Warnings[0].File, "a.jsonl") || !strings.Contains(h.Warnings[0].Message, "stepped back 10ns") {
		t.Fatalf("warnings %+v, want one clock step-back of 10ns at a.jsonl:2", h.Warnings)
	}
}

// WriteDir lays a history out as ReadDir reads it: one file per source.
func TestWriteDirReadsBack(t *testing.T) {
	var evs []Event
	for i, src := range []string{"client-0", "client-1", "client-0"} {
		e := opEvent(OpInvoke, i)
		e.Source, e.Time = src, int64(i+1)
		evs = append(evs, e)
	}
	dir := t.TempDir()
	if err := WriteDir(dir, evs); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, HistoryDir, "*.jsonl"))
	h, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || len(h.Events) != 3 || h.Events[2].Source != "client-0" || h.Events[2].Seq != 1 || h.Events[2].Op.Process != 2 {
		t.Fatalf("%d files, events %+v", len(files), h.Events)
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
	f.Add([]byte(readOK(`"from":5,"values":["a\ud83d\ude00","b\\u0041"],"hw":7`) + "\n" + readOK(`"values":["\udbff"]`)))
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
			if i > 0 && evs[i].Seq <= evs[i-1].Seq {
				t.Fatalf("seq %d after %d accepted", evs[i].Seq, evs[i-1].Seq)
			}
			if op := evs[i].Op; op != nil && bytes.Contains([]byte(fmt.Sprint(op.Records)), []byte("\uFFFD")) && !bytes.Contains(data, []byte("\uFFFD")) &&
				!bytes.Contains(bytes.ToLower(data), []byte(`\ufffd`)) {
				t.Fatalf("a value changed into U+FFFD: %+v", op.Records)
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
			Watch: &Watch{}, Fault: &Fault{}, Phase: &Phase{}, Group: &GroupRequest{}, Queue: &QueueOp{Type: OpInvoke, F: QueueTxn}}
		slot, ok := payloadOf[k]
		set := e.payloadSet()
		if n := countTrue(set[:]); !ok || n != 18 {
			t.Errorf("kind %s: payload known %v, %d payloads counted", k, ok, n)
		}
		if len(payloadOf) != len(Kinds) || slot < 0 || slot >= len(set) {
			t.Errorf("kind %s: payload slot %d of %d, %d kinds mapped for %d", k, slot, len(set), len(payloadOf), len(Kinds))
		}
	}
}

// Each kind's payload slot is its own payload: the event with only that
// payload set validates, and with another one instead it does not.
func TestPayloadSlotNamesTheKindsPayload(t *testing.T) {
	tests := []struct {
		kind  Kind
		right Event
	}{
		{KindOp, Event{Op: &ClientOp{Type: OpInvoke, F: FRead}}},
		{KindNodeStop, Event{Process: &Process{}}},
		{KindControlRequest, Event{Control: &Control{}}},
		{KindProduceAck, Event{Append: &Append{}}},
		{KindZKWatch, Event{Watch: &Watch{}}},
		{KindPhase, Event{Phase: &Phase{}}},
		{KindGroupRequest, Event{Group: &GroupRequest{API: GroupAPIJoin}}},
		{KindTxnRequest, Event{Txn: &TxnRequest{API: TxnAPIEndTxn}}},
		{KindTxnMarker, Event{TxnMarker: &TxnMarker{Offset: 3}}},
		{KindProduceRefused, Event{Refusal: &ProduceRefusal{Check: RefusedVerification}}},
	}
	for _, tt := range tests {
		e := tt.right
		e.V, e.Time, e.Kind = 1, 1, tt.kind
		if err := e.Validate(); err != nil {
			t.Errorf("kind %s with its payload: %v", tt.kind, err)
		}
		wrong := Event{V: 1, Time: 1, Kind: tt.kind, Fault: &Fault{}}
		if err := wrong.Validate(); err == nil {
			t.Errorf("kind %s with a fault payload validated", tt.kind)
		}
	}
}

// Merge must keep each source's own order and, at every step, take the
// least next event by (Time, Source, source position): checked against a
// plain O(n·k) merge, on sources whose clocks step back.
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
	var want []uint64
	pos := make([]int, len(sources))
	for {
		best := -1
		for si, s := range sources {
			if pos[si] == len(s) {
				continue
			}
			if best < 0 {
				best = si
				continue
			}
			x, y := &s[pos[si]], &sources[best][pos[best]]
			if x.Time < y.Time || (x.Time == y.Time && x.Source < y.Source) {
				best = si
			}
		}
		if best < 0 {
			break
		}
		want = append(want, sources[best][pos[best]].Seq)
		pos[best]++
	}
	h := Merge(sources...)
	if len(h.Events) != len(want) {
		t.Fatalf("%d events, want %d", len(h.Events), len(want))
	}
	for i := range want {
		if h.Events[i].Seq != want[i] || h.Events[i].Index != i {
			t.Fatalf("position %d: got seq %d, want %d", i, h.Events[i].Seq, want[i])
		}
	}
}

// A client's clock steps back 3µs between an invoke and its completion. The
// file order is the true order, so the two still pair into one operation
// (re-sorting by time put the completion first: an orphan and an op that
// never completed, which the checkers took for a lost or unknown write).
func TestClockStepBackKeepsOperationsPaired(t *testing.T) {
	dir := t.TempDir()
	hdir := filepath.Join(dir, HistoryDir)
	if err := os.Mkdir(hdir, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := Create(filepath.Join(hdir, "client-0.jsonl"), "client-0", 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, ts := range []int64{1_000_000, 997_000, 1_500_000, 1_600_000} {
		typ := OpInvoke
		if i%2 == 1 {
			typ = OpOK
		}
		e := opEvent(typ, 1)
		e.Time = ts
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	h, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ops, orphans := Operations(h)
	if len(orphans) != 0 || len(ops) != 2 || ops[0].Complete == nil || ops[1].Complete == nil {
		t.Fatalf("ops %+v orphans %v: want 2 complete operations", ops, orphans)
	}
	if len(h.Warnings) != 1 || h.Warnings[0].ClockStepBack != 3000 || h.Warnings[0].Line != 2 {
		t.Fatalf("warnings %+v, want a 3µs step-back at line 2", h.Warnings)
	}
}

// Each bad run directory is an error naming the file and line.
func TestReadDirRejectsBadSources(t *testing.T) {
	ph := func(src string, seq int) string {
		return fmt.Sprintf(`{"v":1,"ts":%d,"src":%q,"seq":%d,"kind":"phase","phase":{"name":"x","mark":"begin"}}`, 10+seq, src, seq)
	}
	tests := []struct {
		name  string
		files map[string][]string
		want  string // file:line and message substring
	}{
		{"src differs from file", map[string][]string{"n1.jsonl": {ph("n1", 0), ph("n2", 1)}}, "n1.jsonl:2: src \"n2\""},
		{"source split across files", map[string][]string{"n1.jsonl": {ph("n1", 0)}, "n1-old.jsonl": {ph("n1", 5)}}, "n1-old.jsonl:1: src \"n1\""},
		{"repeated seq", map[string][]string{"zk.jsonl": {ph("zk", 0), ph("zk", 1), ph("zk", 1)}}, "zk.jsonl:3: seq 1 after seq 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			hdir := filepath.Join(dir, HistoryDir)
			os.Mkdir(hdir, 0o755)
			for name, lines := range tt.files {
				if err := os.WriteFile(filepath.Join(hdir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := ReadDir(dir)
			var le *LineError
			if !errors.As(err, &le) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want a line error containing %q", err, tt.want)
			}
		})
	}
}

// A restarted writer (a node process after a crash) appends to its file:
// it drops a cut-short last line and continues the seq, so the file stays
// readable and (src, seq) unique.
func TestCreateResumesSeq(t *testing.T) {
	p := filepath.Join(t.TempDir(), "n1.jsonl")
	w, err := Create(p, "n1", 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := w.Write(Event{Kind: KindPhase, Phase: &Phase{Name: "a", Mark: PhaseBegin}}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"v":1,"ts":12,"src":"n1","se`) // a crash mid-line
	f.Close()
	w, err = Create(p, "n1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(Event{Kind: KindPhase, Phase: &Phase{Name: "b", Mark: PhaseBegin}}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	evs, warns, err := ReadFile(p)
	if err != nil || len(warns) != 0 {
		t.Fatalf("reopened file: %v %v", err, warns)
	}
	if len(evs) != 4 || evs[3].Seq != 3 || evs[3].Phase.Name != "b" {
		t.Fatalf("events %+v, want 4 with the last at seq 3", evs)
	}
}

// Reads are written compactly and read back as the same records; records
// that are not consecutive keep the long form.
func TestReadRecordsRoundTrip(t *testing.T) {
	ep, hw := int32(3), int64(99)
	tests := []struct {
		name    string
		recs    []Record
		compact string // substring of the written line
	}{
		{"consecutive from the fetch offset", []Record{{7, "p1-1"}, {8, "p2-1"}}, `"offset":7,"values":["p1-1","p2-1"]`},
		{"consecutive after the fetch offset", []Record{{9, "a"}, {10, "b"}}, `"offset":7,"from":9,"values":["a","b"]`},
		{"gap", []Record{{7, "a"}, {9, "b"}}, `"records":[{"offset":7,"value":"a"},{"offset":9,"value":"b"}]`},
		{"empty", nil, `"offset":7,"broker":2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			w := NewWriter(&buf, "c", 0)
			inv := ClientOp{Type: OpInvoke, Process: 1, F: FRead, Topic: "t", Offset: 7}
			op := ClientOp{Type: OpOK, Process: 1, F: FRead, Topic: "t", Offset: 7, Records: tt.recs, Broker: 2, LeaderEpoch: &ep, HW: &hw}
			for _, o := range []*ClientOp{&inv, &op} {
				if err := w.Write(Event{Kind: KindOp, Op: o}); err != nil {
					t.Fatal(err)
				}
			}
			if !strings.Contains(buf.String(), tt.compact) {
				t.Fatalf("line %s does not contain %s", buf.String(), tt.compact)
			}
			evs, _, err := Decode(&buf, "c.jsonl")
			if err != nil {
				t.Fatal(err)
			}
			got := evs[1].Op
			if fmt.Sprint(got.Records) != fmt.Sprint(tt.recs) || got.Broker != 2 || *got.LeaderEpoch != 3 || *got.HW != 99 {
				t.Fatalf("read back %+v, want records %v", got, tt.recs)
			}
		})
	}
}

// A LeaderAndIsr partition answered NONE but not applied carries
// not_applied; one applied, and every line written before the field
// existed, decodes to NotApplied false, and the writer leaves the key out.
func TestControlPartitionNotApplied(t *testing.T) {
	const line = `{"v":1,"ts":5,"src":"n1","seq":0,"node":1,"kind":"control_request","control":{"api":"LeaderAndIsr","correlation_id":3,"controller_id":2,"controller_epoch":1,"broker_epoch":100,"partitions":[{"topic":"t","partition":0,"leader":3,"leader_epoch":4%s}],"verdict":"accepted","known_controller_epoch":1,"own_broker_epoch":100}}`
	tests := []struct {
		name  string
		extra string
		want  bool
	}{
		{"applied (or written before the field)", "", false},
		{"not applied", `,"not_applied":true`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, _, err := Decode(strings.NewReader(fmt.Sprintf(line, tt.extra)+"\n"), "n1.jsonl")
			if err != nil {
				t.Fatal(err)
			}
			p := evs[0].Control.Partitions[0]
			if p.NotApplied != tt.want {
				t.Fatalf("NotApplied %v, want %v", p.NotApplied, tt.want)
			}
			var buf bytes.Buffer
			w := NewWriter(&buf, "n1", 1)
			if err := w.Write(evs[0]); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(buf.String(), `"not_applied":true`); got != tt.want {
				t.Fatalf("written line %s: not_applied present %v, want %v", buf.String(), got, tt.want)
			}
		})
	}
}

// throughFile writes ev as node n's only event to a history file (synced
// and closed, as a node does at exit) and returns what reading it back
// gives.
func throughFile(t *testing.T, n int32, ev Event) Event {
	t.Helper()
	p := filepath.Join(t.TempDir(), fmt.Sprintf("n%d.jsonl", n))
	w, err := Create(p, fmt.Sprintf("n%d", n), n)
	if err != nil {
		t.Fatal(err)
	}
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
	if len(evs) != 1 {
		t.Fatalf("read back %d events, want 1", len(evs))
	}
	return evs[0]
}
