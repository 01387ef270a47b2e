package history_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/history"
)

// testdata/kafka532-run is a real failing run (`chaos repro KAFKA-532`,
// bug switch on) recorded by the paced, bounded workload in the compact
// encoding. expected.json holds what the checkers said about the same
// events before the reader and merge were rewritten for bounded, paced
// reads (old reader, old merge, the reads rewritten as
// "records"): each checker's verdict and the events it named, as src:seq
// (indices differ between the two merges where a node's clock stepped
// back). The reader and merge of today must lead the checkers to the same
// verdicts naming the same events.
func TestRealRunVerdictsUnchanged(t *testing.T) {
	dir := "testdata/kafka532-run"
	b, err := os.ReadFile(dir + "/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Verdict  checkers.Verdict `json:"verdict"`
		Checkers map[string]struct {
			Verdict checkers.Verdict `json:"verdict"`
			Events  []string         `json:"events"`
		} `json:"checkers"`
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	h, err := history.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	results, verdict := checkers.Run(h, checkers.All(checkers.DefaultConfig()))
	if verdict != want.Verdict {
		t.Errorf("verdict %s, want %s", verdict, want.Verdict)
	}
	if len(results) != len(want.Checkers) {
		t.Errorf("%d checkers, want %d", len(results), len(want.Checkers))
	}
	for _, r := range results {
		w, ok := want.Checkers[r.Checker]
		if !ok {
			t.Errorf("checker %s not in expected.json", r.Checker)
			continue
		}
		var got []string
		for _, i := range r.Events {
			got = append(got, fmt.Sprintf("%s:%d", h.Events[i].Source, h.Events[i].Seq))
		}
		slices.Sort(got)
		wantEvs := slices.Clone(w.Events)
		slices.Sort(wantEvs)
		if r.Verdict != w.Verdict || !slices.Equal(got, wantEvs) {
			t.Errorf("%s: %s naming %v; want %s naming %v (%s)", r.Checker, r.Verdict, got, w.Verdict, wantEvs, r.Explanation)
		}
	}
}
