package nemesis

import (
	"context"
	"os/exec"
	"strconv"

	"github.com/zkchaos/zkchaos/docker"
)

// DropRules lists the rules of this package's chains in c's namespace, so a
// test sees what is in force rather than what Net remembers.
func DropRules(ctx context.Context, c *docker.Container) (string, error) {
	st, err := c.State(ctx)
	if err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, "nsenter", "-t", strconv.Itoa(st.Pid), "-n", "--",
		"sh", "-c", "iptables -w 5 -S "+chainIn+"; iptables -w 5 -S "+chainOut).CombinedOutput()
	return string(out), err
}

// SetPauseSignal replaces PauseTarget's signal for a test and returns the
// function that puts it back.
func SetPauseSignal(f func(context.Context, *docker.Container) error) (restore func()) {
	old := pauseSignal
	pauseSignal = f
	return func() { pauseSignal = old }
}
