// Package harness runs one chaos run and records it: the order of its
// phases (set-up → workload and nemesis → heal → final reads → collect),
// what it writes into the run directory (whose layout is rundir's), and
// Check, which judges a stored history and writes results.json. It composes
// cluster/, nemesis/, workloads/, history/ and the checkers; it talks to the
// node program only through its container, ZooKeeper, the Kafka protocol and
// the node's event log, never through its Go packages. Rendering reports is
// reports/', the run → check → render sequence is pipeline/'s and the exit
// status is cmd/chaos's.
package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/docker"
)

// Env is a running environment: an engine connection and a cluster.
type Env struct {
	Engine  *docker.Engine
	Cluster *cluster.Cluster
}

// EnvConfig says what to start: a cluster's options, which Place completes.
type EnvConfig struct {
	cluster.Options
}

// Place gives the run its defaults, a generated id and the directory
// runs/RUN_ID, and makes the directory absolute.
func (cfg *EnvConfig) Place() error {
	if cfg.RunID == "" {
		cfg.RunID = cluster.NewRunID()
	}
	if cfg.RunDir == "" {
		cfg.RunDir = filepath.Join("runs", cfg.RunID)
	}
	abs, err := filepath.Abs(cfg.RunDir)
	if err != nil {
		return fmt.Errorf("run dir %s: %w", cfg.RunDir, err)
	}
	cfg.RunDir = abs
	return nil
}

// StartEnv connects to Docker and starts the ZooKeeper ensemble of a run,
// returning once it has a leader (unless cfg.NoWait). Whatever it started is
// removed again when it fails.
func StartEnv(ctx context.Context, cfg EnvConfig) (*Env, error) {
	if err := cfg.Place(); err != nil {
		return nil, err
	}
	eng, err := docker.Connect(ctx)
	if err != nil {
		return nil, err
	}
	c, err := cluster.Start(ctx, eng, cfg.Options)
	if err != nil {
		eng.Close()
		return nil, err
	}
	return &Env{Engine: eng, Cluster: c}, nil
}

// Close removes the run's containers and network, even when ctx is already
// cancelled (Ctrl-C): clean-up gets its own bounded context.
func (e *Env) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := e.Cluster.Close(ctx)
	e.Engine.Close()
	return err
}

// Clean removes leftovers of earlier runs (all runs when runID is empty),
// selected strictly by the project's label.
func Clean(ctx context.Context, runID string) (docker.CleanReport, error) {
	eng, err := docker.Connect(ctx)
	if err != nil {
		return docker.CleanReport{}, err
	}
	defer eng.Close()
	return eng.RemoveLabelled(ctx, runID)
}

// EnsureDir makes dir, reporting the path on failure.
func EnsureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return nil
}
