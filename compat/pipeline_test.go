package compat

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// pipeline is franz-go's GroupTransactSession copying topic in to topic
// out, input partition p to output partition p, one transaction per poll;
// every third transaction is aborted on purpose. Output values are
// "t<K>:<input value>", K the transaction's number, so a reader can tell
// which transaction wrote a record.
type pipeline struct {
	u                     *chaosUp
	in, out, group, txnID string
	// inputDone is closed once the whole input is written: only then
	// does a caught-up group end the pipeline.
	inputDone chan struct{}

	mu        sync.Mutex
	aborted   map[int]bool // ended without a commit, on purpose or because the session could not commit
	unknown   map[int]bool // End failed: the outcome is not known
	commits   []time.Time  // when each committed transaction's End returned
	txns      int
	onPurpose int
	pausedAt  time.Time // when faults paused the coordinator
}

// run copies until the input is done and the group's committed offsets
// (read with RequireStable, so no transaction is pending on them) reach the
// input's end. It returns an error rather than failing the test, so that it
// can run beside the faults.
func (p *pipeline) run(ctx context.Context, t *testing.T) error {
	p.aborted, p.unknown = map[int]bool{}, map[int]bool{}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(p.u.brokers()...), kgo.MaxVersions(kversion.V2_6_0()),
		kgo.TransactionalID(p.txnID), kgo.ConsumerGroup(p.group), kgo.ConsumeTopics(p.in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.TransactionTimeout(30*time.Second), kgo.SessionTimeout(10*time.Second))
	if err != nil {
		return err
	}
	defer sess.Close()
	for k := 0; ; {
		if ctx.Err() != nil {
			p.mu.Lock()
			defer p.mu.Unlock()
			return fmt.Errorf("pipeline %s → %s not done after %d transactions (%d committed): %w", p.in, p.out, p.txns, len(p.commits), ctx.Err())
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := sess.PollRecords(pctx, 20)
		cancel()
		fs.EachError(func(topic string, part int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				t.Logf("pipeline poll %s-%d: %v", topic, part, err)
			}
		})
		recs := fs.Records()
		if len(recs) == 0 {
			select {
			case <-p.inputDone:
				if p.caughtUp(ctx, sess.Client()) {
					return nil
				}
			default:
			}
			continue
		}
		k++
		if err := p.transaction(ctx, t, sess, k, recs); err != nil {
			return err
		}
	}
}

// transaction writes recs' copies in transaction k and ends it: aborted
// when k is a multiple of 3 or the copy failed, else committed if the
// session can.
func (p *pipeline) transaction(ctx context.Context, t *testing.T, sess *kgo.GroupTransactSession, k int, recs []*kgo.Record) error {
	if err := sess.Begin(); err != nil {
		return fmt.Errorf("transaction %d: begin: %w", k, err)
	}
	var out []*kgo.Record
	for _, r := range recs {
		out = append(out, &kgo.Record{Topic: p.out, Partition: r.Partition, Value: fmt.Appendf(nil, "t%d:%s", k, r.Value)})
	}
	perr := sess.ProduceSync(ctx, out...).FirstErr()
	want := k%3 != 0
	committed, err := sess.End(ctx, kgo.TransactionEndTry(want && perr == nil))
	if ctx.Err() != nil {
		return fmt.Errorf("transaction %d: %w", k, ctx.Err())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.txns++
	if !want {
		p.onPurpose++
	}
	switch {
	case err != nil:
		p.unknown[k] = true
		t.Logf("transaction %d (%d records, from %s-%d offset %d): end: %v (produce: %v)", k, len(recs), recs[0].Topic, recs[0].Partition, recs[0].Offset, err, perr)
	case !committed:
		p.aborted[k] = true
		if want {
			t.Logf("transaction %d (%d records) aborted by the session (produce: %v)", k, len(recs), perr)
		}
	default:
		p.commits = append(p.commits, time.Now())
	}
	return nil
}

// caughtUp reports whether the group's stable committed offsets are the
// input's end offsets on every partition.
func (p *pipeline) caughtUp(ctx context.Context, cl *kgo.Client) bool {
	ends, err := listOffsets(ctx, cl, p.in, 0)
	if err != nil {
		return false
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group, req.RequireStable = p.group, true
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = p.in, []int32{0, 1, 2}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 {
		return false
	}
	for _, q := range resp.Topics[0].Partitions {
		if q.ErrorCode != 0 || q.Offset != ends[q.Partition] {
			return false
		}
	}
	return true
}

// listOffsets is the latest offset of each of topic's three partitions:
// the high watermark (isolation 0) or the last stable offset (1).
func listOffsets(ctx context.Context, cl *kgo.Client, topic string, isolation int8) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID, req.IsolationLevel = -1, isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for q := int32(0); q < 3; q++ {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = q, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("ListOffsets %s: %w", topic, err)
	}
	out := map[int32]int64{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				return nil, fmt.Errorf("ListOffsets %s-%d: error %d", topic, rp.Partition, rp.ErrorCode)
			}
			out[rp.Partition] = rp.Offset
		}
	}
	if len(out) != 3 {
		return nil, fmt.Errorf("ListOffsets %s: %d partitions answered, want 3", topic, len(out))
	}
	return out, nil
}

