package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
	"github.com/zkchaos/zkchaos/internal/wanttext"
	"github.com/zkchaos/zkchaos/rundir"
	"github.com/zkchaos/zkchaos/rundir/rundirtest"
)

// writeRun writes per-source history files into a fresh run directory,
// the events a millisecond apart; with no sources the history folder is
// empty.
func writeRun(t *testing.T, sources map[string][]history.Event) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, history.HistoryDir), 0o755); err != nil {
		t.Fatal(err)
	}
	ts := historytest.T0
	for name, evs := range sources {
		evs = slices.Clone(evs)
		for i := range evs {
			ts += historytest.Ms
			evs[i].Time = ts
		}
		historytest.WriteSource(t, dir, name, 0, evs...)
	}
	return dir
}

func op(typ history.OpType, f, value string, offset int64, final bool, recs ...history.Record) history.Event {
	return history.Event{Kind: history.KindOp, Op: &history.ClientOp{Type: typ, Process: 1, F: f, Topic: "t",
		Value: value, Offset: offset, Acks: history.AcksAll, Final: final, Records: recs}}
}

func exitCode(err error) int {
	if err == nil {
		return exitValid
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return -1
}

func TestCheckCommand(t *testing.T) {
	produceAndRead := func(final ...history.Record) []history.Event {
		return []history.Event{
			op(history.OpInvoke, history.FProduce, "a", 0, false),
			op(history.OpOK, history.FProduce, "", 0, false),
			op(history.OpInvoke, history.FRead, "", 0, true),
			op(history.OpOK, history.FRead, "", 0, true, final...),
		}
	}
	tests := []struct {
		name     string
		sources  map[string][]history.Event
		raw      map[string]string // extra raw files
		want     int
		inOutput string
	}{
		{name: "valid", want: exitValid, inOutput: "verdict: valid",
			sources: map[string][]history.Event{"client-0": produceAndRead(history.Record{Offset: 0, Value: "a"})}},
		{name: "lost write is invalid", want: exitInvalid, inOutput: "was lost",
			sources: map[string][]history.Event{"client-0": produceAndRead()}},
		{name: "no final read is unknown", want: exitUnknown, inOutput: "verdict: unknown; unknown: durability (no final read of t-0",
			sources: map[string][]history.Event{"client-0": produceAndRead()[:2]}},
		{name: "malformed line is bad input", want: exitBad,
			sources: map[string][]history.Event{"client-0": produceAndRead(history.Record{Offset: 0, Value: "a"})},
			raw:     map[string]string{"n1.jsonl": `{"v":1,"ts":5,"src":"n1","kind":"phase","phase":{"name":"x","mark":"begin"}}` + "\n{oops\n"}},
		{name: "future version is bad input", want: exitBad,
			raw: map[string]string{"n1.jsonl": `{"v":99,"ts":5,"src":"n1","kind":"phase","phase":{"name":"x","mark":"begin"}}` + "\n"}},
		{name: "empty file is bad input", want: exitBad, raw: map[string]string{"n1.jsonl": ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeRun(t, tc.sources)
			for name, content := range tc.raw {
				if err := os.WriteFile(filepath.Join(dir, history.HistoryDir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var out bytes.Buffer
			err := runCheck(&out, dir, checkers.DefaultConfig())
			if got := exitCode(err); got != tc.want {
				t.Fatalf("exit %d, want %d (err %v)\n%s", got, tc.want, err, out.String())
			}
			if tc.want == exitBad {
				if !strings.Contains(err.Error(), "n1.jsonl") {
					t.Errorf("bad-input error does not name the file: %v", err)
				}
				return
			}
			if !strings.Contains(out.String(), tc.inOutput) {
				t.Errorf("output lacks %q:\n%s", tc.inOutput, out.String())
			}
			b, err := os.ReadFile(filepath.Join(dir, rundir.ResultsFile))
			if err != nil {
				t.Fatal(err)
			}
			var rep struct {
				Verdict string `json:"verdict"`
				Results []struct {
					Checker string `json:"checker"`
				} `json:"results"`
			}
			if err := json.Unmarshal(b, &rep); err != nil {
				t.Fatal(err)
			}
			if len(rep.Results) != len(checkers.All(checkers.DefaultConfig())) {
				t.Errorf("results.json has %d results", len(rep.Results))
			}
		})
	}
}

func TestCheckCommandLineErrorNamesLine(t *testing.T) {
	dir := writeRun(t, map[string][]history.Event{})
	content := `{"v":1,"ts":5,"src":"n1","kind":"phase","phase":{"name":"x","mark":"begin"}}` + "\n" +
		`{"v":1,"ts":6,"src":"n1","kind":"teleport","phase":{"name":"x","mark":"begin"}}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, history.HistoryDir, "n1.jsonl"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	err := runCheck(&bytes.Buffer{}, dir, checkers.DefaultConfig())
	if exitCode(err) != exitBad || !strings.Contains(err.Error(), "n1.jsonl:2") || !strings.Contains(err.Error(), "unknown event kind") {
		t.Fatalf("got %v", err)
	}
}

func TestCheckCommandTruncatedLastLineIsAWarning(t *testing.T) {
	dir := writeRun(t, map[string][]history.Event{"client-0": {
		op(history.OpInvoke, history.FRead, "", 0, true),
		op(history.OpOK, history.FRead, "", 0, true),
	}})
	rundirtest.AppendHistory(t, dir, "client-0.jsonl", `{"v":1,"ts":9,"sr`)
	var out bytes.Buffer
	if err := runCheck(&out, dir, checkers.DefaultConfig()); err != nil {
		t.Fatalf("exit %d: %v", exitCode(err), err)
	}
	if !strings.Contains(out.String(), "warning: ") || !strings.Contains(out.String(), "client-0.jsonl:3") {
		t.Fatalf("no warning naming the line:\n%s", out.String())
	}
	b, _ := os.ReadFile(filepath.Join(dir, rundir.ResultsFile))
	if !strings.Contains(string(b), "unterminated last line skipped") {
		t.Fatalf("results.json does not state the skipped line")
	}
}

// testdata/kafka-532 is a hand-built KAFKA-532 run (a paused controller's
// stale decision accepted after failover); it must stay invalid for the
// right reasons.
func TestCheckStoredKafka532Run(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/kafka-532")); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := runCheck(&out, dir, checkers.DefaultConfig())
	if exitCode(err) != exitInvalid {
		t.Fatalf("exit %d: %v\n%s", exitCode(err), err, out.String())
	}
	wanttext.Contains(t, "summary", out.String(), "controller-fencing  invalid", "leader-uniqueness   invalid", "durability          invalid", "linearizable        invalid")
}

// Each class of bad input the history reader rejects makes check exit 2
// with an error naming the file and line; a source whose clock steps back
// is not bad input: its file order is kept and the run is judged.
func TestCheckBadHistoryClasses(t *testing.T) {
	ph := func(src string, ts, seq int) string {
		return fmt.Sprintf(`{"v":1,"ts":%d,"src":%q,"seq":%d,"kind":"phase","phase":{"name":"x","mark":"begin"}}`, ts, src, seq)
	}
	read := func(fields string) string {
		return `{"v":1,"ts":9,"src":"n1","seq":1,"kind":"op","op":{"type":"ok","process":1,"f":"read","topic":"t","partition":0,"offset":0,` + fields + `}}`
	}
	tests := []struct {
		name string
		raw  map[string]string
		want string // in the error, after "file:line"
	}{
		{"invalid UTF-8", map[string]string{"n1.jsonl": ph("n1", 5, 0) + "\n" + read(`"values":["a`+"\xfe"+`"]`) + "\n"}, "n1.jsonl:2: not valid UTF-8"},
		{"lone surrogate", map[string]string{"n1.jsonl": ph("n1", 5, 0) + "\n" + read(`"values":["a\udc01"]`) + "\n"}, "n1.jsonl:2: lone UTF-16 surrogate"},
		{"negative offset", map[string]string{"n1.jsonl": ph("n1", 5, 0) + "\n" + read(`"records":[{"offset":-5,"value":"a"}]`) + "\n"}, "n1.jsonl:2: op event with negative record offset"},
		{"src not the file's", map[string]string{"n1.jsonl": ph("n1", 5, 0) + "\n" + ph("n3", 6, 1) + "\n"}, `n1.jsonl:2: src "n3"`},
		{"source in two files", map[string]string{"n1.jsonl": ph("n1", 5, 0) + "\n", "n1b.jsonl": ph("n1", 6, 1) + "\n"}, `n1b.jsonl:1: src "n1"`},
		{"repeated seq", map[string]string{"n1.jsonl": ph("n1", 5, 0) + "\n" + ph("n1", 6, 0) + "\n"}, "n1.jsonl:2: seq 0 after seq 0"},
		// Process 2's acknowledgement of "b" at offset 1 has no invoke:
		// dropped by the pairing, the final read's lack of it would go
		// unjudged and the run would be valid.
		{"completion without an invoke", map[string]string{"client-0.jsonl": strings.Join([]string{
			`{"v":1,"ts":1000000,"src":"client-0","seq":0,"kind":"op","op":{"type":"invoke","process":1,"f":"produce","topic":"t","partition":0,"value":"a","offset":0,"acks":-1}}`,
			`{"v":1,"ts":1100000,"src":"client-0","seq":1,"kind":"op","op":{"type":"ok","process":1,"f":"produce","topic":"t","partition":0,"value":"a","offset":0,"acks":-1}}`,
			`{"v":1,"ts":1200000,"src":"client-0","seq":2,"kind":"op","op":{"type":"ok","process":2,"f":"produce","topic":"t","partition":0,"value":"b","offset":1,"acks":-1}}`,
			`{"v":1,"ts":2000000,"src":"client-0","seq":3,"kind":"op","op":{"type":"invoke","process":1,"f":"read","topic":"t","partition":0,"offset":0,"final":true}}`,
			`{"v":1,"ts":2100000,"src":"client-0","seq":4,"kind":"op","op":{"type":"ok","process":1,"f":"read","topic":"t","partition":0,"offset":0,"values":["a"],"final":true}}`,
		}, "\n") + "\n"}, "client-0.jsonl:3: completion without an invoke: produce ok of process 2 on t-0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeRun(t, nil)
			for name, content := range tc.raw {
				if err := os.WriteFile(filepath.Join(dir, history.HistoryDir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var out bytes.Buffer
			err := runCheck(&out, dir, checkers.DefaultConfig())
			if exitCode(err) != exitBad || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("exit %d, error %v; want exit %d naming %q", exitCode(err), err, exitBad, tc.want)
			}
		})
	}
	t.Run("clock step-back is judged, with a warning", func(t *testing.T) {
		dir := writeRun(t, nil)
		// The read's invoke is stamped 2µs before the produce's
		// completion that precedes it in the file: sorted by time, the
		// read's invoke would close the produce as unknown and the
		// produce's ok would complete the read.
		lines := []string{
			`{"v":1,"ts":1000000,"src":"client-0","seq":0,"kind":"op","op":{"type":"invoke","process":1,"f":"produce","topic":"t","partition":0,"value":"a","offset":0,"acks":-1}}`,
			`{"v":1,"ts":1600000,"src":"client-0","seq":1,"kind":"op","op":{"type":"ok","process":1,"f":"produce","topic":"t","partition":0,"value":"a","offset":0,"acks":-1}}`,
			`{"v":1,"ts":1598000,"src":"client-0","seq":2,"kind":"op","op":{"type":"invoke","process":1,"f":"read","topic":"t","partition":0,"offset":0}}`,
			`{"v":1,"ts":1700000,"src":"client-0","seq":3,"kind":"op","op":{"type":"ok","process":1,"f":"read","topic":"t","partition":0,"offset":0,"values":["a"]}}`,
			`{"v":1,"ts":2000000,"src":"client-0","seq":4,"kind":"op","op":{"type":"invoke","process":1,"f":"read","topic":"t","partition":0,"offset":0,"final":true}}`,
			`{"v":1,"ts":2100000,"src":"client-0","seq":5,"kind":"op","op":{"type":"ok","process":1,"f":"read","topic":"t","partition":0,"offset":0,"values":["a"],"final":true}}`,
		}
		if err := os.WriteFile(filepath.Join(dir, history.HistoryDir, "client-0.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		err := runCheck(&out, dir, checkers.DefaultConfig())
		if exitCode(err) != exitValid {
			t.Fatalf("exit %d (%v), want valid:\n%s", exitCode(err), err, out.String())
		}
		if !strings.Contains(out.String(), "client-0.jsonl:3") || !strings.Contains(out.String(), "stepped back 2µs") {
			t.Fatalf("no step-back warning naming client-0.jsonl:3:\n%s", out.String())
		}
	})
}

// The verdict line says which checkers are invalid or unknown and why, and
// names known anomalies, instead of "every checker says unknown".
func TestVerdictLine(t *testing.T) {
	res := func(name string, v checkers.Verdict, why string, known ...checkers.KnownAnomaly) checkers.Result {
		return checkers.Result{Checker: name, Verdict: v, Explanation: why, Known: known}
	}
	for _, tc := range []struct {
		name    string
		verdict checkers.Verdict
		results []checkers.Result
		want    string
	}{
		{"only durability unknown", checkers.Unknown, []checkers.Result{
			res("broker-fencing", checkers.Valid, "ok."),
			res("durability", checkers.Unknown, "no final read of t-0, so its 3 acknowledged records could not be verified."),
		}, "unknown; unknown: durability (no final read of t-0, so its 3 acknowledged records could not be verified)"},
		{"valid with known anomalies", checkers.Valid, []checkers.Result{
			res("linearizable", checkers.Valid, "ok.", checkers.KnownAnomaly{Name: "KAFKA-2334", Count: 3}),
		}, "valid; known anomalies: KAFKA-2334 ×3 (linearizable)"},
		{"invalid and unknown", checkers.Invalid, []checkers.Result{
			res("broker-fencing", checkers.Invalid, "bad."),
			res("liveness", checkers.Unknown, "the history ends early."),
		}, "invalid; invalid: broker-fencing; unknown: liveness (the history ends early)"},
		{"valid", checkers.Valid, []checkers.Result{res("durability", checkers.Valid, "ok.")}, "valid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := verdictLine(tc.verdict, tc.results); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// A stale empty read answered by a new leader is the known anomaly
// KAFKA-2334: valid by default and named on the verdict line; invalid with
// --strict-reads, still by name.
// staleReadRun writes a run whose only finding is a stale empty read from
// a lagging new leader (known anomaly KAFKA-2334; invalid with
// --strict-reads).
func staleReadRun(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	at := func(ms int64) int64 { return historytest.T0 + ms*historytest.Ms }
	lead := func(node int32, epoch int32, ms int64) history.Event {
		return history.Event{Time: at(ms), Kind: history.KindRoleChange,
			Role: &history.Role{Topic: "t", Role: history.RoleLeader, Leader: node, LeaderEpoch: epoch}}
	}
	timed := func(e history.Event, ms int64) history.Event { e.Time = at(ms); return e }
	files := []struct {
		name string
		node int32
		evs  []history.Event
	}{
		{"n1", 1, []history.Event{lead(1, 0, 1)}},
		{"n2", 2, []history.Event{lead(2, 1, 10)}},
		{"client-0", 0, []history.Event{
			timed(op(history.OpInvoke, history.FProduce, "a", 0, false), 2),
			timed(op(history.OpOK, history.FProduce, "", 0, false), 3),
			timed(op(history.OpInvoke, history.FRead, "", 0, false), 11),
			timed(op(history.OpOK, history.FRead, "", 0, false), 12),
			timed(op(history.OpInvoke, history.FRead, "", 0, true), 20),
			timed(op(history.OpOK, history.FRead, "", 0, true, history.Record{Offset: 0, Value: "a"}), 21),
		}},
	}
	for _, f := range files {
		historytest.WriteSource(t, dir, f.name, f.node, f.evs...)
	}
	return dir
}

func TestCheckStrictReads(t *testing.T) {
	dir := staleReadRun(t)
	for _, tc := range []struct {
		strict bool
		want   int
		line   string
	}{
		{false, exitValid, "verdict: valid; known anomalies: KAFKA-2334 ×1 (linearizable)"},
		{true, exitInvalid, "verdict: invalid; invalid: linearizable; known anomalies: KAFKA-2334 ×1 (linearizable)"},
	} {
		cfg := checkers.DefaultConfig()
		cfg.StrictReads = tc.strict
		var out bytes.Buffer
		err := runCheck(&out, dir, cfg)
		if got := exitCode(err); got != tc.want || !strings.Contains(out.String(), tc.line) {
			t.Errorf("strict %v: exit %d (want %d), output:\n%s\nwant a line containing %q", tc.strict, got, tc.want, out.String(), tc.line)
		}
	}
}

// A re-check takes the settings its run's previous verdict was reached
// with (results.json), unless a flag says otherwise.
func TestCheckTakesTheRecordedSettings(t *testing.T) {
	for _, tc := range []struct {
		name     string
		recorded rundir.CheckConfig // nil: no results.json
		args     []string
		want     int
		says     string
	}{
		{name: "no earlier verdict: the defaults", want: exitValid},
		{name: "recorded strict reads", recorded: rundir.CheckConfig{"strict-reads": "true", "offline-grace": "30s"}, want: exitInvalid,
			says: "settings of the previous verdict (results.json): strict-reads=true\n"},
		{name: "a flag overrides the record", recorded: rundir.CheckConfig{"strict-reads": "true"}, args: []string{"--strict-reads=false"}, want: exitValid},
		{name: "a knob this build lacks is passed over", recorded: rundir.CheckConfig{"no-such-knob": "1"}, want: exitValid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := staleReadRun(t)
			if tc.recorded != nil {
				if err := rundir.WriteResults(dir, &rundir.Results{Schema: rundir.ResultsSchema, Config: tc.recorded}); err != nil {
					t.Fatal(err)
				}
			}
			cmd := newCheckCmd()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetArgs(append(append([]string{}, tc.args...), "--visualize=false", dir))
			err := cmd.Execute()
			if got := exitCode(err); got != tc.want {
				t.Fatalf("exit %d, want %d; output:\n%s", got, tc.want, out.String())
			}
			if tc.says != "" && !strings.Contains(out.String(), tc.says) {
				t.Errorf("output lacks %q:\n%s", tc.says, out.String())
			}
			if tc.says == "" && strings.Contains(out.String(), "settings of the previous verdict") {
				t.Errorf("took settings it should not have:\n%s", out.String())
			}
		})
	}
}

// Every command that checks a history takes every checker knob, by the
// same flag name results.json records it under.
func TestCommandsTakeEveryKnob(t *testing.T) {
	for name, cmd := range map[string]*cobra.Command{"check": newCheckCmd(), "run": newRunCmd(), "shrink": newShrinkCmd()} {
		for knob := range checkers.DefaultConfig().Knobs() {
			if cmd.Flags().Lookup(knob) == nil {
				t.Errorf("chaos %s has no --%s", name, knob)
			}
		}
	}
}
