package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/broker"
	"github.com/zkchaos/zkchaos/node/dataplane"
	"github.com/zkchaos/zkchaos/node/group"
	"github.com/zkchaos/zkchaos/node/storage"
	"github.com/zkchaos/zkchaos/node/wire"
	"github.com/zkchaos/zkchaos/node/zkdata"
	"github.com/zkchaos/zkchaos/node/zkutil"
)

// groups wires the group coordinator (package group) into the broker, as
// KafkaServer and KafkaApis wire Kafka's GroupCoordinator: its
// __consumer_offsets writes go through the data plane's acks=all append,
// FindCoordinator creates the topic in ZooKeeper on first use, LeaderAndIsr
// and StopReplica load and unload its partitions, and every request it
// answers goes to the event log as a group_request.
type groups struct {
	n     *Node
	coord *group.Coordinator
	h     *group.Handlers

	// sess is the ZooKeeper session, set once it exists (the Kafka
	// listener serves before it does).
	sess atomic.Pointer[zkutil.Session]

	// loads follows this broker's leadership of __consumer_offsets.
	loads *partitionLoads
}

func newGroups(n *Node) *groups {
	g := &groups{n: n}
	cfg := n.cfg
	g.coord = group.New(group.Options{
		Config: group.Config{
			NumPartitions:     cfg.OffsetsTopicPartitions,
			MinSessionTimeout: cfg.GroupMinSessionTimeout, MaxSessionTimeout: cfg.GroupMaxSessionTimeout,
			InitialRebalanceDelay: cfg.GroupInitialRebalanceDelay, NoInitialRebalanceDelay: cfg.GroupInitialRebalanceDelay == 0,
			CommitTimeout: cfg.OffsetsCommitTimeout,
		},
		Log:     groupLog{n.data},
		OnEvent: g.emit,
	})
	g.h = &group.Handlers{C: g.coord, Cluster: g}
	g.loads = newPartitionLoads(func(p, _ int32) { g.coord.BeginLoad(p) }, func(p, _ int32) { g.load(p) }, g.coord.Unload)
	return g
}

// close is GroupCoordinator.shutdown: parked requests end, timers stop.
func (g *groups) close() {
	g.coord.Close()
	g.loads.close()
}

// routes registers the group APIs on the Kafka listener; ApiVersions then
// lists them at these versions.
func (g *groups) routes(s *wire.Server) {
	for _, r := range group.Routes() {
		s.Handle(r.Key, r.Min, r.Max, func(ctx context.Context, info *wire.ConnInfo, hdr wire.RequestHeader, req kmsg.Request) (kmsg.Response, error) {
			clientID := ""
			if hdr.ClientID != nil {
				clientID = *hdr.ClientID
			}
			host := ""
			if info != nil && info.Remote != nil {
				if h, _, err := net.SplitHostPort(info.Remote.String()); err == nil {
					host = "/" + h // as KafkaApis prints an InetAddress
				}
			}
			return g.h.Handle(ctx, clientID, host, req)
		})
	}
}

// emit maps a coordinator event onto the history schema. It runs under the
// coordinator's lock, so it only writes.
func (g *groups) emit(e group.Event) {
	gr := &history.GroupRequest{API: e.API, APIVersion: e.Version, Group: e.Group, Partition: e.Partition,
		Member: e.Member, AssignedMember: e.AssignedMember, Generation: e.GenerationCarried, GroupGeneration: e.GenerationCurrent,
		State: e.State, Leader: e.Leader, ErrorCode: e.Error, Groups: e.Groups}
	if e.InstanceID != nil {
		gr.InstanceID = *e.InstanceID
	}
	if e.API == history.GroupAPIFindCoordinator {
		gr.Coordinator = e.Coordinator
	}
	if c := e.Checked; c != nil {
		gr.Checked = &history.GroupCheck{Generation: c.Generation, Member: c.Member}
	}
	switch e.API {
	case history.GroupAPITxnOffsetCommit:
		pid, epoch := e.ProducerID, e.ProducerEpoch
		gr.TransactionalID, gr.ProducerID, gr.ProducerEpoch = e.TransactionalID, &pid, &epoch
	case history.GroupAPITxnCompletion:
		pid := e.ProducerID
		gr.ProducerID, gr.Commit = &pid, e.Commit
	}
	for _, o := range e.Offsets {
		gr.Offsets = append(gr.Offsets, history.GroupOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, ErrorCode: o.Error})
	}
	for _, m := range e.Members {
		gm := history.GroupMember{MemberID: m.MemberID, ErrorCode: m.Err}
		if m.InstanceID != nil {
			gm.InstanceID = *m.InstanceID
		}
		gr.Members = append(gr.Members, gm)
	}
	g.n.log.Emit(history.Event{Kind: history.KindGroupRequest, Group: gr})
}

