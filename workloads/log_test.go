package workloads

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/history"
	"go.uber.org/goleak"
)

// The workload runs against kfake, franz-go's in-process fake cluster (a
// fake used only in this package's unit tests; the real runs use the node
// program). The history it writes must be well-formed and, since the fake
// neither loses nor reorders data, every checker must find it valid.
func TestLogWorkloadRecordsCheckableHistory(t *testing.T) {
	// The cases run side by side (each against its own fake, paced, so
	// mostly waiting); the leak check waits for all of them.
	t.Run("cases", func(t *testing.T) {
		for _, tc := range []struct {
			name          string
			nonIdempotent bool
			acks          int
			idempotent    bool // what each produce must record
		}{
			{"idempotent by default", false, 0, true},
			{"non-idempotent", true, 0, false},
			{"acks=1 is never idempotent", false, history.AcksLeader, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				logWorkloadHistory(t, tc.nonIdempotent, tc.acks, tc.idempotent)
			})
		}
	})
	goleak.VerifyNone(t)
}

// historyDir is a run directory for a test's history files, and the
// opener a workload writes them with.
func historyDir(t *testing.T) (dir string, open func(name string) (*history.Writer, error)) {
	t.Helper()
	dir = t.TempDir()
	hdir := filepath.Join(dir, "history")
	if err := os.MkdirAll(hdir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, func(name string) (*history.Writer, error) {
		return history.Create(filepath.Join(hdir, name+".jsonl"), name, 0)
	}
}

// logWorkloadFor is how long logWorkloadHistory runs the workload: long
// enough for dozens of operations per process at the default pace.
const logWorkloadFor = 500 * time.Millisecond

func logWorkloadHistory(t *testing.T, nonIdempotent bool, acks int, idempotent bool) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()

	dir, open := historyDir(t)
	cfg := LogConfig{Brokers: fake.ListenAddrs(), Topic: "t", Partitions: 3, Producers: 3, Readers: 2, OpTimeout: 2 * time.Second, Seed: 1,
		NonIdempotent: nonIdempotent, Acks: acks}
	wl, err := NewLog(cfg, open)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), logWorkloadFor)
	defer cancel()
	if err := wl.Run(ctx); err != nil {
		t.Fatal(err)
	}
	fw, _ := open("final")
	if err := FinalReads(context.Background(), cfg, fw, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	fw.Close()

	h, err := history.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ops, orphans := history.Operations(h)
	if len(orphans) != 0 {
		t.Fatalf("%d invocations without completion", len(orphans))
	}
	var produced, read, final int
	perSource := map[string]int{}
	for _, op := range ops {
		if !op.Op().Final {
			perSource[op.Invoke.Source]++
		}
		if c := op.Complete; c != nil && op.Op().F == history.FRead && c.Op.Type == history.OpOK {
			// Who answered: the broker (kfake numbers them from 0), the
			// leader epoch it accepted and its high watermark; and one
			// poll's worth of records.
			if c.Op.Broker < 0 || c.Op.Broker > 2 || c.Op.LeaderEpoch == nil || c.Op.HW == nil {
				t.Fatalf("read %d does not say who answered: %+v", c.Index, c.Op)
			}
			if recs := c.Op.Records; !op.Op().Final && len(recs) > readMaxRecords {
				t.Fatalf("read %d returned %d records, more than a poll's %d", c.Index, len(recs), readMaxRecords)
			}
			if recs := c.Op.Records; len(recs) > 0 && recs[len(recs)-1].Offset >= *c.Op.HW {
				t.Fatalf("read %d returned offset %d at or above the HW %d it reported", c.Index, recs[len(recs)-1].Offset, *c.Op.HW)
			}
		}
		if op.Op().F == history.FProduce && op.Op().Idempotent != idempotent {
			t.Fatalf("produce %d records idempotent=%v, want %v", op.Invoke.Index, op.Op().Idempotent, idempotent)
		}
		switch {
		case op.Op().F == history.FProduce && op.Outcome() == history.OpOK:
			produced++
		case op.Op().Final:
			final++
		case op.Op().F == history.FRead && op.Outcome() == history.OpOK:
			read++
		}
	}
	// Paced: a run allows at most its length/interval + 1 operations per
	// process, however fast the fake answers.
	for src, n := range perSource {
		every := DefaultProduceEvery
		if src == "client-3" || src == "client-4" {
			every = DefaultReadEvery
		}
		if limit := int(logWorkloadFor/every) + 1; n > limit {
			t.Errorf("%s made %d operations in %s, more than its pace allows (%d)", src, n, logWorkloadFor, limit)
		}
	}
	if produced < 10 || read < 5 || final < 3 {
		t.Fatalf("too little traffic: %d produces ok, %d reads ok, %d final reads", produced, read, final)
	}
	results, verdict := checkers.Run(h, checkers.All(checkers.DefaultConfig()))
	if verdict != checkers.Valid {
		for _, r := range results {
			t.Logf("%s: %s: %s", r.Checker, r.Verdict, r.Explanation)
		}
		t.Fatalf("verdict %s on a fake that loses nothing", verdict)
	}
	t.Logf("%d produces, %d reads, %d final reads; verdict %s", produced, read, final, verdict)
}

