package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/pipeline"
	"github.com/zkchaos/zkchaos/reports"
	"github.com/zkchaos/zkchaos/rundir"
)

// powerSwitch is one configuration chaos power measures: a bug switch (or
// the offline policy) with the checkers that name its harm, or every fix on.
type powerSwitch struct {
	Name      string
	Bugs      []string
	NodeFlags []string
	// Harm lists the checkers whose invalid verdict counts as catching the
	// bug; empty for the every-fix-on row, where any invalid verdict is a
	// false positive.
	Harm []string
	// StrictAvailability judges the row's runs with known anomaly
	// KAFKA-3861 (a partition left offline while a registered broker held
	// every acknowledged record) as a violation: the offline policy is
	// Kafka's default, so only this row counts it as harm.
	StrictAvailability bool
}

const powerFixed = "every-fix-on"

var powerSwitches = []powerSwitch{
	{Name: "KAFKA-532", Bugs: []string{"KAFKA-532"}, Harm: []string{"controller-fencing", "durability"}},
	{Name: "KAFKA-7235", Bugs: []string{"KAFKA-7235"}, Harm: []string{"broker-fencing", "hw-checkpoint"}},
	// The report's window needs the ISR to shrink inside a fault's hold and
	// acks=all to need a follower: the settings of `chaos repro KAFKA-3861`.
	{Name: "KAFKA-3861", NodeFlags: []string{"--offline-election=offline", "--min-insync-replicas=2", "--replica-lag-time-max=2s"}, Harm: []string{"availability"}, StrictAvailability: true},
	{Name: "KAFKA-16667", Bugs: []string{"KAFKA-16667"}, NodeFlags: []string{"--replica-lag-time-max=2s"}, Harm: []string{"liveness"}},
	{Name: powerFixed},
}

func lookupPowerSwitch(name string) (powerSwitch, bool) {
	i := slices.IndexFunc(powerSwitches, func(s powerSwitch) bool { return s.Name == name })
	if i < 0 {
		return powerSwitch{}, false
	}
	return powerSwitches[i], true
}

// powerRun is one random run of one switch.
type powerRun struct {
	Switch  string           `json:"switch"`
	Seed    uint64           `json:"seed"`
	RunDir  string           `json:"run_dir"`
	Verdict checkers.Verdict `json:"verdict"`
	// Caught: a harm checker found the bug (every-fix-on: any invalid
	// verdict, a false positive).
	Caught bool `json:"caught"`
	// By lists the checkers that caught it.
	By []string `json:"caught_by,omitempty"`
	// FirstViolation is the time from the start of the workload to the
	// earliest event a catching checker names; nil when not caught.
	FirstViolation *time.Duration `json:"first_violation_ns,omitempty"`
	// Windows are the failpoint windows the nemesis armed and reached.
	Windows []string `json:"windows_reached,omitempty"`
	// Cost of the run: from its run.json to its results.json being
	// written (set-up, workload, settle, collection, check), and the disk
	// space its run directory takes. Zero when the files are not there.
	Seconds float64 `json:"run_seconds,omitempty"`
	Bytes   int64   `json:"run_bytes,omitempty"`
	// Fences are the stale inputs each fence saw and refused in the run
	// (checkers.CountFences), counted from its history.
	Fences []checkers.FenceCount `json:"fences,omitempty"`
}

// runCost is how long one stored run took, from its run.json being written
// (after any wait for --lock) to its results.json, and the bytes its
// directory holds.
func runCost(dir string) (time.Duration, int64) {
	var took time.Duration
	begin, err1 := os.Stat(filepath.Join(dir, rundir.RunFile))
	end, err2 := os.Stat(filepath.Join(dir, rundir.ResultsFile))
	if err1 == nil && err2 == nil && end.ModTime().After(begin.ModTime()) {
		took = end.ModTime().Sub(begin.ModTime())
	}
	var size int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				size += onDisk(fi)
			}
		}
		return nil
	})
	return took, size
}

