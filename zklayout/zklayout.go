// Package zklayout owns, for the harness, the layout of ZooKeeper-mode
// Kafka's znodes (Kafka 2.6.3's kafka.zk.ZkData): their paths, and the JSON
// of a partition's state, a topic's assignment, the controller and
// controller-epoch znodes and the admin requests (reassignment, preferred
// replica election) that ZooKeeper-era operator tools wrote. Harness,
// workloads, observer, nemesis, checkers and reports name a znode or
// decode one through it, so the format has one reader on this side.
//
// It is a format package and imports only the standard library, so the
// checkers and reports name znodes without linking a ZooKeeper client;
// zklayout/zkio reads and writes them through go-zookeeper. It never decides
// anything about the cluster.
// It must not touch the node program's Go packages (the harness never
// imports node/): the node writes these znodes from its own code, and the
// harness reading them back through an independent decoder is what lets a
// checker catch the node writing the wrong thing.
package zklayout

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Znode paths (ZkData's *ZNode.path).
const (
	ControllerPath        = "/controller"       // ControllerZNode: the elected controller, ephemeral
	ControllerEpochPath   = "/controller_epoch" // ControllerEpochZNode: its version fences controller writes
	BrokersPath           = "/brokers"          // BrokersZNode
	BrokerIDsPath         = "/brokers/ids"      // BrokerIdsZNode: one ephemeral child per registered broker
	TopicsPath            = "/brokers/topics"   // TopicsZNode: one child per topic, its assignment
	AdminPath             = "/admin"            // AdminZNode
	ReassignPath          = "/admin/reassign_partitions"
	PreferredElectionPath = "/admin/preferred_replica_election"
	// DeleteTopicsPath holds one child per topic to delete
	// (DeleteTopicsZNode); the controller removes the child with the topic.
	DeleteTopicsPath = "/admin/delete_topics"
	// ISRChangeNotificationPath is where partition leaders tell the
	// controller of ISR changes (IsrChangeNotificationZNode); the
	// controller deletes each child once it has taken it in.
	ISRChangeNotificationPath = "/isr_change_notification"
)

// BrokerPath is broker id's registration znode (BrokerIdZNode.path); its
// czxid is the broker epoch.
func BrokerPath(id int) string { return BrokerIDsPath + "/" + strconv.Itoa(id) }

// ParseBrokerID reads a child name of /brokers/ids as a broker id.
func ParseBrokerID(child string) (int32, error) {
	n, err := strconv.ParseInt(child, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s child %q is not a broker id: %w", BrokerIDsPath, child, err)
	}
	return int32(n), nil
}

// TopicPath is a topic's assignment znode (TopicZNode.path).
func TopicPath(topic string) string { return TopicsPath + "/" + topic }

// DeleteTopicPath is the znode whose creation asks the controller to
// delete topic (DeleteTopicsTopicZNode.path).
func DeleteTopicPath(topic string) string { return DeleteTopicsPath + "/" + topic }

// StatePath is a partition's state znode (TopicPartitionStateZNode.path).
func StatePath(topic string, partition int32) string {
	return TopicPath(topic) + "/partitions/" + strconv.FormatInt(int64(partition), 10) + "/state"
}

// ParseStatePath is StatePath's inverse: ok is false when p is not a
// partition's state znode.
func ParseStatePath(p string) (topic string, partition int32, ok bool) {
	rest, ok := strings.CutPrefix(p, TopicsPath+"/")
	if !ok {
		return "", 0, false
	}
	rest, ok = strings.CutSuffix(rest, "/state")
	if !ok {
		return "", 0, false
	}
	topic, part, ok := strings.Cut(rest, "/partitions/")
	if !ok || topic == "" || strings.Contains(topic, "/") {
		return "", 0, false
	}
	n, err := strconv.ParseInt(part, 10, 32)
	if err != nil || n < 0 {
		return "", 0, false
	}
	return topic, int32(n), true
}

// PartitionState is a partition state znode's content
// (TopicPartitionStateZNode: LeaderIsrAndControllerEpoch). Leader is -1
// when the partition has none.
type PartitionState struct {
	Leader          int   `json:"leader"`
	LeaderEpoch     int   `json:"leader_epoch"`
	ControllerEpoch int   `json:"controller_epoch"`
	ISR             []int `json:"isr"`
}

// DecodePartitionState decodes the data b of state znode p. Like
// TopicPartitionStateZNode.decode, which reads every field with to[Int],
// it refuses data that lacks one.
func DecodePartitionState(p string, b []byte) (PartitionState, error) {
	var v struct {
		Leader          *int  `json:"leader"`
		LeaderEpoch     *int  `json:"leader_epoch"`
		ControllerEpoch *int  `json:"controller_epoch"`
		ISR             []int `json:"isr"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return PartitionState{}, fmt.Errorf("malformed partition state %s %q: %w", p, b, err)
	}
	var missing []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"leader", v.Leader != nil}, {"leader_epoch", v.LeaderEpoch != nil}, {"controller_epoch", v.ControllerEpoch != nil}, {"isr", v.ISR != nil}} {
		if !f.set {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return PartitionState{}, fmt.Errorf("malformed partition state %s %q: no %s", p, b, strings.Join(missing, ", "))
	}
	return PartitionState{Leader: *v.Leader, LeaderEpoch: *v.LeaderEpoch, ControllerEpoch: *v.ControllerEpoch, ISR: v.ISR}, nil
}

// DecodeController reads the broker id /controller names
// (ControllerZNode.decode).
func DecodeController(b []byte) (int, error) {
	var v struct {
		BrokerID *int `json:"brokerid"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return 0, fmt.Errorf("malformed %s %q: %w", ControllerPath, b, err)
	}
	if v.BrokerID == nil {
		return 0, fmt.Errorf("malformed %s %q: no brokerid", ControllerPath, b)
	}
	return *v.BrokerID, nil
}

// DecodeControllerEpoch reads /controller_epoch, a decimal integer
// (ControllerEpochZNode.decode).
func DecodeControllerEpoch(b []byte) (int32, error) {
	n, err := strconv.ParseInt(string(b), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("malformed %s %q: %w", ControllerEpochPath, b, err)
	}
	return int32(n), nil
}

// Assignment is a topic's partition → replicas, the first replica the
// preferred leader.
type Assignment map[int32][]int

// DecodeAssignment reads the partition → replicas map of topic znode p
// (TopicZNode.decode; the adding and removing replicas of a reassignment in
// flight are not read).
func DecodeAssignment(p string, b []byte) (Assignment, error) {
	var v struct {
		Partitions map[string][]int `json:"partitions"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("malformed %s %q: %w", p, b, err)
	}
	out := Assignment{}
	for k, r := range v.Partitions {
		n, err := strconv.ParseInt(k, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("malformed %s: partition %q", p, k)
		}
		out[int32(n)] = r
	}
	return out, nil
}

// EncodeAssignment is a topic znode's data for a (TopicZNode.encode,
// version 2, with no reassignment in flight).
func EncodeAssignment(a Assignment) ([]byte, error) {
	parts := make(map[string][]int, len(a))
	for p, r := range a {
		if p < 0 || len(r) == 0 {
			return nil, fmt.Errorf("topic assignment: partition %d with replicas %v", p, r)
		}
		parts[strconv.FormatInt(int64(p), 10)] = r
	}
	return json.Marshal(struct {
		Version    int              `json:"version"`
		Partitions map[string][]int `json:"partitions"`
	}{2, parts})
}

// Reassignment is one partition's entry of /admin/reassign_partitions.
type Reassignment struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Replicas  []int  `json:"replicas"`
}

// EncodeReassignment is /admin/reassign_partitions's data
// (ReassignPartitionsZNode.encode, version 1).
func EncodeReassignment(rs []Reassignment) ([]byte, error) {
	if len(rs) == 0 {
		return nil, errors.New("reassignment of no partition")
	}
	return json.Marshal(struct {
		Version    int            `json:"version"`
		Partitions []Reassignment `json:"partitions"`
	}{1, rs})
}

// EncodePreferredElection is /admin/preferred_replica_election's data for
// partitions of topic (PreferredReplicaElectionZNode.encode, version 1).
func EncodePreferredElection(topic string, partitions []int32) ([]byte, error) {
	if len(partitions) == 0 {
		return nil, fmt.Errorf("preferred election of no partition of %s", topic)
	}
	type tp struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
	}
	req := struct {
		Version    int  `json:"version"`
		Partitions []tp `json:"partitions"`
	}{Version: 1}
	for _, p := range partitions {
		req.Partitions = append(req.Partitions, tp{topic, p})
	}
	return json.Marshal(req)
}

// NotifiedPartition is one partition an ISR change notification names.
type NotifiedPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// DecodeISRChangeNotification parses the data of the ISR change
// notification at p (IsrChangeNotificationSequenceZNode, version 1): the
// partitions whose ISR their leader changed since its previous one.
func DecodeISRChangeNotification(p string, b []byte) ([]NotifiedPartition, error) {
	var v struct {
		Version    int                 `json:"version"`
		Partitions []NotifiedPartition `json:"partitions"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%s: ISR change notification: %w", p, err)
	}
	if v.Version != 1 {
		return nil, fmt.Errorf("%s: ISR change notification version %d, want 1", p, v.Version)
	}
	return v.Partitions, nil
}
