// Package dockertest decides whether a test that needs the Docker Engine may run.
//
// Under CI=true a missing engine is a test FAILURE, never a skip: a CI job that
// silently skipped every container test would report green while proving nothing.
// Outside CI, `go test -short` skips container tests so unit tests stay fast, and
// a developer without Docker gets a skip that says why.
//
// It owns only that decision; it must not start containers itself.
package dockertest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// InCI reports whether the process runs as a CI job.
func InCI() bool { return os.Getenv("CI") == "true" }

// Require fails (CI) or skips (elsewhere) t unless a Docker Engine answers a
// ping within a few seconds. It also disables testcontainers' reaper, which
// cannot be pulled on machines without a registry.
func Require(t testing.TB) {
	t.Helper()
	if testing.Short() && !InCI() {
		t.Skip("container test skipped in -short mode")
	}
	os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	if err := ping(); err != nil {
		if InCI() {
			t.Fatalf("CI=true and the Docker Engine is unavailable: %v", err)
		}
		t.Skipf("Docker Engine unavailable: %v", err)
	}
}

func ping() error {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	return err
}
