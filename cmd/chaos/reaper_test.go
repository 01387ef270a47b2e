package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/rundir"
)

// reapedWithin is how long after a SIGKILL of its harness a run may still
// have containers or networks: the reaper's grace plus the removals.
const reapedWithin = 30 * time.Second

// waitReaped fails t unless run runID has no container and no network
// within reapedWithin of killed, and returns how long that took.
func waitReaped(t *testing.T, eng *docker.Engine, runID string, killed time.Time) time.Duration {
	t.Helper()
	for {
		n, err := eng.CountLabelled(context.Background(), runID)
		if err != nil {
			t.Fatal(err)
		}
		if n.Containers+n.Networks == 0 {
			return time.Since(killed)
		}
		if time.Since(killed) > reapedWithin {
			t.Fatalf("%d containers and %d networks of run %s still there %s after the harness was killed", n.Containers, n.Networks, runID, reapedWithin)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestKilledRunIsReaped kills `chaos run` with SIGKILL once its brokers run:
// the harness can remove nothing, and the run's reaper must remove all of it.
func TestKilledRunIsReaped(t *testing.T) {
	eng := engine(t)
	bin, err := docker.BuildGoBinary(t.Context(), "./cmd/chaos", "chaos-test")
	if err != nil {
		t.Fatal(err)
	}
	runs := t.TempDir()
	cmd := exec.Command(bin, "run", "--seeds", "1", "--time-limit", "60s", "--runs", runs)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()

	// The run's id is its directory's name; its brokers run once the run
	// has node containers.
	var runID string
	deadline := time.Now().Add(15 * time.Minute) // includes a cold image build
	for {
		if time.Now().After(deadline) {
			t.Fatal("chaos run started no broker in time")
		}
		if runID == "" {
			ds, _ := os.ReadDir(runs)
			for _, d := range ds {
				if d.IsDir() {
					runID = d.Name()
					t.Cleanup(func() { eng.RemoveLabelled(context.Background(), runID) })
					break
				}
			}
		}
		if runID != "" && brokers(t, eng, runID) > 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(runs, runID, cluster.ReaperSocket)); err != nil {
		t.Errorf("no reaper socket in the run directory while the run lives: %v", err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	at := time.Now()
	cmd.Wait()
	killed = true
	t.Logf("run %s removed %s after the SIGKILL", runID, waitReaped(t, eng, runID, at).Round(100*time.Millisecond))
	// The history written until the kill stays, for `chaos check`.
	if _, err := os.Stat(filepath.Join(runs, runID, rundir.RunFile)); err != nil {
		t.Errorf("the killed run's directory lost its %s: %v", rundir.RunFile, err)
	}
}

// brokers counts run runID's node containers.
func brokers(t *testing.T, eng *docker.Engine, runID string) int {
	t.Helper()
	f := client.Filters{}.Add("label", append(docker.RunSelector(runID), docker.LabelRole+"=node")...)
	res, err := eng.Client().ContainerList(context.Background(), client.ContainerListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	return len(res.Items)
}
