// Package clustertest starts a real ZooKeeper ensemble for a test and
// guarantees it is gone, and nothing labelled with its run id is left, when
// the test ends. It owns test set-up only; it must not be imported outside
// _test.go files.
package clustertest

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/internal/dockertest"
)

// Start brings up an ensemble per opts (RunDir defaults to a temp dir) and
// registers clean-up with a leak check: after the test no container or
// network of its run may remain.
func Start(t testing.TB, opts cluster.Options) (*cluster.Cluster, *docker.Engine) {
	t.Helper()
	dockertest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	eng, err := docker.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if opts.RunDir == "" {
		opts.RunDir = t.TempDir()
	}
	if opts.RunID == "" {
		opts.RunID = "t-" + sanitize(t.Name()) + "-" + cluster.NewRunID()[16:]
	}
	if testing.Verbose() {
		opts.Progress = os.Stderr
	} else {
		opts.Progress = io.Discard
	}
	c, err := cluster.Start(ctx, eng, opts)
	if err != nil {
		eng.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		if err := c.Close(cctx); err != nil {
			t.Errorf("close cluster: %v", err)
		}
		if n, err := eng.CountLabelled(cctx, c.RunID); err != nil || n.Containers+n.Networks != 0 {
			t.Errorf("run %s leaked %d containers, %d networks (err %v)", c.RunID, n.Containers, n.Networks, err)
		}
		eng.Close()
	})
	return c, eng
}

// Connect opens a ZooKeeper session to exactly the given servers and closes
// it when the test ends. The session event callback, not the channel, is the
// reliable way to see state changes (the channel drops events).
func Connect(t testing.TB, servers []string, timeout time.Duration, onEvent func(zk.Event)) *zk.Conn {
	t.Helper()
	if onEvent == nil {
		onEvent = func(zk.Event) {}
	}
	conn, _, err := zk.Connect(servers, timeout, zk.WithLogger(quiet{}), zk.WithEventCallback(onEvent))
	if err != nil {
		t.Fatalf("zk connect %v: %v", servers, err)
	}
	t.Cleanup(conn.Close)
	return conn
}

// WaitConnected waits for conn to have a session.
func WaitConnected(t testing.TB, conn *zk.Conn, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for conn.State() != zk.StateHasSession {
		if time.Now().After(deadline) {
			t.Fatalf("no zookeeper session within %s (state %s)", within, conn.State())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

func sanitize(s string) string {
	s = strings.ToLower(s)
	var b strings.Builder
	for _, r := range s {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	out := b.String()
	if len(out) > 30 {
		out = out[:30]
	}
	return strings.Trim(out, "-")
}

// WaitFor polls cond until it holds, failing the test after within: the
// way a test waits for a cluster to reach a state it cannot be told of.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", within, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