// elected is GroupCoordinator.onElection, called once LeaderAndIsr made
// this broker leader of __consumer_offsets partition p: its groups answer
// COORDINATOR_LOAD_IN_PROGRESS until the loader has read the partition.
// As in Kafka 2.6.3 (Partition.makeLeader's isNewLeader) a broker that
// already leads p, at a newer epoch or not, does not load again.
func (g *groups) elected(p int32) { g.loads.elected(p, 0) }

// resigned is GroupCoordinator.onResignation: this broker became a follower
// of p, or StopReplica deleted it.
func (g *groups) resigned(p int32) { g.loads.resigned(p) }

// load is GroupMetadataManager.doLoadGroupsAndOffsets: read the partition
// from its start to its end as it is now. A partition given up since its
// election stays unloaded (FinishLoad ignores it).
func (g *groups) load(p int32) {
	start := time.Now()
	batches, err := g.n.data.ReadLocalBatches(history.TP(dataplane.GroupMetadataTopic, p))
	if err != nil {
		g.n.log.Printf("group coordinator: load %s-%d: %v", dataplane.GroupMetadataTopic, p, err)
	}
	var loaded []group.LoadedRecord
	for _, b := range batches {
		h := b.Header
		if h.IsControl() {
			// A control record that is not a transaction marker ends the
			// producer's pending offsets as an abort would.
			mk := group.LoadedRecord{BatchOffset: h.BaseOffset, ProducerID: h.ProducerID, Transactional: true, Control: true}
			if b.Marker != nil {
				mk.Commit = b.Marker.Commit
			}
			loaded = append(loaded, mk)
			continue
		}
		for _, r := range b.Records {
			loaded = append(loaded, group.LoadedRecord{BatchOffset: r.BatchOffset, Key: r.Key, Value: r.Value,
				ProducerID: h.ProducerID, Transactional: h.IsTransactional()})
		}
	}
	if err := g.coord.FinishLoad(p, loaded); err != nil {
		g.n.log.Printf("group coordinator: load %s-%d: %v", dataplane.GroupMetadataTopic, p, err)
	}
	g.n.log.Printf("group coordinator: loaded %s-%d (%d records) in %s", dataplane.GroupMetadataTopic, p, len(loaded), time.Since(start).Round(time.Millisecond))
}

// PartitionExists implements group.Cluster (MetadataCache.contains).
func (g *groups) PartitionExists(topic string, p int32) bool {
	_, ok := g.n.broker.Metadata.Partition(history.TP(topic, p))
	return ok
}

// OffsetsLeader implements group.Cluster: KafkaApis.getOrCreateInternalTopic
// and the leader look-up of handleFindCoordinatorRequest. A topic not in
// the metadata cache is created (when enough brokers are live) and answers
// not ok, as the LEADER_NOT_AVAILABLE of a topic just created does; so does
// a partition without a live leader.
func (g *groups) OffsetsLeader(ctx context.Context, p int32) (group.Node, bool) {
	return internalTopicLeader(ctx, g.n, g.sess.Load(), "group coordinator", dataplane.GroupMetadataTopic, p, g.n.cfg.OffsetsTopicPartitions, g.n.cfg.OffsetsTopicReplicationFactor)
}

