package dataplane

import (
	"context"
	"encoding/binary"
	"fmt"
	"github.com/twmb/franz-go/pkg/kerr"
	"hash/crc32"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/broker"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/storage"
	"github.com/zkchaos/zkchaos/node/storage/checkpoint"
	"github.com/zkchaos/zkchaos/node/wire"
)

// batch builds a valid, uncompressed v2 record batch as a producer sends it.
func batch(vals ...string) []byte {
	var recs []byte
	for i, v := range vals {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		body := r.AppendTo(nil)[1:]
		r.Length = int32(len(body))
		recs = r.AppendTo(recs)
	}
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(len(vals) - 1),
		FirstTimestamp: 1, MaxTimestamp: 1, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(vals)), Records: recs}
	b.Length = int32(storage.BatchHeaderSize - 12 + len(recs))
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

func newManager(t testing.TB, dir string, bugs config.Bugs, minISR int) *Manager {
	t.Helper()
	return newManagerID(t, 1, dir, bugs, minISR)
}

func newManagerID(t testing.TB, id int32, dir string, bugs config.Bugs, minISR int) *Manager {
	t.Helper()
	m, err := Open(Config{BrokerID: id, DataDir: dir, Bugs: bugs, MinISR: minISR, LagTime: time.Second,
		CheckpointInterval: time.Hour, FetchMaxWait: 50 * time.Millisecond, MaxMessageBytes: 4096}, nil, broker.New(1, bugs, nil).Metadata)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serve serves m's routes on a loopback port for the rest of the test (or
// until the server is closed) and returns the address, a follower's
// LeaderAddr, and the server.
func serve(t *testing.T, m *Manager) (string, *wire.Server) {
	t.Helper()
	srv := wire.NewServer()
	m.Routes(srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), srv
}

// diverge makes broker 2's m leader of t-0 at epoch 0 and appends n
// records acks=1: a log that broker 1 leading epoch 3 will not share.
func diverge(t *testing.T, m *Manager, n int) {
	t.Helper()
	if err := m.BecomeLeader(broker.Partition{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 0, ISR: []int32{2}, Replicas: []int32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	for range n {
		if r := produce(m, 0, 1, time.Second, batch("diverged")); r.ErrorCode != 0 {
			t.Fatalf("produce on n2: %d", r.ErrorCode)
		}
	}
}

// follow makes m a follower of t-0 at epoch 3 under broker 1 at addr.
func follow(t *testing.T, m *Manager, addr string, isr ...int32) {
	t.Helper()
	if err := m.BecomeFollower(broker.Partition{Topic: "t", Partition: 0, Leader: 1, LeaderEpoch: 3, ISR: isr, Replicas: []int32{1, 2}, LeaderAddr: addr}); err != nil {
		t.Fatal(err)
	}
}

// A follower with a divergent log (appended as leader of epoch 0) truncates
// it via OffsetForLeaderEpoch when it follows the epoch-3 leader, then
// replicates; acks=all completes and the follower's HW follows the leader's.
func TestFollowerTruncatesAndReplicates(t *testing.T) {
	m1 := newManagerID(t, 1, t.TempDir(), nil, 2)
	m2 := newManagerID(t, 2, t.TempDir(), nil, 2)
	addr, _ := serve(t, m1)
	m2.cfg.MinISR = 1
	diverge(t, m2, 5)
	lead(t, m1, 0, 1) // epoch 3, ISR [1]
	if r := produce(m1, 0, -1, time.Second, batch("a", "b")); r.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all with ISR [1] < 2: %d", r.ErrorCode)
	}
	m1.cfg.MinISR = 1
	if r := produce(m1, 0, -1, time.Second, batch("a", "b")); r.ErrorCode != 0 {
		t.Fatalf("produce on n1: %d", r.ErrorCode)
	}
	follow(t, m2, addr, 1)
	l1, l2 := m1.get(history.TP("t", 0)), m2.get(history.TP("t", 0))
	eventually(t, "follower truncated and caught up", func() bool { return l2.log.LogEndOffset() == 2 && l2.log.LatestEpoch() == 3 })
	// The follower's fetches expand the ISR only with ZooKeeper; take it in.
	l1.mu.Lock()
	l1.isr = []int32{1, 2}
	l1.mu.Unlock()
	m1.cfg.MinISR = 2
	if r := produce(m1, 0, -1, 2*time.Second, batch("c")); r.ErrorCode != 0 || r.BaseOffset != 2 {
		t.Fatalf("acks=all with the follower in the ISR: %+v", r)
	}
	eventually(t, "follower HW 3", func() bool { l2.mu.Lock(); defer l2.mu.Unlock(); return l2.hw == 3 })
	a, _ := l1.log.Read(0, 1<<20, -1)
	b, _ := l2.log.Read(0, 1<<20, -1)
	if string(a) != string(b) {
		t.Fatalf("replica logs differ: %d vs %d bytes", len(a), len(b))
	}
}

func lead(t testing.TB, m *Manager, p int32, isr ...int32) {
	t.Helper()
	if err := m.BecomeLeader(broker.Partition{Topic: "t", Partition: p, Leader: 1, LeaderEpoch: 3, ISR: isr, Replicas: []int32{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
}

func produce(m *Manager, p int32, acks int16, timeout time.Duration, records []byte) *kmsg.ProduceResponseTopicPartition {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = acks, int32(timeout/time.Millisecond)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := m.Produce(context.Background(), req)
	if resp == nil {
		return nil
	}
	return &resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

func fetch(m *Manager, replica int32, p int32, offset int64) *kmsg.FetchResponseTopicPartition {
	req := fetchRequest(12, replica, history.TP("t", p), offset, 1<<20)
	return &m.Fetch(context.Background(), req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
}

func TestProduceFetchListOffsets(t *testing.T) {
	m := newManager(t, t.TempDir(), nil, 1)
	lead(t, m, 0, 1)
	r := produce(m, 0, -1, time.Second, batch("a", "b"))
	if r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("produce: %+v", r)
	}
	if r = produce(m, 0, 1, time.Second, batch("c")); r.ErrorCode != 0 || r.BaseOffset != 2 {
		t.Fatalf("produce acks=1: %+v", r)
	}
	if r = produce(m, 0, 0, time.Second, batch("d")); r != nil {
		t.Fatalf("acks=0 must not answer: %+v", r)
	}
	f := fetch(m, -1, 0, 0)
	if f.ErrorCode != 0 || f.HighWatermark != 4 || len(f.RecordBatches) == 0 {
		t.Fatalf("fetch: error %d hw %d %d bytes", f.ErrorCode, f.HighWatermark, len(f.RecordBatches))
	}
	hs, _, err := storage.SplitBatches(f.RecordBatches)
	if err != nil || len(hs) != 3 || hs[2].BaseOffset != 3 || hs[0].PartitionLeaderEpoch != 3 {
		t.Fatalf("fetched batches %+v, %v", hs, err)
	}
	if f = fetch(m, -1, 0, 9); f.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch past the end: %d", f.ErrorCode)
	}
	if got := m.ListOffsets(listOffsetsRequest(-2, history.TP("t", 0), -1, -1)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]; got.ErrorCode != 0 || got.Offset != 4 {
		t.Fatalf("ListOffsets latest (query-leo): %+v", got)
	}
	if got := m.OffsetForLeaderEpoch(offsetForLeaderEpochRequest(2, history.TP("t", 0), 3, 2)).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]; got.ErrorCode != 0 || got.EndOffset != 0 {
		t.Fatalf("OffsetForLeaderEpoch(2) before epoch 3 started at 0: %+v", got)
	}
}

func TestProduceErrors(t *testing.T) {
	m := newManager(t, t.TempDir(), nil, 2)
	lead(t, m, 0, 1, 2)
	lead(t, m, 1, 1)
	if err := m.BecomeFollower(broker.Partition{Topic: "t", Partition: 2, Leader: -1, LeaderEpoch: 1, ISR: []int32{2}, Replicas: []int32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	corrupt := batch("x")
	corrupt[len(corrupt)-1] ^= 0xff
	for _, c := range []struct {
		name    string
		p       int32
		acks    int16
		records []byte
		want    int16
	}{
		{"corrupt", 0, 1, corrupt, kerr.CorruptMessage.Code},
		{"garbage", 0, 1, []byte("not a batch"), kerr.CorruptMessage.Code},
		{"empty", 0, 1, nil, kerr.CorruptMessage.Code},
		{"too large", 0, 1, batch(strings.Repeat("x", 5000)), kerr.MessageTooLarge.Code},
		{"unknown partition", 7, 1, batch("x"), kerr.UnknownTopicOrPartition.Code},
		{"follower", 2, 1, batch("x"), kerr.NotLeaderForPartition.Code},
		{"isr below min", 1, -1, batch("x"), kerr.NotEnoughReplicas.Code},
		{"isr below min, acks=1", 1, 1, batch("x"), 0},
		{"bad acks", 0, 5, batch("x"), kerr.InvalidRequiredAcks.Code},
	} {
		if r := produce(m, c.p, c.acks, 50*time.Millisecond, c.records); r.ErrorCode != c.want {
			t.Errorf("%s: error %d, want %d", c.name, r.ErrorCode, c.want)
		}
	}
}

// acks=all completes when the follower's next fetch moves the HW past the
// record, and times out (REQUEST_TIMED_OUT) when no follower fetches.
func TestAcksAllWaitsForISR(t *testing.T) {
	m := newManager(t, t.TempDir(), nil, 2)
	lead(t, m, 0, 1, 2)
	if r := produce(m, 0, -1, 100*time.Millisecond, batch("lost?")); r.ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("no follower fetch: error %d, want REQUEST_TIMED_OUT", r.ErrorCode)
	}
	done := make(chan *kmsg.ProduceResponseTopicPartition)
	go func() { done <- produce(m, 0, -1, 5*time.Second, batch("v")) }()
	// Follower 2 fetches from 0 (gets both batches), then from 2.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if f := fetch(m, 2, 0, 0); f.ErrorCode != 0 {
			t.Fatalf("replica fetch: %d", f.ErrorCode)
		}
		if m.get(history.TP("t", 0)).log.LogEndOffset() == 2 || time.Now().After(deadline) {
			break
		}
	}
	if f := fetch(m, 2, 0, 2); f.HighWatermark != 2 {
		t.Fatalf("HW after the follower caught up: %d", f.HighWatermark)
	}
	if r := <-done; r.ErrorCode != 0 || r.BaseOffset != 1 {
		t.Fatalf("acks=all: %+v", r)
	}
}

func writeLogs(t *testing.T, dir string, hws map[int32]int64) {
	t.Helper()
	ck := map[checkpoint.TopicPartition]int64{}
	for p, hw := range hws {
		l, _, err := storage.Open(storage.PartitionDir(dir, "t", p), storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := int64(0); i < hw+2; i++ {
			if _, err := l.AppendAsLeader(batch(fmt.Sprint(i)), 0); err != nil {
				t.Fatal(err)
			}
		}
		l.Close()
		ck[checkpoint.TopicPartition{Topic: "t", Partition: p}] = hw
	}
	if err := checkpoint.WriteReplicationOffsets(dir, ck); err != nil {
		t.Fatal(err)
	}
}

// The checkpoint task (ReplicaManager.checkpointHighWatermarks, Kafka
// 2.6.3) writes the partitions in the in-memory partition map, with the
// KAFKA-7235 switch or without; the checkpoint-hosted proposal writes every
// hosted log, those not yet in memory with the HW the file had.
func TestHWCheckpointHosted(t *testing.T) {
	inMemory := map[checkpoint.TopicPartition]int64{{Topic: "t", Partition: 1}: 7}
	hosted := map[checkpoint.TopicPartition]int64{{Topic: "t", Partition: 0}: 5, {Topic: "t", Partition: 1}: 7, {Topic: "t", Partition: 2}: 3}
	tests := []struct {
		name      string
		bugs      config.Bugs
		proposals config.Proposals
		want      map[checkpoint.TopicPartition]int64
	}{
		{"Kafka 2.6.3: the in-memory map", nil, nil, inMemory},
		{"KAFKA-7235 switch: the in-memory map", config.Bugs{config.BugKafka7235: true}, nil, inMemory},
		{"checkpoint-hosted proposal: every hosted log", nil, config.Proposals{config.ProposalCheckpointHosted: true}, hosted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeLogs(t, dir, map[int32]int64{0: 5, 1: 7, 2: 3})
			m := newManager(t, dir, tt.bugs, 1)
			m.cfg.Proposals = tt.proposals
			if err := m.BecomeFollower(broker.Partition{Topic: "t", Partition: 1, Leader: -1, LeaderEpoch: 1, ISR: []int32{2}, Replicas: []int32{1, 2}}); err != nil {
				t.Fatal(err)
			}
			if got := writtenCheckpoint(t, m, dir); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("checkpoint %v, want %v", got, tt.want)
			}
		})
	}
}

// Metadata answers from the cache UpdateMetadata fills: brokers, leaders,
// ISR, offline replicas; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
func TestMetadata(t *testing.T) {
	b := broker.New(1, nil, nil)
	m, err := Open(Config{BrokerID: 1, DataDir: t.TempDir()}, nil, b.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	um := kmsg.NewPtrUpdateMetadataRequest()
	um.SetVersion(6)
	um.ControllerID, um.ControllerEpoch, um.BrokerEpoch = 2, 1, -1
	for _, id := range []int32{1, 2} {
		lb := kmsg.NewUpdateMetadataRequestLiveBroker()
		lb.ID = id
		ep := kmsg.NewUpdateMetadataRequestLiveBrokerEndpoint()
		ep.Host, ep.Port = fmt.Sprintf("10.0.0.%d", id), 9092
		lb.Endpoints = append(lb.Endpoints, ep)
		um.LiveBrokers = append(um.LiveBrokers, lb)
	}
	ts := kmsg.NewUpdateMetadataRequestTopicState()
	ts.Topic = "t"
	for p, leader := range []int32{1, -1} {
		ps := kmsg.NewUpdateMetadataRequestTopicPartition()
		ps.Partition, ps.Leader, ps.LeaderEpoch, ps.ISR, ps.Replicas = int32(p), leader, 4, []int32{1}, []int32{1, 2, 3}
		ts.PartitionStates = append(ts.PartitionStates, ps)
	}
	um.TopicStates = append(um.TopicStates, ts)
	if r := b.HandleUpdateMetadata(wire.RequestHeader{}, um); r.ErrorCode != 0 {
		t.Fatalf("UpdateMetadata: %d", r.ErrorCode)
	}
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9)
	for _, name := range []string{"t", "nope"} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, mt)
	}
	resp := m.Metadata(req).(*kmsg.MetadataResponse)
	if resp.ControllerID != 2 || len(resp.Brokers) != 2 || resp.Brokers[1].Host != "10.0.0.2" {
		t.Fatalf("brokers %+v controller %d", resp.Brokers, resp.ControllerID)
	}
	p0, p1 := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
	if p0.ErrorCode != 0 || p0.Leader != 1 || p0.LeaderEpoch != 4 || fmt.Sprint(p0.OfflineReplicas) != "[3]" {
		t.Fatalf("partition 0: %+v", p0)
	}
	if p1.ErrorCode != kerr.LeaderNotAvailable.Code || p1.Leader != -1 {
		t.Fatalf("partition 1 without leader: %+v", p1)
	}
	if resp.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %d", resp.Topics[1].ErrorCode)
	}
}

