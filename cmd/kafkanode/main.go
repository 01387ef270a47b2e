// Command kafkanode is the node program: a Go re-implementation of a
// ZooKeeper-mode Kafka broker that any instance of may become the controller
// (see node/ and docs/KAFKA-MODEL.md). It is built static
// (CGO_ENABLED=0) and runs as PID 1 in a node container.
//
// Exit status: 0 after a clean shutdown (SIGTERM/SIGINT), 1 on a runtime
// error (e.g. ZooKeeper unreachable at start-up), 2 on bad flags, an unknown
// bug switch, policy or failpoint. With --check-flags it exits 0 or 2 after
// the flags are checked, without starting.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/zkchaos/zkchaos/node"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/failpoint"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	cfg, err := config.Parse(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kafkanode: %v\n", err)
		return 2
	}
	if err := failpoint.New().ArmSpec(cfg.Failpoints); err != nil {
		fmt.Fprintf(os.Stderr, "kafkanode: --failpoints: %v\n", err)
		return 2
	}
	if cfg.CheckFlags {
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	coverCtx, stopCover := context.WithCancel(context.Background())
	coverDone := make(chan struct{})
	go func() {
		defer close(coverDone)
		flushCoverage(coverCtx, func(f string, a ...any) { fmt.Fprintf(os.Stderr, "kafkanode: "+f+"\n", a...) })
	}()
	defer func() { stopCover(); <-coverDone }()
	if err := node.Run(ctx, cfg, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "kafkanode: %v\n", err)
		return 1
	}
	return 0
}