// onDisk is the space a file takes: ZooKeeper preallocates its transaction
// logs as 64 MB sparse files, which would otherwise count ten times the
// run's real cost.
func onDisk(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}

// judgePowerRun reads what one run found.
func judgePowerRun(sw powerSwitch, seed uint64, dir string, verdict checkers.Verdict, results []checkers.Result, h *history.History) powerRun {
	r := powerRun{Switch: sw.Name, Seed: seed, RunDir: dir, Verdict: verdict}
	var workload int64
	for _, e := range h.Events {
		if e.Phase != nil && e.Phase.Name == history.PhaseWorkload && e.Phase.Mark == history.PhaseBegin {
			workload = e.Time
			break
		}
		if workload == 0 && e.Time > 0 {
			workload = e.Time // a history without phase marks: its first event
		}
	}
	first := int64(-1)
	for _, res := range results {
		if res.Verdict != checkers.Invalid || (len(sw.Harm) > 0 && !slices.Contains(sw.Harm, res.Checker)) {
			continue
		}
		r.Caught = true
		r.By = append(r.By, res.Checker)
		// A violation cites the events that show it, context included (a
		// registration long before): it happened at the latest of them,
		// unless an absence proves it (no leader within a grace), which
		// holds from when the grace ran out (its At). The first violation
		// is the earliest such moment.
		vs := res.Violations
		if len(vs) == 0 {
			vs = []checkers.Violation{{Events: res.Events}}
		}
		for _, v := range vs {
			at := int64(-1)
			for _, i := range v.Events {
				if i >= 0 && i < len(h.Events) {
					at = max(at, h.Events[i].Time)
				}
			}
			if v.At > 0 {
				at = v.At
			}
			if at >= 0 && (first < 0 || at < first) {
				first = at
			}
		}
	}
	if first >= 0 {
		d := time.Duration(max(0, first-workload))
		r.FirstViolation = &d
	}
	for _, e := range h.Events {
		if e.Source == "nemesis" && e.Kind == history.KindFaultStop && e.Fault != nil && e.Fault.Failpoint != "" &&
			e.Fault.Detail == "window reached" && !slices.Contains(r.Windows, e.Fault.Failpoint) {
			r.Windows = append(r.Windows, e.Fault.Failpoint)
		}
	}
	sort.Strings(r.Windows)
	r.Fences = checkers.CountFences(h)
	took, size := runCost(dir)
	r.Seconds, r.Bytes = took.Seconds(), size
	return r
}

// powerRow is one line of the table.
type powerRow struct {
	Switch string `json:"switch"`
	Runs   int    `json:"runs"`
	// Caught counts runs a harm checker found invalid; for every-fix-on
	// it counts false positives.
	Caught    int            `json:"caught"`
	ByChecker map[string]int `json:"by_checker,omitempty"`
	// Median and Worst time to first violation over the caught runs.
	Median *time.Duration `json:"median_first_violation_ns,omitempty"`
	Worst  *time.Duration `json:"worst_first_violation_ns,omitempty"`
	// The median run's cost over the runs whose cost is known.
	MedianSeconds float64 `json:"median_run_seconds,omitempty"`
	MedianBytes   int64   `json:"median_run_bytes,omitempty"`
	// Fences says, per fence, in how many of the row's runs a stale input
	// reached it and it refused one, with the inputs and refusals summed
	// (checkers.TallyFences); a fence no run reached is untested.
	Fences []checkers.FenceTally `json:"fences,omitempty"`
}

