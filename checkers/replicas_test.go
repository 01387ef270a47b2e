package checkers

import (
	"reflect"
	"testing"

	"github.com/zkchaos/zkchaos/history"
)

// The replica set is the newest leader epoch's since the topic's last
// completed deletion, whatever order the requests are logged in.
func TestReplicaTracker(t *testing.T) {
	tp := history.TP("t", 0)
	lai := func(epoch int32, replicas ...int32) *history.Control {
		return &history.Control{API: history.APILeaderAndIsr, Partitions: []history.ControlPartition{
			{Topic: "t", Partition: 0, LeaderEpoch: epoch, Replicas: replicas}}}
	}
	step := func(s string) *history.TopicDeletion {
		return &history.TopicDeletion{Topic: "t", Step: s, Partitions: []int32{0}}
	}
	for _, c := range []struct {
		name  string
		steps []any // *history.Control or *history.TopicDeletion
		want  []int32
	}{
		{"none", nil, nil},
		{"a newer epoch replaces", []any{lai(1, 1, 2), lai(2, 2, 3)}, []int32{2, 3}},
		{"an older request logged later does not", []any{lai(2, 2, 3), lai(1, 1, 2)}, []int32{2, 3}},
		{"the same epoch again replaces", []any{lai(2, 2, 3), lai(2, 3, 1)}, []int32{3, 1}},
		{"a request without replicas says nothing", []any{lai(1, 1, 2), lai(3)}, []int32{1, 2}},
		{"a completed deletion forgets", []any{lai(4, 1, 2), step(history.DeletionCompleted)}, nil},
		{"the next incarnation counts from 0", []any{lai(4, 1, 2), step(history.DeletionCompleted), lai(0, 3)}, []int32{3}},
		{"a deletion only begun keeps the set", []any{lai(4, 1, 2), step(history.DeletionStarted), lai(0, 3)}, []int32{1, 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newReplicaTracker()
			for _, s := range c.steps {
				switch s := s.(type) {
				case *history.Control:
					r.leaderAndIsr(s)
				case *history.TopicDeletion:
					r.deleted(s)
				}
			}
			if got := r.of(tp); !reflect.DeepEqual(got, c.want) {
				t.Errorf("replicas %v, want %v", got, c.want)
			}
			if got, ok := r.all()[tp]; ok != (c.want != nil) || !reflect.DeepEqual(got, c.want) {
				t.Errorf("all: %v (%v), want %v", got, ok, c.want)
			}
		})
	}
}
