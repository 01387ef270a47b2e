package power

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/reports"
	"github.com/zkchaos/zkchaos/rundir"
)

// Report is the JSON chaos power writes.
type Report struct {
	Seeds     int      `json:"seeds"`
	FirstSeed uint64   `json:"first_seed"`
	TimeLimit string   `json:"time_limit"`
	Faults    []string `json:"faults"`
	Density   float64  `json:"fault_density,omitempty"`
	Admin     bool     `json:"admin"`
	Guided    bool     `json:"guided,omitempty"`
	// Cover: the runs' node programs were instrumented; CoverageGuided:
	// later seeds ran mutations of schedules that reached new node code.
	Cover          bool `json:"cover,omitempty"`
	CoverageGuided bool `json:"coverage_guided,omitempty"`
	// NoOpenings: the schedules did not begin with the openings
	// (--openings=false).
	NoOpenings bool `json:"no_openings,omitempty"`
	// SpreadTopic: the runs had the RF-2 spread topic beside the workload
	// topic (rundir.RunSpec.SpreadTopic).
	SpreadTopic bool `json:"spread_topic,omitempty"`
	// Workload is the client workload (rundir.RunSpec.Workload: "" for
	// the log workload), QueueTxn its transactional mode.
	Workload string `json:"workload,omitempty"`
	QueueTxn bool   `json:"queue_txn,omitempty"`
	// Build is the commit chaos was built from ("+modified" when the
	// checkout had changes), so tables from two builds are not mixed up;
	// with --from, the build that made the table.
	Build string `json:"build,omitempty"`
	// RunBuild is the build every run names in its run.json, when they
	// agree; runs of several builds are named in Mixed instead.
	RunBuild string `json:"run_build,omitempty"`
	// Mixed names each run setting a --from table's runs disagree on,
	// with its values and how many runs had each: such a row does not
	// measure one configuration.
	Mixed []string `json:"mixed_settings,omitempty"`
	// From lists the directories a --from table was made of; the run
	// settings above are then those of the runs, not of this command.
	From      []string `json:"from,omitempty"`
	Rows      []Row    `json:"rows"`
	Unreached []string `json:"windows_unreached"`
	Runs      []Run    `json:"runs"`
}

// Write prints the table, stores it as RUNS/power.txt and the JSON
// report, and refreshes the runs index. rep carries the run settings; the
// rows, unreached windows and runs are filled in here.
func Write(out io.Writer, runs []Run, runsDir, jsonOut string, rep Report) error {
	rep.Rows, rep.Unreached, rep.Runs = Table(runs), UnreachedWindows(runs), runs
	rep.Build = rundir.BuildRevision()
	var table strings.Builder
	PrintTable(&table, rep.Rows, rep.Unreached)
	PrintMisses(&table, runs)
	for _, m := range rep.Mixed {
		fmt.Fprintf(&table, "mixed settings: %s\n", m)
	}
	if rep.RunBuild != "" {
		fmt.Fprintf(&table, "runs built from: %s\n", rep.RunBuild)
	}
	if rep.Build != "" {
		fmt.Fprintf(&table, "build: %s\n", rep.Build)
	}
	fmt.Fprint(out, table.String())
	if err := os.MkdirAll(runsDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(runsDir, reports.PowerFile), []byte(table.String()), 0o644); err != nil {
		return fmt.Errorf("write the table: %w", err)
	}
	if jsonOut == "" {
		jsonOut = filepath.Join(runsDir, "power.json")
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.MkdirAll(filepath.Dir(jsonOut), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(jsonOut, b, 0o644); err != nil {
		return fmt.Errorf("write the JSON table: %w", err)
	}
	fmt.Fprintf(out, "json: %s\n", jsonOut)
	if idx, err := reports.WriteIndexFile(runsDir); err == nil {
		fmt.Fprintf(out, "runs index: %s\n", idx)
	}
	return nil
}

// storedSwitch is the switch a stored run was made for: the one whose
// bug switches and node flags its run.json names exactly (a random run:
// no scenario).
func storedSwitch(info *rundir.Info) (Switch, bool) {
	if info.Scenario != "" {
		return Switch{}, false
	}
	for _, sw := range Switches {
		if slices.Equal(slices.Sorted(slices.Values(sw.Bugs)), slices.Sorted(slices.Values(info.Bugs))) &&
			slices.Equal(sw.NodeFlags, info.NodeFlags) {
			return sw, true
		}
	}
	return Switch{}, false
}

// JudgeStored judges every checked run directory under dirs, in
// name order (their run ids start with the time they ran), with the
// coverage an instrumented run left (its parent and mutations, a
// coverage-guided run's, are not stored with it). A directory that
// is not a checked random run of a power switch is named on warn and left
// out; one whose files do not read is an error. infos[i] is the run.json of
// runs[i].
func JudgeStored(warn io.Writer, dirs []string) (runs []Run, infos []*rundir.Info, err error) {
	// Per switch, what its runs reached so far: a run's new blocks and
	// combinations are counted against the runs before it, as when the
	// table is made by running.
	found := map[string]*search{}
	for _, root := range dirs {
		entries, err := os.ReadDir(root)
		if err != nil {
			return nil, nil, err
		}
		for _, e := range entries {
			dir := filepath.Join(root, e.Name())
			if !e.IsDir() {
				continue
			}
			if _, err := os.Stat(filepath.Join(dir, rundir.RunFile)); err != nil {
				continue // not a run directory
			}
			info, err := rundir.ReadInfo(dir)
			if err != nil || info == nil {
				return nil, nil, fmt.Errorf("%s: %v", dir, err)
			}
			sw, ok := storedSwitch(info)
			if !ok {
				fmt.Fprintf(warn, "%s: not a random run of a power switch (bugs %v, node flags %v, scenario %q): left out\n", dir, info.Bugs, info.NodeFlags, info.Scenario)
				continue
			}
			res, err := rundir.ReadResults(dir)
			if errors.Is(err, fs.ErrNotExist) {
				// Not checked yet, or still running: its results.json
				// is written whole, at the end.
				fmt.Fprintf(warn, "%s: not checked (%v): left out\n", dir, err)
				continue
			}
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", dir, err)
			}
			h, err := history.ReadDir(dir)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", dir, err)
			}
			r := Judge(sw, info.Seed, dir, res.Verdict, res.Results, h)
			if found[sw.Name] == nil {
				found[sw.Name] = newSearch()
			}
			found[sw.Name].add(&r, info.Cover, corpusEntry{}, nil)
			runs = append(runs, r)
			infos = append(infos, info)
		}
	}
	if len(runs) == 0 {
		return nil, nil, fmt.Errorf("%s: no checked random runs of a power switch", strings.Join(dirs, ","))
	}
	return runs, infos, nil
}

