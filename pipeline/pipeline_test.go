package pipeline

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/judge"
	"github.com/zkchaos/zkchaos/rundir"
	"github.com/zkchaos/zkchaos/rundir/rundirtest"
)

// The stored KAFKA-532 run goes through check and render: results.json,
// the report and porcupine's page are written, and the checker the
// scenario names is found and fires.
func TestFinishChecksAndRendersAStoredRun(t *testing.T) {
	tests := []struct {
		name        string
		opt         Options
		wantLinear  bool
		wantChecker string
	}{
		{"with porcupine's page", Options{}, true, "controller-fencing"},
		{"without", Options{NoVisualize: true}, false, "controller-fencing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := rundirtest.Copy(t, rundirtest.Stored(rundirtest.Kafka532))
			out, err := Finish(dir, tt.opt)
			if err != nil {
				t.Fatal(err)
			}
			if out.Verdict() != checkers.Invalid {
				t.Errorf("verdict %s, want invalid", out.Verdict())
			}
			if r := out.Result(tt.wantChecker); r == nil || r.Verdict != checkers.Invalid {
				t.Errorf("%s: %+v, want it invalid", tt.wantChecker, r)
			}
			if out.Result("no-such-checker") != nil {
				t.Error("a checker that does not exist has a result")
			}
			for _, f := range []string{rundir.ResultsFile, rundir.ReportFile} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("no %s: %v", f, err)
				}
			}
			if out.Report != filepath.Join(dir, rundir.ReportFile) {
				t.Errorf("report path %q", out.Report)
			}
			_, err = os.Stat(filepath.Join(dir, rundir.LinearizeFile))
			if (err == nil) != tt.wantLinear {
				t.Errorf("%s written = %v, want %v", rundir.LinearizeFile, err == nil, tt.wantLinear)
			}
		})
	}
}

func TestFinishReportsBadHistory(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, rundir.HistoryDir), 0o755)
	os.WriteFile(filepath.Join(dir, rundir.HistoryDir, "n1.jsonl"), []byte("{not json\n"), 0o644)
	out, err := Finish(dir, Options{})
	if !errors.Is(err, judge.ErrBadHistory) {
		t.Fatalf("err %v, want bad history", err)
	}
	if out.Results != nil || out.Verdict() != checkers.Unknown || out.Dir != dir {
		t.Errorf("outcome %+v after a bad history", out)
	}
}
