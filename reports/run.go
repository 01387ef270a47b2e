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
	"runtime"
	"sort"
	"strings"
	"sync"
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
// without one it re-plans from the seed. It mirrors replayFlags in
// cmd/chaos/run.go. A nil info yields "" (nothing to replay from).
func ReplayCommand(runDir string, info *RunInfo, haveSchedule bool) string {
	if info == nil {
		return ""
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
	if info.Producers > 0 || info.Readers > 0 {
		fmt.Fprintf(&b, " --producers %d --readers %d", info.Producers, info.Readers)
	}
	if info.ZKSessionTimeout > 0 {
		fmt.Fprintf(&b, " --session-timeout %s", info.ZKSessionTimeout)
	}
	return b.String()
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
	info    *RunInfo         // nil: no run.json
	results *Results         // nil: not checked yet
	hist    *history.History // nil: no history folder
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
	if _, err := os.Stat(hdir); err == nil {
		if r.hist, err = readHistory(runDir); err != nil {
			return nil, err
		}
	} else if errors.Is(err, fs.ErrNotExist) {
		r.notes = append(r.notes, "no history/ folder: the run stopped before recording anything")
	} else {
		return nil, fmt.Errorf("history: %w", err)
	}
	if r.info == nil && r.results == nil && r.hist == nil {
		return nil, fmt.Errorf("%s: not a run directory (no %s/, %s or %s)", runDir, history.HistoryDir, ResultsFile, RunConfigFile)
	}
	if r.info == nil {
		r.notes = append(r.notes, "no run.json: seed, bug switches and the replay command are unknown")
	}
	if r.results != nil && r.hist != nil && r.results.Events != 0 && r.results.Events != len(r.hist.Events) {
		r.notes = append(r.notes, fmt.Sprintf("results.json was computed over %d events but the history now has %d: event references may point at the wrong events; run `chaos check` again",
			r.results.Events, len(r.hist.Events)))
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

// readHistory reads RUN_DIR/history like history.ReadDir, with the same
// file order and merge (so event indices match the checkers'), but it
// tolerates what a crashed run leaves: an empty history file is skipped with
// a warning instead of failing the whole report. Any other bad record is an
// error naming file and line.
func readHistory(runDir string) (*history.History, error) {
	dir := filepath.Join(runDir, history.HistoryDir)
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("history: list %s: %w", dir, err)
	}
	sort.Strings(files)
	type decoded struct {
		evs   []history.Event
		warns []history.Warning
		err   error
	}
	out := make([]decoded, len(files))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			evs, w, err := history.ReadFile(f)
			out[i] = decoded{evs, w, err}
		}()
	}
	wg.Wait()
	var (
		sources [][]history.Event
		warns   []history.Warning
	)
	for i, d := range out {
		warns = append(warns, d.warns...)
		if d.err != nil {
			if errors.Is(d.err, history.ErrEmpty) {
				warns = append(warns, history.Warning{File: files[i], Message: "empty history file skipped (the run stopped early?)"})
				continue
			}
			return nil, fmt.Errorf("history: %w", d.err)
		}
		sources = append(sources, d.evs)
	}
	h := history.Merge(sources...)
	h.Files = files
	h.Warnings = warns
	return h, nil
}