// internalTopicLeader is the leader look-up of partition p of an internal
// topic, which both coordinators make: a topic not in the metadata cache
// is created (createInternalTopic, whose error is logged as who's) and
// answers not ok, as does a partition without a live leader.
func internalTopicLeader(ctx context.Context, n *Node, sess *zkutil.Session, who, topic string, p, partitions int32, rf int) (group.Node, bool) {
	brokers, parts := n.broker.Metadata.Snapshot()
	exists := false
	for tp := range parts {
		if tp.Topic == topic {
			exists = true
			break
		}
	}
	if !exists {
		if err := createInternalTopic(ctx, n, sess, topic, partitions, rf, len(brokers)); err != nil {
			n.log.Printf("%s: %v", who, err)
		}
		return group.Node{}, false
	}
	ps, ok := parts[history.TP(topic, p)]
	if !ok || ps.Leader < 0 {
		return group.Node{}, false
	}
	b, live := brokers[ps.Leader]
	if !live {
		return group.Node{}, false
	}
	return group.Node{ID: b.ID, Host: b.Host, Port: b.Port}, true
}

// createInternalTopic is KafkaApis.createInternalTopic: refused while
// fewer brokers are live than the replication factor; otherwise
// AdminZkClient.createTopic writes the assignment znode (another broker
// may have written it first) and the controller creates the partitions.
// The topic's config znode is not written: nothing in the node program
// reads it.
func createInternalTopic(ctx context.Context, n *Node, sess *zkutil.Session, topic string, partitions int32, rf, live int) error {
	if live < rf {
		return fmt.Errorf("%d live brokers do not meet the replication factor %d of %s", live, rf, topic)
	}
	if sess == nil {
		return errors.New("no ZooKeeper session yet")
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ZKRequestTimeout)
	defer cancel()
	kids, err := zkutil.Call(ctx, sess, func(c *zk.Conn) ([]string, error) {
		k, _, err := c.Children(zkdata.BrokerIDsPath)
		return k, err
	})
	if err != nil {
		return fmt.Errorf("create %s: list brokers: %w", topic, err)
	}
	var ids []int32
	for _, k := range kids {
		if id, err := strconv.ParseInt(k, 10, 32); err == nil {
			ids = append(ids, int32(id))
		}
	}
	assignment, err := assignReplicas(partitions, rf, ids, time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("create %s: %w", topic, err)
	}
	path := zkdata.TopicPath(topic)
	_, err = zkutil.Call(ctx, sess, func(c *zk.Conn) (string, error) {
		return c.Create(path, zkdata.EncodeTopic(assignment), 0, zk.WorldACL(zk.PermAll))
	})
	outcome := history.ZKOK
	switch {
	case errors.Is(err, zk.ErrNodeExists):
		outcome, err = history.ZKNodeExists, nil // another broker created it
	case err != nil:
		outcome = history.ZKError
	}
	w := history.ZKWrite{Path: path, Op: "create", ExpectedVersion: -1, Outcome: outcome, Data: string(zkdata.EncodeTopic(assignment))}
	if err != nil {
		w.Error = err.Error()
	}
	n.log.ZKWrite(w)
	if err != nil {
		return fmt.Errorf("create %s: %w", topic, err)
	}
	return nil
}

// assignReplicas is AdminUtils.assignReplicasToBrokersRackUnaware: the
// first replica of partition i on broker (start + i) mod n of the sorted
// brokers, the others shifted by a second random offset that grows each
// time the partitions wrap around the brokers. seed stands in for Kafka's
// random start index and shift.
func assignReplicas(partitions int32, rf int, brokers []int32, seed int64) (map[int32][]int32, error) {
	n := len(brokers)
	if partitions < 1 || rf < 1 {
		return nil, fmt.Errorf("assign %d partitions with replication factor %d", partitions, rf)
	}
	if rf > n {
		return nil, fmt.Errorf("replication factor %d larger than the %d registered brokers", rf, n)
	}
	sorted := slices.Clone(brokers)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	if seed < 0 {
		seed = -seed
	}
	start := int(seed % int64(n))
	shift := int((seed / int64(n)) % int64(n))
	out := make(map[int32][]int32, partitions)
	for p := 0; p < int(partitions); p++ {
		if p > 0 && p%n == 0 {
			shift++
		}
		first := (p + start) % n
		replicas := []int32{sorted[first]}
		for j := 0; j < rf-1; j++ {
			replicas = append(replicas, sorted[(first+1+(shift+j)%(n-1))%n])
		}
		out[int32(p)] = replicas
	}
	return out, nil
}

