// Command reaper removes a run's containers and network once the chaos
// process that owns the run is gone (package reaper). The cluster starts it
// as a container of the run: it listens on a unix socket the owner holds a
// connection to, and reaps when that connection has been gone for the grace.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zkchaos/zkchaos/reaper"
)

type labels []string

func (l *labels) String() string     { return strings.Join(*l, ",") }
func (l *labels) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	log.SetFlags(log.LstdFlags | log.LUTC)
	log.SetPrefix("reaper: ")
	if err := run(); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

func run() error {
	var (
		sel          labels
		socket       = flag.String("socket", "", "unix socket to listen on for the owner")
		engine       = flag.String("engine", "/var/run/docker.sock", "the Docker Engine's unix socket")
		keep         = flag.String("keep", "", "name of the reaper's own container, left to the engine")
		owner        = flag.String("owner", "", "uid:gid that gets the socket (the owner may not be root)")
		grace        = flag.Duration("grace", 3*time.Second, "how long a dropped owner has to come back")
		firstContact = flag.Duration("first-contact", 10*time.Second, "how long to wait for the first connection")
	)
	flag.Var(&sel, "label", "key=value every object of the run carries (repeat; all must match)")
	flag.Parse()
	if *socket == "" || len(sel) == 0 {
		return errors.New("need --socket and at least one --label")
	}
	os.Remove(*socket) // a socket left by an earlier reaper of the same run directory
	ln, err := net.Listen("unix", *socket)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer os.Remove(*socket)
	if *owner != "" {
		if err := chown(*socket, *owner); err != nil {
			return err
		}
	}
	// The engine stops the container with SIGTERM or SIGKILL; a SIGTERM
	// (chaos clean, docker stop) means someone else removes the run.
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	eng := reaper.NewEngine(*engine)
	err = reaper.Watch(ctx, ln, reaper.Config{
		FirstContact: *firstContact,
		Grace:        *grace,
		Logf:         log.Printf,
		Reap:         func(ctx context.Context) error { return reap(ctx, eng, sel, *keep) },
	})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// reap removes the run, trying again a few times: a removal can fail while
// the engine is still busy with a container's teardown.
func reap(ctx context.Context, eng *reaper.Engine, sel []string, keep string) error {
	var err error
	for attempt := 1; attempt <= 5; attempt++ {
		var rep reaper.Removed
		rep, err = eng.RemoveLabelled(ctx, sel, keep)
		log.Printf("removed %d containers and %d networks labelled %s", rep.Containers, rep.Networks, strings.Join(sel, ","))
		if err == nil {
			return nil
		}
		log.Printf("attempt %d: %v", attempt, err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return err
}

func chown(path, owner string) error {
	u, g, ok := strings.Cut(owner, ":")
	uid, uerr := strconv.Atoi(u)
	gid, gerr := strconv.Atoi(g)
	if !ok || uerr != nil || gerr != nil {
		return fmt.Errorf("--owner %q: want uid:gid", owner)
	}
	if err := os.Chown(path, uid, gid); err != nil {
		return fmt.Errorf("give the socket to its owner: %w", err)
	}
	return nil
}
