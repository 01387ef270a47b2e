package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/rundir"
)

// layout is a topic the set-up creates: its name and each partition's
// replicas, the first of them the preferred leader.
type layout struct {
	topic  string
	assign [][]int
}

// layouts are the topics of a run of c (after defaults): the workload
// topic and, with SpreadTopic, the spread topic.
func (c RunConfig) layouts() []layout {
	work := layout{topic: c.Topic}
	for p := 0; p < int(c.Partitions); p++ {
		work.assign = append(work.assign, rotation(c.Nodes, c.RF, p))
	}
	out := []layout{work}
	if c.SpreadTopic != "" {
		spread := layout{topic: c.SpreadTopic}
		for p := 0; p < c.Nodes; p++ {
			spread.assign = append(spread.assign, rotation(c.Nodes, rundir.SpreadRF, p))
		}
		out = append(out, spread)
	}
	return out
}

// createTopics writes /brokers/topics/<topic> for each of the run's
// layouts, as ZooKeeper-era admin tools did; the controller's watch does
// the rest.
func createTopics(ctx context.Context, conn *zk.Conn, cfg RunConfig) error {
	acl := zk.WorldACL(zk.PermAll)
	for _, p := range []string{"/brokers", "/brokers/topics"} {
		if _, err := conn.Create(p, nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	for _, l := range cfg.layouts() {
		parts := map[string][]int{}
		for p, reps := range l.assign {
			parts[strconv.Itoa(p)] = reps
		}
		b, _ := json.Marshal(map[string]any{"version": 2, "partitions": parts})
		if _, err := conn.Create("/brokers/topics/"+l.topic, b, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create topic %s: %w", l.topic, err)
		}
	}
	return nil
}

// rotation is partition p's replicas in a topic of replication factor rf
// on brokers 1..nodes: rf brokers in a row from p+1, wrapping, so
// leadership starts spread (the round-robin assignment of ZooKeeper-era
// admin tools, without their random start).
func rotation(nodes, rf, p int) []int {
	var reps []int
	for r := 0; r < rf; r++ {
		reps = append(reps, (p+r)%nodes+1)
	}
	return reps
}
