// Package zkdata owns the ZooKeeper layout of ZooKeeper-mode Kafka: the znode
// paths and the exact JSON each znode holds (core/.../zk/ZkData.scala). Both
// the controller and the broker encode and decode znodes only through it, so a
// checker or a future adapter for a real Kafka cluster reads the same bytes.
//
// It must not talk to ZooKeeper itself; it is pure data. Decoders never panic
// and return an error naming the path on malformed input (a znode is input
// from the network like any other).
package zkdata

import (
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Paths of the znodes the node program reads and writes.
const (
	ControllerPath         = "/controller"
	ControllerEpochPath    = "/controller_epoch"
	BrokersPath            = "/brokers"
	BrokerIDsPath          = "/brokers/ids"
	TopicsPath             = "/brokers/topics"
	AdminPath              = "/admin"
	ReassignPartitionsPath = "/admin/reassign_partitions"
	PreferredElectionPath  = "/admin/preferred_replica_election"
	ISRChangePath          = "/isr_change_notification"
	ProducerIDBlockPath    = "/latest_producer_id_block"
	ISRChangePrefix        = "isr_change_"
	// DeleteTopicsPath holds one child per topic asked to be deleted
	// (DeleteTopicsZNode); the controller removes it when the topic is gone.
	DeleteTopicsPath = "/admin/delete_topics"
	// TopicConfigsPath holds the topics' config overrides
	// (ConfigEntityTypeZNode for topics); the node writes none, but a
	// deletion removes the topic's entry as Kafka does.
	TopicConfigsPath = "/config/topics"
)

// PersistentPaths are created (empty) at start-up if missing, as
// KafkaZkClient.createTopLevelPaths does.
var PersistentPaths = []string{BrokersPath, BrokerIDsPath, TopicsPath, AdminPath, DeleteTopicsPath, ISRChangePath}

// BrokerPath is /brokers/ids/<id>.
func BrokerPath(id int32) string { return BrokerIDsPath + "/" + strconv.Itoa(int(id)) }

// TopicPath is /brokers/topics/<t>.
func TopicPath(topic string) string { return TopicsPath + "/" + topic }

// PartitionsPath is /brokers/topics/<t>/partitions.
func PartitionsPath(topic string) string { return TopicPath(topic) + "/partitions" }

// PartitionPath is /brokers/topics/<t>/partitions/<p>.
func PartitionPath(topic string, p int32) string {
	return PartitionsPath(topic) + "/" + strconv.Itoa(int(p))
}

// PartitionStatePath is /brokers/topics/<t>/partitions/<p>/state.
func PartitionStatePath(topic string, p int32) string { return PartitionPath(topic, p) + "/state" }

// DeleteTopicPath is /admin/delete_topics/<t>: its creation asks the
// controller to delete topic t.
func DeleteTopicPath(topic string) string { return DeleteTopicsPath + "/" + topic }

// TopicConfigPath is /config/topics/<t>.
func TopicConfigPath(topic string) string { return TopicConfigsPath + "/" + topic }

// TimestampString renders a time the way Kafka stores it: milliseconds since
// the epoch as a decimal string.
func TimestampString(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// Controller is the JSON of /controller.
type Controller struct {
	Version   int    `json:"version"`
	BrokerID  int32  `json:"brokerid"`
	Timestamp string `json:"timestamp"`
}

// EncodeController returns /controller's bytes for broker id.
func EncodeController(id int32, now time.Time) []byte {
	b, _ := json.Marshal(Controller{Version: 1, BrokerID: id, Timestamp: TimestampString(now)})
	return b
}

// DecodeController parses /controller. Kafka 0.8 stored a bare integer; accept
// that too, as KafkaZkClient.getControllerId does.
func DecodeController(data []byte) (int32, error) {
	s := strings.TrimSpace(string(data))
	if n, err := strconv.ParseInt(s, 10, 32); err == nil {
		return int32(n), nil
	}
	var c Controller
	if err := strictUnmarshal(data, &c); err != nil {
		return -1, fmt.Errorf("%s: %w", ControllerPath, err)
	}
	if c.BrokerID < 0 {
		return -1, fmt.Errorf("%s: negative brokerid %d", ControllerPath, c.BrokerID)
	}
	return c.BrokerID, nil
}

// EncodeControllerEpoch returns /controller_epoch's bytes: a decimal string.
func EncodeControllerEpoch(epoch int32) []byte { return []byte(strconv.Itoa(int(epoch))) }

// DecodeControllerEpoch parses /controller_epoch.
func DecodeControllerEpoch(data []byte) (int32, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 32)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s: malformed epoch %q", ControllerEpochPath, truncate(data))
	}
	return int32(n), nil
}

// BrokerRegistration is the JSON of /brokers/ids/<id> (version 4).
type BrokerRegistration struct {
	Version   int      `json:"version"`
	Host      string   `json:"host"`
	Port      int32    `json:"port"`
	JMXPort   int      `json:"jmx_port"`
	Timestamp string   `json:"timestamp"`
	Endpoints []string `json:"endpoints"`
	Rack      *string  `json:"rack,omitempty"`
}

