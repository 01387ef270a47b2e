// Package rundir owns the layout of a run directory (RUN_DIR): the names of
// the files and folders a run leaves, run.json (what the run was asked to
// do), results.json (what the checkers said) with their reading and writing,
// and the replay command, built from the same flag definitions `chaos run`
// registers.
//
// It is a format package: it reads and writes files, it never starts
// containers, runs checkers or renders reports. harness writes a run
// directory through it, cmd/chaos and reports read one through it.
package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/zkchaos/zkchaos/history"
)

// The layout of RUN_DIR.
const (
	// HistoryDir holds one JSONL file per source; the history reader owns
	// the name (history.ReadDir looks there) and this is the same constant.
	HistoryDir    = history.HistoryDir
	RunFile       = "run.json"             // Info: what the run was asked to do
	ScheduleFile  = "schedule.json"        // the fault schedule executed, for --replay
	LogsDir       = "logs"                 // container output, one NAME.log per container
	HarnessLog    = "harness.log"          // in LogsDir: the run's progress lines, as a person watching saw them
	ResultsFile   = "results.json"         // Results: the checkers' verdicts
	LinearizeFile = "linearizability.html" // porcupine's visualization
	ReportFile    = "report.html"          // the HTML report
	// While the run's cluster exists, RUN_DIR also holds the unix socket
	// its reaper listens on: cluster.ReaperSocket, named by the package
	// that starts the reaper so that cluster need not import this one.
)

// writeJSONAtomic writes v to path via a temporary file and rename, so a
// reader never sees half a file.
func writeJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(fmt.Errorf("rename %s: %w", tmp, err), os.Remove(tmp))
	}
	return nil
}
