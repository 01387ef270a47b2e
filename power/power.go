// Package power measures what the nemesis can find: random runs of each
// bug switch (and with every fix on) judged by the checkers naming the
// switch's harm, folded into a table per switch (runs caught, by which
// checker, time to the first violation, the run's cost, the failpoint
// windows reached and the fences tested). It runs the seeds (Measure),
// judges stored runs (JudgeStored) and writes the table and power.json
// (Write); `chaos power` parses the flags and calls it.
package power

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/rundir"
)

// Switch is one configuration chaos power measures: a bug switch (or
// the offline policy) with the checkers that name its harm, or every fix on.
type Switch struct {
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
	// Workload and QueueTxn set the row's client workload (rundir.RunSpec's
	// fields of the same names); empty, the runs keep the measurement's
	// own (the log workload by default).
	Workload string
	QueueTxn bool
}

// Fixed names the row with every fix on, whose invalid runs are false
// positives.
const Fixed = "every-fix-on"

// Switches are the configurations a table has a row for, in its order.
var Switches = []Switch{
	// A queue run's lost acknowledged records are queue-lost-write's, as
	// a log run's are durability's.
	{Name: "KAFKA-532", Bugs: []string{"KAFKA-532"}, Harm: []string{"controller-fencing", "durability", "queue-lost-write"}},
	{Name: "KAFKA-7235", Bugs: []string{"KAFKA-7235"}, Harm: []string{"broker-fencing", "hw-checkpoint"}},
	// The report's window needs the ISR to shrink inside a fault's hold and
	// acks=all to need a follower: the settings of `chaos repro KAFKA-3861`.
	{Name: "KAFKA-3861", NodeFlags: []string{"--offline-election=offline", "--min-insync-replicas=2", "--replica-lag-time-max=2s"}, Harm: []string{"availability"}, StrictAvailability: true},
	{Name: "KAFKA-16667", Bugs: []string{"KAFKA-16667"}, NodeFlags: []string{"--replica-lag-time-max=2s"}, Harm: []string{"liveness"}},
	// The window needs a transaction aborted at its producer's epoch while
	// one of its produces is still held at the leader. The row runs the
	// queue workload with transactions: its producer, when a send is not
	// answered in time, aborts the transaction (EndTxn at its epoch, not
	// waiting for the produce in flight) and restarts under a new
	// transactional id; the schedule opens by holding such a produce at
	// leader-before-txn-append past that abort (faults/opening.go), and the
	// batch released after the ABORT marker opens a transaction nobody
	// ends. The coordinator's timeout abort would bump the epoch, which the
	// leader fences even without verification, so only the client's own
	// abort opens the window.
	{Name: "KAFKA-12671", Bugs: []string{"KAFKA-12671"}, Harm: []string{"lso"}, Workload: rundir.WorkloadQueue, QueueTxn: true},
	{Name: Fixed},
}

// Lookup returns the switch named name.
func Lookup(name string) (Switch, bool) {
	i := slices.IndexFunc(Switches, func(s Switch) bool { return s.Name == name })
	if i < 0 {
		return Switch{}, false
	}
	return Switches[i], true
}

// Run is one random run of one switch.
type Run struct {
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
	// Coverage is what the run's instrumented node processes reached
	// (--cover); nil for an uninstrumented run.
	Coverage *RunCoverage `json:"coverage,omitempty"`
	// Combinations counts the distinct combinations of fault, target role,
	// failpoint window and partition state class the run's faults reached
	// (Combinations); Reached lists them as fault/role/window/state.
	// NewCombinations counts those no earlier run of the switch reached,
	// CombinationsUnion the switch's runs' up to and with this one.
	Combinations      int      `json:"combinations"`
	Reached           []string `json:"combinations_reached,omitempty"`
	NewCombinations   int      `json:"new_combinations"`
	CombinationsUnion int      `json:"combinations_union"`
	// JoinedCorpus says why a coverage-guided run's schedule joined its
	// switch's corpus: NewBlocks, NewCombinations or both; empty when it
	// did not (or the search was not coverage-guided).
	JoinedCorpus []string `json:"joined_corpus_for,omitempty"`
}

