package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/eventlog"
	"github.com/zkchaos/zkchaos/node/failpoint"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

// stuckClient is a connection whose request never returns until released,
// whatever its context or Close say: the worst a broker's network can do to
// a send thread.
type stuckClient struct {
	entered  chan struct{} // one value per Request call
	release  chan struct{}
	requests atomic.Int32
}

func (s *stuckClient) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	s.requests.Add(1)
	s.entered <- struct{}{}
	<-s.release
	return nil, errors.New("released")
}
func (s *stuckClient) NextCorrelationID() int32 { return 1 }
func (s *stuckClient) Close()                   {}

// removeBroker runs on the event loop: a send thread stuck on a broker that
// does not answer must not hold it beyond the bound, and the abandoned
// thread must send nothing more once it comes back.
func TestRemoveBrokerDoesNotWaitForAStuckSend(t *testing.T) {
	c := &Controller{cfg: Config{SocketTimeout: time.Hour, RetryBackoff: time.Millisecond}}
	m := newChannelManager(c)
	m.stopWait = 50 * time.Millisecond
	sc := &stuckClient{entered: make(chan struct{}, 10), release: make(chan struct{})}
	m.newClient = func(brokerInfo) requester { return sc }
	m.addBroker(brokerInfo{ID: 2, Host: "127.0.0.1", Port: 1})
	m.send(2, kmsg.NewPtrLeaderAndISRRequest(), 0)
	m.send(2, kmsg.NewPtrUpdateMetadataRequest(), 0)
	select {
	case <-sc.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the send thread never sent")
	}
	done := make(chan struct{})
	start := time.Now()
	go func() { m.removeBroker(2); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		close(sc.release)
		t.Fatal("removeBroker waited for a send stuck on an unresponsive broker")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("removeBroker took %s with a %s bound", d, m.stopWait)
	}
	close(sc.release)
	time.Sleep(100 * time.Millisecond)
	if n := sc.requests.Load(); n != 1 {
		t.Fatalf("the removed queue made %d requests, want 1 (nothing after removal)", n)
	}
}

// With the real client, removing a broker aborts a request in flight to a
// peer that accepted the connection but never answers (a SIGKILLed broker's
// address, a one-way cut), long before the socket timeout.
func TestRemoveBrokerAbortsRequestToSilentBroker(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make(chan net.Conn, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		var b [1]byte
		conn.Read(b[:])
		got <- conn
		io.Copy(io.Discard, conn)
	}()
	defer func() { ln.Close(); wg.Wait() }()

	c := &Controller{cfg: Config{SocketTimeout: time.Minute, RetryBackoff: time.Millisecond}}
	m := newChannelManager(c)
	m.addBroker(brokerInfo{ID: 3, Host: "127.0.0.1", Port: int32(ln.Addr().(*net.TCPAddr).Port)})
	m.send(3, kmsg.NewPtrLeaderAndISRRequest(), 0)
	var peer net.Conn
	select {
	case peer = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the request never reached the peer")
	}
	defer peer.Close()
	start := time.Now()
	m.removeBroker(3)
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("removeBroker took %s: it waited on the silent broker", d)
	}
}

// flakyClient fails its first fails requests (with err, default
// "connection refused"), then answers.
type flakyClient struct {
	fails int
	err   error
	corr  int32
	done  chan struct{}
}

func (f *flakyClient) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	f.corr++
	if f.fails > 0 {
		f.fails--
		if f.err != nil {
			return nil, f.err
		}
		return nil, errors.New("connection refused")
	}
	defer close(f.done)
	return req.ResponseKind(), nil
}
func (f *flakyClient) NextCorrelationID() int32 { return f.corr + 1 }
func (f *flakyClient) Close()                   {}

// With the KAFKA-7235 switch the request carries no broker epoch, but the
// controller still logs the process it meant (the czxid it held when it
// queued it), on every attempt with that attempt's correlation id, so a
// receipt pairs with exactly one send.
func TestControlSentRecordsMeantBrokerEpochOnEveryAttempt(t *testing.T) {
	var buf bytes.Buffer
	w := history.NewWriter(&buf, "n1", 1)
	c := &Controller{cfg: Config{SocketTimeout: time.Second, RetryBackoff: time.Millisecond,
		Bugs: config.Bugs{config.BugKafka7235: true}}, ctx: newContext(), active: true, epoch: 3,
		log: eventlog.New(w, 1, io.Discard)}
	c.chans = newChannelManager(c)
	fc := &flakyClient{fails: 2, done: make(chan struct{})}
	c.chans.newClient = func(brokerInfo) requester { return fc }
	c.ctx.live[2] = brokerInfo{ID: 2, Epoch: 4242, Host: "127.0.0.1", Port: 1}
	c.ctx.assign[history.TP("t", 0)] = []int32{2}
	c.ctx.state[history.TP("t", 0)] = &partState{st: zkdata.PartitionState{Leader: 2, LeaderEpoch: 1, ControllerEpoch: 3, ISR: []int32{2}}, ver: 1}
	c.chans.addBroker(c.ctx.live[2])
	defer c.chans.shutdown()
	c.sendUpdateMetadata([]int32{2}, nil)
	select {
	case <-fc.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the request was never answered")
	}
	c.chans.shutdown()
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	var attempts []history.Control
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var e history.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		if e.Kind == history.KindControlSent {
			attempts = append(attempts, *e.Control)
		}
	}
	if len(attempts) != 3 {
		t.Fatalf("%d control_sent events, want one per attempt (3): %+v", len(attempts), attempts)
	}
	for i, a := range attempts {
		if a.BrokerEpoch != -1 || a.MeantBrokerEpoch != 4242 || a.Attempt != i+1 || a.CorrelationID != int32(i+1) {
			t.Errorf("attempt %d: %+v; want broker epoch -1 on the wire, meant 4242, attempt %d, correlation id %d", i+1, a, i+1, i+1)
		}
	}
}

