package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/rundir"
)

// Driver runs during the workload phase, beside client traffic, and breaks
// things: the seeded schedule of a nightly run, or a scenario that hits the
// exact window of a historical bug.
type Driver interface {
	Drive(ctx context.Context, live *Live) error
}

// scheduleDriver runs a seeded fault schedule.
type scheduleDriver struct{ s nemesis.Schedule }

func (d scheduleDriver) Drive(ctx context.Context, l *Live) error {
	return l.Faults.RunSchedule(ctx, d.s)
}

// Live is a running cluster as a driver sees it. Everything it offers goes
// through containers, ZooKeeper, the node's admin port or the node's event
// log: a driver never reaches into the node program's internals.
type Live struct {
	Cluster *cluster.Cluster
	Nemesis *nemesis.Nemesis
	// Faults is the run's fault catalogue bound to Nemesis: the
	// schedule's and `chaos fault`'s faults go through it.
	Faults   *faults.Set
	World    nemesis.World
	RunDir   string
	Progress io.Writer
}

// Note prints a step of a scenario for the person watching.
func (l *Live) Note(format string, args ...any) {
	fmt.Fprintf(l.Progress, "[%s]   %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// Node returns broker id as a nemesis target.
func (l *Live) Node(id int) (nemesis.Target, error) {
	n := l.Cluster.Node(id)
	if n == nil {
		return nemesis.Target{}, fmt.Errorf("no node %d", id)
	}
	return nemesis.Target{Name: fmt.Sprintf("n%d", id), Container: n.Container}, nil
}

// Nodes returns brokers ids as nemesis targets, in the order given.
func (l *Live) Nodes(ids ...int) ([]nemesis.Target, error) {
	out := make([]nemesis.Target, len(ids))
	for i, id := range ids {
		t, err := l.Node(id)
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

// ArmFailpoint arms failpoint name on node id with action (e.g. "1*sigstop")
// over the node's admin HTTP port.
func (l *Live) ArmFailpoint(ctx context.Context, id int, name, action string) error {
	return l.admin(ctx, id, http.MethodPut, "/failpoints/"+name, action)
}

// ReleaseFailpoint lets a node waiting in failpoint name go on.
func (l *Live) ReleaseFailpoint(ctx context.Context, id int, name string) error {
	return l.admin(ctx, id, http.MethodPost, "/failpoints/"+name+"/release", "")
}

// armAnswerMargin is how long before the harness stops waiting an arm
// request must be read: the node's answer needs the rest to come back.
const armAnswerMargin = time.Second

// adminRequest builds a request to the admin port at addr. An arm (PUT or
// POST /failpoints/{name}) names when this side stops waiting, less
// armAnswerMargin (history.FailpointArmBeforeHeader): a node stopped by
// another fault reads the request only once it resumes, and without the
// deadline it armed then a failpoint the fault had recorded as never armed,
// whose hold nobody ended (a controller held in its broker change from
// +1m11s to the end of a run).
func adminRequest(ctx context.Context, addr, method, path, body string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	arm := (method == http.MethodPut || method == http.MethodPost) &&
		strings.HasPrefix(path, "/failpoints/") && !strings.HasSuffix(path, "/release")
	if d, ok := ctx.Deadline(); ok && arm {
		req.Header.Set(history.FailpointArmBeforeHeader, strconv.FormatInt(d.Add(-armAnswerMargin).UnixNano(), 10))
	}
	return req, nil
}

func (l *Live) admin(ctx context.Context, id int, method, path, body string) error {
	n := l.Cluster.Node(id)
	if n == nil {
		return fmt.Errorf("no node %d", id)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := adminRequest(ctx, n.AdminAddr(), method, path, body)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("node %d admin %s %s: %w", id, method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("node %d admin %s %s: %s: %s", id, method, path, resp.Status, bytes.TrimSpace(b))
	}
	return nil
}

// WaitEvent polls the nodes' event logs (history/n<id>.jsonl) until an
// event that match accepts appears with a time at or after since (Unix
// ns), or within passes; the error names what. Node event logs are written
// one line per event, so polling the files sees what the nodes saw. Each
// poll reads only the lines the logs gained, and match sees each event
// once, in file order, the files in name order. The clients' histories are
// not read: they grow by tens of megabytes in a run with a workload, and
// decoding them on every poll made a driver notice an ISR change 8 to 11 s
// after it happened.
func (l *Live) WaitEvent(ctx context.Context, since int64, within time.Duration, what string, match func(*history.Event) bool) (*history.Event, error) {
	logs := newFollower(filepath.Join(l.RunDir, rundir.HistoryDir, "n[0-9]*.jsonl"))
	defer logs.close()
	deadline := time.Now().Add(within)
	for {
		if e := nextMatch(logs, since, match); e != nil {
			return e, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("waited %s for %s", within, what)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(waitEventPoll):
		}
	}
}

// waitEventPoll is how often WaitEvent looks at the event logs. A poll
// reads only what the logs gained (a few KB), so polling often is cheap,
// and every step of a scenario driver waits for the previous one: at
// 100 ms a driver of five steps lost a quarter of a second to polling.
const waitEventPoll = 25 * time.Millisecond

// nextMatch reads what the followed logs gained and returns the first new
// event at or after since that match accepts. The follower holds a line
// being written back until it is whole; a whole line that does not decode
// is passed over. Lines after the match are consumed unseen: the caller
// stops there.
func nextMatch(logs *follower, since int64, match func(*history.Event) bool) *history.Event {
	var found *history.Event
	logs.poll(func(_ *followed, b []byte) {
		if found != nil || len(bytes.TrimSpace(b)) == 0 {
			return
		}
		var e history.Event
		if json.Unmarshal(b, &e) != nil || e.Validate() != nil {
			return
		}
		if e.Time >= since && match(&e) {
			found = &e
		}
	})
	return found
}

// Append produces one record to partition p of topic through the Kafka
// protocol (acks=1, no idempotence, no retries past the timeout), as a
// client would: a driver whose run has no workload uses it to give a leader
// something its followers lack. It returns once the leader acknowledged.
func (l *Live) Append(ctx context.Context, topic string, p int32, value string) error {
	var seeds []string
	for _, n := range l.Cluster.Nodes() {
		seeds = append(seeds, n.KafkaAddr())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		return fmt.Errorf("append to %s-%d: %w", topic, p, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(value)}).FirstErr(); err != nil {
		return fmt.Errorf("append to %s-%d: %w", topic, p, err)
	}
	return nil
}
