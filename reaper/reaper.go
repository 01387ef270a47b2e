// Package reaper owns the clean-up of a run whose harness died without
// cleaning up. A chaos process killed with SIGKILL (a CI job's hard timeout,
// the OOM killer) cannot remove its containers and network, and
// testcontainers' own reaper needs an image from a registry, which this
// project never uses.
//
// The reaper is a small program (cmd/reaper) that the cluster starts as a
// container of the run, from the run's own image with the program
// bind-mounted and the engine's socket mounted. The harness holds a
// connection to it on a unix socket in the run directory for as long as it
// owns the run, and the kernel closes that connection when the harness
// dies, however it dies. Once no connection has been held for the grace
// (or none came within the first-contact wait after the start), the reaper
// removes every container and network carrying the run's labels, its own
// container last, by exiting (the engine removes it).
//
// The package owns that watch (Watch), the removal through the Engine API
// (Engine, standard library only, so the program links quickly and stays
// small) and the harness's side of the connection (Dial, Hold). Which labels
// a run carries is docker's to say; the caller passes them.
package reaper

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Greeting is what the reaper writes on every connection it accepts: the
// owner waits for it, so a held connection means a watching reaper.
const Greeting = "watching\n"

// Config says when the owner counts as dead and what then happens.
type Config struct {
	// FirstContact is how long the reaper waits for its first connection:
	// an owner killed between starting the reaper and dialling it never
	// comes.
	FirstContact time.Duration
	// Grace is how long, once the last connection dropped, the reaper
	// waits for a new one before it reaps.
	Grace time.Duration
	// Reap removes the run's objects.
	Reap func(context.Context) error
	// Logf, if set, receives what the reaper decides.
	Logf func(format string, args ...any)
}

func (c Config) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
	}
}

// Watch serves ln until the owner is gone, then closes ln and calls Reap.
// It returns Reap's error (nil once the run is removed), or ctx's error when
// ctx ends first, in which case nothing is removed.
func Watch(ctx context.Context, ln net.Listener, cfg Config) error {
	serve, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// Returning closes the listener (ending the accept loop) and every
	// connection (stop ends each hold) and waits for their goroutines, so
	// no goroutine outlives Watch. The listener is closed here, not by a
	// context.AfterFunc on serve: stopping such a hook on the way out
	// could win the race with a cancelled ctx's own call of it, and leave
	// the accept loop, and wg.Wait, blocked for ever.
	defer wg.Wait()
	defer ln.Close()
	defer stop()

	held := make(chan int) // +1: a connection came; -1: one dropped
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return // ln closed
			}
			wg.Go(func() { hold(serve, conn, held) })
		}
	})

	open := 0
	timer := time.NewTimer(cfg.FirstContact)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case d := <-held:
			open += d
			if open == 0 {
				cfg.logf("owner's connection dropped; removing the run unless it is back within %s", cfg.Grace)
				timer.Reset(cfg.Grace)
			} else {
				timer.Stop()
			}
		case <-timer.C:
			if open == 0 {
				stop()
				ln.Close()
				wg.Wait()
				cfg.logf("no owner; removing the run")
				return cfg.Reap(ctx)
			}
		}
	}
}

// hold keeps one owner's connection until the owner closes it (or dies:
// the kernel closes it then) or the watch ends, and reports both ends.
func hold(ctx context.Context, conn net.Conn, held chan<- int) {
	defer conn.Close()
	select {
	case held <- 1:
	case <-ctx.Done():
		return
	}
	unhook := context.AfterFunc(ctx, func() { conn.Close() })
	defer unhook()
	if _, err := io.WriteString(conn, Greeting); err == nil {
		// The owner never writes; a read ends when its end closes.
		io.Copy(io.Discard, conn)
	}
	select {
	case held <- -1:
	case <-ctx.Done():
	}
}

// Hold is the owner's side: while it is open, the reaper waits.
type Hold struct {
	conn net.Conn
}

// Dial connects to the reaper listening on socket, retrying until wait has
// passed (the reaper's container takes a moment to listen), and returns once
// the reaper has greeted. The connection is close-on-exec, as Go opens every
// descriptor, so a child process (go build, a shell) cannot keep it open
// after the owner died.
func Dial(ctx context.Context, socket string, wait time.Duration) (*Hold, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var last error
	for {
		conn, err := dialUnix(ctx, socket)
		if err == nil {
			if err = greeted(conn, wait); err == nil {
				return &Hold{conn: conn}, nil
			}
			conn.Close()
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("reaper at %s: no greeting within %s: %w", socket, wait, last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func greeted(conn net.Conn, wait time.Duration) error {
	conn.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, len(Greeting))
	if _, err := io.ReadFull(conn, buf); err != nil {
		return fmt.Errorf("read greeting: %w", err)
	}
	if string(buf) != Greeting {
		return fmt.Errorf("greeting %q, want %q", buf, Greeting)
	}
	return conn.SetReadDeadline(time.Time{})
}

// Close lets go of the reaper: unless another connection comes within its
// grace, it reaps. On a clean end the harness removes the reaper's container
// with the rest of the run before it closes the hold.
func (h *Hold) Close() error {
	if h == nil {
		return nil
	}
	return h.conn.Close()
}
