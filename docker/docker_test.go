package docker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go/wait"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/internal/dockertest"
)

func TestConnectNamesTheEngineItTried(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/zkchaos.sock")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, err := docker.Connect(ctx)
	if err == nil {
		t.Fatal("connected to a socket that does not exist")
	}
	if !strings.Contains(err.Error(), "/nonexistent/zkchaos.sock") {
		t.Fatalf("error does not name the socket: %v", err)
	}
}

func TestImageTagDependsOnInputs(t *testing.T) {
	a := docker.DefaultBaseImage()
	b := docker.DefaultBaseImage()
	b.Packages = append([]string{b.Packages[len(b.Packages)-1]}, b.Packages[:len(b.Packages)-1]...)
	if a.Tag() != b.Tag() {
		t.Error("package order changed the tag")
	}
	b.Packages = append(b.Packages, "strace")
	if a.Tag() == b.Tag() {
		t.Error("an extra package did not change the tag")
	}
	c := docker.DefaultBaseImage()
	c.Mirror = "http://example.invalid/debian"
	if a.Tag() == c.Tag() {
		t.Error("the mirror did not change the tag")
	}
}

func engine(t *testing.T) *docker.Engine {
	t.Helper()
	dockertest.Require(t)
	e, err := docker.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestUnreachableMirrorLeavesNoImage(t *testing.T) {
	e := engine(t)
	t.Setenv("ZKCHAOS_CACHE", t.TempDir())
	// Nothing listens on port 9 of loopback: debootstrap fails at once.
	b := docker.BaseImage{Suite: "bookworm", Mirror: "http://127.0.0.1:9/debian", Packages: []string{"procps"}}
	_, err := e.EnsureImage(t.Context(), b, nil)
	if err == nil {
		t.Fatal("built an image from an unreachable mirror")
	}
	if !strings.Contains(err.Error(), "127.0.0.1:9") {
		t.Errorf("error does not name the mirror: %v", err)
	}
	if _, ierr := e.Client().ImageInspect(t.Context(), b.Tag()); ierr == nil {
		t.Errorf("image %s exists after a failed build", b.Tag())
	}
}

func TestFailedStartShowsLastLogLines(t *testing.T) {
	e := engine(t)
	rep, err := e.EnsureImage(t.Context(), docker.DefaultBaseImage(), nil)
	if err != nil {
		t.Fatal(err)
	}
	runID := "t-failstart-" + cluster.NewRunID()[16:]
	t.Cleanup(func() { e.RemoveLabelled(context.Background(), runID) })
	_, err = e.StartContainer(t.Context(), docker.ContainerSpec{
		RunID: runID, Role: "probe", Name: "zkchaos-" + runID, Image: rep.Ref,
		Cmd:          []string{"sh", "-c", "echo the-reason-it-died; exit 3"},
		WaitFor:      wait.ForLog("never printed"),
		StartTimeout: 10 * time.Second,
	})
	if err == nil {
		t.Fatal("a container that exits at once was reported started")
	}
	if !strings.Contains(err.Error(), "the-reason-it-died") {
		t.Fatalf("error lacks the container's last log lines: %v", err)
	}
}

// A run's network that a container outside the run's removal is still
// attached to (here another run's; in a loaded engine, one whose endpoint
// was not released yet) is removed all the same: its endpoints are
// disconnected first. Before, the run's clean-up failed with "has active
// endpoints" and left the network behind.
func TestRemoveLabelledDisconnectsWhatIsStillAttached(t *testing.T) {
	e := engine(t)
	rep, err := e.EnsureImage(t.Context(), docker.DefaultBaseImage(), nil)
	if err != nil {
		t.Fatal(err)
	}
	runID := "t-netrm-" + cluster.NewRunID()[16:]
	other := runID + "-other"
	t.Cleanup(func() {
		e.RemoveLabelled(context.Background(), other)
		e.RemoveLabelled(context.Background(), runID)
	})
	nw, err := e.CreateNetwork(t.Context(), runID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.StartContainer(t.Context(), docker.ContainerSpec{
		RunID: other, Role: "probe", Name: "zkchaos-" + other, Image: rep.Ref, Network: nw,
		Cmd: []string{"sleep", "600"}, StartTimeout: 20 * time.Second,
	}); err != nil {
		t.Fatal(err)
	}
	res, err := e.RemoveLabelled(t.Context(), runID)
	if err != nil {
		t.Fatalf("removing the run with another container on its network: %v", err)
	}
	if res.Networks != 1 {
		t.Fatalf("removed %d networks, want the run's one", res.Networks)
	}
}
