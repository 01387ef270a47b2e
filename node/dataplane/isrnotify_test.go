package dataplane

import (
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

// note is the notification naming partitions ps of t.
func note(ps ...int32) string {
	var tps []zkdata.TopicPartition
	for _, p := range ps {
		tps = append(tps, zkdata.TopicPartition{Topic: "t", Partition: p})
	}
	return string(zkdata.EncodeTopicPartitions(tps))
}

// ReplicaManager.maybePropagateIsrChanges (Kafka 2.6.3), run every 2.5 s:
// the partitions changed since the last notification go out in one, once
// no change came for 5 s or 60 s after the previous notification.
func TestISRChangesPropagatedInBatches(t *testing.T) {
	type step struct {
		at     time.Duration // since the manager's start
		change int32         // -1: a propagation run instead
		fail   bool          // the run's notification write fails
		want   []string      // every notification written so far
	}
	run := func(at time.Duration, want ...string) step { return step{at: at, change: -1, want: want} }
	change := func(at time.Duration, p int32) step { return step{at: at, change: p} }
	steps := func(ss ...step) []step { return ss }
	every2s := func(until time.Duration) []step {
		var ss []step
		for at := time.Duration(0); at <= until; at += 2 * time.Second {
			ss = append(ss, change(at, 0))
		}
		return ss
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a lone change waits for 5 s without another", steps(
			change(0, 0),
			run(2500*time.Millisecond),
			run(5*time.Second),
			run(5100*time.Millisecond, note(0)),
			run(7600*time.Millisecond, note(0)),
		)},
		{"changes 2 s apart go out 60 s after the last notification", append(every2s(62*time.Second),
			run(59*time.Second),
			run(60*time.Second),
			run(62500*time.Millisecond, note(0)),
		)},
		{"partitions changed together share one notification", steps(
			change(0, 1),
			change(time.Second, 0),
			run(6100*time.Millisecond, note(0, 1)),
		)},
		{"a failed write keeps the changes for the next run", steps(
			change(0, 0),
			step{at: 5100 * time.Millisecond, change: -1, fail: true},
			run(7600*time.Millisecond, note(0)),
		)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newManager(t, t.TempDir(), nil, 1)
			store := newFakeISRStore(false)
			m.testISRStore = store
			t0 := time.Now().Add(time.Hour) // past anything the manager's own task sees
			m.isrCh.mu.Lock()
			m.isrCh.lastChange, m.isrCh.lastPropagation = t0, t0
			m.isrCh.mu.Unlock()
			slices.SortStableFunc(tt.steps, func(a, b step) int { return int(a.at - b.at) })
			for _, s := range tt.steps {
				if s.change >= 0 {
					m.recordISRChangeAt(history.TP("t", s.change), t0.Add(s.at))
					continue
				}
				store.mu.Lock()
				store.noteErr = nil
				if s.fail {
					store.noteErr = zk.ErrConnectionClosed
				}
				store.mu.Unlock()
				m.maybePropagateISRChanges(t0.Add(s.at))
				if got := store.notifications(); !slices.Equal(got, s.want) {
					t.Fatalf("after the run at +%s: notifications %q, want %q", s.at, got, s.want)
				}
			}
		})
	}
}

// A leader's ISR write records the change (ReplicaManager.recordIsrChange)
// and writes no notification itself: the controller hears of it from the
// next propagation run that finds 5 s without changes.
func TestISRWriteLeavesTheNotificationToThePropagationTask(t *testing.T) {
	m := newManager(t, t.TempDir(), nil, 1)
	store := newFakeISRStore(false)
	m.testISRStore = store
	lead(t, m, 0, 1)
	if f := fetch(m, 2, 0, 0); f.ErrorCode != 0 { // at the leader's LEO: follower 2 joins
		t.Fatalf("fetch: %d", f.ErrorCode)
	}
	if w := store.written(); len(w) != 1 {
		t.Fatalf("ISR writes %v, want one", w)
	}
	time.Sleep(100 * time.Millisecond)
	if n := store.notifications(); len(n) != 0 {
		t.Fatalf("notifications %q right after the ISR write, want none before a propagation run", n)
	}
	m.maybePropagateISRChanges(time.Now().Add(isrChangePropagationBlackOut + time.Second))
	if n := store.notifications(); !slices.Equal(n, []string{note(0)}) {
		t.Fatalf("notifications %q after the quiet period, want %q", n, note(0))
	}
}

// maybePropagateIsrChanges holds isrChangeSet's lock from its read to its
// clear, across the notification's write: a change a leader records while
// ZooKeeper holds that write (a slow or stalled server) waits, and goes in
// the next notification. Released around the write, the clear would drop
// it, and the controller would never read that ISR.
func TestISRChangeRecordedDuringANotificationWriteIsKept(t *testing.T) {
	m := newManager(t, t.TempDir(), nil, 1)
	store := newFakeISRStore(false)
	m.testISRStore = store
	t0 := time.Now().Add(time.Hour)
	m.recordISRChangeAt(history.TP("t", 0), t0)
	recorded := make(chan struct{})
	store.duringCreate = func() {
		store.duringCreate = nil
		go func() {
			m.recordISRChangeAt(history.TP("t", 1), t0.Add(5100*time.Millisecond))
			close(recorded)
		}()
		// Give the change its chance to land while the write is held.
		select {
		case <-recorded:
		case <-time.After(100 * time.Millisecond):
		}
	}
	m.maybePropagateISRChanges(t0.Add(5100 * time.Millisecond))
	<-recorded
	m.maybePropagateISRChanges(t0.Add(10300 * time.Millisecond))
	if got, want := store.notifications(), []string{note(0), note(1)}; !slices.Equal(got, want) {
		t.Fatalf("notifications %q, want %q: the change recorded during the first write was dropped", got, want)
	}
}