// A log missing from the checkpoint starts with HW = log start.
func TestHWWithoutCheckpointStartsAtLogStart(t *testing.T) {
	dir := t.TempDir()
	writeLogs(t, dir, map[int32]int64{0: 5})
	os.Remove(filepath.Join(dir, checkpoint.ReplicationOffsetFile))
	m := newManager(t, dir, nil, 1)
	if err := m.BecomeFollower(broker.Partition{Topic: "t", Partition: 0, Leader: -1, LeaderEpoch: 1, ISR: []int32{2}, Replicas: []int32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	if hw := m.get(history.TP("t", 0)).hw; hw != 0 {
		t.Fatalf("HW %d, want 0", hw)
	}
}

// Damage in the middle of a log at start-up: Kafka's log recovery
// (LogSegment.recover, Log.recoverLog) cuts the log at the first invalid
// batch and starts; with the refuse-mid-log-damage proposal start-up fails
// with an error naming the segment.
func TestCorruptLogAtStartup(t *testing.T) {
	tests := []struct {
		name      string
		proposals config.Proposals
		wantErr   bool
	}{
		{"Kafka 2.6.3: cut at the damage", nil, false},
		{"refuse-mid-log-damage", config.Proposals{config.ProposalRefuseMidLogDamage: true}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeLogs(t, dir, map[int32]int64{0: 3})
			seg := filepath.Join(storage.PartitionDir(dir, "t", 0), "00000000000000000000.log")
			b, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			first, n, err := storage.NextBatch(b)
			if err != nil {
				t.Fatal(err)
			}
			b[n+storage.BatchHeaderSize] ^= 0xff // in the second batch's records, three valid batches after it
			if err := os.WriteFile(seg, b, 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := Open(Config{BrokerID: 1, DataDir: dir, Proposals: tt.proposals}, nil, broker.New(1, nil, nil).Metadata)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "00000000000000000000.log") {
					t.Fatalf("Open: %v, want an error naming the segment", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer m.Close()
			if leo, want := m.get(history.TP("t", 0)).log.LogEndOffset(), first.LastOffset()+1; leo != want {
				t.Fatalf("LEO %d after recovery, want %d (cut at the second batch)", leo, want)
			}
		})
	}
}

// fuzzSeeds are Produce and Fetch request frames (without size prefix).
func fuzzSeeds() [][]byte {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("seed"))
	var out [][]byte
	for _, v := range []int16{3, 7, 9} {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(v)
		req.Acks, req.TimeoutMillis = -1, 10
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch("a", "b")
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		out = append(out, f.AppendRequest(nil, req, 1)[4:])
	}
	for _, r := range []kmsg.Request{
		func() kmsg.Request {
			r := kmsg.NewPtrMetadataRequest()
			r.SetVersion(9)
			t := kmsg.NewMetadataRequestTopic()
			t.Topic = kmsg.StringPtr("t")
			r.Topics = append(r.Topics, t)
			return r
		}(),
		listOffsetsRequest(-1, history.TP("t", 0), 0, -1),
		offsetForLeaderEpochRequest(-2, history.TP("t", 0), -1, 0),
	} {
		out = append(out, f.AppendRequest(nil, r, 3)[4:])
	}
	for _, v := range []int16{4, 11, 12} {
		out = append(out, f.AppendRequest(nil, fetchRequest(v, -1, history.TP("t", 0), 0, 1<<20), 2)[4:])
	}
	return out
}

// TestWriteFuzzSeeds regenerates testdata/fuzz/FuzzProduceFetch with
// ZKCHAOS_WRITE_FUZZ_SEEDS=1.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("ZKCHAOS_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set ZKCHAOS_WRITE_FUZZ_SEEDS=1 to regenerate")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzProduceFetch")
	os.MkdirAll(dir, 0o755)
	for i, s := range fuzzSeeds() {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d", i)), []byte(fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzProduceFetch: no client request frame (Produce, Fetch, and also
// Metadata, ListOffsets, OffsetForLeaderEpoch) panics the decoder, the
// handlers or the response encoder (run with go test
// -fuzz=FuzzProduceFetch ./node/dataplane).
func FuzzProduceFetch(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	m := newManager(f, f.TempDir(), nil, 1)
	lead(f, m, 0, 1)
	srv := wire.NewServer()
	m.Routes(srv)
	f.Fuzz(func(t *testing.T, frame []byte) {
		req, err := wire.ParseRequest(frame, func(key, v int16) bool { return key != wire.ApiVersionsKey && srv.Supports(key, v) })
		if err != nil {
			return
		}
		var resp kmsg.Response
		switch r := req.Body.(type) {
		case *kmsg.ProduceRequest:
			r.TimeoutMillis = 1
			resp = m.Produce(context.Background(), r)
		case *kmsg.FetchRequest:
			r.MaxWaitMillis = 0
			resp = m.Fetch(context.Background(), r)
		case *kmsg.MetadataRequest:
			resp = m.Metadata(r)
		case *kmsg.ListOffsetsRequest:
			resp = m.ListOffsets(r)
		case *kmsg.OffsetForLeaderEpochRequest:
			resp = m.OffsetForLeaderEpoch(r)
		}
		if resp != nil {
			resp.SetVersion(req.Header.APIVersion)
			wire.AppendResponse(nil, resp, req.Header.CorrelationID)
		}
	})
}

// writtenCheckpoint runs m's checkpoint task once and returns what it wrote
// to dir's replication-offset-checkpoint.
func writtenCheckpoint(t *testing.T, m *Manager, dir string) map[checkpoint.TopicPartition]int64 {
	t.Helper()
	if err := m.WriteCheckpoint(); err != nil {
		t.Fatal(err)
	}
	got, _, err := checkpoint.ReadReplicationOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