// median is the middle of xs (the mean of the two middle ones), 0 when
// empty.
func median[T int64 | float64 | time.Duration](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	if n := len(xs); n%2 == 0 {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
	return xs[len(xs)/2]
}

// powerTable folds runs into one row per switch, in powerSwitches order.
func powerTable(runs []powerRun) []powerRow {
	var rows []powerRow
	for _, sw := range powerSwitches {
		row := powerRow{Switch: sw.Name, ByChecker: map[string]int{}}
		var (
			ttf     []time.Duration
			seconds []float64
			bytes   []int64
			fences  [][]checkers.FenceCount
		)
		for _, r := range runs {
			if r.Switch != sw.Name {
				continue
			}
			row.Runs++
			fences = append(fences, r.Fences)
			if r.Seconds > 0 {
				seconds = append(seconds, r.Seconds)
			}
			if r.Bytes > 0 {
				bytes = append(bytes, r.Bytes)
			}
			if !r.Caught {
				continue
			}
			row.Caught++
			for _, c := range r.By {
				row.ByChecker[c]++
			}
			if r.FirstViolation != nil {
				ttf = append(ttf, *r.FirstViolation)
			}
		}
		if row.Runs == 0 {
			continue
		}
		if len(ttf) > 0 {
			med, worst := median(ttf), slices.Max(ttf)
			row.Median, row.Worst = &med, &worst
		}
		row.MedianSeconds, row.MedianBytes = median(seconds), median(bytes)
		row.Fences = checkers.TallyFences(fences)
		rows = append(rows, row)
	}
	return rows
}

// unreachedWindows lists the failpoint windows no run reached.
func unreachedWindows(runs []powerRun) []string {
	var out []string
	for _, w := range nemesis.FailpointWindowNames() {
		if !slices.ContainsFunc(runs, func(r powerRun) bool { return slices.Contains(r.Windows, w) }) {
			out = append(out, w)
		}
	}
	return out
}

func printPowerTable(w io.Writer, rows []powerRow, unreached []string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "switch\tcaught\tchecker\tmedian to first violation\tworst\tmedian run")
	for _, r := range rows {
		caught := fmt.Sprintf("%d/%d", r.Caught, r.Runs)
		if r.Switch == powerFixed {
			caught = fmt.Sprintf("%d/%d false positives", r.Caught, r.Runs)
		}
		var by []string
		for c, n := range r.ByChecker {
			by = append(by, fmt.Sprintf("%s %d", c, n))
		}
		sort.Strings(by)
		med, worst := "-", "-"
		if r.Median != nil {
			med, worst = r.Median.Round(100*time.Millisecond).String(), r.Worst.Round(100*time.Millisecond).String()
		}
		checker := strings.Join(by, ", ")
		if checker == "" {
			checker = "-"
		}
		cost := "-"
		if r.MedianSeconds > 0 || r.MedianBytes > 0 {
			cost = fmt.Sprintf("%.0fs, %.1f MB", r.MedianSeconds, float64(r.MedianBytes)/1e6)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Switch, caught, checker, med, worst, cost)
	}
	tw.Flush()
	if len(unreached) > 0 {
		fmt.Fprintf(w, "failpoint windows no run reached: %s\n", strings.Join(unreached, ", "))
	}
	printFenceTable(w, rows)
}

// printFenceTable says, per row and fence, in how many runs a stale input
// reached the fence and in how many it refused one, with the counts summed,
// and names the fences no run of a row tested: a row's verdicts say nothing
// about them.
func printFenceTable(w io.Writer, rows []powerRow) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "switch\tfence\truns with stale input\truns refusing one\tstale inputs\trejected")
	for _, r := range rows {
		name := r.Switch
		for _, f := range r.Fences {
			with := fmt.Sprintf("%d/%d", f.RunsWithInput, f.Runs)
			if f.Untested() {
				with += " UNTESTED"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%d\t%d\n", name, f.Fence, with, f.RunsWithRejection, f.Runs, f.Inputs, f.Rejected)
			name = ""
		}
	}
	tw.Flush()
	for _, r := range rows {
		var untested []string
		for _, f := range r.Fences {
			if f.Untested() {
				untested = append(untested, f.Fence)
			}
		}
		if len(untested) > 0 {
			runs := "runs"
			if r.Runs == 1 {
				runs = "run"
			}
			fmt.Fprintf(w, "untested in %s (no stale input in %d %s): %s\n", r.Switch, r.Runs, runs, strings.Join(untested, ", "))
		}
	}
}

