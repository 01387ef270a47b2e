package docker

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// ContainerSpec is what cluster/ asks for: one process, on one static
// address, with host directories mounted so its data and logs outlive it.
type ContainerSpec struct {
	RunID   string
	Role    string // label value: "zookeeper", "node", ...
	Name    string // container name; must be unique on the engine
	Image   string
	Network *Network
	IP      netip.Addr
	// Cmd is exec'd as PID 1 (no shell in between), so a signal sent to
	// the container reaches the program itself.
	Cmd    []string
	Env    map[string]string
	Binds  []string // "host:container[:ro]"
	CapAdd []string
	// WaitFor, if set, must succeed before StartContainer returns.
	WaitFor wait.Strategy
	// StartTimeout bounds creation plus WaitFor (default 60 s).
	StartTimeout time.Duration
}

// Container is one running (or stopped) container of a run.
type Container struct {
	ID   string
	Name string
	IP   netip.Addr
	e    *Engine
}

// StartContainer creates and starts a container through testcontainers-go. A
// container that fails to start is left for clean-up but its last log lines
// are put into the error, since they nearly always say why.
func (e *Engine) StartContainer(ctx context.Context, s ContainerSpec) (*Container, error) {
	timeout := s.StartTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	opts := []testcontainers.ContainerCustomizer{
		testcontainers.WithName(s.Name),
		testcontainers.WithLabels(RunLabels(s.RunID, s.Role)),
		testcontainers.WithEntrypoint(s.Cmd...),
		testcontainers.WithEnv(s.Env),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			// This replaces testcontainers' default host config, so state
			// everything we rely on.
			hc.Binds = s.Binds
			hc.CapAdd = s.CapAdd
			hc.Init = new(bool) // no tini: our program must be PID 1
			hc.RestartPolicy = container.RestartPolicy{Name: container.RestartPolicyDisabled}
		}),
		testcontainers.WithConfigModifier(func(c *container.Config) { c.Hostname = s.Name }),
	}
	if s.Network != nil {
		opts = append(opts, testcontainers.CustomizeRequestOption(func(req *testcontainers.GenericContainerRequest) error {
			req.Networks = []string{s.Network.Name}
			req.NetworkAliases = map[string][]string{s.Network.Name: {s.Name}}
			return nil
		}), testcontainers.WithEndpointSettingsModifier(func(m map[string]*network.EndpointSettings) {
			es := m[s.Network.Name]
			if es == nil {
				es = &network.EndpointSettings{}
				m[s.Network.Name] = es
			}
			es.IPAMConfig = &network.EndpointIPAMConfig{IPv4Address: s.IP}
		}))
	}
	if s.WaitFor != nil {
		opts = append(opts, testcontainers.WithWaitStrategyAndDeadline(timeout, s.WaitFor))
	}
	tc, err := testcontainers.Run(ctx, s.Image, opts...)
	if err != nil {
		msg := fmt.Sprintf("start container %s (%s): %v", s.Name, s.Image, err)
		if tc != nil && tc.GetContainerID() != "" {
			c := &Container{ID: tc.GetContainerID(), Name: s.Name, e: e}
			lctx, lcancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer lcancel()
			if logs, lerr := c.Logs(lctx, 20); lerr == nil && logs != "" {
				msg += "\nlast log lines of " + s.Name + ":\n" + logs
			}
		}
		return nil, fmt.Errorf("%s", msg)
	}
	return &Container{ID: tc.GetContainerID(), Name: s.Name, IP: s.IP, e: e}, nil
}

// Signal sends sig (e.g. "SIGSTOP", "SIGCONT", "SIGKILL") to the container's
// PID 1 through the engine. For SIGSTOP this is a GC-pause lookalike: the
// process freezes, the kernel keeps its sockets and still completes handshakes.
func (c *Container) Signal(ctx context.Context, sig string) error {
	if _, err := c.e.cli.ContainerKill(ctx, c.ID, client.ContainerKillOptions{Signal: sig}); err != nil {
		return fmt.Errorf("signal %s to %s: %w", sig, c.Name, err)
	}
	return nil
}

// Start starts a stopped container again (same id, same address, same mounts).
// A kill disables any restart policy, so restarts are always explicit.
func (c *Container) Start(ctx context.Context) error {
	if _, err := c.e.cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("start %s: %w", c.Name, err)
	}
	return nil
}

// WaitExited blocks until the container is no longer running.
func (c *Container) WaitExited(ctx context.Context) error {
	res := c.e.cli.ContainerWait(ctx, c.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case <-res.Result:
		return nil
	case err := <-res.Error:
		return fmt.Errorf("wait for %s to exit: %w", c.Name, err)
	}
}

// State is the part of an inspect the harness acts on.
type State struct {
	Running  bool
	Paused   bool
	Pid      int // host pid of PID 1; 0 when not running
	ExitCode int
}

// State inspects the container.
func (c *Container) State(ctx context.Context) (State, error) {
	res, err := c.e.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
	if err != nil {
		return State{}, fmt.Errorf("inspect %s: %w", c.Name, err)
	}
	st := res.Container.State
	if st == nil {
		return State{}, fmt.Errorf("inspect %s: no state", c.Name)
	}
	return State{Running: st.Running, Paused: st.Paused, Pid: st.Pid, ExitCode: st.ExitCode}, nil
}

// Logs returns the last tail lines of the container's stdout and stderr.
func (c *Container) Logs(ctx context.Context, tail int) (string, error) {
	rc, err := c.e.cli.ContainerLogs(ctx, c.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: fmt.Sprint(tail)})
	if err != nil {
		return "", fmt.Errorf("logs of %s: %w", c.Name, err)
	}
	defer rc.Close()
	var out strings.Builder
	if _, err := stdcopy.StdCopy(&out, &out, rc); err != nil && err != io.EOF {
		return out.String(), fmt.Errorf("logs of %s: %w", c.Name, err)
	}
	return strings.TrimRight(out.String(), "\n"), nil
}

// Remove force-removes the container; one already gone is not an error.
func (c *Container) Remove(ctx context.Context) error {
	return c.e.removeContainer(ctx, c.ID)
}

func (e *Engine) removeContainer(ctx context.Context, id string) error {
	if _, err := e.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !isNotFound(err) {
		return fmt.Errorf("remove container %s: %w", id, err)
	}
	return nil
}