// storedSettings are the run settings a folded table must not mix
// unnoticed: a row of 30 s runs and 60 s runs, or of two builds, measures
// no one configuration. set records a value all runs share in the report.
var storedSettings = []struct {
	name string
	of   func(*rundir.Info) string
	set  func(*Report, *rundir.Info)
}{
	{"time limit", func(i *rundir.Info) string { return i.TimeLimit.String() }, func(r *Report, i *rundir.Info) { r.TimeLimit = i.TimeLimit.String() }},
	{"faults", func(i *rundir.Info) string { return strings.Join(i.Faults, ",") }, func(r *Report, i *rundir.Info) { r.Faults = i.Faults }},
	{"fault density", func(i *rundir.Info) string { return fmt.Sprint(i.Density) }, func(r *Report, i *rundir.Info) { r.Density = i.Density }},
	{"admin workload", func(i *rundir.Info) string { return fmt.Sprint(i.Admin) }, func(r *Report, i *rundir.Info) { r.Admin = i.Admin }},
	{"spread topic", func(i *rundir.Info) string { return fmt.Sprint(i.SpreadTopic != "") }, func(r *Report, i *rundir.Info) { r.SpreadTopic = i.SpreadTopic != "" }},
	{"workload", func(i *rundir.Info) string { return i.WorkloadName() }, func(r *Report, i *rundir.Info) { r.Workload, r.QueueTxn = i.Workload, i.QueueTxn }},
	{"fault holds", func(i *rundir.Info) string { return i.MinHold.String() + "-" + i.MaxHold.String() }, nil},
	{"ZooKeeper servers", func(i *rundir.Info) string { return fmt.Sprint(i.ZK.Servers) }, nil},
	{"session timeout", func(i *rundir.Info) string { return i.ZKSessionTimeout.String() }, nil},
	{"build", func(i *rundir.Info) string { return i.Build }, func(r *Report, i *rundir.Info) { r.RunBuild = i.Build }},
}

// FoldStoredSettings fills a --from report's run settings from the runs'
// run.json: a setting they all share is recorded as for a table made by
// running, one they differ on is named in rep.Mixed with each value's run
// count. Seeds is the most runs any switch has, FirstSeed the lowest seed.
func FoldStoredSettings(rep *Report, runs []Run, infos []*rundir.Info) {
	perSwitch := map[string]int{}
	for i, r := range runs {
		perSwitch[r.Switch]++
		rep.Seeds = max(rep.Seeds, perSwitch[r.Switch])
		if i == 0 || r.Seed < rep.FirstSeed {
			rep.FirstSeed = r.Seed
		}
	}
	for _, st := range storedSettings {
		count := map[string]int{}
		var values []string
		for _, info := range infos {
			v := st.of(info)
			if count[v] == 0 {
				values = append(values, v)
			}
			count[v]++
		}
		if len(values) == 1 {
			if st.set != nil {
				st.set(rep, infos[0])
			}
			continue
		}
		var parts []string
		for _, v := range values {
			label := v
			if label == "" {
				label = "(not recorded)"
			}
			unit := "runs"
			if count[v] == 1 {
				unit = "run"
			}
			parts = append(parts, fmt.Sprintf("%s in %d %s", label, count[v], unit))
		}
		rep.Mixed = append(rep.Mixed, st.name+": "+strings.Join(parts, ", "))
	}
}
