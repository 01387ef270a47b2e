// Package docker owns everything the harness does with the Docker Engine:
// building images without a registry, per-run networks with static addresses,
// containers (through testcontainers-go, and the Engine client for what it
// lacks), signals, logs, and removal of labelled leftovers.
//
// It knows nothing about ZooKeeper, Kafka or faults: cluster/ decides what to
// run and nemesis/ decides what to break. Every object it creates carries the
// LabelProject label and a LabelRun label, and it never removes an object
// without LabelProject, so it cannot touch what it did not make.
package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/moby/moby/client"
	tclog "github.com/testcontainers/testcontainers-go/log"
)

// Labels put on every container, network and image this package creates.
const (
	LabelProject = "io.zkchaos.project"
	LabelRun     = "io.zkchaos.run"
	LabelRole    = "io.zkchaos.role"
	projectValue = "zkchaos"
)

// Engine is a connection to one Docker Engine.
type Engine struct {
	cli *client.Client
}

var quietTestcontainers sync.Once

// Connect reaches the engine named by DOCKER_HOST (or the default socket) and
// fails within a few seconds, naming what it tried, when nothing answers.
func Connect(ctx context.Context) (*Engine, error) {
	// The reaper image can never be pulled here; clean-up is by label instead.
	// testcontainers reads this before its first call, so set it before any.
	os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	quietTestcontainers.Do(func() { tclog.SetDefault(tclog.NewNoopLogger()) })

	where := os.Getenv("DOCKER_HOST")
	if where == "" {
		where = client.DefaultDockerHost
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker engine at %s: %w", where, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		return nil, fmt.Errorf("docker engine unreachable at %s (set DOCKER_HOST to point elsewhere): %w", where, err)
	}
	return &Engine{cli: cli}, nil
}

// Client exposes the Engine client for the few callers (tests, clean-up
// tooling) that need a call this package does not wrap.
func (e *Engine) Client() *client.Client { return e.cli }

// Close releases the connection.
func (e *Engine) Close() error { return e.cli.Close() }

// RunLabels returns the labels every object of run runID carries.
func RunLabels(runID, role string) map[string]string {
	l := map[string]string{LabelProject: projectValue, LabelRun: runID}
	if role != "" {
		l[LabelRole] = role
	}
	return l
}

// ErrNotFound reports an object that is already gone; removal treats it as
// success so clean-up is idempotent.
var ErrNotFound = errors.New("not found")
