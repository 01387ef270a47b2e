// Package ctxsleep owns the harness side's one way to wait a while unless
// the run is cancelled first. It knows nothing of the cluster; callers
// decide what a cut-short wait means.
package ctxsleep

import (
	"context"
	"time"
)

// For waits d, or until ctx ends, and says whether the whole d passed. A
// timer is stopped on the way out, so a cancelled long wait does not keep
// one alive until it would have fired.
func For(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Until checks cond every interval until it holds, within has passed, or
// ctx ends, and says whether cond held; cond is checked at least once, and
// once more at the deadline.
func Until(ctx context.Context, within, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || !For(ctx, every) {
			return false
		}
	}
}
