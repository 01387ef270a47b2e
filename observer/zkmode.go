package observer

import (
	"context"
	"sync"
	"time"

	"github.com/zkchaos/zkchaos/fourletter"
	"github.com/zkchaos/zkchaos/history"
)

// ZKServer names one ZooKeeper server for PollModes: its name in the run
// ("zk1") and its client address.
type ZKServer struct {
	_ struct{}

	Name, Addr string
}

// PollModes asks each server for `srvr` every period and records a
// zk_watch event of type server_mode whenever a server's answer changes:
// its mode (leader, follower, standalone), or no mode while it does not
// answer. Which server led when a fault struck is otherwise known only to
// the faults that chose their target by it; the poll lets the history say
// it for every fault. A change shorter than a period can be missed, and a
// mode is recorded up to a period (plus the answer's time) late. It returns
// when ctx ends, after its last record.
func PollModes(ctx context.Context, servers []ZKServer, period time.Duration, w *history.Writer) {
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pollMode(ctx, s, period, w)
		}()
	}
	wg.Wait()
}

func pollMode(ctx context.Context, s ZKServer, period time.Duration, w *history.Writer) {
	last, first := "", true
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		mode := ""
		// A loaded machine can take most of a short period to answer;
		// a second tells a server that does not answer from a slow one.
		if st, err := fourletter.Srvr(ctx, s.Addr, max(period, time.Second)); err == nil {
			mode = st.Mode
		}
		if ctx.Err() != nil {
			return
		}
		if first || mode != last {
			w.Write(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: "/", Type: history.WatchServerMode, Server: s.Name, Mode: mode}})
			last, first = mode, false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