// A request that fails because the broker had closed the connection (it
// was killed and restarted) is sent again at once over a new connection,
// as Kafka's RequestSendThread, which polls the connection before sending,
// never sends on a dead one; other failures back off.
func TestSendThreadResendsAtOnceOnAConnectionThePeerClosed(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		fails     int
		wantQuick bool
	}{
		{"peer closed (EOF)", fmt.Errorf("read LeaderAndISR response: %w", io.EOF), 1, true},
		{"peer reset", fmt.Errorf("write: %w", syscall.ECONNRESET), 1, true},
		{"closed twice: the second backs off", fmt.Errorf("read: %w", io.EOF), 2, false},
		{"refused: backs off", nil, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			backoff := 300 * time.Millisecond
			c := &Controller{cfg: Config{SocketTimeout: time.Second, RetryBackoff: backoff}, log: eventlog.New(nil, 1, io.Discard)}
			m := newChannelManager(c)
			fc := &flakyClient{fails: tt.fails, err: tt.err, done: make(chan struct{})}
			m.newClient = func(brokerInfo) requester { return fc }
			m.addBroker(brokerInfo{ID: 2, Host: "127.0.0.1", Port: 1})
			defer m.shutdown()
			start := time.Now()
			m.send(2, kmsg.NewPtrLeaderAndISRRequest(), 0)
			select {
			case <-fc.done:
			case <-time.After(5 * time.Second):
				t.Fatal("the request was never answered")
			}
			if quick := time.Since(start) < backoff; quick != tt.wantQuick {
				t.Fatalf("answered after %s; want quicker than the %s backoff: %v", time.Since(start), backoff, tt.wantQuick)
			}
		})
	}
}

// recordingClient answers every request and keeps the controller epochs it
// was asked to carry.
type recordingClient struct {
	mu     sync.Mutex
	epochs []int32
	got    chan struct{}
}

func (r *recordingClient) Request(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	r.mu.Lock()
	if l, ok := req.(*kmsg.LeaderAndISRRequest); ok {
		r.epochs = append(r.epochs, l.ControllerEpoch)
	}
	r.mu.Unlock()
	r.got <- struct{}{}
	return req.ResponseKind(), nil
}
func (r *recordingClient) NextCorrelationID() int32 { return 7 }
func (r *recordingClient) Close()                   {}

// A request held at controller-before-send is already logged as sent and
// goes out, with the epoch it was built under, when the hold ends: the
// zombie's request in hand that brokers must refuse. Requests to the
// controller's own broker never stop there (their receiver knows no newer
// epoch than its own controller's), and a stopped queue logs nothing more.
func TestControllerBeforeSendHoldsABuiltRequest(t *testing.T) {
	var buf bytes.Buffer
	w := history.NewWriter(&buf, "n1", 1)
	fp := failpoint.New()
	if err := fp.ArmSpec(failpoint.ControllerBeforeSend + "=pause"); err != nil {
		t.Fatal(err)
	}
	hits := make(chan failpoint.Hit, 10)
	fp.OnHit = func(h failpoint.Hit) { hits <- h }
	c := &Controller{cfg: Config{BrokerID: 1, SocketTimeout: time.Second, RetryBackoff: time.Millisecond},
		log: eventlog.New(w, 1, io.Discard), fp: fp}
	m := newChannelManager(c)
	rc := &recordingClient{got: make(chan struct{}, 10)}
	m.newClient = func(brokerInfo) requester { return rc }
	m.addBroker(brokerInfo{ID: 1, Host: "127.0.0.1", Port: 1})
	m.addBroker(brokerInfo{ID: 2, Host: "127.0.0.1", Port: 2})
	defer m.shutdown()

	own := kmsg.NewPtrLeaderAndISRRequest()
	own.ControllerEpoch = 4
	m.send(1, own, 0)
	select {
	case <-rc.got:
	case <-time.After(5 * time.Second):
		t.Fatal("the request to the controller's own broker stopped at the failpoint")
	}
	req := kmsg.NewPtrLeaderAndISRRequest()
	req.ControllerEpoch = 5
	m.send(2, req, 0)
	select {
	case h := <-hits:
		if h.Name != failpoint.ControllerBeforeSend || h.Phase != "start" {
			t.Fatalf("hit %+v", h)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request to broker 2 never reached controller-before-send")
	}
	select {
	case <-rc.got:
		t.Fatal("the held request went out before the hold ended")
	case <-time.After(100 * time.Millisecond):
	}
	if err := fp.Release(failpoint.ControllerBeforeSend); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rc.got:
	case <-time.After(5 * time.Second):
		t.Fatal("the held request never went out after the release")
	}
	rc.mu.Lock()
	epochs := slices.Clone(rc.epochs)
	rc.mu.Unlock()
	if !slices.Equal(epochs, []int32{4, 5}) {
		t.Fatalf("sent controller epochs %v, want [4 5]", epochs)
	}

	m.shutdown()
	m.send(2, req, 0)
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	sent := strings.Count(buf.String(), `"kind":"control_sent"`)
	if sent != 2 {
		t.Fatalf("%d control_sent events, want 2 (nothing after the queues stopped)", sent)
	}
}
