package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
)

// ErrNodeFlags marks a run whose bug switches or node flags the node program
// refuses: bad input, not a failed run.
var ErrNodeFlags = errors.New("the node program refuses these flags")

// CheckNodeFlags builds the node program for the host and asks it, with
// --check-flags, whether a node could start with cfg's bug switches and node
// flags. Without it an unknown switch is only heard of when the nodes exit
// at start-up, after the ensemble is up. It talks to the program through its
// command line only, like every other part of the harness. The build is the
// one Run uses, so a later Run finds it in the Go build cache.
func CheckNodeFlags(ctx context.Context, cfg RunConfig) error {
	if runtime.GOOS != "linux" {
		// The build is for Linux containers and does not run here; the
		// start-up check (nodesAlive) still names a refused flag.
		return nil
	}
	bin, err := buildNode(ctx, cfg.Cover)
	if err != nil {
		return err
	}
	// A placement no container has: the check parses, it does not start.
	placement := []string{"--id=1", "--zk=127.0.0.1:2181", "--listen=127.0.0.1:0",
		"--advertised=127.0.0.1:9092", "--admin-listen=off", "--data-dir=/nonexistent", "--event-log="}
	cmd := exec.CommandContext(ctx, bin, append(nodeArgs(placement, cfg), "--check-flags")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit) && exit.ExitCode() == 2:
		msg := strings.TrimSpace(stderr.String())
		msg = strings.TrimPrefix(msg, "kafkanode: ")
		return fmt.Errorf("%w: %s", ErrNodeFlags, msg)
	default:
		return fmt.Errorf("check node flags with %s: %w: %s", bin, err, strings.TrimSpace(stderr.String()))
	}
}
