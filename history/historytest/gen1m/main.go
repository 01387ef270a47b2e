// Command gen1m writes the generated 1M-event benchmark history
// (historytest.Bench1M) into RUN_DIR/history, so `chaos check RUN_DIR` can be
// measured end to end:
//
//	go run ./history/historytest/gen1m [-polls] RUN_DIR
//	/usr/bin/time -v bin/chaos check RUN_DIR
//
// -polls writes historytest.Bench1MPolls instead: reads shaped like a real
// run's (one poll of up to 64 records).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/history/historytest"
)

func main() {
	polls := flag.Bool("polls", false, "reads of up to 64 records, as the workload's polls (historytest.Bench1MPolls)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: gen1m [-polls] RUN_DIR")
		os.Exit(2)
	}
	cfg := historytest.Bench1M
	if *polls {
		cfg = historytest.Bench1MPolls
	}
	h := historytest.Clean(cfg)
	if err := history.WriteDir(flag.Arg(0), h.Events); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%d events written to %s\n", len(h.Events), flag.Arg(0))
}