// groupLog implements group.Log over the data plane.
type groupLog struct{ data *dataplane.Manager }

// Append encodes the coordinator's records as one uncompressed batch, as
// GroupMetadataManager does, and appends it with requiredAcks = -1.
func (l groupLog) Append(p int32, records []group.Record) (int64, func(context.Context) error, error) {
	return l.append(p, records, nil)
}

// AppendTxn is Append for a TxnOffsetCommit: a transactional batch of
// producer pid at epoch, base sequence 0, as storeOffsets builds it.
func (l groupLog) AppendTxn(p int32, records []group.Record, pid int64, epoch int16) (int64, func(context.Context) error, error) {
	return l.append(p, records, &txnProducer{pid, epoch})
}

// txnProducer is the producer of a transactional batch.
type txnProducer struct {
	id    int64
	epoch int16
}

// append writes records as one batch; prod, when set, makes it prod's
// transactional batch.
func (l groupLog) append(p int32, records []group.Record, prod *txnProducer) (int64, func(context.Context) error, error) {
	kvs := make([]storage.KeyValue, len(records))
	ts := time.Now().UnixMilli()
	for i, r := range records {
		kvs[i] = storage.KeyValue{Key: r.Key, Value: r.Value}
		if i == 0 && r.Timestamp > 0 {
			ts = r.Timestamp
		}
	}
	var batch []byte
	var err error
	if prod != nil {
		batch, err = storage.EncodeTxnBatch(kvs, ts, prod.id, prod.epoch, 0)
	} else {
		batch, err = storage.EncodeBatch(kvs, ts)
	}
	if err != nil {
		return -1, nil, err
	}
	return l.data.AppendAsCoordinator(history.TP(dataplane.GroupMetadataTopic, p), batch)
}

// groupDataPlane is the data plane as the broker's control requests see it,
// with ReplicaManager.becomeLeaderOrFollower's onLeadershipChange callback
// and handleStopReplicaRequest's resignation added: a role change of a
// __consumer_offsets partition, once the data plane applied it, elects or
// resigns the group coordinator of that partition. CreateLog and the rest
// are the data plane's own.
type groupDataPlane struct {
	*dataplane.Manager
	g *groups
	t *txns // nil: no transaction coordinator
}

var _ broker.LogCreator = groupDataPlane{}

func (d groupDataPlane) BecomeLeader(p broker.Partition) error {
	if err := d.Manager.BecomeLeader(p); err != nil {
		return err
	}
	if p.Topic == dataplane.GroupMetadataTopic {
		d.g.elected(p.Partition)
	}
	if p.Topic == dataplane.TransactionStateTopic && d.t != nil {
		d.t.elected(p.Partition, p.LeaderEpoch)
	}
	return nil
}

func (d groupDataPlane) BecomeFollower(p broker.Partition) error {
	if err := d.Manager.BecomeFollower(p); err != nil {
		return err
	}
	if p.Topic == dataplane.GroupMetadataTopic {
		d.g.resigned(p.Partition)
	}
	if p.Topic == dataplane.TransactionStateTopic && d.t != nil {
		d.t.resigned(p.Partition)
	}
	return nil
}

func (d groupDataPlane) StopReplica(tp history.TopicPartition, del bool) error {
	if err := d.Manager.StopReplica(tp, del); err != nil {
		return err
	}
	// KafkaApis.handleStopReplicaRequest resigns only for a deleted
	// partition; a leader stopped without delete keeps leading.
	if tp.Topic == dataplane.GroupMetadataTopic && del {
		d.g.resigned(tp.Partition)
	}
	if tp.Topic == dataplane.TransactionStateTopic && del && d.t != nil {
		d.t.resigned(tp.Partition)
	}
	return nil
}