// RunCoverage is one run's node-program coverage beside the runs of its
// switch before it.
type RunCoverage struct {
	Blocks  int `json:"blocks"`
	Covered int `json:"covered"`
	// New counts the blocks no earlier run of the switch reached; Union
	// the blocks the switch's runs reached up to and with this one.
	New   int `json:"new"`
	Union int `json:"union"`
	// Parent and Mutations say how a coverage-guided run's schedule was
	// made: which earlier run's schedule (its run directory) and what was
	// changed in it.
	Parent    string   `json:"parent,omitempty"`
	Mutations []string `json:"mutations,omitempty"`
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

// Judge reads what one run found.
func Judge(sw Switch, seed uint64, dir string, verdict checkers.Verdict, results []checkers.Result, h *history.History) Run {
	r := Run{Switch: sw.Name, Seed: seed, RunDir: dir, Verdict: verdict}
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
	r.Reached = CombinationStrings(Combinations(h))
	r.Combinations = len(r.Reached)
	r.Fences = checkers.CountFences(h)
	took, size := runCost(dir)
	r.Seconds, r.Bytes = took.Seconds(), size
	return r
}

// Row is one line of the table.
type Row struct {
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
	// Coverage sums the row's instrumented runs: the blocks of the node
	// program, how many the runs reached together, and how many runs
	// reached a block no earlier run had.
	Coverage *RowCoverage `json:"coverage,omitempty"`
	// Combinations is how many distinct combinations the row's runs
	// reached together, MedianCombinations the median run's count, and
	// RunsWithNewCombinations how many runs reached one no earlier run had.
	Combinations            int     `json:"combinations"`
	MedianCombinations      float64 `json:"median_combinations"`
	RunsWithNewCombinations int     `json:"runs_with_new_combinations"`
}

// RowCoverage is a row's node-program coverage: the blocks of the node
// program, how many the runs reached together (Union) and the median run
// alone (MedianCovered), and how many runs reached a block no earlier run
// had.
type RowCoverage struct {
	Blocks        int     `json:"blocks"`
	Union         int     `json:"union"`
	MedianCovered float64 `json:"median_covered"`
	RunsWithNew   int     `json:"runs_with_new"`
	Runs          int     `json:"runs"`
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

// Table folds runs into one row per switch, in Switches order.
func Table(runs []Run) []Row {
	var rows []Row
	for _, sw := range Switches {
		row := Row{Switch: sw.Name, ByChecker: map[string]int{}}
		var (
			ttf     []time.Duration
			seconds []float64
			bytes   []int64
			fences  [][]checkers.FenceCount
			covered []float64
			combos  []float64
			union   = map[string]bool{}
		)
		for _, r := range runs {
			if r.Switch != sw.Name {
				continue
			}
			row.Runs++
			fences = append(fences, r.Fences)
			combos = append(combos, float64(r.Combinations))
			for _, c := range r.Reached {
				union[c] = true
			}
			if r.NewCombinations > 0 {
				row.RunsWithNewCombinations++
			}
			if c := r.Coverage; c != nil {
				covered = append(covered, float64(c.Covered))
				if row.Coverage == nil {
					row.Coverage = &RowCoverage{}
				}
				row.Coverage.Runs++
				row.Coverage.Blocks = max(row.Coverage.Blocks, c.Blocks)
				row.Coverage.Union = max(row.Coverage.Union, c.Union)
				if c.New > 0 {
					row.Coverage.RunsWithNew++
				}
			}
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
		row.Combinations, row.MedianCombinations = len(union), median(combos)
		if row.Coverage != nil {
			row.Coverage.MedianCovered = median(covered)
		}
		rows = append(rows, row)
	}
	return rows
}

// UnreachedWindows lists the failpoint windows no run reached.
func UnreachedWindows(runs []Run) []string {
	var out []string
	for _, w := range faults.FailpointWindowNames() {
		if !slices.ContainsFunc(runs, func(r Run) bool { return slices.Contains(r.Windows, w) }) {
			out = append(out, w)
		}
	}
	return out
}
