package node

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/broker"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/dataplane"
	"github.com/zkchaos/zkchaos/node/eventlog"
	"github.com/zkchaos/zkchaos/node/group"
	"github.com/zkchaos/zkchaos/node/storage"
	"github.com/zkchaos/zkchaos/node/txn"
	"github.com/zkchaos/zkchaos/node/wire"
)

// pidCounter stands in for ZooKeeper's producer id blocks.
type pidCounter struct {
	mu   sync.Mutex
	next int64
}

func (p *pidCounter) NextProducerID(context.Context) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	return 4000 + p.next, nil
}

// syncBuffer is the event log's writer, read while the node writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) events(t *testing.T) []history.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	evs, _, err := history.Decode(bytes.NewReader(s.b.Bytes()), "n1.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// readCommitted reads partitions of t from their start with a
// read_committed consumer until done holds for the values seen, failing
// the test if ctx ends first.
func readCommitted(t *testing.T, ctx context.Context, addr string, partitions []int32, done func(seen map[string]bool) bool) map[string]bool {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	for _, p := range partitions {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(kversion.V2_6_0()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": offsets}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]bool{}
	for !done(seen) {
		if ctx.Err() != nil {
			t.Fatalf("read_committed consumer saw %v", seen)
		}
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := cons.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	return seen
}

// clientTxnNode is txnNode for the tests that run franz-go's clients
// against it, with a minute for them; -short leaves those tests out.
func clientTxnNode(t *testing.T) (ctx context.Context, addr string, events *syncBuffer) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real clients for a few seconds")
	}
	_, addr, events = txnNode(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx, addr, events
}

// txnNode is broker 1 alone, serving the Kafka protocol on a loopback
// port with data plane, group and transaction coordinators, and leading
// t-0, t-1, in-0, __consumer_offsets-0 and __transaction_state-0 (leader epoch
// 7: the coordinator epoch). No ZooKeeper: producer ids come from a
// counter.
func txnNode(t *testing.T) (n *Node, addr string, events *syncBuffer) {
	t.Helper()
	events = &syncBuffer{}
	cfg := &config.Config{BrokerID: 1, OffsetsTopicPartitions: 1, OffsetsTopicReplicationFactor: 1, OffsetsCommitTimeout: time.Second,
		GroupMinSessionTimeout: time.Second, GroupMaxSessionTimeout: time.Minute,
		TransactionTopicPartitions: 1, TransactionTopicReplicationFactor: 1, TransactionMaxTimeout: time.Minute, TransactionAbortInterval: time.Hour}
	n = &Node{cfg: cfg, log: eventlog.New(history.NewWriter(events, "n1", 1), 1, nil)}
	n.broker = broker.New(1, nil, n.log)
	var err error
	n.data, err = dataplane.Open(dataplane.Config{BrokerID: 1, DataDir: t.TempDir(), CheckpointInterval: time.Hour, MinISR: 1,
		LagTime: time.Second, MaxMessageBytes: 1 << 20}, n.log, n.broker.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.data.Close)
	n.groups = newGroups(n)
	t.Cleanup(n.groups.close)
	n.txns = newTxns(n, &pidCounter{})
	t.Cleanup(n.txns.close)
	n.broker.Data = groupDataPlane{n.data, n.groups, n.txns}
	n.broker.SetEpoch(10)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := wire.NewServer()
	n.server = srv
	n.data.Routes(srv)
	n.groups.routes(srv)
	n.txns.routes(srv, n.groups)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	host, portS, _ := net.SplitHostPort(ln.Addr().String())
	port, _ := strconv.Atoi(portS)

	topics := map[string]int32{"t": 2, "in": 1, dataplane.GroupMetadataTopic: 1, dataplane.TransactionStateTopic: 1}
	um := kmsg.NewPtrUpdateMetadataRequest()
	um.SetVersion(6)
	um.ControllerID, um.ControllerEpoch, um.BrokerEpoch = 1, 1, 10
	lb := kmsg.NewUpdateMetadataRequestLiveBroker()
	lb.ID = 1
	ep := kmsg.NewUpdateMetadataRequestLiveBrokerEndpoint()
	ep.Host, ep.Port, ep.SecurityProtocol = host, int32(port), 0
	lb.Endpoints = append(lb.Endpoints, ep)
	um.LiveBrokers = append(um.LiveBrokers, lb)
	la := kmsg.NewPtrLeaderAndISRRequest()
	la.SetVersion(4)
	la.ControllerID, la.ControllerEpoch, la.BrokerEpoch = 1, 1, 10
	for topic, np := range topics {
		us := kmsg.NewUpdateMetadataRequestTopicState()
		us.Topic = topic
		ls := kmsg.NewLeaderAndISRRequestTopicState()
		ls.Topic = topic
		for p := int32(0); p < np; p++ {
			ups := kmsg.NewUpdateMetadataRequestTopicPartition()
			ups.Partition, ups.Leader, ups.LeaderEpoch, ups.ISR, ups.Replicas = p, 1, 7, []int32{1}, []int32{1}
			us.PartitionStates = append(us.PartitionStates, ups)
			lps := kmsg.NewLeaderAndISRRequestTopicPartition()
			lps.Partition, lps.Leader, lps.LeaderEpoch, lps.ISR, lps.Replicas = p, 1, 7, []int32{1}, []int32{1}
			ls.PartitionStates = append(ls.PartitionStates, lps)
		}
		um.TopicStates = append(um.TopicStates, us)
		la.TopicStates = append(la.TopicStates, ls)
	}
	n.broker.HandleUpdateMetadata(wire.RequestHeader{}, um)
	resp := n.broker.HandleLeaderAndIsr(wire.RequestHeader{}, la)
	if resp.ErrorCode != 0 {
		t.Fatalf("LeaderAndIsr: %+v", resp)
	}
	for _, p := range resp.Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("LeaderAndIsr: %+v", p)
		}
	}
	return n, ln.Addr().String(), events
}

