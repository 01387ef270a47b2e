package docker

import (
	"testing"

	"github.com/moby/moby/client"
)

// A helper container reaches the engine through its mounted socket, so an
// engine reached another way must be refused, not mounted as a path.
func TestSocketPath(t *testing.T) {
	for _, tc := range []struct {
		host, want string
		ok         bool
	}{
		{"unix:///var/run/docker.sock", "/var/run/docker.sock", true},
		{"unix:///run/user/1000/docker.sock", "/run/user/1000/docker.sock", true},
		{"tcp://127.0.0.1:2375", "", false},
	} {
		cli, err := client.New(client.WithHost(tc.host))
		if err != nil {
			t.Fatal(err)
		}
		got, err := (&Engine{cli: cli}).SocketPath()
		cli.Close()
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%s: SocketPath = %q, %v; want %q (ok %v)", tc.host, got, err, tc.want, tc.ok)
		}
	}
}
