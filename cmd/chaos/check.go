package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/history"
)

func init() { subcommands = append(subcommands, newCheckCmd) }

// ResultsFile is written into the run directory by `chaos check`.
const resultsFile = "results.json"

// resultsSchema versions results.json.
const resultsSchema = 1

// checkReport is the content of RUN_DIR/results.json.
type checkReport struct {
	Schema    int                `json:"schema"`
	RunDir    string             `json:"run_dir"`
	CheckedAt time.Time          `json:"checked_at"`
	Verdict   checkers.Verdict   `json:"verdict"`
	Events    int                `json:"events"`
	Files     []string           `json:"files"`
	Warnings  []history.Warning  `json:"warnings,omitempty"`
	Results   []checkers.Result  `json:"results"`
	Config    checkConfigSummary `json:"config"`
}

type checkConfigSummary struct {
	OfflineGrace         string `json:"offline_grace"`
	LivenessGrace        string `json:"liveness_grace"`
	MaxBadVersionRetries int    `json:"max_badversion_retries"`
	LinearizeTimeout     string `json:"linearize_timeout"`
}

func newCheckCmd() *cobra.Command {
	cfg := checkers.DefaultConfig()
	var visualize bool
	cmd := &cobra.Command{
		Use:   "check RUN_DIR",
		Short: "Re-check a stored run's history offline (no Docker) and write RUN_DIR/results.json",
		Long: `check reads every RUN_DIR/history/*.jsonl file, merges them into one ordered
history, runs every checker (controller fencing, broker fencing, leader
uniqueness, durability, HW checkpoint, availability, liveness, linearizability),
writes RUN_DIR/results.json and prints a summary.

Exit status: 0 valid, 1 invalid, 2 bad input (unreadable history: the error
names file and line), 3 unknown (a checker could not decide).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if visualize {
				cfg.VisualizePath = filepath.Join(args[0], "linearizability.html")
			}
			return runCheck(cmd.OutOrStdout(), args[0], cfg)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&cfg.OfflineGrace, "offline-grace", cfg.OfflineGrace, "a partition still without a leader this long after every fault healed is invalid")
	f.DurationVar(&cfg.LivenessGrace, "liveness-grace", cfg.LivenessGrace, "time the controller has after every fault healed to finish pending work")
	f.IntVar(&cfg.MaxBadVersionRetries, "max-badversion-retries", cfg.MaxBadVersionRetries, "BADVERSION failures of one controller write tolerated after the liveness grace")
	f.DurationVar(&cfg.LinearizeTimeout, "linearize-timeout", cfg.LinearizeTimeout, "porcupine's budget; when it runs out linearizability is unknown")
	f.BoolVar(&visualize, "visualize", true, "write porcupine's visualization of the most interesting partition to RUN_DIR/linearizability.html")
	return cmd
}

// runCheck does the work of `chaos check` and maps the verdict to an exit
// code error (nil for valid).
func runCheck(out io.Writer, runDir string, cfg checkers.Config) error {
	h, err := history.ReadDir(runDir)
	if err != nil {
		return withCode(exitBad, fmt.Errorf("check %s: %w", runDir, err))
	}
	results, verdict := checkers.Run(h, checkers.All(cfg))
	rep := checkReport{
		Schema:    resultsSchema,
		RunDir:    runDir,
		CheckedAt: time.Now().UTC(),
		Verdict:   verdict,
		Events:    len(h.Events),
		Files:     h.Files,
		Warnings:  h.Warnings,
		Results:   results,
		Config: checkConfigSummary{
			OfflineGrace:         cfg.OfflineGrace.String(),
			LivenessGrace:        cfg.LivenessGrace.String(),
			MaxBadVersionRetries: cfg.MaxBadVersionRetries,
			LinearizeTimeout:     cfg.LinearizeTimeout.String(),
		},
	}
	path := filepath.Join(runDir, resultsFile)
	if err := writeJSONAtomic(path, rep); err != nil {
		return withCode(exitBad, err)
	}
	printSummary(out, rep, path)
	switch verdict {
	case checkers.Valid:
		return nil
	case checkers.Invalid:
		return withCode(exitInvalid, nil)
	default:
		return withCode(exitUnknown, nil)
	}
}

func printSummary(out io.Writer, rep checkReport, path string) {
	fmt.Fprintf(out, "checked %d events from %d history files in %s\n", rep.Events, len(rep.Files), rep.RunDir)
	for _, w := range rep.Warnings {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", r.Checker, r.Verdict, r.Explanation)
	}
	tw.Flush()
	fmt.Fprintf(out, "verdict: %s (details in %s)\n", rep.Verdict, path)
}

// writeJSONAtomic writes v to path via a temporary file and rename, so a
// reader never sees half a results file.
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
