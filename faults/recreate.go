package faults

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/ctxsleep"
	"github.com/zkchaos/zkchaos/nemesis"
)

// DeleteRecreateTopicDoc is delete-recreate-topic's catalogue line.
const DeleteRecreateTopicDoc = "delete a topic no client uses (/admin/delete_topics) while other faults are in force; the heal creates it again at the same name once the controller removed it"

// Topics deletes and creates topics through ZooKeeper's admin znodes, as
// kafka-topics.sh --zookeeper did.
type Topics interface {
	// RecreatableTopic names the topic delete-recreate-topic may delete:
	// one no client produces to or reads (the run's spread topic), so no
	// checker follows its records; ok is false when the run has none.
	RecreatableTopic() (topic string, ok bool)
	// RequestTopicDeletion reads topic's assignment, then writes
	// /admin/delete_topics/<topic>; it returns the assignment read.
	RequestTopicDeletion(ctx context.Context, topic string) (map[int32][]int, error)
	// TopicExists reports whether /brokers/topics/<topic> exists.
	TopicExists(ctx context.Context, topic string) (bool, error)
	// CreateTopic writes /brokers/topics/<topic> with assignment.
	CreateTopic(ctx context.Context, topic string, assignment map[int32][]int) error
}

// recreateWithin bounds how long the heal waits for the controller to
// finish a deletion: a replica on a broker that is down holds it back
// until the broker returns (TopicDeletionManager's ineligible topics).
const recreateWithin = 60 * time.Second

// topicRecreate is delete-recreate-topic: a topic's deletion asked for at
// the step's start, carried out by the controller while the step (and any
// fault beside it) holds, and the topic created again at the same name,
// with the same assignment, when the step heals. The new incarnation's
// partitions start at leader epoch 0 and offset 0, which every checker
// must take as a new partition.
type topicRecreate struct {
	topics Topics
	rec    *nemesis.Recorder
	within time.Duration
}

func (f *topicRecreate) inject(ctx context.Context, _ int) (Heal, error) {
	k := DeleteRecreateTopic
	topic, ok := f.topics.RecreatableTopic()
	if !ok {
		return nil, fmt.Errorf("%s: the run has no topic without clients to delete", k)
	}
	assign, err := f.topics.RequestTopicDeletion(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k, err)
	}
	id := f.rec.StartFault(history.Fault{Name: string(k), Detail: fmt.Sprintf("deletion of topic %s asked for (assignment %s)", topic, assignmentString(assign))})
	return func(ctx context.Context) error {
		err := f.recreate(ctx, topic, assign)
		detail := fmt.Sprintf("topic %s deleted and created again at the same name", topic)
		if err != nil {
			detail = ""
		}
		f.rec.StopDetail(id, string(k), nil, detail, err)
		return err
	}, nil
}

// recreate waits, within f.within, until the controller removed topic, then
// creates it again with assign.
func (f *topicRecreate) recreate(ctx context.Context, topic string, assign map[int32][]int) error {
	begin := time.Now()
	wctx, cancel := context.WithTimeout(ctx, f.within)
	defer cancel()
	for {
		there, err := f.topics.TopicExists(wctx, topic)
		if err == nil && !there {
			break
		}
		if !ctxsleep.For(wctx, 100*time.Millisecond) {
			return fmt.Errorf("%s: the controller had not deleted topic %s %s after the heal began; not created again",
				DeleteRecreateTopic, topic, time.Since(begin).Round(time.Millisecond))
		}
	}
	if err := f.topics.CreateTopic(ctx, topic, assign); err != nil {
		return fmt.Errorf("%s: %w", DeleteRecreateTopic, err)
	}
	return nil
}

// assignmentString renders an assignment as "0:1,2 1:2,3".
func assignmentString(a map[int32][]int) string {
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(a)) {
		rs := make([]string, len(a[p]))
		for i, r := range a[p] {
			rs[i] = fmt.Sprint(r)
		}
		parts = append(parts, fmt.Sprintf("%d:%s", p, strings.Join(rs, ",")))
	}
	return strings.Join(parts, " ")
}
