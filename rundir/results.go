package rundir

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// CheckConfig records the checker knobs a verdict was reached with, by the
// name of the flag that sets each (checkers.Config.Knobs), each value as
// that flag takes it: {"offline-grace": "30s", "strict-reads": "false"}.
// It is built from checkers.Config, never copied field by field, so a new
// knob is recorded without a change here.
type CheckConfig map[string]string

// UnmarshalJSON also reads the config of results.json files written before
// the knobs were recorded by flag name: keys with underscores
// ("offline_grace") and numbers and booleans as JSON values
// ("max_badversion_retries": 3). Every such key was its flag's name with
// "-" written "_".
func (c *CheckConfig) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if raw == nil { // "config": null
		*c = nil
		return nil
	}
	out := CheckConfig{}
	for k, v := range raw {
		var s string
		switch {
		case string(v) == "null":
			continue
		case len(v) > 0 && v[0] == '"':
			if err := json.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("config %q: %w", k, err)
			}
		default:
			var scalar any
			if err := json.Unmarshal(v, &scalar); err != nil {
				return fmt.Errorf("config %q: %w", k, err)
			}
			switch scalar.(type) {
			case float64, bool:
				s = string(v)
			default:
				return fmt.Errorf("config %q: want a string, number or boolean, got %s", k, v)
			}
		}
		out[strings.ReplaceAll(k, "_", "-")] = s
	}
	*c = out
	return nil
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
