package reports

// This file reads a run directory for reports: run.json, results.json, the
// history and what else the directory holds (logs, schedule, porcupine's
// page). Their formats and names belong to rundir.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/zkchaos/zkchaos/rundir"
	"github.com/zkchaos/zkchaos/schedule"
)

// absDir makes a run directory absolute for commands a person copies from
// a report opened anywhere (a browser has no working directory).
func absDir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// run is everything a report is rendered from.
type run struct {
	dir     string
	id      string
	info    *rundir.Info    // nil: no run.json
	results *rundir.Results // nil: not checked yet
	// hist is the history as the report sees it: the events results.json
	// names, the count, files and skipped lines (nil: no history folder).
	hist *scanned
	tl   *timeline // aggregated while the history was read
	// notes are problems worth showing that did not stop rendering.
	notes       []string
	hasSchedule bool
	hasLinear   bool
	logs        []fileLink
}

// fileLink is a file of the run directory the report links to.
type fileLink struct {
	Name string // path relative to the run directory, slash-separated
	Size int64
}

// loadRun reads what a report needs from runDir. Bad input (unreadable or
// corrupt files) is an error naming the file; absent optional parts are
// notes. A directory holding none of history/, results.json and run.json is
// not a run directory.
func loadRun(runDir string) (*run, error) {
	fi, err := os.Stat(runDir)
	if err != nil {
		return nil, fmt.Errorf("run dir: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("run dir %s: not a directory", runDir)
	}
	r := &run{dir: runDir, id: filepath.Base(filepath.Clean(runDir))}
	if r.info, err = rundir.ReadInfo(runDir); err != nil {
		return nil, err
	}
	if r.info != nil && r.info.RunID != "" {
		r.id = r.info.RunID
	}
	if _, err := os.Stat(filepath.Join(runDir, rundir.ResultsFile)); err == nil {
		if r.results, err = rundir.ReadResults(runDir); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("results: %w", err)
	}
	hdir := filepath.Join(runDir, rundir.HistoryDir)
	b := newBuilder()
	if _, err := os.Stat(hdir); err == nil {
		if r.hist, err = scanHistory(runDir, b, wantedEvents(r.results)); err != nil {
			return nil, err
		}
	} else if errors.Is(err, fs.ErrNotExist) {
		r.notes = append(r.notes, "no history/ folder: the run stopped before recording anything")
	} else {
		return nil, fmt.Errorf("history: %w", err)
	}
	r.tl = b.finish()
	if r.hist != nil && r.hist.count() == 0 && len(r.hist.warnings) == 0 {
		r.notes = append(r.notes, "history/ holds no *.jsonl events")
	}
	if r.info == nil && r.results == nil && r.hist == nil {
		return nil, fmt.Errorf("%s: not a run directory (no %s/, %s or %s)", runDir, rundir.HistoryDir, rundir.ResultsFile, rundir.RunFile)
	}
	if r.info == nil {
		r.notes = append(r.notes, "no run.json: seed, bug switches and the replay command are unknown")
	}
	if r.results != nil && r.hist != nil && r.results.Events != 0 && r.results.Events != r.hist.count() {
		r.notes = append(r.notes, fmt.Sprintf("results.json was computed over %d events but the history now has %d: event references may point at the wrong events; run `chaos check` again",
			r.results.Events, r.hist.count()))
	}
	// The replay command replays schedule.json; one that would not load
	// (a hand edit, a truncated copy) gets the seed's command and a note.
	if _, err := schedule.Load(filepath.Join(runDir, rundir.ScheduleFile)); err == nil {
		r.hasSchedule = true
	} else if !errors.Is(err, fs.ErrNotExist) {
		r.notes = append(r.notes, fmt.Sprintf("%s cannot be replayed (%v): the replay command re-plans from the seed", rundir.ScheduleFile, err))
	}
	_, err = os.Stat(filepath.Join(runDir, rundir.LinearizeFile))
	r.hasLinear = err == nil
	logs, _ := filepath.Glob(filepath.Join(runDir, rundir.LogsDir, "*.log"))
	sort.Strings(logs)
	for _, l := range logs {
		if fi, err := os.Stat(l); err == nil {
			r.logs = append(r.logs, fileLink{Name: rundir.LogsDir + "/" + filepath.Base(l), Size: fi.Size()})
		}
	}
	return r, nil
}

// wantedEvents lists the merged indices of every event results.json
// names: the only events a report shows one by one.
func wantedEvents(res *rundir.Results) []int {
	if res == nil {
		return nil
	}
	var out []int
	for _, r := range res.Results {
		for _, v := range r.Violations {
			out = append(out, v.Events...)
		}
	}
	return out
}