// franz-go's transactional producer (capped at Kafka 2.6's request
// versions) against the node: a committed transaction's records reach a
// read_committed consumer, an aborted one's do not, and a second producer
// with the same transactional id fences the first. The node logs each
// transaction request with its epochs and each marker it appended.
func TestKgoTransactions(t *testing.T) {
	ctx, addr, events := clientTxnNode(t)
	newProducer := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(kversion.V2_6_0()), kgo.TransactionalID("tx-1"),
			kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	produceTxn := func(cl *kgo.Client, commit bool, vals ...string) error {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		for i, v := range vals {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 2), Value: []byte(v)}).FirstErr(); err != nil {
				return err
			}
		}
		return cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
	}
	a := newProducer()
	defer a.Close()
	if err := produceTxn(a, true, "c1", "c2", "c3"); err != nil {
		t.Fatalf("committed transaction: %v", err)
	}
	if err := produceTxn(a, false, "x1", "x2"); err != nil {
		t.Fatalf("aborted transaction: %v", err)
	}
	if err := produceTxn(a, true, "c4"); err != nil {
		t.Fatalf("second committed transaction: %v", err)
	}

	// A second instance of tx-1 fences the first.
	b := newProducer()
	defer b.Close()
	if err := produceTxn(b, true, "c5"); err != nil {
		t.Fatalf("new producer's transaction: %v", err)
	}
	if err := produceTxn(a, true, "zombie"); err == nil {
		t.Fatal("the fenced producer committed a transaction")
	}

	seen := readCommitted(t, ctx, addr, []int32{0, 1}, func(seen map[string]bool) bool {
		return seen["c1"] && seen["c2"] && seen["c3"] && seen["c4"] && seen["c5"]
	})
	for _, v := range []string{"x1", "x2", "zombie"} {
		if seen[v] {
			t.Errorf("read_committed consumer saw %q of an aborted or fenced transaction", v)
		}
	}

	apis := map[string]bool{}
	markers := 0
	for _, e := range events.events(t) {
		switch e.Kind {
		case history.KindTxnRequest:
			apis[e.Txn.API] = true
			if e.Txn.API == history.TxnAPIEndTxn && e.Txn.ErrorCode == 0 && e.Txn.CoordinatorEpoch != 7 {
				t.Errorf("EndTxn at coordinator epoch %d, want 7 (the partition's leader epoch)", e.Txn.CoordinatorEpoch)
			}
		case history.KindTxnMarker:
			if e.TxnMarker.ErrorCode == 0 {
				markers++
				if e.TxnMarker.CoordinatorEpoch != 7 || e.TxnMarker.Offset < 0 {
					t.Errorf("marker %+v", e.TxnMarker)
				}
			}
		}
	}
	for _, api := range []string{history.TxnAPIFindCoordinator, history.TxnAPIInitProducerID, history.TxnAPIAddPartitions,
		history.TxnAPIEndTxn, history.TxnAPIMarkers, history.TxnAPIComplete, history.TxnLoadPartition} {
		if !apis[api] {
			t.Errorf("no %s txn_request; saw %v", api, apis)
		}
	}
	if markers < 5 {
		t.Errorf("%d markers appended, want at least one per transaction", markers)
	}
}