// EncodeBroker returns /brokers/ids/<id>'s bytes.
func EncodeBroker(host string, port int32, now time.Time) []byte {
	b, _ := json.Marshal(BrokerRegistration{
		Version: 4, Host: host, Port: port, JMXPort: -1,
		Timestamp: TimestampString(now),
		Endpoints: []string{"PLAINTEXT://" + net.JoinHostPort(host, strconv.Itoa(int(port)))},
	})
	return b
}

// DecodeBroker parses /brokers/ids/<id>. Host and port come from the first
// PLAINTEXT endpoint when present (version 2+ writes host null for non
// plaintext listeners), else from host/port.
func DecodeBroker(id int32, data []byte) (BrokerRegistration, error) {
	var r BrokerRegistration
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("%s: %w", BrokerPath(id), err)
	}
	for _, ep := range r.Endpoints {
		rest, ok := strings.CutPrefix(ep, "PLAINTEXT://")
		if !ok {
			continue
		}
		h, p, err := net.SplitHostPort(rest)
		if err != nil {
			return r, fmt.Errorf("%s: endpoint %q: %w", BrokerPath(id), ep, err)
		}
		port, err := strconv.ParseInt(p, 10, 32)
		if err != nil {
			return r, fmt.Errorf("%s: endpoint %q: bad port", BrokerPath(id), ep)
		}
		r.Host, r.Port = h, int32(port)
		break
	}
	if r.Host == "" || r.Port <= 0 {
		return r, fmt.Errorf("%s: no usable PLAINTEXT endpoint in %q", BrokerPath(id), truncate(data))
	}
	return r, nil
}

// TopicAssignment is the JSON of /brokers/topics/<t> (version 2).
type TopicAssignment struct {
	Version    int                `json:"version"`
	Partitions map[string][]int32 `json:"partitions"`
	// Adding/RemovingReplicas (KIP-455): the replicas a reassignment in
	// progress adds to and removes from the partition's assignment.
	AddingReplicas   map[string][]int32 `json:"adding_replicas,omitempty"`
	RemovingReplicas map[string][]int32 `json:"removing_replicas,omitempty"`
}

// EncodeTopic returns /brokers/topics/<t>'s bytes for an assignment.
func EncodeTopic(assignment map[int32][]int32) []byte {
	return EncodeTopicReassigning(assignment, nil, nil)
}

// EncodeTopicReassigning is EncodeTopic for a topic with partitions being
// reassigned (TopicZNode.encode): adding and removing name, per partition,
// the replicas of its assignment that a reassignment adds and removes;
// partitions with neither are left out of both.
func EncodeTopicReassigning(assignment, adding, removing map[int32][]int32) []byte {
	t := TopicAssignment{Version: 2, Partitions: map[string][]int32{}}
	for p, r := range assignment {
		t.Partitions[strconv.Itoa(int(p))] = r
	}
	byName := func(m map[int32][]int32) map[string][]int32 {
		var out map[string][]int32
		for p, r := range m {
			if len(r) == 0 {
				continue
			}
			if out == nil {
				out = map[string][]int32{}
			}
			out[strconv.Itoa(int(p))] = r
		}
		return out
	}
	t.AddingReplicas, t.RemovingReplicas = byName(adding), byName(removing)
	b, _ := json.Marshal(t)
	return b
}

// DecodeTopic parses /brokers/topics/<t> into partition → replicas.
func DecodeTopic(topic string, data []byte) (map[int32][]int32, error) {
	var t TopicAssignment
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", TopicPath(topic), err)
	}
	out := make(map[int32][]int32, len(t.Partitions))
	for ps, replicas := range t.Partitions {
		p, err := strconv.ParseInt(ps, 10, 32)
		if err != nil || p < 0 {
			return nil, fmt.Errorf("%s: bad partition %q", TopicPath(topic), ps)
		}
		if len(replicas) == 0 {
			return nil, fmt.Errorf("%s: partition %d has no replicas", TopicPath(topic), p)
		}
		out[int32(p)] = replicas
	}
	return out, nil
}

// DecodeTopicReassigning parses the adding and removing replicas of
// /brokers/topics/<t>: partition → replicas, for the partitions a
// reassignment is moving (TopicZNode.decode's ReplicaAssignment).
func DecodeTopicReassigning(topic string, data []byte) (adding, removing map[int32][]int32, err error) {
	var t TopicAssignment
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", TopicPath(topic), err)
	}
	byPartition := func(m map[string][]int32) (map[int32][]int32, error) {
		out := map[int32][]int32{}
		for ps, r := range m {
			p, err := strconv.ParseInt(ps, 10, 32)
			if err != nil || p < 0 {
				return nil, fmt.Errorf("%s: bad partition %q", TopicPath(topic), ps)
			}
			out[int32(p)] = r
		}
		return out, nil
	}
	if adding, err = byPartition(t.AddingReplicas); err != nil {
		return nil, nil, err
	}
	if removing, err = byPartition(t.RemovingReplicas); err != nil {
		return nil, nil, err
	}
	return adding, removing, nil
}

