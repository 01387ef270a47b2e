package scenarios

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/history"
)

// waitNode waits, like harness.Live.WaitEvent, for an event after since
// (Unix ns) that match accepts, but reads only the node event logs
// (n<id>.jsonl). The clients' histories grow by tens of megabytes in a
// scenario with a workload, and decoding them on every poll made the
// driver notice an ISR change 8 to 11 s after it happened.
func waitNode(ctx context.Context, l *harness.Live, since int64, within time.Duration, what string, match func(*history.Event) bool) (*history.Event, error) {
	deadline := time.Now().Add(within)
	for {
		if e := findNodeEvent(l.RunDir, since, match); e != nil {
			return e, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("waited %s for %s", within, what)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func findNodeEvent(runDir string, since int64, match func(*history.Event) bool) *history.Event {
	files, _ := filepath.Glob(filepath.Join(runDir, history.HistoryDir, "n[0-9]*.jsonl"))
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		evs, _, err := history.Decode(fh, f)
		fh.Close()
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			continue
		}
		for i := range evs {
			if evs[i].Time >= since && match(&evs[i]) {
				return &evs[i]
			}
		}
	}
	return nil
}
