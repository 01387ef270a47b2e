package reaper

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// maxSocketPath is the longest path a unix socket address takes on Linux
// (sun_path is 108 bytes with its terminating NUL).
const maxSocketPath = 107

// dialUnix connects to the unix socket at path. A run directory can be
// deeper than a socket address may be long; then the socket is reached
// through an open descriptor of its directory (/proc/self/fd/N/name), which
// is short whatever the directory.
func dialUnix(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	if len(path) <= maxSocketPath {
		return d.DialContext(ctx, "unix", path)
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("open socket directory: %w", err)
	}
	defer dir.Close()
	return d.DialContext(ctx, "unix", fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), filepath.Base(path)))
}