// Markers sent over the wire to a partition leader (here the broker
// itself, reached through its listener as another broker would reach it):
// the first is appended, one at an older coordinator epoch is refused with
// TRANSACTION_COORDINATOR_FENCED, and an unknown partition answers
// UNKNOWN_TOPIC_OR_PARTITION; each is logged as a txn_marker.
func TestWriteTxnMarkersOverTheWire(t *testing.T) {
	n, _, events := txnNode(t)
	n.cfg.BrokerID = 99 // so Send takes the network path to broker 1
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	t0, missing := txn.TopicPartition{Topic: "t", Partition: 0}, txn.TopicPartition{Topic: "t", Partition: 5}
	got, err := n.txns.Send(ctx, 1, txn.Marker{ProducerID: 77, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: 7,
		Partitions: []txn.TopicPartition{t0, missing}})
	if err != nil {
		t.Fatal(err)
	}
	if got[t0] != 0 || got[missing] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("first markers: %v", got)
	}
	got, err = n.txns.Send(ctx, 1, txn.Marker{ProducerID: 77, ProducerEpoch: 0, Commit: false, CoordinatorEpoch: 6, Partitions: []txn.TopicPartition{t0}})
	if err != nil {
		t.Fatal(err)
	}
	if got[t0] != kerr.TransactionCoordinatorFenced.Code {
		t.Fatalf("marker at an older coordinator epoch: %v, want TRANSACTION_COORDINATOR_FENCED", got)
	}
	var ms []*history.TxnMarker
	for _, e := range events.events(t) {
		if e.Kind == history.KindTxnMarker {
			ms = append(ms, e.TxnMarker)
		}
	}
	// The refusal of the unknown partition is logged at once, the append
	// once it is committed.
	if len(ms) != 3 || ms[0].Partition != 5 || ms[0].Offset != -1 || ms[1].Partition != 0 || ms[1].Offset != 0 || ms[1].CoordinatorEpoch != 7 ||
		ms[2].ErrorCode != history.ErrTransactionCoordinatorFenced || ms[2].CoordinatorEpoch != 6 || ms[2].Offset != -1 {
		for _, m := range ms {
			t.Logf("%+v", *m)
		}
		t.Fatalf("%d txn_marker events, want the append, the unknown partition and the fenced one", len(ms))
	}
}