func TestDefiniteFailure(t *testing.T) {
	tests := []struct {
		err        error
		idempotent bool
		acks       int
		want       bool
	}{
		{kerr.NotEnoughReplicas, false, history.AcksAll, true},
		{kerr.NotLeaderForPartition, false, history.AcksLeader, true},
		{kerr.KafkaStorageError, false, history.AcksLeader, true},
		// DelayedProduce answers these after the append once the broker
		// no longer leads (Kafka 2.6.3).
		{kerr.NotLeaderForPartition, false, history.AcksAll, false},
		{kerr.KafkaStorageError, false, history.AcksAll, false},
		{kerr.NotEnoughReplicasAfterAppend, false, history.AcksAll, false},
		{kerr.RequestTimedOut, false, history.AcksAll, false},
		{context.DeadlineExceeded, false, history.AcksAll, false},
		{os.ErrClosed, false, history.AcksLeader, false},
		// An idempotent producer's error answers only its last try.
		{kerr.NotEnoughReplicas, true, history.AcksAll, false},
		{kerr.NotLeaderForPartition, true, history.AcksAll, false},
		{kerr.OutOfOrderSequenceNumber, true, history.AcksAll, false},
	}
	for _, tt := range tests {
		if got := definiteFailure(tt.err, tt.idempotent, tt.acks); got != tt.want {
			t.Errorf("%v (idempotent %v, acks %d): got %v, want %v", tt.err, tt.idempotent, tt.acks, got, tt.want)
		}
	}
}

// A broker that answers NOT_LEADER_OR_FOLLOWER to acks=all may have
// appended the record (Kafka's DelayedProduce after a leadership loss): the
// workload records the produce unknown (info), never failed. To acks=1 the
// same answer comes before any append: failed.
func TestNotLeaderAfterAppendIsUnknown(t *testing.T) {
	tests := []struct {
		name string
		acks int
		want history.OpType
	}{
		{"acks=all", history.AcksAll, history.OpInfo},
		{"acks=1", history.AcksLeader, history.OpFail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each against its own fake
			fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
			if err != nil {
				t.Fatal(err)
			}
			defer fake.Close()
			fake.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
				fake.KeepControl()
				req := kr.(*kmsg.ProduceRequest)
				resp := req.ResponseKind().(*kmsg.ProduceResponse)
				for _, rt := range req.Topics {
					ot := kmsg.NewProduceResponseTopic()
					ot.Topic = rt.Topic
					for _, rp := range rt.Partitions {
						op := kmsg.NewProduceResponseTopicPartition()
						op.Partition, op.ErrorCode, op.BaseOffset = rp.Partition, kerr.NotLeaderForPartition.Code, -1
						ot.Partitions = append(ot.Partitions, op)
					}
					resp.Topics = append(resp.Topics, ot)
				}
				return resp, nil, true
			})
			dir, open := historyDir(t)
			wl, err := NewLog(LogConfig{Brokers: fake.ListenAddrs(), Topic: "t", Partitions: 1, Producers: 1, Acks: tt.acks,
				NonIdempotent: true, OpTimeout: 2 * time.Second, Seed: 1}, open)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			if err := wl.Run(ctx); err != nil {
				t.Fatal(err)
			}
			h, err := history.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			ops, _ := history.Operations(h)
			n := 0
			for _, op := range ops {
				if op.Invoke.Op.F != history.FProduce || op.Complete == nil {
					continue
				}
				n++
				if got := op.Outcome(); got != tt.want {
					t.Fatalf("a produce answered NOT_LEADER_OR_FOLLOWER was recorded %s (%s), want %s", got, op.Complete.Op.Error, tt.want)
				}
			}
			if n == 0 {
				t.Fatal("no produce completed")
			}
		})
	}
}

// A produce still in the client when the workload ends (here: waiting for
// its producer id) gets its answer if it comes within endGrace, and is
// recorded unknown (info) if it does not; the workload does not wait for it
// longer.
func TestProduceInFlightAtTheEnd(t *testing.T) {
	tests := []struct {
		name  string
		delay time.Duration // the producer id is answered this long after the end
		want  history.OpType
	}{
		{"answered within the grace", endGrace / 4, history.OpOK},
		{"not answered within the grace", 5 * endGrace, history.OpInfo},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
			if err != nil {
				t.Fatal(err)
			}
			defer fake.Close()
			ctx, cancel := context.WithCancel(context.Background())
			held := make(chan struct{})
			var once sync.Once
			fake.ControlKey(int16(kmsg.InitProducerID), func(kmsg.Request) (kmsg.Response, error, bool) {
				// Hold the first producer id until the workload has ended
				// and the delay has passed; kfake then answers it.
				once.Do(func() {
					close(held)
					<-ctx.Done()
					time.Sleep(tt.delay)
				})
				return nil, nil, false
			})
			dir, open := historyDir(t)
			wl, err := NewLog(LogConfig{Brokers: fake.ListenAddrs(), Topic: "t", Partitions: 1, Producers: 1, OpTimeout: time.Minute, Seed: 1}, open)
			if err != nil {
				t.Fatal(err)
			}
			go func() { <-held; cancel() }() // the workload ends while the produce waits
			if err := wl.Run(ctx); err != nil {
				t.Fatal(err)
			}
			h, err := history.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			ops, orphans := history.Operations(h)
			if len(ops) != 1 || len(orphans) != 0 {
				t.Fatalf("%d operations, %d without completion; want the one produce", len(ops), len(orphans))
			}
			if got := ops[0].Outcome(); got != tt.want {
				t.Fatalf("the produce in flight at the end was recorded %s (%s), want %s", got, ops[0].Complete.Op.Error, tt.want)
			}
		})
	}
}
