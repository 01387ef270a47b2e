package reports

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
)

// TestScanMatchesReadDir: the streamed read numbers events exactly as
// history.ReadDir (the checkers' view) does, re-reads any of them from its
// line, and aggregates the same timeline, including for a file out of time
// order, a file with two sources, ties across files, blank lines and a
// truncated last line. (A file holds one source, as history.ReadDir
// requires; its clock steps back and its file order stands.)
func TestScanMatchesReadDir(t *testing.T) {
	dir := t.TempDir()
	writeHistory(t, dir, historytest.Clean(historytest.GenConfig{Partitions: 3, Processes: 4, Ops: 1500, UnknownRate: 0.05,
		ReadRate: 0.3, FinalReads: true, NodeEvents: true, Seed: 3}))
	t0 := historytest.T0
	line := func(ts int64, src string, seq int, kind, payload string) string {
		return fmt.Sprintf(`{"v":1,"ts":%d,"src":%q,"seq":%d,"kind":%q,%s}`, ts, src, seq, kind, payload)
	}
	phase := func(name, mark string) string { return fmt.Sprintf(`"phase":{"name":%q,"mark":%q}`, name, mark) }
	fault := `"fault":{"id":"x","name":"pause","targets":["n2"]}`
	raw := map[string]string{
		// Out of time order, ties with other files (same ts as
		// generated events), a blank line and a cut-short last line.
		"aaa-mixed.jsonl": strings.Join([]string{
			line(t0+5*historytest.Ms, "aaa-mixed", 0, "phase", phase("heal", "begin")),
			line(t0+2*historytest.Ms, "aaa-mixed", 1, "phase", phase("setup", "begin")),
			"",
			line(t0+5*historytest.Ms, "aaa-mixed", 2, "fault_start", fault),
			line(t0+2*historytest.Ms, "aaa-mixed", 3, "phase", phase("setup", "end")),
			line(t0+9*historytest.Ms, "aaa-mixed", 4, "fault_stop", fault),
		}, "\n") + "\n" + `{"v":1,"ts":`,
		"zzz-late.jsonl": line(t0+5*historytest.Ms, "zzz-late", 0, "phase", phase("collect", "begin")) + "\n",
	}
	// A final read returning 20,000 records: one line far longer than any
	// read buffer.
	var recs []string
	for i := 0; i < 20_000; i++ {
		recs = append(recs, fmt.Sprintf(`{"offset":%d,"value":"value-%d"}`, i, i))
	}
	raw["final-big.jsonl"] = "\n" + line(t0+6*historytest.Ms, "final-big", 0, "op",
		`"op":{"type":"invoke","process":7,"f":"read","topic":"t","partition":0,"final":true}`) + "\n" + line(t0+7*historytest.Ms, "final-big", 1, "op",
		`"op":{"type":"ok","process":7,"f":"read","topic":"t","partition":0,"final":true,"records":[`+strings.Join(recs, ",")+`]}`) + "\n"
	for name, content := range raw {
		if err := os.WriteFile(filepath.Join(dir, "history", name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := history.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	all := make([]int, len(h.Events)+2)
	for i := range all {
		all[i] = i - 1 // includes -1 and n: ignored
	}
	b := newBuilder()
	sc, err := scanHistory(dir, b, all)
	if err != nil {
		t.Fatal(err)
	}
	if sc.count() != len(h.Events) || len(sc.files) != len(h.Files) || len(sc.warnings) != len(h.Warnings) {
		t.Fatalf("count %d files %d warnings %d; ReadDir %d %d %d", sc.count(), len(sc.files), len(sc.warnings), len(h.Events), len(h.Files), len(h.Warnings))
	}
	for i := range h.Events {
		want, got := &h.Events[i], sc.event(i)
		if got == nil || got.Index != i || got.Time != want.Time || got.Source != want.Source || got.Seq != want.Seq || got.Kind != want.Kind ||
			(want.Op != nil && len(got.Op.Records) != len(want.Op.Records)) {
			t.Fatalf("event %d: got %+v, want %+v", i, got, want)
		}
	}
	if sc.event(-1) != nil || sc.event(len(h.Events)) != nil {
		t.Fatal("out-of-range events loaded")
	}
	streamed := b.finish().renderSVG()
	merged := buildTimeline(h).renderSVG()
	if streamed != merged {
		i := 0
		for i < len(streamed) && streamed[i] == merged[i] {
			i++
		}
		t.Fatalf("timelines differ at byte %d:\nstreamed %.300s\nmerged   %.300s", i, streamed[max(0, i-100):], merged[max(0, i-100):])
	}
}
