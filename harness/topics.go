package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/internal/zkcall"
	"github.com/zkchaos/zkchaos/zklayout"
	"github.com/zkchaos/zkchaos/zklayout/zkio"
)

var _ faults.Topics = (*failpointWorld)(nil)

// topicCallWithin bounds one ZooKeeper call of the topic admin.
const topicCallWithin = 10 * time.Second

// RecreatableTopic is the run's spread topic: no client uses it, so its
// deletion moves no checker's record of what was produced.
func (f *failpointWorld) RecreatableTopic() (string, bool) { return f.spread, f.spread != "" }

// RequestTopicDeletion reads topic's assignment and asks the controller to
// delete it, as kafka-topics.sh --delete --zookeeper did.
func (f *failpointWorld) RequestTopicDeletion(ctx context.Context, topic string) (map[int32][]int, error) {
	a, err := zkcall.Do(ctx, topicCallWithin, func() (zklayout.Assignment, error) { return zkio.ReadAssignment(f.conn, topic) })
	if err != nil {
		return nil, err
	}
	if _, err := zkcall.Do(ctx, topicCallWithin, func() (struct{}, error) {
		return struct{}{}, zkio.RequestTopicDeletion(f.conn, topic)
	}); err != nil {
		return nil, err
	}
	return a, nil
}

// TopicExists reports whether /brokers/topics/<topic> exists.
func (f *failpointWorld) TopicExists(ctx context.Context, topic string) (bool, error) {
	return zkcall.Do(ctx, topicCallWithin, func() (bool, error) {
		ok, _, err := f.conn.Exists(zklayout.TopicPath(topic))
		return ok, err
	})
}

// CreateTopic writes /brokers/topics/<topic> with assignment.
func (f *failpointWorld) CreateTopic(ctx context.Context, topic string, assignment map[int32][]int) error {
	_, err := zkcall.Do(ctx, topicCallWithin, func() (struct{}, error) {
		return struct{}{}, zkio.CreateTopic(f.conn, topic, assignment)
	})
	if err != nil {
		return fmt.Errorf("create topic %s again: %w", topic, err)
	}
	return nil
}
