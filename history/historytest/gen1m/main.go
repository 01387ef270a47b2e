// Command gen1m writes the generated 1M-event benchmark history
// (historytest.Bench1M) into RUN_DIR/history, so `chaos check RUN_DIR` can be
// measured end to end:
//
//	go run ./history/historytest/gen1m RUN_DIR
//	/usr/bin/time -v bin/chaos check RUN_DIR
package main

import (
	"fmt"
	"os"

	"github.com/zkchaos/zkchaos/history/historytest"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gen1m RUN_DIR")
		os.Exit(2)
	}
	h := historytest.Clean(historytest.Bench1M)
	if err := historytest.WriteRunDir(os.Args[1], h); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%d events written to %s\n", len(h.Events), os.Args[1])
}
