// Package nemesis owns the primitives that break a running cluster and undo
// them (process pause, kill, restart, fast bounce, network partitions and
// one-way drops, slow links), the Nemesis that applies them to a run's
// targets and remembers what is in force (so Heal undoes everything, and
// other faults and the control-plane workload leave a held broker or
// partition alone), the Recorder that writes every fault to the history,
// and the runners that execute a schedule's steps at their offsets (one at
// a time, or held together; openings first, one by one).
//
// Network faults are applied from OUTSIDE the target, by entering its network
// namespace from the host (nsenter), never by exec into the container: a
// SIGSTOPped or frozen target cannot run anything, and a fault must still be
// added and removed while it is stopped. Every rule lives in chains and
// qdiscs this package owns, so heal removes exactly what it added.
//
// It does not decide what to break or when: which fault a step's kind names,
// the composite faults aimed at bug windows and the planning of seeded
// schedules are package faults' (the runners take its Set.Apply as their
// Injector). It does not start containers (cluster/ does) and never asks
// the node program anything.
package nemesis

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/zkchaos/zkchaos/docker"
)

// Pause freezes the container's main process with SIGSTOP, as a long GC
// pause would: its sockets stay open and the kernel still completes TCP
// handshakes, so peers see timeouts, not resets.
func Pause(ctx context.Context, c *docker.Container) error {
	return c.Signal(ctx, "SIGSTOP")
}

// Resume undoes Pause.
func Resume(ctx context.Context, c *docker.Container) error {
	err := c.Signal(ctx, "SIGCONT")
	if err == nil {
		return nil
	}
	// Faults held together: another one killed the paused process (a kill,
	// a bounce still starting, a failpoint's restart). Nothing is left to
	// resume, and the kill's own heal starts the container.
	if st, serr := c.State(ctx); serr == nil && !st.Running {
		return nil
	}
	return err
}

// ProcessStopped reports whether c's process is stopped by a signal
// (SIGSTOP) now, from the kernel's view of it (/proc/<pid>/stat): the
// engine's own state cannot tell, as it reports a SIGSTOPped container
// running and not paused (its Paused is the cgroup freezer's). A container
// that is not running has no stopped process.
func ProcessStopped(ctx context.Context, c *docker.Container) (bool, error) {
	st, err := c.State(ctx)
	if err != nil {
		return false, err
	}
	if !st.Running || st.Pid <= 0 {
		return false, nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", st.Pid))
	if err != nil {
		return false, fmt.Errorf("process state of %s: %w", c.Name, err)
	}
	return statStopped(b)
}

// statStopped reads the state field of a /proc/<pid>/stat line: "T" is a
// process stopped by a signal. The field follows the command name, which
// is in parentheses and may itself hold spaces and parentheses.
func statStopped(stat []byte) (bool, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return false, fmt.Errorf("unreadable process stat %q", stat)
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) == 0 {
		return false, fmt.Errorf("unreadable process stat %q", stat)
	}
	return string(f[0]) == "T", nil
}

// Kill sends SIGKILL and waits until the engine reports the container down.
func Kill(ctx context.Context, c *docker.Container) error {
	if err := c.Signal(ctx, "SIGKILL"); err != nil {
		// Faults held together: another one killed it first (power seed
		// 2003: kill-lagging-leader's kill found its leader down). Down is
		// what a kill is for.
		if st, serr := c.State(ctx); serr == nil && !st.Running {
			return nil
		}
		return err
	}
	return c.WaitExited(ctx)
}

// Bounce kills the container and starts it again as fast as the engine
// allows. Gap is the time from the kill being sent to the start returning:
// the window in which the process does not exist.
func Bounce(ctx context.Context, c *docker.Container) (gap time.Duration, err error) {
	start := time.Now()
	if err := Kill(ctx, c); err != nil {
		return 0, fmt.Errorf("bounce %s: %w", c.Name, err)
	}
	if err := c.Start(ctx); err != nil {
		return 0, fmt.Errorf("bounce %s: %w", c.Name, err)
	}
	return time.Since(start), nil
}
