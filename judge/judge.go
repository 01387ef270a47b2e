// Package judge checks a stored run offline: it reads RUN_DIR's history,
// runs every checker and writes RUN_DIR/results.json. `chaos check` and
// pipeline.Finish (after every run) both judge a run through it.
//
// It owns that one step and nothing else: what a verdict means is
// checkers', the files' names and formats are rundir's. It must never
// import cluster, docker, nemesis or harness, so that re-checking a stored
// run links no container client (internal/layers holds it to that).
package judge

import (
	"errors"
	"fmt"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/rundir"
)

// ErrBadHistory wraps every error that comes from an unreadable history, so
// callers can tell bad input (exit 2) from a verdict.
var ErrBadHistory = errors.New("bad history")

// Check reads RUN_DIR's history, runs every checker and writes
// RUN_DIR/results.json. It needs no Docker: any stored run can be re-checked.
func Check(runDir string, cfg checkers.Config) (*rundir.Results, error) {
	h, err := history.ReadDir(runDir)
	if err != nil {
		return nil, fmt.Errorf("%w: check %s: %w", ErrBadHistory, runDir, err)
	}
	results, verdict := checkers.Run(h, checkers.All(cfg))
	rep := &rundir.Results{
		Schema:    rundir.ResultsSchema,
		RunDir:    runDir,
		CheckedAt: time.Now().UTC(),
		Verdict:   verdict,
		Events:    len(h.Events),
		Files:     h.Files,
		Warnings:  h.Warnings,
		Results:   results,
		Config:    cfg.Knobs(),
	}
	if err := rundir.WriteResults(runDir, rep); err != nil {
		return rep, fmt.Errorf("check %s: %w", runDir, err)
	}
	return rep, nil
}