// PartitionState is the JSON of .../partitions/<p>/state (LeaderIsrAndControllerEpoch).
type PartitionState struct {
	Version         int     `json:"version"`
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	ControllerEpoch int32   `json:"controller_epoch"`
	ISR             []int32 `json:"isr"`
}

// EncodePartitionState returns the state znode's bytes.
func EncodePartitionState(s PartitionState) []byte {
	s.Version = 1
	if s.ISR == nil {
		s.ISR = []int32{}
	}
	b, _ := json.Marshal(s)
	return b
}

// DecodePartitionState parses a state znode.
func DecodePartitionState(topic string, p int32, data []byte) (PartitionState, error) {
	var s PartitionState
	if err := strictUnmarshal(data, &s); err != nil {
		return s, fmt.Errorf("%s: %w", PartitionStatePath(topic, p), err)
	}
	if len(s.ISR) == 0 {
		return s, fmt.Errorf("%s: empty isr", PartitionStatePath(topic, p))
	}
	return s, nil
}

// Reassignment is the JSON of /admin/reassign_partitions.
type Reassignment struct {
	Version    int                     `json:"version"`
	Partitions []ReassignmentPartition `json:"partitions"`
}

// ReassignmentPartition is one entry of a Reassignment.
type ReassignmentPartition struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
}

// EncodeReassignment returns /admin/reassign_partitions's bytes.
func EncodeReassignment(parts []ReassignmentPartition) []byte {
	b, _ := json.Marshal(Reassignment{Version: 1, Partitions: parts})
	return b
}

// DecodeReassignment parses /admin/reassign_partitions.
func DecodeReassignment(data []byte) ([]ReassignmentPartition, error) {
	var r Reassignment
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", ReassignPartitionsPath, err)
	}
	for _, p := range r.Partitions {
		if p.Topic == "" || p.Partition < 0 || len(p.Replicas) == 0 {
			return nil, fmt.Errorf("%s: bad entry %+v", ReassignPartitionsPath, p)
		}
	}
	return r.Partitions, nil
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

func (tp TopicPartition) String() string { return tp.Topic + "-" + strconv.Itoa(int(tp.Partition)) }

// SortTopicPartitions orders tps by topic, then partition, so requests and
// logs are deterministic.
func SortTopicPartitions(tps []TopicPartition) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
}

// EncodeTopicPartitions returns the JSON used by /admin/preferred_replica_election
// and by ISR change notifications: {"version":1,"partitions":[{topic,partition}]}.
func EncodeTopicPartitions(tps []TopicPartition) []byte {
	b, _ := json.Marshal(struct {
		Version    int              `json:"version"`
		Partitions []TopicPartition `json:"partitions"`
	}{1, tps})
	return b
}

// DecodeTopicPartitions parses the JSON written by EncodeTopicPartitions.
func DecodeTopicPartitions(path string, data []byte) ([]TopicPartition, error) {
	var v struct {
		Partitions []TopicPartition `json:"partitions"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v.Partitions, nil
}

// ProducerIDBlock is the JSON of /latest_producer_id_block
// (ProducerIdBlockZNode, version 1): the last block of producer ids a broker
// claimed, its bounds as decimal strings.
type ProducerIDBlock struct {
	Version    int    `json:"version"`
	Broker     int32  `json:"broker"`
	BlockStart string `json:"block_start"`
	BlockEnd   string `json:"block_end"`
}

// EncodeProducerIDBlock returns /latest_producer_id_block's bytes for the
// block [start, end] claimed by broker.
func EncodeProducerIDBlock(broker int32, start, end int64) []byte {
	b, _ := json.Marshal(ProducerIDBlock{Version: 1, Broker: broker,
		BlockStart: strconv.FormatInt(start, 10), BlockEnd: strconv.FormatInt(end, 10)})
	return b
}

// DecodeProducerIDBlockEnd parses /latest_producer_id_block and returns the
// last id of the block it records: the next claim starts after it.
func DecodeProducerIDBlockEnd(data []byte) (int64, error) {
	var z ProducerIDBlock
	if err := strictUnmarshal(data, &z); err != nil {
		return 0, fmt.Errorf("%s: %w", ProducerIDBlockPath, err)
	}
	end, err := strconv.ParseInt(z.BlockEnd, 10, 64)
	if err != nil || end < 0 {
		return 0, fmt.Errorf("%s: malformed block_end %q", ProducerIDBlockPath, z.BlockEnd)
	}
	return end, nil
}

func strictUnmarshal(data []byte, v any) error {
	if len(data) == 0 {
		return fmt.Errorf("empty znode")
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("malformed JSON %q: %w", truncate(data), err)
	}
	return nil
}

func truncate(b []byte) string {
	if len(b) > 120 {
		return string(b[:120]) + "..."
	}
	return string(b)
}