// outRecord is one record of the output as a reader saw it.
type outRecord struct {
	part   int32
	offset int64
	txn    int
	value  string
}

// readOutput reads every partition of topic from the start at isolation
// level iso until it has seen want distinct input values and then two
// polls in a row bring nothing more.
func (p *pipeline) readOutput(ctx context.Context, t *testing.T, iso kgo.IsolationLevel, want int) []outRecord {
	t.Helper()
	start := map[int32]kgo.Offset{0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart()}
	cl := newKgo(t, p.u, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{p.out: start}), kgo.FetchIsolationLevel(iso))
	defer cl.Close()
	var out []outRecord
	seen := map[string]bool{}
	deadline := time.Now().Add(90 * time.Second)
	for quiet := 0; quiet < 2 || len(seen) < want; {
		if time.Now().After(deadline) {
			t.Fatalf("reading %s: %d of %d input values seen within 90s", p.out, len(seen), want)
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		recs := fs.Records()
		if len(recs) == 0 {
			quiet++
			continue
		}
		quiet = 0
		for _, r := range recs {
			txn, v, ok := strings.Cut(strings.TrimPrefix(string(r.Value), "t"), ":")
			k, err := strconv.Atoi(txn)
			if !ok || err != nil {
				t.Fatalf("%s-%d offset %d: %q is not a copy", p.out, r.Partition, r.Offset, r.Value)
			}
			seen[v] = true
			out = append(out, outRecord{r.Partition, r.Offset, k, v})
		}
	}
	return out
}

