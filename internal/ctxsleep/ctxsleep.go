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
