package reports

// This file owns reading a run directory for reports: run.json (what the run
// was asked to do), results.json (what the checkers said), the history and
// what else the directory holds (logs, schedule, porcupine's page), and the
// one-line replay command built from them.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/history"
)

// Files a run directory may hold besides results.json (see harness.Run).
const (
	RunConfigFile = "run.json"
	ScheduleFile  = "schedule.json"
	ReportFile    = "report.html"
	LinearizeFile = "linearizability.html"
	LogsDir       = "logs"
)

// RunInfo is the part of RUN_DIR/run.json (harness.RunConfig, written by
// harness.Run with Go field names and durations in nanoseconds) that reports
// show. It is decoded here rather than imported because harness imports this
// package; unknown fields are ignored, so harness may add fields freely.
type RunInfo struct {
	RunID  string `json:"RunID"`
	RunDir string `json:"RunDir"`
	Seed   uint64 `json:"Seed"`
	ZK     struct {
		Servers int `json:"Servers"`
	} `json:"ZK"`
	Nodes            int           `json:"Nodes"`
	Bugs             []string      `json:"Bugs"`
	NodeFlags        []string      `json:"NodeFlags"`
	ZKSessionTimeout time.Duration `json:"ZKSessionTimeout"`
	Topic            string        `json:"Topic"`
	Partitions       int32         `json:"Partitions"`
	RF               int           `json:"RF"`
	Producers        int           `json:"Producers"`
	Readers          int           `json:"Readers"`
	Acks             int           `json:"Acks"`
	TimeLimit        time.Duration `json:"TimeLimit"`
	Faults           []string      `json:"Faults"`
	MinHold          time.Duration `json:"MinHold"`
	MaxHold          time.Duration `json:"MaxHold"`
	Settle           time.Duration `json:"Settle"`
	NoWorkload       bool          `json:"NoWorkload"`
	Scenario         string        `json:"Scenario"`
}

// ReadRunInfo loads RUN_DIR/run.json. A missing file is (nil, nil): runs
// stored before run.json existed, and hand-made test runs, have none.
func ReadRunInfo(runDir string) (*RunInfo, error) {
	p := filepath.Join(runDir, RunConfigFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read run config: %w", err)
	}
	var ri RunInfo
	if err := json.Unmarshal(b, &ri); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return &ri, nil
}

// ReplayCommand is the one-line command that replays a run. It is the only
// place that knows the `chaos run` flag syntax, so when the CLI changes its
// flags only this function changes. With the stored schedule the replay
// repeats the exact faults (--replay sets seed and time limit from it);
// without one it re-plans from the seed. A scenario run replays as
// `chaos repro NAME` (with --fixed when no bug switch was on): its driver,
// not a schedule, decides the faults. A nil info yields "" (nothing to
// replay from).
func ReplayCommand(runDir string, info *RunInfo, haveSchedule bool) string {
	if info == nil {
		return ""
	}
	if info.Scenario != "" {
		if len(info.Bugs) == 0 {
			return "chaos repro " + shellQuote(info.Scenario) + " --fixed"
		}
		return "chaos repro " + shellQuote(info.Scenario)
	}
	var b strings.Builder
	b.WriteString("chaos run")
	if haveSchedule {
		fmt.Fprintf(&b, " --seed %d --replay %s", info.Seed, shellQuote(filepath.Join(runDir, ScheduleFile)))
	} else {
		fmt.Fprintf(&b, " --seed %d", info.Seed)
		if info.TimeLimit > 0 {
			fmt.Fprintf(&b, " --time-limit %s", info.TimeLimit)
		}
		faults := "none"
		if len(info.Faults) > 0 {
			faults = strings.Join(info.Faults, ",")
		}
		fmt.Fprintf(&b, " --faults %s", shellQuote(faults))
		if info.MinHold > 0 {
			fmt.Fprintf(&b, " --min-hold %s", info.MinHold)
		}
		if info.MaxHold > 0 {
			fmt.Fprintf(&b, " --max-hold %s", info.MaxHold)
		}
	}
	if len(info.Bugs) > 0 {
		fmt.Fprintf(&b, " --bugs %s", shellQuote(strings.Join(info.Bugs, ",")))
	}
	for _, f := range info.NodeFlags {
		fmt.Fprintf(&b, " --node-flag=%s", shellQuote(f))
	}
	if info.Nodes > 0 {
		fmt.Fprintf(&b, " --nodes %d", info.Nodes)
	}
	if info.ZK.Servers > 0 {
		fmt.Fprintf(&b, " --zk %d", info.ZK.Servers)
	}
	if info.Partitions > 0 {
		fmt.Fprintf(&b, " --partitions %d", info.Partitions)
	}
	if info.NoWorkload {
		b.WriteString(" --no-workload")
	} else if info.Producers > 0 || info.Readers > 0 {
		fmt.Fprintf(&b, " --producers %d --readers %d", info.Producers, info.Readers)
	}
	if info.ZKSessionTimeout > 0 {
		fmt.Fprintf(&b, " --session-timeout %s", info.ZKSessionTimeout)
	}
	return b.String()
}

// absDir makes a run directory absolute for commands a person copies from
// a report opened anywhere (a browser has no working directory).
func absDir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// shellQuote quotes s for a POSIX shell when it needs it, so a copied
// command works even for run directories with spaces.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=,:+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// run is everything a report is rendered from.
type run struct {
	dir     string
	id      string
	info    *RunInfo // nil: no run.json
	results *Results // nil: not checked yet
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
	if r.info, err = ReadRunInfo(runDir); err != nil {
		return nil, err
	}
	if r.info != nil && r.info.RunID != "" {
		r.id = r.info.RunID
	}
	if _, err := os.Stat(filepath.Join(runDir, ResultsFile)); err == nil {
		if r.results, err = ReadResults(runDir); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("results: %w", err)
	}
	hdir := filepath.Join(runDir, history.HistoryDir)
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
		return nil, fmt.Errorf("%s: not a run directory (no %s/, %s or %s)", runDir, history.HistoryDir, ResultsFile, RunConfigFile)
	}
	if r.info == nil {
		r.notes = append(r.notes, "no run.json: seed, bug switches and the replay command are unknown")
	}
	if r.results != nil && r.hist != nil && r.results.Events != 0 && r.results.Events != r.hist.count() {
		r.notes = append(r.notes, fmt.Sprintf("results.json was computed over %d events but the history now has %d: event references may point at the wrong events; run `chaos check` again",
			r.results.Events, r.hist.count()))
	}
	_, err = os.Stat(filepath.Join(runDir, ScheduleFile))
	r.hasSchedule = err == nil
	_, err = os.Stat(filepath.Join(runDir, LinearizeFile))
	r.hasLinear = err == nil
	logs, _ := filepath.Glob(filepath.Join(runDir, LogsDir, "*.log"))
	sort.Strings(logs)
	for _, l := range logs {
		if fi, err := os.Stat(l); err == nil {
			r.logs = append(r.logs, fileLink{Name: LogsDir + "/" + filepath.Base(l), Size: fi.Size()})
		}
	}
	return r, nil
}

// wantedEvents lists the merged indices of every event results.json
// names: the only events a report shows one by one.
func wantedEvents(res *Results) []int {
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
