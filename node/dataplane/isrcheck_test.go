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

// lostAnswerStore keeps one partition state znode. The first write lands
// but its answer is lost with the connection; the first getLosses reads
// lose their connection too. The session stays the same throughout.
type lostAnswerStore struct {
	getLosses int

	mu   sync.Mutex
	data []byte
	ver  int32
	sets int
	gets int
}

func (s *lostAnswerStore) set(_ context.Context, _ string, data []byte, ver int32) (*zk.Stat, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sets++
	if ver != s.ver {
		return nil, zk.ErrBadVersion
	}
	s.data, s.ver = data, s.ver+1
	if s.sets == 1 {
		return nil, zk.ErrConnectionClosed
	}
	return &zk.Stat{Version: s.ver}, nil
}

func (s *lostAnswerStore) get(context.Context, string) ([]byte, *zk.Stat, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gets++
	if s.gets <= s.getLosses {
		return nil, nil, zk.ErrConnectionClosed
	}
	return slices.Clone(s.data), &zk.Stat{Version: s.ver}, nil
}

func (s *lostAnswerStore) createSequential(_ context.Context, path string, _ []byte) (string, error) {
	return path + "0000000000", nil
}

func (s *lostAnswerStore) sessionID() int64                  { return 1 }
func (s *lostAnswerStore) waitSession(context.Context) error { return nil }
func (s *lostAnswerStore) requestTimeout() time.Duration     { return 20 * time.Millisecond }

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
			store := &lostAnswerStore{getLosses: tt.getLosses}
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