// printPowerMisses names the runs to open next: each bug switch's seeds its
// harm checker did not catch, and every false positive with every fix on.
func printPowerMisses(w io.Writer, runs []powerRun) {
	for _, r := range runs {
		switch {
		case r.Switch == powerFixed && r.Caught:
			fmt.Fprintf(w, "false positive: %s seed %d, %s by %s: %s\n", r.Switch, r.Seed, r.Verdict, strings.Join(r.By, ", "), r.RunDir)
		case r.Switch != powerFixed && !r.Caught:
			fmt.Fprintf(w, "not caught: %s seed %d (%s): %s\n", r.Switch, r.Seed, r.Verdict, r.RunDir)
		}
	}
}

// powerReport is the JSON chaos power writes.
type powerReport struct {
	Seeds     int      `json:"seeds"`
	FirstSeed uint64   `json:"first_seed"`
	TimeLimit string   `json:"time_limit"`
	Faults    []string `json:"faults"`
	Density   float64  `json:"fault_density,omitempty"`
	Admin     bool     `json:"admin"`
	Guided    bool     `json:"guided,omitempty"`
	// SpreadTopic: the runs had the RF-2 spread topic beside the workload
	// topic (rundir.RunSpec.SpreadTopic).
	SpreadTopic bool `json:"spread_topic,omitempty"`
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
	From      []string   `json:"from,omitempty"`
	Rows      []powerRow `json:"rows"`
	Unreached []string   `json:"windows_unreached"`
	Runs      []powerRun `json:"runs"`
}

// powerExecute runs one configuration through the pipeline (run, check,
// report) like `chaos run`; a variable so tests can stand in for Docker.
var powerExecute = func(ctx context.Context, rc harness.RunConfig, check checkers.Config) (string, checkers.Verdict, []checkers.Result, error) {
	out, err := pipeline.Execute(ctx, rc, pipeline.Options{Check: &check, NoVisualize: true})
	if err != nil {
		return out.Dir, "", nil, err
	}
	return out.Dir, out.Results.Verdict, out.Results.Results, nil
}

// powerPreflight asks the engine once before the first seed: without it an
// unreachable engine fails every seed in turn, each leaving a run dir. A
// variable for the same reason as powerExecute.
var powerPreflight = func(ctx context.Context) error {
	eng, err := docker.Connect(ctx)
	if err != nil {
		return err
	}
	return eng.Close()
}

