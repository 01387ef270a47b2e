package main

import (
	"bufio"
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/internal/dockertest"
)

// startUp runs `chaos up` as a real child process and waits for "ready".
func startUp(t *testing.T, runID string) *exec.Cmd {
	t.Helper()
	bin, err := docker.BuildGoBinary(t.Context(), "./cmd/chaos", "chaos-test")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "up", "--zk", "1", "--brokers", "0", "--run-id", runID, "--dir", t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "ready") {
				ready <- true
			}
		}
		close(ready)
	}()
	select {
	case ok := <-ready:
		if !ok {
			cmd.Wait()
			t.Fatal("chaos up exited before it was ready")
		}
	case <-time.After(15 * time.Minute): // includes a cold image build
		cmd.Process.Kill()
		t.Fatal("chaos up not ready in time")
	}
	return cmd
}

// engine connects to Docker for the test (skipping it without Docker).
func engine(t *testing.T) *docker.Engine {
	t.Helper()
	dockertest.Require(t)
	eng, err := docker.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// labelledRun names a run of the test whose leftovers are removed when the
// test ends, whatever happens to the harness it starts.
func labelledRun(t *testing.T, eng *docker.Engine, prefix string) string {
	runID := prefix + cluster.NewRunID()[16:]
	t.Cleanup(func() { eng.RemoveLabelled(context.Background(), runID) })
	return runID
}

func count(t *testing.T, eng *docker.Engine, runID string) int {
	t.Helper()
	n, err := eng.CountLabelled(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	return n.Containers + n.Networks
}

// TestKilledUpIsReaped: `chaos up` killed with SIGKILL removes nothing
// itself; its reaper removes the ZooKeeper server, the network and itself.
func TestKilledUpIsReaped(t *testing.T) {
	eng := engine(t)
	runID := labelledRun(t, eng, "t-killed-")

	cmd := startUp(t, runID)
	cmd.Process.Signal(syscall.SIGKILL)
	at := time.Now()
	cmd.Wait()
	t.Logf("run removed %s after the SIGKILL", waitReaped(t, eng, runID, at).Round(100*time.Millisecond))
}

func TestInterruptedHarnessCleansUp(t *testing.T) {
	eng := engine(t)
	runID := labelledRun(t, eng, "t-sigint-")

	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		cmd := startUp(t, runID)
		cmd.Process.Signal(sig)
		if err := cmd.Wait(); err != nil {
			t.Errorf("%v: chaos up exited with %v", sig, err)
		}
		if n := count(t, eng, runID); n != 0 {
			t.Fatalf("%v: %d labelled objects remain after an interrupted run", sig, n)
		}
	}
}

func TestCleanNeverTouchesUnlabelled(t *testing.T) {
	dockertest.Require(t)
	eng, err := docker.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	// A network without the project label must survive a clean, even one
	// named like the project's. The clean is scoped to a run id of this
	// test's own: a clean of every run would destroy the runs of anyone
	// else using the engine (other tests, a chaos run in another shell).
	cli := eng.Client()
	runID := "t-" + cluster.NewRunID()[16:]
	name := "zkchaos-foreign-" + runID
	res, err := cli.NetworkCreate(t.Context(), name, client.NetworkCreateOptions{Driver: "bridge", Internal: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.RemoveNetwork(context.Background(), res.ID)
	if _, err := eng.RemoveLabelled(t.Context(), runID); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.NetworkInspect(t.Context(), res.ID, client.NetworkInspectOptions{}); err != nil {
		t.Fatalf("clean removed an unlabelled network: %v", err)
	}
}
