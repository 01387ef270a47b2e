package docker

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// EngineSocketPath is where a helper container finds the engine's socket.
const EngineSocketPath = "/var/run/docker.sock"

// HelperSpec is a container that serves the harness rather than the system
// under test (the run's reaper): it joins no network, runs its command as
// PID 1 and is removed by the engine when it exits.
type HelperSpec struct {
	RunID string
	Role  string
	Name  string
	Image string
	Cmd   []string
	Binds []string // "host:container[:ro]"
	// EngineSocket mounts the engine's unix socket at EngineSocketPath.
	EngineSocket bool
}

// StartHelper creates and starts a helper container through the Engine
// client: testcontainers would attach it to a bridge network and wait on
// ports it does not have, and cannot ask for removal on exit.
func (e *Engine) StartHelper(ctx context.Context, s HelperSpec) (*Container, error) {
	binds := s.Binds
	if s.EngineSocket {
		sock, err := e.SocketPath()
		if err != nil {
			return nil, fmt.Errorf("helper %s: %w", s.Name, err)
		}
		binds = append(binds[:len(binds):len(binds)], sock+":"+EngineSocketPath)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: s.Name,
		Config: &container.Config{
			Image:      s.Image,
			Entrypoint: s.Cmd,
			Labels:     RunLabels(s.RunID, s.Role),
		},
		HostConfig: &container.HostConfig{
			Binds:       binds,
			NetworkMode: "none",
			AutoRemove:  true,
			Init:        new(bool),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("create helper %s (%s): %w", s.Name, s.Image, err)
	}
	c := &Container{ID: res.ID, Name: s.Name, e: e}
	if _, err := e.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer rcancel()
		c.Remove(rctx)
		return nil, fmt.Errorf("start helper %s: %w", s.Name, err)
	}
	return c, nil
}

// SocketPath is the host path of the engine's unix socket, which a helper
// container mounts to reach the engine. An engine reached another way (tcp,
// ssh) has none.
func (e *Engine) SocketPath() (string, error) {
	host := e.cli.DaemonHost()
	u, err := url.Parse(host)
	if err != nil || u.Scheme != "unix" {
		return "", fmt.Errorf("the engine at %s is not reached through a unix socket", host)
	}
	return u.Path, nil
}