func newPowerCmd() *cobra.Command {
	var (
		cfg      harness.RunConfig
		seeds    int
		switches string
		runsDir  string
		jsonOut  string
		guided   bool
		lockPath string
		from     []string
	)
	check := checkers.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "power",
		Short: "Measure what the nemesis can find: N random seeds per bug switch and with every fix on, no scenario driver",
		Long: `power runs --seeds random runs (no scenario driver) for each bug switch and
with every fix on, and prints, per switch, how many seeds the checker naming
its harm caught, which checker, and the median and worst time from the start
of the workload to the first violating event; the every-fix-on row counts
false positives. It also names the failpoint windows no run reached and, per
switch and fence, in how many runs a stale input reached the fence and in how
many it refused one, with the counts summed, naming the fences no run tested
(a row's verdicts say nothing about them). The same
table goes to power.json in --runs (or --json). With --guided each seed's
failpoint faults aim at the windows the earlier seeds of the same switch
reached least, so a switch's seeds together cover every window sooner.

Exit status: 0 table written, 2 bad input or harness error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(from) > 0 {
				// A table from runs already made: per-seed invocations
				// (each holding the Docker lock for one run) or batches
				// on several days fold into one table.
				runs, infos, err := judgeStoredPowerRuns(cmd.ErrOrStderr(), from)
				if err != nil {
					return withCode(exitBad, err)
				}
				if !cmd.Flags().Changed("runs") {
					runsDir = from[0]
				}
				rep := powerReport{From: from}
				foldStoredSettings(&rep, runs, infos)
				return writePower(cmd.OutOrStdout(), runs, runsDir, jsonOut, rep)
			}
			if seeds < 1 {
				return withCode(exitBad, fmt.Errorf("--seeds %d: want at least 1", seeds))
			}
			if err := errors.Join(cfg.Validate(), checkKnobs(check)); err != nil {
				return withCode(exitBad, err)
			}
			var sws []powerSwitch
			for _, n := range strings.Split(switches, ",") {
				sw, ok := lookupPowerSwitch(strings.TrimSpace(n))
				if !ok {
					var known []string
					for _, s := range powerSwitches {
						known = append(known, s.Name)
					}
					return withCode(exitBad, fmt.Errorf("--switches: unknown %q (known: %s)", n, strings.Join(known, ", ")))
				}
				sws = append(sws, sw)
			}
			if err := powerPreflight(cmd.Context()); err != nil {
				return withCode(exitBad, err)
			}
			cfg.Progress = io.Discard
			// The cluster settles past the graces, so a partition left
			// offline or a controller stuck retrying is seen stuck rather
			// than cut off by the end of the history (unknown).
			cfg.Linger = max(check.LivenessGrace, check.OfflineGrace, check.RecoveryGrace) + 5*time.Second
			out := cmd.OutOrStdout()
			var runs []powerRun
			var failed []error
			for _, sw := range sws {
				// Per switch: which failpoint windows its runs so far
				// reached, for --guided.
				reached := map[string]int{}
				for i := 0; i < seeds; i++ {
					rc := cfg
					rc.Seed = cfg.Seed + uint64(i)
					rc.Bugs = sw.Bugs
					rc.NodeFlags = append(slices.Clone(cfg.NodeFlags), sw.NodeFlags...)
					rc.RunID = cluster.NewRunID()
					rc.RunDir = filepath.Join(runsDir, rc.RunID)
					if guided {
						// The guided schedule is stored with the run, so
						// its replay command repeats it exactly.
						s := nemesis.GuideFailpoints(rc.Plan(), reached)
						rc.Schedule = &s
					}
					rowCheck := check
					rowCheck.StrictAvailability = rowCheck.StrictAvailability || sw.StrictAvailability
					unlock, err := lockFile(cmd.Context(), lockPath)
					if err != nil {
						return withCode(exitBad, err)
					}
					dir, verdict, results, err := powerExecute(cmd.Context(), rc, rowCheck)
					unlock()
					if err != nil {
						// One run the harness could not finish does not
						// void the others: it is reported, left out of
						// the table, and the command exits 2.
						failed = append(failed, fmt.Errorf("%s seed %d (run kept in %s): %w", sw.Name, rc.Seed, dir, err))
						fmt.Fprintf(cmd.ErrOrStderr(), "%s seed %d: harness error (left out of the table): %v\n", sw.Name, rc.Seed, err)
						if cmd.Context().Err() != nil {
							return withCode(exitBad, errors.Join(failed...))
						}
						continue
					}
					h, err := history.ReadDir(dir)
					if err != nil {
						return withCode(exitBad, fmt.Errorf("%s seed %d: %w", sw.Name, rc.Seed, err))
					}
					r := judgePowerRun(sw, rc.Seed, dir, verdict, results, h)
					runs = append(runs, r)
					for _, w := range r.Windows {
						reached[w]++
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "%s seed %d: %s (caught %v) %s\n", sw.Name, rc.Seed, r.Verdict, r.Caught, dir)
				}
			}
			if err := writePower(out, runs, runsDir, jsonOut, powerReport{Seeds: seeds, FirstSeed: cfg.Seed, TimeLimit: cfg.TimeLimit.String(),
				Faults: cfg.Faults, Density: cfg.Density, Admin: cfg.Admin, Guided: guided,
				SpreadTopic: cfg.SpreadTopic != ""}); err != nil {
				return err
			}
			if len(failed) > 0 {
				return withCode(exitBad, fmt.Errorf("%d runs the harness could not finish: %w", len(failed), errors.Join(failed...)))
			}
			return nil
		},
	}
	f := cmd.Flags()
	var names []string
	for _, s := range powerSwitches {
		names = append(names, s.Name)
	}
	f.IntVar(&seeds, "seeds", 20, "random runs per switch")
	// A power table's runs: every switch runs seed, seed+1, ...; longer and
	// denser than a `chaos run`, so each seed has more chances to reach a
	// window. The switch sets bug switches and node flags, and the brokers
	// and clients are a `chaos run`'s.
	cfg.RunSpec = rundir.Default()
	cfg.Seed, cfg.TimeLimit, cfg.Density = 1, 60*time.Second, 1.5
	cfg.Register(f, rundir.FlagSeed, rundir.FlagTimeLimit, rundir.FlagFaults, rundir.FlagMinHold, rundir.FlagMaxHold,
		rundir.FlagZK, rundir.FlagSessionTimeout, rundir.FlagAdmin, rundir.FlagSpreadTopic, rundir.FlagFaultDensity)
	f.StringVar(&switches, "switches", strings.Join(names, ","), "configurations to measure, comma-separated")
	f.StringVar(&runsDir, "runs", "runs", "directory that receives one run directory per run, and power.json")
	f.StringVar(&jsonOut, "json", "", "write the table as JSON here (default RUNS/power.json)")
	check.LivenessGrace, check.OfflineGrace = 10*time.Second, 10*time.Second
	f.DurationVar(&check.LivenessGrace, "liveness-grace", check.LivenessGrace, "time the controller has after healing to finish pending work; each run settles 5s past the longest of it, --offline-grace and the recovery grace (15s)")
	f.DurationVar(&check.OfflineGrace, "offline-grace", check.OfflineGrace, "a partition without a leader this long after healing is invalid")
	// A power table is hours of runs; per-run locking lets other users
	// of a shared engine take turns instead of waiting for all of it.
	f.StringVar(&lockPath, "lock", "", "hold an exclusive flock on this file during each run only (a shared machine's Docker lock), so other users get turns between runs")
	f.StringSliceVar(&from, "from", nil, "make the table from the run directories already under these directories (comma-separated or repeated) instead of running: each run counts for the switch its run.json matches (its bug switches and node flags); other runs are skipped and named")
	f.BoolVar(&guided, "guided", false, "aim each seed's failpoint faults at the windows the switch's earlier seeds reached least (coverage-guided; each run stores its schedule, so it replays exactly)")
	return cmd
}

func kindStrings(kinds []nemesis.FaultKind) []string {
	var out []string
	for _, k := range kinds {
		out = append(out, string(k))
	}
	return out
}

// writePower prints the table, stores it as RUNS/power.txt and the JSON
// report, and refreshes the runs index. rep carries the run settings; the
// rows, unreached windows and runs are filled in here.
func writePower(out io.Writer, runs []powerRun, runsDir, jsonOut string, rep powerReport) error {
	rep.Rows, rep.Unreached, rep.Runs = powerTable(runs), unreachedWindows(runs), runs
	rep.Build = rundir.BuildRevision()
	var table strings.Builder
	printPowerTable(&table, rep.Rows, rep.Unreached)
	printPowerMisses(&table, runs)
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
		return withCode(exitBad, err)
	}
	if err := os.WriteFile(filepath.Join(runsDir, reports.PowerFile), []byte(table.String()), 0o644); err != nil {
		return withCode(exitBad, fmt.Errorf("--runs: %w", err))
	}
	if jsonOut == "" {
		jsonOut = filepath.Join(runsDir, "power.json")
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.MkdirAll(filepath.Dir(jsonOut), 0o755); err != nil {
		return withCode(exitBad, err)
	}
	if err := os.WriteFile(jsonOut, b, 0o644); err != nil {
		return withCode(exitBad, fmt.Errorf("--json: %w", err))
	}
	fmt.Fprintf(out, "json: %s\n", jsonOut)
	if idx, err := reports.WriteIndexFile(runsDir); err == nil {
		fmt.Fprintf(out, "runs index: %s\n", idx)
	}
	return nil
}

// storedPowerSwitch is the switch a stored run was made for: the one whose
// bug switches and node flags its run.json names exactly (a random run:
// no scenario).
func storedPowerSwitch(info *rundir.Info) (powerSwitch, bool) {
	if info.Scenario != "" {
		return powerSwitch{}, false
	}
	for _, sw := range powerSwitches {
		if slices.Equal(slices.Sorted(slices.Values(sw.Bugs)), slices.Sorted(slices.Values(info.Bugs))) &&
			slices.Equal(sw.NodeFlags, info.NodeFlags) {
			return sw, true
		}
	}
	return powerSwitch{}, false
}

// judgeStoredPowerRuns judges every checked run directory under dirs, in
// name order (their run ids start with the time they ran). A directory that
// is not a checked random run of a power switch is named on warn and left
// out; one whose files do not read is an error. infos[i] is the run.json of
// runs[i].
func judgeStoredPowerRuns(warn io.Writer, dirs []string) (runs []powerRun, infos []*rundir.Info, err error) {
	for _, root := range dirs {
		entries, err := os.ReadDir(root)
		if err != nil {
			return nil, nil, fmt.Errorf("--from: %w", err)
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
				return nil, nil, fmt.Errorf("--from %s: %v", dir, err)
			}
			sw, ok := storedPowerSwitch(info)
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
				return nil, nil, fmt.Errorf("--from %s: %w", dir, err)
			}
			h, err := history.ReadDir(dir)
			if err != nil {
				return nil, nil, fmt.Errorf("--from %s: %w", dir, err)
			}
			runs = append(runs, judgePowerRun(sw, info.Seed, dir, res.Verdict, res.Results, h))
			infos = append(infos, info)
		}
	}
	if len(runs) == 0 {
		return nil, nil, fmt.Errorf("--from %s: no checked random runs of a power switch", strings.Join(dirs, ","))
	}
	return runs, infos, nil
}

// storedSettings are the run settings a folded table must not mix
// unnoticed: a row of 30 s runs and 60 s runs, or of two builds, measures
// no one configuration. set records a value all runs share in the report.
var storedSettings = []struct {
	name string
	of   func(*rundir.Info) string
	set  func(*powerReport, *rundir.Info)
}{
	{"time limit", func(i *rundir.Info) string { return i.TimeLimit.String() }, func(r *powerReport, i *rundir.Info) { r.TimeLimit = i.TimeLimit.String() }},
	{"faults", func(i *rundir.Info) string { return strings.Join(i.Faults, ",") }, func(r *powerReport, i *rundir.Info) { r.Faults = i.Faults }},
	{"fault density", func(i *rundir.Info) string { return fmt.Sprint(i.Density) }, func(r *powerReport, i *rundir.Info) { r.Density = i.Density }},
	{"admin workload", func(i *rundir.Info) string { return fmt.Sprint(i.Admin) }, func(r *powerReport, i *rundir.Info) { r.Admin = i.Admin }},
	{"spread topic", func(i *rundir.Info) string { return fmt.Sprint(i.SpreadTopic != "") }, func(r *powerReport, i *rundir.Info) { r.SpreadTopic = i.SpreadTopic != "" }},
	{"fault holds", func(i *rundir.Info) string { return i.MinHold.String() + "-" + i.MaxHold.String() }, nil},
	{"ZooKeeper servers", func(i *rundir.Info) string { return fmt.Sprint(i.ZK.Servers) }, nil},
	{"session timeout", func(i *rundir.Info) string { return i.ZKSessionTimeout.String() }, nil},
	{"build", func(i *rundir.Info) string { return i.Build }, func(r *powerReport, i *rundir.Info) { r.RunBuild = i.Build }},
}

// foldStoredSettings fills a --from report's run settings from the runs'
// run.json: a setting they all share is recorded as for a table made by
// running, one they differ on is named in rep.Mixed with each value's run
// count. Seeds is the most runs any switch has, FirstSeed the lowest seed.
func foldStoredSettings(rep *powerReport, runs []powerRun, infos []*rundir.Info) {
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