// franz-go's GroupTransactSession (consume-transform-produce, capped at
// Kafka 2.6's request versions) against the node: a committed transaction
// writes its records and moves the group's offset together (TxnOffsetCommit
// made visible by the commit marker); an aborted one leaves no record a
// read_committed consumer sees and the group's committed offset where it
// was.
func TestKgoGroupTransactSession(t *testing.T) {
	ctx, addr, events := clientTxnNode(t)
	plain, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(kversion.V2_6_0()), kgo.DefaultProduceTopic("in"),
		kgo.DisableIdempotentWrite()) // no ZooKeeper here for producer id blocks
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	input := func(prefix string, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte(prefix + strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Fatalf("input: %v", err)
			}
		}
	}
	// committed is the group's offset of in-0 once no transaction has
	// offsets pending there: a transaction's offsets become the group's
	// when the marker reaches __consumer_offsets, after EndTxn was
	// answered, and until then OffsetFetch with RequireStable answers
	// UNSTABLE_OFFSET_COMMIT.
	committed := func() int64 {
		t.Helper()
		for {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.Group, req.RequireStable = "g", true
			rt := kmsg.NewOffsetFetchRequestTopic()
			rt.Topic, rt.Partitions = "in", []int32{0}
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, plain)
			if err != nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				t.Fatalf("OffsetFetch: %+v, %v", resp, err)
			}
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode == 0 {
				return p.Offset
			}
			if p.ErrorCode != kerr.UnstableOffsetCommit.Code || ctx.Err() != nil {
				t.Fatalf("OffsetFetch of in-0: error %d", p.ErrorCode)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(addr), kgo.MaxVersions(kversion.V2_6_0()), kgo.TransactionalID("gts"),
		kgo.ConsumerGroup("g"), kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(30*time.Second),
		kgo.SessionTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	// round polls until it has n input records, then writes "prefix-value"
	// for each to t-0 in one transaction and ends it.
	round := func(prefix string, n int, commit kgo.TransactionEndTry) bool {
		t.Helper()
		var recs []*kgo.Record
		for len(recs) < n {
			if ctx.Err() != nil {
				t.Fatalf("%s: polled %d of %d input records", prefix, len(recs), n)
			}
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			fs := sess.PollFetches(pctx)
			pcancel()
			recs = append(recs, fs.Records()...)
		}
		if err := sess.Begin(); err != nil {
			t.Fatalf("%s: begin: %v", prefix, err)
		}
		for _, r := range recs {
			if err := sess.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(prefix + "-" + string(r.Value))}).FirstErr(); err != nil {
				t.Fatalf("%s: produce: %v", prefix, err)
			}
		}
		ok, err := sess.End(ctx, commit)
		if err != nil {
			t.Fatalf("%s: end: %v", prefix, err)
		}
		return ok
	}

	input("a", 4)
	if !round("out", 4, kgo.TryCommit) {
		t.Fatal("the first transaction did not commit")
	}
	if got := committed(); got != 4 {
		t.Fatalf("after the committed transaction the group's offset is %d, want 4", got)
	}
	input("b", 3)
	if round("aborted", 3, kgo.TryAbort) {
		t.Fatal("the aborted transaction committed")
	}
	if got := committed(); got != 4 {
		t.Fatalf("after the aborted transaction the group's offset is %d, want it still at 4", got)
	}
	// The session sends no TxnOffsetCommit for a transaction it aborts:
	// another producer commits offsets of group g in a transaction and
	// aborts it, and the group's offset still does not move.
	manual, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(kversion.V2_6_0()), kgo.TransactionalID("manual"),
		kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer manual.Close()
	if err := manual.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := manual.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("manual")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := manual.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "manual", pid, epoch, "g"
	if resp, err := add.RequestWith(ctx, manual); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %+v, %v", resp, err)
	}
	toc := kmsg.NewPtrTxnOffsetCommitRequest()
	toc.TransactionalID, toc.Group, toc.ProducerID, toc.ProducerEpoch, toc.Generation = "manual", "g", pid, epoch, -1
	tt := kmsg.NewTxnOffsetCommitRequestTopic()
	tt.Topic = "in"
	tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	tp.Partition, tp.Offset = 0, 99
	tt.Partitions = append(tt.Partitions, tp)
	toc.Topics = append(toc.Topics, tt)
	if resp, err := toc.RequestWith(ctx, manual); err != nil || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit: %+v, %v", resp, err)
	}
	if err := manual.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	if got := committed(); got != 4 {
		t.Fatalf("after the aborted TxnOffsetCommit of offset 99 the group's offset is %d, want it still at 4", got)
	}

	seen := readCommitted(t, ctx, addr, []int32{0}, func(seen map[string]bool) bool { return len(seen) >= 4 })
	for v := range seen {
		if !strings.HasPrefix(v, "out-a") {
			t.Errorf("read_committed consumer saw %q", v)
		}
	}

	var commits, completions []*history.GroupRequest
	for _, e := range events.events(t) {
		if e.Kind != history.KindGroupRequest {
			continue
		}
		switch e.Group.API {
		case history.GroupAPITxnOffsetCommit:
			commits = append(commits, e.Group)
		case history.GroupAPITxnCompletion:
			completions = append(completions, e.Group)
		}
	}
	if len(commits) != 2 || commits[0].ErrorCode != 0 || commits[1].ErrorCode != 0 || commits[0].TransactionalID != "gts" || commits[0].ProducerID == nil || commits[0].Generation < 0 {
		t.Fatalf("TxnOffsetCommit events %+v, want the session's, carrying its producer and generation, and the other producer's", commits)
	}
	if len(completions) != 2 || !completions[0].Commit || completions[1].Commit {
		t.Fatalf("completion events %+v, want the session's commit, then the other producer's abort", completions)
	}
}

