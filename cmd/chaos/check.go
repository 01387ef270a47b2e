package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/judge"
	"github.com/zkchaos/zkchaos/rundir"
)

func newCheckCmd() *cobra.Command {
	cfg := checkers.DefaultConfig()
	var visualize bool
	cmd := &cobra.Command{
		Use:   "check RUN_DIR",
		Short: "Re-check a stored run's history offline (no Docker) and write RUN_DIR/results.json",
		Long: `check reads every RUN_DIR/history/*.jsonl file, merges them into one ordered
history, runs every checker (controller fencing, broker fencing, leader
uniqueness, durability, HW checkpoint, ISR, availability, liveness,
linearizability, idempotence, recovery; each layer's own promise:
registration, controller-epoch, controller-tenure, zk-writes, isr-propagation, truncation,
log-retention, producer-state, hw-within-isr, follower-hw, group-generation,
txn-fencing; and the fences
count: the stale inputs each fence saw and refused), writes
RUN_DIR/results.json and prints a summary.

A run judged before (its results.json names the checker settings of that
verdict, as ` + "`chaos run`" + ` and ` + "`chaos power`" + ` write it) is judged again with those
settings, so a re-check compares like with like (chaos power's rows judge
with 10 s graces, the KAFKA-3861 row strictly); a flag given here overrides
its setting, and the summary names the settings taken from the file.

Exit status: 0 valid, 1 invalid, 2 bad input (unreadable history: the error
names file and line), 3 unknown (a checker could not decide).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if taken := recordedKnobs(cmd.Flags(), args[0]); len(taken) > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "settings of the previous verdict (results.json): %s\n", strings.Join(taken, " "))
			}
			if err := checkKnobs(cfg); err != nil {
				return withCode(exitBad, err)
			}
			if visualize {
				cfg.VisualizePath = filepath.Join(args[0], rundir.LinearizeFile)
			}
			defer tuneGC(args[0])()
			return runCheck(cmd.OutOrStdout(), args[0], cfg)
		},
	}
	f := cmd.Flags()
	cfg.RegisterFlags(f)
	f.BoolVar(&visualize, "visualize", true, "write porcupine's visualization of the most interesting partition to RUN_DIR/linearizability.html")
	return cmd
}

// recordedKnobs sets, in fs, every checker knob the run's results.json
// recorded with a value other than the flag's default, unless the flag was
// given, and returns them as "name=value". A run without results.json, or
// with one this build cannot read, keeps the defaults: it is about to be
// written again. Knobs this build no longer has are passed over.
func recordedKnobs(fs *pflag.FlagSet, runDir string) (taken []string) {
	res, err := rundir.ReadResults(runDir)
	if err != nil {
		return nil
	}
	// results.json records only the knobs, but an older file could name
	// another flag (--visualize is one this command has).
	knobs := checkers.DefaultConfig().Knobs()
	for _, name := range slices.Sorted(maps.Keys(res.Config)) {
		v := res.Config[name]
		f := fs.Lookup(name)
		if _, knob := knobs[name]; f == nil || !knob || f.Changed || v == f.DefValue {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			continue
		}
		taken = append(taken, name+"="+v)
	}
	return taken
}

// gcHeadroom is how many times a history's size in bytes the heap may grow
// to before `chaos check` collects garbage (tuneGC). A decoded history
// takes about twice its size in bytes, so this is roughly what GOGC=150
// would allow once all is read.
const gcHeadroom = 5

// tuneGC turns the garbage collector off for a check, up to a memory limit
// of gcHeadroom times the size of the run's history files (at least
// 512 MiB), and returns the function that restores the settings. A check
// builds one large, long-lived structure (the history, then the checkers'
// indexes) and exits: collections on the way there find little garbage
// and each marks all of the history again, which was a fifth of the CPU
// time on a 1M-event run. The limit keeps a larger history within bounds:
// past it the collector runs as usual. GOGC or GOMEMLIMIT set in the
// environment win.
func tuneGC(runDir string) (restore func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	files, _ := filepath.Glob(filepath.Join(runDir, history.HistoryDir, "*.jsonl"))
	var size int64
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			size += fi.Size()
		}
	}
	limit := max(512<<20, gcHeadroom*size)
	oldLimit := debug.SetMemoryLimit(limit)
	oldPercent := debug.SetGCPercent(-1)
	return func() {
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	}
}

// runCheck does the work of `chaos check` and maps the verdict to an exit
// code error (nil for valid).
func runCheck(out io.Writer, runDir string, cfg checkers.Config) error {
	rep, err := judge.Check(runDir, cfg)
	if err != nil {
		return withCode(exitBad, err)
	}
	printSummary(out, rep, filepath.Join(runDir, rundir.ResultsFile))
	return verdictExit(rep.Verdict)
}

// verdictExit maps a verdict to the process exit status.
func verdictExit(v checkers.Verdict) error {
	switch v {
	case checkers.Valid:
		return nil
	case checkers.Invalid:
		return withCode(exitInvalid, nil)
	default:
		return withCode(exitUnknown, nil)
	}
}

func printSummary(out io.Writer, rep *rundir.Results, path string) {
	fmt.Fprintf(out, "checked %d events from %d history files in %s\n", rep.Events, len(rep.Files), rep.RunDir)
	for _, w := range rep.Warnings {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", r.Checker, r.Verdict, r.Explanation)
	}
	tw.Flush()
	fmt.Fprintf(out, "verdict: %s (details in %s)\n", verdictLine(rep.Verdict, rep.Results), path)
}

// verdictLine says the verdict and why: which checkers are invalid, which
// are unknown and why, and the known anomalies seen (which do not make a
// run invalid).
func verdictLine(v checkers.Verdict, results []checkers.Result) string {
	var invalid, unknown, known []string
	for _, r := range results {
		switch r.Verdict {
		case checkers.Invalid:
			invalid = append(invalid, r.Checker)
		case checkers.Unknown:
			unknown = append(unknown, fmt.Sprintf("%s (%s)", r.Checker, strings.TrimSuffix(r.Explanation, ".")))
		}
		for _, k := range r.Known {
			known = append(known, fmt.Sprintf("%s ×%d (%s)", k.Name, k.Count, r.Checker))
		}
	}
	s := string(v)
	if len(invalid) > 0 {
		s += "; invalid: " + strings.Join(invalid, ", ")
	}
	if len(unknown) > 0 {
		s += "; unknown: " + strings.Join(unknown, "; ")
	}
	if len(known) > 0 {
		s += "; known anomalies: " + strings.Join(known, ", ")
	}
	return s
}
