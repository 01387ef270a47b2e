package rundir

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/history"
)

// ResultsSchema versions results.json.
const ResultsSchema = 1

// Results is the content of RUN_DIR/results.json: what every checker said
// about the run's history. Reports (HTML, JUnit) are rendered from it.
type Results struct {
	Schema    int               `json:"schema"`
	RunDir    string            `json:"run_dir"`
	CheckedAt time.Time         `json:"checked_at"`
	Verdict   checkers.Verdict  `json:"verdict"`
	Events    int               `json:"events"`
	Files     []string          `json:"files"`
	Warnings  []history.Warning `json:"warnings,omitempty"`
	Results   []checkers.Result `json:"results"`
	Config    CheckConfig       `json:"config"`
}

// CheckConfig records the checker knobs a verdict was reached with.
type CheckConfig struct {
	OfflineGrace         string `json:"offline_grace"`
	LivenessGrace        string `json:"liveness_grace"`
	MaxBadVersionRetries int    `json:"max_badversion_retries"`
	LinearizeTimeout     string `json:"linearize_timeout"`
	// StrictReads: the KAFKA-2334 known anomaly counted as invalid.
	StrictReads bool `json:"strict_reads,omitempty"`
}

// ReadResults loads RUN_DIR/results.json.
func ReadResults(runDir string) (*Results, error) {
	p := filepath.Join(runDir, ResultsFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if r.Schema > ResultsSchema {
		return nil, fmt.Errorf("%s: results schema %d is newer than this build reads (%d)", p, r.Schema, ResultsSchema)
	}
	return &r, nil
}

// WriteResults stores r as RUN_DIR/results.json atomically.
func WriteResults(runDir string, r *Results) error {
	return writeJSONAtomic(filepath.Join(runDir, ResultsFile), r)
}
