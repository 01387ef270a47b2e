package compat

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// groupTopic has three partitions led by three different nodes, so a group
// reads from every broker while its coordinator is one of them.
const groupTopic = "groups"

// consumerGroups: kcat's balanced consumer (-G, librdkafka's KafkaConsumer)
// and kafka-python's group consumer each find the coordinator (the first
// look-up creates __consumer_offsets), join, read every record of the topic
// from the earliest offset and commit; kafka-python reads its commits back.
func (e *env) consumerGroups(t *testing.T) {
	assign := map[int32][]int32{0: {1, 2, 3}, 1: {2, 3, 1}, 2: {3, 1, 2}}
	if _, err := e.zk.Create(topicPath(groupTopic), encodeTopic(assign), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create %s: %v", groupTopic, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		r, err := e.metadata(groupTopic)
		ok := err == nil && len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 3
		for i := 0; ok && i < 3; i++ {
			p := r.Topics[0].Partitions[i]
			ok = p.ErrorCode == 0 && p.Leader > 0
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no leaders within 60s", groupTopic)
		}
		time.Sleep(200 * time.Millisecond)
	}
	vals := values("grp", 90)
	// No -p: librdkafka's partitioner spreads the keyless records.
	e.kcatRun(t, strings.Join(vals, "\n")+"\n", "-P", "-t", groupTopic, "-X", "acks=all")

	t.Run("kcat -G", func(t *testing.T) {
		expectOnce(t, "kcat -G", e.kcatGroup(t, e.bootstrap, "kcat-group", groupTopic, len(vals)), vals)
	})
	t.Run("kafka-python group", func(t *testing.T) {
		r := e.py(t, "group_consume", "topic="+groupTopic, "group=py-group", "count="+strconv.Itoa(len(vals)))
		got := map[int64]string{}
		for i, rec := range r.Records {
			got[int64(i)] = rec[1].(string)
		}
		expectOnce(t, "kafka-python group", got, vals)
		var sum int64
		for _, off := range r.Committed {
			sum += off
		}
		if len(r.Committed) != 3 || sum != int64(len(vals)) {
			t.Errorf("kafka-python committed %v (sum %d), want the end of all 3 partitions (sum %d)", r.Committed, sum, len(vals))
		}
	})
}

// kcatGroup consumes n values of topic with kcat's balanced consumer as
// member of group, keyed by the order they came in.
func (e *env) kcatGroup(t *testing.T, bootstrap, group, topic string, n int) map[int64]string {
	t.Helper()
	out, err := e.run(2*time.Minute, "", e.kcat, "-b", bootstrap, "-G", group, "-X", "auto.offset.reset=earliest",
		"-c", strconv.Itoa(n), "-q", "-f", "%p %s\n", topic)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]string{}
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		_, v, _ := strings.Cut(line, " ")
		got[int64(i)] = v
	}
	return got
}
