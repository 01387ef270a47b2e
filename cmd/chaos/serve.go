package main

// This file owns `chaos serve`: browse stored runs over HTTP, read-only,
// on 127.0.0.1 unless told otherwise. The handler lives in reports/.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkchaos/zkchaos/reports"
)

func newServeCmd() *cobra.Command {
	var (
		dir         string
		addr        string
		allowRemote bool
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Browse stored runs over HTTP (index, reports, logs, histories), read-only, on 127.0.0.1",
		Long: `serve lists the run directories under --dir (newest first, with verdict, seed
and bug switches) and serves each one read-only. A run's report.html is
rendered on demand when it is missing or older than the run's results.

It binds to a loopback address unless --allow-remote: run directories hold
logs and data not meant for the whole network. Stop it with Ctrl-C.

Exit status: 0 after Ctrl-C, 2 bad input (missing --dir, address refused or busy).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), cmd.OutOrStdout(), dir, addr, allowRemote)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "runs", "folder holding one directory per run")
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "address to listen on")
	cmd.Flags().BoolVar(&allowRemote, "allow-remote", false, "allow a non-loopback --addr")
	return cmd
}

// runServe serves until ctx is cancelled. It prints the URL once listening
// (with the real port when --addr ends in :0).
func runServe(ctx context.Context, out io.Writer, dir, addr string, allowRemote bool) error {
	if err := reports.CheckListenAddr(addr, allowRemote); err != nil {
		return withCode(exitBad, err)
	}
	srv, err := reports.NewServer(dir)
	if err != nil {
		return withCode(exitBad, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return withCode(exitBad, fmt.Errorf("serve: %w", err))
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(out, "serving runs in %s on http://%s/ (Ctrl-C to stop)\n", dir, ln.Addr())
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return withCode(exitBad, fmt.Errorf("serve: %w", err))
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return withCode(exitBad, fmt.Errorf("serve: shutdown: %w", err))
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return withCode(exitBad, fmt.Errorf("serve: %w", err))
	}
	return nil
}