// verify holds the output to exactly-once: a read_committed reader sees
// every input value once, in the partition it came from, and nothing a
// transaction wrote that ended aborted; a read_uncommitted reader does see
// aborted records, so the aborts did write something for the first check
// to hide.
func (p *pipeline) verify(ctx context.Context, t *testing.T, vals []string, inPart func(v string) int32) {
	t.Helper()
	p.mu.Lock()
	t.Logf("%s → %s: %d transactions, %d committed, %d aborted (%d on purpose), %d with an unknown outcome",
		p.in, p.out, p.txns, len(p.commits), len(p.aborted), p.onPurpose, len(p.unknown))
	aborted := p.aborted
	if !p.pausedAt.IsZero() {
		var gaps []string
		for i := 1; i < len(p.commits); i++ {
			if d := p.commits[i].Sub(p.commits[i-1]); d > 2*time.Second {
				gaps = append(gaps, fmt.Sprintf("%s from +%s", d.Round(time.Millisecond), p.commits[i-1].Sub(p.pausedAt).Round(time.Millisecond)))
			}
		}
		t.Logf("gaps over 2s between commits, times from the pause: %v", gaps)
	}
	p.mu.Unlock()
	committed := p.readOutput(ctx, t, kgo.ReadCommitted(), len(vals))
	got := map[string][]outRecord{}
	for _, r := range committed {
		got[r.value] = append(got[r.value], r)
		if aborted[r.txn] {
			t.Errorf("read_committed read %s-%d offset %d %q, written by transaction %d, which ended aborted", p.out, r.part, r.offset, r.value, r.txn)
		}
	}
	for _, v := range vals {
		rs := got[v]
		if len(rs) != 1 {
			t.Errorf("input %q copied %d times to %s, want once: %+v", v, len(rs), p.out, rs)
			continue
		}
		if want := inPart(v); rs[0].part != want {
			t.Errorf("input %q (partition %d) copied to %s-%d", v, want, p.out, rs[0].part)
		}
	}
	if len(got) != len(vals) {
		t.Errorf("%s holds %d distinct committed values, want %d", p.out, len(got), len(vals))
	}
	all := p.readOutput(ctx, t, kgo.ReadUncommitted(), len(vals))
	hidden := 0
	for _, r := range all {
		if aborted[r.txn] {
			hidden++
		}
	}
	if hidden == 0 {
		t.Errorf("read_uncommitted saw no record of the %d aborted transactions: the aborts wrote nothing", len(aborted))
	}
	t.Logf("%s: read_committed %d records, read_uncommitted %d (%d of aborted transactions)", p.out, len(committed), len(all), hidden)
}

// faults, once the pipeline has committed a transaction, pauses its group's
// coordinator with `chaos fault pause-node` for 6 s (past the brokers' 3 s
// ZooKeeper session, so the coordinator's __consumer_offsets partition
// fails over), heals, and restarts the group's coordinator after that (or
// the next broker, if it is the paused one again) with `bounce-node`.
// Faults pick from the brokers in id order when none is held, so broker N
// is pick N-1; the answer names the broker hit, which is checked.
func (p *pipeline) faults(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		p.mu.Lock()
		n := len(p.commits)
		p.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pipeline committed nothing within 90s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	coord := p.u.coordinator(t, p.group, 0)
	t.Logf("group %s: coordinator n%d; transactional id %s: coordinator n%d", p.group, coord, p.txnID, p.u.coordinator(t, p.txnID, 1))
	p.mu.Lock()
	p.pausedAt = time.Now()
	p.mu.Unlock()
	if msg := p.u.fault(t, "pause-node", "--pick", strconv.Itoa(int(coord-1))); !strings.Contains(msg, fmt.Sprintf("pause n%d", coord)) {
		t.Fatalf("pause-node --pick %d paused another broker than the coordinator n%d: %s", coord-1, coord, msg)
	}
	time.Sleep(6 * time.Second)
	p.u.fault(t, "heal")
	// The broker asked may be the resumed one, whose metadata cache
	// names itself until the new controller's UpdateMetadata reaches it:
	// ask again for a few seconds before judging.
	next := p.u.coordinator(t, p.group, 0)
	for deadline := time.Now().Add(5 * time.Second); next == coord && time.Now().Before(deadline); {
		time.Sleep(250 * time.Millisecond)
		next = p.u.coordinator(t, p.group, 0)
	}
	// Paused past its ZooKeeper session, the coordinator lost the
	// leadership of the group's __consumer_offsets partition, and nothing
	// gives it back within the test (Kafka's preferred-leader check runs
	// every 300 s).
	if next == coord {
		t.Errorf("group %s: coordinator still n%d after its pause of 6s: its __consumer_offsets partition did not fail over", p.group, coord)
		next = coord%3 + 1
	}
	t.Logf("group %s: coordinator n%d after the pause of n%d", p.group, next, coord)
	time.Sleep(2 * time.Second)
	if msg := p.u.fault(t, "bounce-node", "--pick", strconv.Itoa(int(next-1))); !strings.Contains(msg, fmt.Sprintf("bounce n%d", next)) {
		t.Fatalf("bounce-node --pick %d restarted another broker than n%d: %s", next-1, next, msg)
	}
}