// Loading __consumer_offsets from the node's own log: a transactional
// offset commit whose commit marker is in the log is the group's offset,
// one whose abort marker is there is not, and one with no marker yet stays
// pending (OffsetFetch with RequireStable answers UNSTABLE_OFFSET_COMMIT).
func TestGroupLoadReadsTransactionalOffsets(t *testing.T) {
	n, _, _ := txnNode(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	offsets := history.TP(dataplane.GroupMetadataTopic, 0)
	in := group.TopicPartition{Topic: "in", Partition: 0}
	commit := func(g string, pid, offset int64) {
		t.Helper()
		rec := group.Record{Key: group.OffsetCommitKey(g, in),
			Value: group.OffsetCommitValue(group.OffsetAndMetadata{Offset: offset, LeaderEpoch: -1, ExpireTimestamp: -1})}
		_, committed, err := groupLog{n.data}.AppendTxn(0, []group.Record{rec}, pid, 0)
		if err == nil {
			err = committed(ctx)
		}
		if err != nil {
			t.Fatalf("TxnOffsetCommit batch of producer %d: %v", pid, err)
		}
	}
	marker := func(pid int64, commit bool) {
		t.Helper()
		_, committed, _, err := n.data.AppendMarker(offsets, storage.Marker{ProducerID: pid, Commit: commit, CoordinatorEpoch: 7})
		if err == nil {
			err = committed(ctx)
		}
		if err != nil {
			t.Fatalf("marker of producer %d: %v", pid, err)
		}
	}
	commit("committed", 500, 7)
	commit("aborted", 501, 8)
	commit("open", 502, 4)
	commit("open", 502, 9) // sequence 0 again: a coordinator's batch, not checked
	marker(500, true)
	marker(501, false)
	// A producer epoch older than the log's is fenced, even from the
	// coordinator.
	if _, committed, _, err := n.data.AppendMarker(offsets, storage.Marker{ProducerID: 503, ProducerEpoch: 1, CoordinatorEpoch: 7}); err != nil || committed(ctx) != nil {
		t.Fatalf("abort marker of producer 503 at epoch 1: %v", err)
	}
	rec := group.Record{Key: group.OffsetCommitKey("fenced", in), Value: group.OffsetCommitValue(group.OffsetAndMetadata{Offset: 1, LeaderEpoch: -1, ExpireTimestamp: -1})}
	if _, _, err := (groupLog{n.data}).AppendTxn(0, []group.Record{rec}, 503, 0); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("TxnOffsetCommit batch of producer 503 at epoch 0 after its epoch-1 marker: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	// The broker gives up the partition and leads it again: a fresh load.
	n.groups.resigned(0)
	n.groups.elected(0)
	fetch := func(g string) (int64, int16) {
		t.Helper()
		for {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.SetVersion(7)
			req.Group, req.RequireStable = g, true
			rt := kmsg.NewOffsetFetchRequestTopic()
			rt.Topic, rt.Partitions = "in", []int32{0}
			req.Topics = append(req.Topics, rt)
			resp := n.groups.h.OffsetFetch(req)
			if resp.ErrorCode == kerr.CoordinatorLoadInProgress.Code && ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if resp.ErrorCode != 0 || len(resp.Topics) != 1 {
				t.Fatalf("OffsetFetch of %s: %+v", g, resp)
			}
			p := resp.Topics[0].Partitions[0]
			return p.Offset, p.ErrorCode
		}
	}
	if off, code := fetch("committed"); off != 7 || code != 0 {
		t.Errorf("committed transaction: offset %d error %d, want 7", off, code)
	}
	if off, code := fetch("aborted"); off != -1 || code != 0 {
		t.Errorf("aborted transaction: offset %d error %d, want none", off, code)
	}
	if _, code := fetch("open"); code != kerr.UnstableOffsetCommit.Code {
		t.Errorf("open transaction: error %d, want UNSTABLE_OFFSET_COMMIT", code)
	}
}
