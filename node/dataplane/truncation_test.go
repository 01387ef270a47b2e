package dataplane

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/broker"
	"github.com/zkchaos/zkchaos/node/eventlog"
	"github.com/zkchaos/zkchaos/node/storage"
	"github.com/zkchaos/zkchaos/node/storage/checkpoint"
)

// leadEpochs makes m, broker id, lead t-0 alone at each epoch in turn and
// append n[i] one-record batches in epoch epochs[i]: a log with that epoch
// history.
func leadEpochs(t *testing.T, m *Manager, id int32, epochs []int32, n []int) {
	t.Helper()
	for i, e := range epochs {
		if err := m.BecomeLeader(broker.Partition{Topic: "t", Partition: 0, Leader: id, LeaderEpoch: e, ISR: []int32{id}, Replicas: []int32{1, 2}}); err != nil {
			t.Fatal(err)
		}
		for range n[i] {
			if r := produce(m, 0, 1, time.Second, batch("x")); r.ErrorCode != 0 {
				t.Fatalf("produce at epoch %d: %d", e, r.ErrorCode)
			}
		}
	}
}

// KIP-279 (AbstractFetcherThread.getOffsetTruncationState, 2.6.3): when the
// leader answers OffsetsForLeaderEpoch with an epoch the follower does not
// have, the follower truncates to its own end offset for the largest epoch
// below it and asks again, until the leader's epoch is one it has; only
// then is truncation complete. Stopped after one round, a follower that
// missed several leader changes keeps records of epochs the leader never
// had.
func TestFollowerTruncationRepeatsUntilEpochsAgree(t *testing.T) {
	tests := []struct {
		name           string
		leader, follow [2][]int32 // epochs, and one-record batches in each
		wantEpochs     []checkpoint.EpochEntry
	}{
		{
			// Follower asks 4, leader answers (3, 9): truncate to 8 (end of the
			// follower's epoch 2); asks 2, answered (1, 6): truncate to 5;
			// asks 0, answered (0, 3): truncate to 3 — then fetches the rest.
			name:       "three rounds",
			leader:     [2][]int32{{0, 1, 3, 5}, {3, 3, 3, 1}},
			follow:     [2][]int32{{0, 2, 4}, {5, 3, 2}},
			wantEpochs: []checkpoint.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 1, StartOffset: 3}, {Epoch: 3, StartOffset: 6}, {Epoch: 5, StartOffset: 9}},
		},
		{
			name:       "one round: the leader knows the follower's epoch",
			leader:     [2][]int32{{0, 2, 5}, {4, 2, 2}},
			follow:     [2][]int32{{0, 2}, {4, 5}},
			wantEpochs: []checkpoint.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 4}, {Epoch: 5, StartOffset: 6}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m1 := newManagerID(t, 1, t.TempDir(), nil, 1)
			m2 := newManagerID(t, 2, t.TempDir(), nil, 1)
			addr, _ := serve(t, m1)
			leadEpochs(t, m1, 1, tt.leader[0], ints(tt.leader[1]))
			leadEpochs(t, m2, 2, tt.follow[0], ints(tt.follow[1]))
			l1, l2 := followAndCatchUp(t, m1, m2, addr, tt.leader[0])
			if got := l2.log.Epochs(); !reflect.DeepEqual(got, tt.wantEpochs) {
				t.Fatalf("follower's epochs %v, want the leader's %v (leader has %v)", got, tt.wantEpochs, l1.log.Epochs())
			}
		})
	}
}

func ints(ns []int32) []int {
	out := make([]int, len(ns))
	for i, n := range ns {
		out[i] = int(n)
	}
	return out
}

// sizeAtTruncation is a broker's event log that notes, as each truncation
// event is written, how many bytes the partition's segment files hold on
// disk: what a SIGKILL landing right after the write would leave.
type sizeAtTruncation struct {
	dir   string // the partition's log directory
	buf   bytes.Buffer
	sizes []int64
}

func (s *sizeAtTruncation) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte(`"kind":"truncation"`)) {
		s.sizes = append(s.sizes, segmentBytes(s.dir))
	}
	return s.buf.Write(b)
}

