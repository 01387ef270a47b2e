package dataplane

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

// oneZnodeStore keeps one partition state znode for a leader's ISR writes.
// With loseFirstSet the first write lands but its answer is lost with the
// connection; the first getLosses reads lose their connection too. The
// session stays the same throughout. Set ver ahead of the leader's cached
// zkVersion for a znode the controller has rewritten since the leader's
// last LeaderAndIsr.
type oneZnodeStore struct {
	loseFirstSet bool
	getLosses    int

	mu   sync.Mutex
	data []byte
	ver  int32
	sets int
	gets int
}

func (s *oneZnodeStore) set(_ context.Context, _ string, data []byte, ver int32) (*zk.Stat, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sets++
	if ver != s.ver {
		return nil, zk.ErrBadVersion
	}
	s.data, s.ver = data, s.ver+1
	if s.loseFirstSet && s.sets == 1 {
		return nil, zk.ErrConnectionClosed
	}
	return &zk.Stat{Version: s.ver}, nil
}

func (s *oneZnodeStore) get(context.Context, string) ([]byte, *zk.Stat, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gets++
	if s.gets <= s.getLosses {
		return nil, nil, zk.ErrConnectionClosed
	}
	return slices.Clone(s.data), &zk.Stat{Version: s.ver}, nil
}

func (s *oneZnodeStore) createSequential(_ context.Context, path string, _ []byte) (string, error) {
	return path + "0000000000", nil
}

func (s *oneZnodeStore) sessionID() int64                  { return 1 }
func (s *oneZnodeStore) waitSession(context.Context) error { return nil }
func (s *oneZnodeStore) requestTimeout() time.Duration     { return 20 * time.Millisecond }

// A leader's ISR write that landed but whose answer was lost is resent by
// retryRequestsUntilConnected and meets BADVERSION; Kafka 2.6.3's
// ReplicationUtils.checkLeaderAndIsrZkData then reads the znode
// (KafkaZkClient.getDataAndStat, itself retried until connected, with no
// time limit) and takes the write as done when ZooKeeper holds exactly its
// state. Before, the node gave that read one attempt bounded by
// --zk-request-timeout: a connection lost under it made the leader keep
// its old ISR in memory while ZooKeeper held the new one.
func TestISRWriteCheckReadWaitsForTheConnection(t *testing.T) {
	tests := []struct {
		name      string
		getLosses int
	}{
		{"check read answered at once", 0},
		{"check read loses its connection twice", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newManager(t, t.TempDir(), nil, 1)
			store := &oneZnodeStore{loseFirstSet: true, getLosses: tt.getLosses}
			m.testISRStore = store
			lead(t, m, 0, 1, 2)
			produce(m, 0, 1, time.Second, batch("a")) // follower 2 is behind
			p := m.get(history.TP("t", 0))
			p.maybeShrinkISR(time.Now().Add(2 * m.cfg.LagTime))
			st, err := zkdata.DecodePartitionState("t", 0, store.data)
			if err != nil || !slices.Equal(st.ISR, []int32{1}) {
				t.Fatalf("ZooKeeper holds %+v (%v), want ISR [1]", st, err)
			}
			p.mu.Lock()
			isr, ver := slices.Clone(p.isr), p.zkVersion
			p.mu.Unlock()
			if !slices.Equal(isr, []int32{1}) || ver != store.ver {
				t.Fatalf("leader's ISR %v at zkVersion %d, want [1] at %d (what ZooKeeper holds)", isr, ver, store.ver)
			}
		})
	}
}

// A leader's ISR write that meets BADVERSION and finds another state in
// ZooKeeper leaves that state alone: ReplicationUtils.updateLeaderAndIsr
// fails, Partition keeps its ISR and zkVersion ("cached zkVersion not equal
// to that in zookeeper, skip updating ISR") and waits for the controller's
// LeaderAndIsr. The znode holds a newer leader decision (a higher leader
// epoch); writing again at the version read would put the leader's older
// epoch back over it.
func TestISRWriteMeetingTheControllersStateKeepsIt(t *testing.T) {
	tests := []struct {
		name       string
		controller zkdata.PartitionState
	}{
		{"controller elected another leader", zkdata.PartitionState{Leader: 2, LeaderEpoch: 4, ControllerEpoch: 1, ISR: []int32{2}}},
		{"controller removed the same follower", zkdata.PartitionState{Leader: 1, LeaderEpoch: 4, ControllerEpoch: 1, ISR: []int32{1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newManager(t, t.TempDir(), nil, 1)
			want := zkdata.EncodePartitionState(tt.controller)
			store := &oneZnodeStore{data: slices.Clone(want), ver: 1} // the leader caches zkVersion 0
			m.testISRStore = store
			lead(t, m, 0, 1, 2)
			produce(m, 0, 1, time.Second, batch("a")) // follower 2 is behind
			p := m.get(history.TP("t", 0))
			p.maybeShrinkISR(time.Now().Add(2 * m.cfg.LagTime))
			if store.sets != 1 || !slices.Equal(store.data, want) {
				t.Fatalf("after %d writes ZooKeeper holds %s, want the controller's %s untouched", store.sets, store.data, want)
			}
			p.mu.Lock()
			isr, ver := slices.Clone(p.isr), p.zkVersion
			p.mu.Unlock()
			if !slices.Equal(isr, []int32{1, 2}) || ver != 0 {
				t.Fatalf("leader's ISR %v at zkVersion %d, want [1 2] at 0 until the controller's LeaderAndIsr", isr, ver)
			}
		})
	}
}
