package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime/coverage"
	"slices"
	"time"
)

// coverFlushEvery is how often a node built with -cover writes its
// counters. The harness kills nodes with SIGKILL, and a killed process
// writes nothing at exit, so the counters go to disk while it runs: what a
// killed node reached is lost for at most this long.
const coverFlushEvery = time.Second

// flushCoverage writes the program's coverage counters into $GOCOVERDIR
// every coverFlushEvery until ctx ends, keeping one counter file for this
// process: each write supersedes the last, since a process's counters only
// grow. It returns at once when GOCOVERDIR is unset or the program was not
// built with -cover (WriteMetaDir says so).
func flushCoverage(ctx context.Context, logf func(string, ...any)) {
	dir := os.Getenv("GOCOVERDIR")
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		logf("coverage: %v", err)
		return
	}
	if err := coverage.WriteMetaDir(dir); err != nil {
		return // not built with -cover
	}
	var last string
	flush := func() {
		before, _ := filepath.Glob(filepath.Join(dir, "covcounters.*"))
		if err := coverage.WriteCountersDir(dir); err != nil {
			logf("coverage: %v", err)
			return
		}
		after, _ := filepath.Glob(filepath.Join(dir, "covcounters.*"))
		for _, f := range after {
			if !slices.Contains(before, f) {
				if last != "" && last != f {
					os.Remove(last)
				}
				last = f
				return
			}
		}
	}
	t := time.NewTicker(coverFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			flush()
			return
		case <-t.C:
			flush()
		}
	}
}
