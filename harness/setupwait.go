package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/rundir"
	"github.com/zkchaos/zkchaos/zklayout/zkio"
)

// waitRoles waits until every broker's event log says it has taken a role
// (leader or follower) in every partition it replicates. waitSettled reads
// ZooKeeper, where the controller writes each partition's state before it
// sends the LeaderAndIsr requests that carry it, so a set-up that ended
// there could end inside the controller's start-up burst: a driver that cut
// a link at once took a start-up request for the one its fault provoked
// (KAFKA-7235's driver, 1 run in 6).
func waitRoles(ctx context.Context, runDir string, cfg RunConfig, within time.Duration) error {
	type replica struct {
		node      int32
		topic     string
		partition int32
	}
	want := map[replica]bool{}
	for _, l := range cfg.layouts() {
		for p, reps := range l.assign {
			for _, b := range reps {
				want[replica{int32(b), l.topic, int32(p)}] = true
			}
		}
	}
	logs := newFollower(filepath.Join(runDir, rundir.HistoryDir, "n[0-9]*.jsonl"))
	defer logs.close()
	deadline := time.Now().Add(within)
	for {
		logs.poll(func(_ *followed, b []byte) {
			var e history.Event
			if json.Unmarshal(b, &e) == nil && e.Kind == history.KindRoleChange && e.Role != nil {
				delete(want, replica{e.Node, e.Role.Topic, e.Role.Partition})
			}
		})
		if len(want) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			var missing []string
			for r := range want {
				missing = append(missing, fmt.Sprintf("n%d in %s-%d", r.node, r.topic, r.partition))
			}
			slices.Sort(missing)
			return fmt.Errorf("after %s, no role yet for %s", within, strings.Join(missing, ", "))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// waitLeaders waits until every partition's state znode names a leader,
// in every topic of the run.
func waitLeaders(ctx context.Context, w *world, cfg RunConfig, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		var missing []string
		for _, l := range cfg.layouts() {
			for p := range l.assign {
				if ld, err := w.PartitionLeader(ctx, l.topic, int32(p)); err != nil || ld < 0 {
					missing = append(missing, fmt.Sprintf("%s-%d", l.topic, p))
				}
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("partitions without a leader after %s: %s", within, strings.Join(missing, ", "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitBrokerIDs waits until n brokers are registered under /brokers/ids. A
// node process that exited at start-up (an error from alive) ends the wait
// at once: it would never register.
func waitBrokerIDs(ctx context.Context, w *world, n int, within time.Duration, alive <-chan error) error {
	deadline := time.Now().Add(within)
	for {
		select {
		case err := <-alive:
			if err != nil {
				return err
			}
			alive = nil // answered: a nil channel is never ready
		default:
		}
		ids, _, err := w.conn.Children("/brokers/ids")
		if err == nil && len(ids) >= n {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%d of %d brokers registered after %s (%v)", len(ids), n, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// isrChangeNotifications is where partition leaders tell the controller of
// ISR changes; the controller deletes each notification once it has taken
// it in and sends UpdateMetadata right after.
const isrChangeNotifications = "/isr_change_notification"

// waitSettled waits until every partition's ISR (of every topic of the
// run) holds all its replicas and no ISR change waits for the controller.
func waitSettled(ctx context.Context, w *world, cfg RunConfig, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		var short []string
		for _, l := range cfg.layouts() {
			for p, reps := range l.assign {
				st, _, err := zkio.ReadPartitionState(w.synced(ctx), l.topic, int32(p))
				if err != nil || len(st.ISR) < len(reps) {
					short = append(short, fmt.Sprintf("%s-%d", l.topic, p))
				}
			}
		}
		pending, _, err := w.conn.Children(isrChangeNotifications)
		if errors.Is(err, zk.ErrNoNode) {
			pending, err = nil, nil
		}
		if len(short) == 0 && err == nil && len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("after %s, ISR short of the replicas: %v; ISR changes the controller has not taken in: %d (%v)",
				within, short, len(pending), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