func segmentBytes(dir string) int64 {
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	n := int64(0)
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			n += st.Size()
		}
	}
	return n
}

// A follower's truncation is written to its history before its log is cut.
// A bounce's SIGKILL once landed inside the cut (after the segment was
// truncated, while the durable-lengths sidecar was being replaced): the
// restarted broker's log ended at the leader's epoch end offset, its
// history held the records above it and no truncation, and the isr checker
// judged the leader for taking in a replica whose log still differed. Kafka
// 2.6.3's Log.truncateTo likewise logs "Truncating to offset" before it
// cuts (ReplicaFetcherThread.truncate → Partition.truncateTo).
func TestTruncationRecordedBeforeTheCut(t *testing.T) {
	tests := []struct {
		name           string
		leader, follow [2][]int32 // epochs, and one-record batches in each
		wantFrom       int64
		wantTo         int64
	}{
		{
			// Asks about 2, the leader answers (0, 3): cut 7 → 3.
			name:     "keeps the common prefix",
			leader:   [2][]int32{{0, 3}, {3, 2}},
			follow:   [2][]int32{{0, 2}, {3, 4}},
			wantFrom: 7, wantTo: 3,
		},
		{
			// Asks about 0, the leader answers (0, 0): cut 5 → 0.
			name:     "cuts the whole log",
			leader:   [2][]int32{{3}, {2}},
			follow:   [2][]int32{{0}, {5}},
			wantFrom: 5, wantTo: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m1 := newManagerID(t, 1, t.TempDir(), nil, 1)
			dir2 := t.TempDir()
			logged := &sizeAtTruncation{dir: storage.PartitionDir(dir2, "t", 0)}
			m2, err := Open(Config{BrokerID: 2, DataDir: dir2, MinISR: 1, LagTime: time.Second,
				CheckpointInterval: time.Hour, FetchMaxWait: 50 * time.Millisecond, MaxMessageBytes: 4096},
				eventlog.New(history.NewWriter(logged, "n2", 2), 2, nil), broker.New(2, nil, nil).Metadata)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(m2.Close)
			addr, _ := serve(t, m1)
			leadEpochs(t, m1, 1, tt.leader[0], ints(tt.leader[1]))
			leadEpochs(t, m2, 2, tt.follow[0], ints(tt.follow[1]))
			full := segmentBytes(logged.dir)
			followAndCatchUp(t, m1, m2, addr, tt.leader[0])
			m2.Close()
			var got []history.Truncation
			for _, line := range strings.Split(strings.TrimSpace(logged.buf.String()), "\n") {
				var e history.Event
				if json.Unmarshal([]byte(line), &e) == nil && e.Kind == history.KindTruncation {
					got = append(got, *e.Truncation)
				}
			}
			if len(got) != 1 || got[0].From != tt.wantFrom || got[0].To != tt.wantTo {
				t.Fatalf("truncations logged %+v, want one from %d to %d", got, tt.wantFrom, tt.wantTo)
			}
			if len(logged.sizes) != 1 || logged.sizes[0] != full {
				t.Fatalf("segment bytes on disk when the truncation was logged: %v, want %d (the log not yet cut): a kill right after the cut would leave a shorter log with no truncation in its history",
					logged.sizes, full)
			}
		})
	}
}

// followAndCatchUp makes m2 follow m1 (at addr) for t-0 at the last of
// m1's leader epochs and waits until m2's log ends where m1's does, in
// that epoch.
func followAndCatchUp(t *testing.T, m1, m2 *Manager, addr string, leaderEpochs []int32) (l1, l2 *partition) {
	t.Helper()
	last := leaderEpochs[len(leaderEpochs)-1]
	if err := m2.BecomeFollower(broker.Partition{Topic: "t", Partition: 0, Leader: 1, LeaderEpoch: last, ISR: []int32{1}, Replicas: []int32{1, 2}, LeaderAddr: addr}); err != nil {
		t.Fatal(err)
	}
	l1, l2 = m1.get(history.TP("t", 0)), m2.get(history.TP("t", 0))
	eventually(t, "follower caught up", func() bool {
		return l2.log.LogEndOffset() == l1.log.LogEndOffset() && l2.log.LatestEpoch() == last
	})
	return l1, l2
}
