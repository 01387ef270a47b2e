package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/history"
)

// ResultsFile is the name of a run's check results inside its directory.
const ResultsFile = "results.json"

// resultsSchema versions results.json.
const resultsSchema = 1

// Report is the content of RUN_DIR/results.json: what every checker said
// about the run's history. Reports (HTML, JUnit) are rendered from it.
type Report struct {
	Schema    int                `json:"schema"`
	RunDir    string             `json:"run_dir"`
	CheckedAt time.Time          `json:"checked_at"`
	Verdict   checkers.Verdict   `json:"verdict"`
	Events    int                `json:"events"`
	Files     []string           `json:"files"`
	Warnings  []history.Warning  `json:"warnings,omitempty"`
	Results   []checkers.Result  `json:"results"`
	Config    CheckConfigSummary `json:"config"`
}

// CheckConfigSummary records the checker knobs a verdict was reached with.
type CheckConfigSummary struct {
	OfflineGrace         string `json:"offline_grace"`
	LivenessGrace        string `json:"liveness_grace"`
	MaxBadVersionRetries int    `json:"max_badversion_retries"`
	LinearizeTimeout     string `json:"linearize_timeout"`
}

// ErrBadHistory wraps every error that comes from an unreadable history, so
// callers can tell bad input (exit 2) from a verdict.
var ErrBadHistory = errors.New("bad history")

// Check reads RUN_DIR's history, runs every checker and writes
// RUN_DIR/results.json. It needs no Docker: any stored run can be re-checked.
func Check(runDir string, cfg checkers.Config) (*Report, error) {
	h, err := history.ReadDir(runDir)
	if err != nil {
		return nil, fmt.Errorf("%w: check %s: %w", ErrBadHistory, runDir, err)
	}
	results, verdict := checkers.Run(h, checkers.All(cfg))
	rep := &Report{
		Schema:    resultsSchema,
		RunDir:    runDir,
		CheckedAt: time.Now().UTC(),
		Verdict:   verdict,
		Events:    len(h.Events),
		Files:     h.Files,
		Warnings:  h.Warnings,
		Results:   results,
		Config: CheckConfigSummary{
			OfflineGrace:         cfg.OfflineGrace.String(),
			LivenessGrace:        cfg.LivenessGrace.String(),
			MaxBadVersionRetries: cfg.MaxBadVersionRetries,
			LinearizeTimeout:     cfg.LinearizeTimeout.String(),
		},
	}
	if err := writeJSONAtomic(filepath.Join(runDir, ResultsFile), rep); err != nil {
		return rep, err
	}
	return rep, nil
}

// ReadReport loads RUN_DIR/results.json.
func ReadReport(runDir string) (*Report, error) {
	p := filepath.Join(runDir, ResultsFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if r.Schema > resultsSchema {
		return nil, fmt.Errorf("%s: results schema %d is newer than this build reads (%d)", p, r.Schema, resultsSchema)
	}
	return &r, nil
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
