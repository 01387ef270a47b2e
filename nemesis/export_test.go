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

// PausesLandButFail makes n's pauses deliver their SIGSTOP and then
// report the call failed, as an engine does that carries out a request
// whose caller gave up.
func PausesLandButFail(n *Nemesis) { n.ops = landedPause{engineOps{net: n.Net}} }

type landedPause struct{ engineOps }

func (o landedPause) pause(ctx context.Context, c *docker.Container) error {
	if err := o.engineOps.pause(ctx, c); err != nil {
		return err
	}
	return context.DeadlineExceeded
}
