package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/reaper"
)

// In-container paths of the reaper.
const (
	reaperBinaryPath = "/usr/local/bin/reaper"
	reaperRunDir     = "/run-dir" // bind mount of the run directory, for the socket
)

// ReaperSocket is the unix socket, in RUN_DIR, that the run's reaper listens
// on and the harness holds for as long as the cluster exists.
const ReaperSocket = "reaper.sock"

// Reaper timing: within ReaperGrace of this process's death (or
// reaperFirstContact of the reaper's start, when this process died before
// it could connect) the run's containers and network start to go.
const (
	ReaperGrace        = 3 * time.Second
	reaperFirstContact = 10 * time.Second
)

// buildReaper builds cmd/reaper, the program of every run's reaper.
func buildReaper(ctx context.Context) (string, error) {
	return docker.BuildGoBinary(ctx, "./cmd/reaper", "zkchaos-reaper")
}

// startReaper starts the run's reaper container (package reaper) from the
// run's image with bin mounted, and holds its connection until Close. It
// runs before anything else of the run exists, so no kill of this process
// leaves an object the reaper does not cover.
func (c *Cluster) startReaper(ctx context.Context, bin string) error {
	sock := filepath.Join(c.RunDir, ReaperSocket)
	ct, err := c.eng.StartHelper(ctx, docker.HelperSpec{
		RunID: c.RunID, Role: "reaper", Name: c.containerName("reaper"), Image: c.Image,
		Cmd: append([]string{
			reaperBinaryPath,
			"--socket=" + reaperRunDir + "/" + ReaperSocket,
			"--engine=" + docker.EngineSocketPath,
			"--keep=" + c.containerName("reaper"),
			fmt.Sprintf("--owner=%d:%d", os.Getuid(), os.Getgid()),
			"--grace=" + ReaperGrace.String(),
			"--first-contact=" + reaperFirstContact.String(),
		}, labelFlags(docker.RunSelector(c.RunID))...),
		Binds:        []string{bin + ":" + reaperBinaryPath + ":ro", c.RunDir + ":" + reaperRunDir},
		EngineSocket: true,
	})
	if err != nil {
		return err
	}
	h, err := reaper.Dial(ctx, sock, reaperFirstContact)
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		ct.Remove(rctx)
		return err
	}
	c.reaper, c.reaperHold = ct, h
	return nil
}

func labelFlags(sel []string) []string {
	out := make([]string, len(sel))
	for i, l := range sel {
		out[i] = "--label=" + l
	}
	return out
}

// releaseReaper lets go of the reaper once Close has removed the run (its
// container with the rest), and removes the socket it leaves behind.
func (c *Cluster) releaseReaper() {
	if c.reaperHold == nil {
		return
	}
	c.reaperHold.Close()
	os.Remove(filepath.Join(c.RunDir, ReaperSocket))
}
