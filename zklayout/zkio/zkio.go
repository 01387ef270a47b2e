// Package zkio reads and writes the znodes package zklayout describes
// through go-zookeeper: a typed read decodes with zklayout's codecs and names
// the znode in its errors, a typed write encodes the way the ZooKeeper-era
// admin tools did. It owns no format (zklayout does) and decides nothing.
package zkio

import (
	"fmt"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/zklayout"
)

// Getter reads one znode. *zk.Conn is one; a caller that bounds each call
// in time, or syncs first, hands a wrapper.
type Getter interface {
	Get(path string) ([]byte, *zk.Stat, error)
}

// Creator creates one znode. *zk.Conn is one.
type Creator interface {
	Create(path string, data []byte, flags int32, acl []zk.ACL) (string, error)
}

// GetDeleter reads and deletes znodes. *zk.Conn is one.
type GetDeleter interface {
	Getter
	Delete(path string, version int32) error
}

// ReadPartitionState reads and decodes a partition's state znode, with its
// stat (Mzxid: the write that set it).
func ReadPartitionState(g Getter, topic string, partition int32) (zklayout.PartitionState, *zk.Stat, error) {
	p := zklayout.StatePath(topic, partition)
	b, st, err := g.Get(p)
	if err != nil {
		return zklayout.PartitionState{}, nil, fmt.Errorf("read %s: %w", p, err)
	}
	s, err := zklayout.DecodePartitionState(p, b)
	return s, st, err
}

// ReadAssignment reads and decodes topic's assignment znode.
func ReadAssignment(g Getter, topic string) (zklayout.Assignment, error) {
	p := zklayout.TopicPath(topic)
	b, _, err := g.Get(p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return zklayout.DecodeAssignment(p, b)
}

// ReadController reads the broker id /controller names.
func ReadController(g Getter) (int, error) {
	b, _, err := g.Get(zklayout.ControllerPath)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", zklayout.ControllerPath, err)
	}
	return zklayout.DecodeController(b)
}

// CreateTopic writes topic's assignment znode, as ZooKeeper-era admin
// tools did (AdminZkClient.createTopicWithAssignment); the controller's
// watch on /brokers/topics does the rest. An existing topic is an error
// wrapping zk.ErrNodeExists.
func CreateTopic(c Creator, topic string, a zklayout.Assignment) error {
	b, err := zklayout.EncodeAssignment(a)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	if _, err := c.Create(zklayout.TopicPath(topic), b, 0, zk.WorldACL(zk.PermAll)); err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// RequestPreferredElection writes /admin/preferred_replica_election for
// partitions of topic, as kafka-preferred-replica-election.sh did; the
// controller deletes the znode once it ran the election. A request already
// pending is an error wrapping zk.ErrNodeExists (the controller takes one
// at a time).
func RequestPreferredElection(c Creator, topic string, partitions []int32) error {
	b, err := zklayout.EncodePreferredElection(topic, partitions)
	if err != nil {
		return err
	}
	if _, err := c.Create(zklayout.PreferredElectionPath, b, 0, zk.WorldACL(zk.PermAll)); err != nil {
		return fmt.Errorf("write %s: %w", zklayout.PreferredElectionPath, err)
	}
	return nil
}

// RequestTopicDeletion writes /admin/delete_topics/<topic>, as
// kafka-topics.sh --delete --zookeeper did
// (AdminZkClient.deleteTopic); the controller removes it with the topic's
// znodes once every replica deleted its log. A deletion already pending is
// an error wrapping zk.ErrNodeExists.
func RequestTopicDeletion(c Creator, topic string) error {
	if _, err := c.Create(zklayout.DeleteTopicPath(topic), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		return fmt.Errorf("write %s: %w", zklayout.DeleteTopicPath(topic), err)
	}
	return nil
}

// RequestReassignment writes /admin/reassign_partitions, as
// kafka-reassign-partitions.sh did; the controller deletes it once every
// listed partition has its new replicas. A reassignment already pending is
// an error wrapping zk.ErrNodeExists.
func RequestReassignment(c Creator, rs []zklayout.Reassignment) error {
	b, err := zklayout.EncodeReassignment(rs)
	if err != nil {
		return err
	}
	if _, err := c.Create(zklayout.ReassignPath, b, 0, zk.WorldACL(zk.PermAll)); err != nil {
		return fmt.Errorf("write %s: %w", zklayout.ReassignPath, err)
	}
	return nil
}

// ResignController deletes /controller if it names broker id, at the version
// read (so a successor's znode is never the one deleted), as an operator
// forcing a controller election did with zkCli's delete: every broker's
// watch fires and the first to create the znode again is the next
// controller. The controller that lost it learns so through its own watch,
// handled on its event thread. A /controller naming another broker, or
// none, is an error saying so.
func ResignController(c GetDeleter, id int) error {
	b, st, err := c.Get(zklayout.ControllerPath)
	if err != nil {
		return fmt.Errorf("resign controller %d: read %s: %w", id, zklayout.ControllerPath, err)
	}
	now, err := zklayout.DecodeController(b)
	if err != nil {
		return fmt.Errorf("resign controller %d: %w", id, err)
	}
	if now != id {
		return fmt.Errorf("resign controller %d: %s names broker %d", id, zklayout.ControllerPath, now)
	}
	if err := c.Delete(zklayout.ControllerPath, st.Version); err != nil {
		return fmt.Errorf("resign controller %d: delete %s: %w", id, zklayout.ControllerPath, err)
	}
	return nil
}
