package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/failpoint"
	"github.com/zkchaos/zkchaos/node/wire"
)

// brokerInfo is the controller's view of one live broker: its endpoint and
// the broker epoch (czxid) it read from /brokers/ids/<id>.
type brokerInfo struct {
	ID    int32
	Epoch int64
	Host  string
	Port  int32
}

func (b brokerInfo) addr() string { return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) }

// sendQueue is one broker's queue and send thread, as
// ControllerChannelManager's RequestSendThread: requests go out one at a
// time, in order, each retried until the broker answers or the queue is
// removed. A request queued for a broker that restarts meanwhile reaches the
// NEW process on the same address; that is how KAFKA-7235 happens, and why
// bounce detection replaces the queue.
type sendQueue struct {
	broker brokerInfo
	q      *queue[queued]
	client requester
	// ctx ends when the queue is removed: it aborts the request in flight
	// (dial, write or read) and the retry backoff.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// sending orders a send's log line against the queue's stop: the
	// thread checks ctx and logs control_sent under it, stopQueue cancels
	// under it, so once a queue is stopped (and the resignation that
	// stopped it logged) no control_sent of it follows in the event log.
	sending sync.Mutex
}

// queued is a request and the broker epoch (czxid) of the process it was
// meant for, which the controller logs with every send even when the
// request itself carries no broker epoch (KAFKA-7235).
type queued struct {
	req   kmsg.Request
	meant int64
	// at is when the controller queued it: what a request says is what
	// the controller knew then, however long the send thread holds it.
	at time.Time
}

// requester is the connection a send thread uses: *wire.Client, or a fake in
// tests.
type requester interface {
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	NextCorrelationID() int32
	Close()
}

// defaultStopWait bounds how long removing a broker's queue waits for its
// send thread to finish. removeBroker runs on the controller's event loop,
// which must never wait on a broker's network (Kafka's controller thread
// never does): removal aborts the request in flight, so the thread normally
// exits at once; a thread still busy after the bound is abandoned, and it
// sends nothing more once it returns.
const defaultStopWait = time.Second

type channelManager struct {
	c *Controller
	// gen is the controller generation the queues serve; responses carry
	// it to the event loop, which drops them once the controller moved on.
	gen    int
	mu     sync.Mutex
	queues map[int32]*sendQueue
	// newClient connects a queue to its broker (wire.NewClient).
	newClient func(b brokerInfo) requester
	stopWait  time.Duration
	// manual (tests): queues get no send thread, so what the controller
	// sends stays queued for the test to read.
	manual bool
}

func newChannelManager(c *Controller) *channelManager {
	return &channelManager{c: c, gen: c.gen, queues: map[int32]*sendQueue{}, stopWait: defaultStopWait,
		newClient: func(b brokerInfo) requester {
			return wire.NewClient(b.addr(), fmt.Sprintf("controller-%d", c.cfg.BrokerID))
		}}
}

func (m *channelManager) addBroker(b brokerInfo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.queues[b.ID]; ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	sq := &sendQueue{broker: b, q: newQueue[queued](), client: m.newClient(b),
		ctx: ctx, cancel: cancel, done: make(chan struct{})}
	m.queues[b.ID] = sq
	if m.manual {
		close(sq.done)
		return
	}
	go m.sendThread(sq)
}

// removeBroker stops a broker's send thread and drops what was queued. It
// returns within stopWait whatever the broker's network does.
func (m *channelManager) removeBroker(id int32) {
	m.mu.Lock()
	sq, ok := m.queues[id]
	delete(m.queues, id)
	m.mu.Unlock()
	if !ok {
		return
	}
	stopQueue(sq)
	m.awaitQueue(sq, time.Now().Add(m.stopWait))
}

// stopQueue aborts a queue's request in flight without waiting for it.
func stopQueue(sq *sendQueue) {
	sq.sending.Lock()
	sq.cancel()
	sq.sending.Unlock()
	sq.client.Close()
}

// awaitQueue waits until deadline for a stopped queue's send thread, then
// drops the queue's requests either way.
func (m *channelManager) awaitQueue(sq *sendQueue, deadline time.Time) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-sq.done:
	case <-t.C:
		m.c.log.Printf("send thread for broker %d (%s) still busy after %s; abandoning it (it sends nothing more)",
			sq.broker.ID, sq.broker.addr(), m.stopWait)
	}
	if n := len(sq.q.drain()); n > 0 {
		m.c.log.Printf("dropped %d queued requests for broker %d", n, sq.broker.ID)
	}
}

// shutdown removes every queue, stopping them all before waiting, so it
// takes at most one stopWait in all.
func (m *channelManager) shutdown() {
	m.mu.Lock()
	qs := make([]*sendQueue, 0, len(m.queues))
	for id, sq := range m.queues {
		qs = append(qs, sq)
		delete(m.queues, id)
	}
	m.mu.Unlock()
	for _, sq := range qs {
		stopQueue(sq)
	}
	deadline := time.Now().Add(m.stopWait)
	for _, sq := range qs {
		m.awaitQueue(sq, deadline)
	}
}

// send queues req for broker id's process with broker epoch meant.
func (m *channelManager) send(id int32, req kmsg.Request, meant int64) {
	m.mu.Lock()
	sq, ok := m.queues[id]
	m.mu.Unlock()
	if !ok {
		m.c.log.Printf("no send queue for broker %d: dropping %s", id, kmsg.NameForKey(req.Key()))
		return
	}
	sq.q.push(queued{req: req, meant: meant, at: time.Now()})
}

func (m *channelManager) sendThread(sq *sendQueue) {
	defer close(sq.done)
	for {
		// A removed queue sends nothing more, even if its thread was
		// abandoned in the middle of a request and only returns now.
		if sq.ctx.Err() != nil {
			return
		}
		item, ok := sq.q.pop()
		req := item.req
		if !ok {
			select {
			case <-sq.ctx.Done():
				return
			case <-sq.q.wake:
				continue
			}
		}
		resent := false
		for attempt := 1; ; attempt++ {
			if !m.logSent(sq, item, attempt) {
				return
			}
			if sq.broker.ID != m.c.cfg.BrokerID {
				// The request is in hand and logged: a process held here
				// and resumed after its successor's election delivers it
				// under its old controller epoch.
				_ = m.c.fp.Eval(sq.ctx, failpoint.ControllerBeforeSend)
			}
			ctx, cancel := context.WithTimeout(sq.ctx, m.c.cfg.SocketTimeout)
			resp, err := sq.client.Request(ctx, req)
			cancel()
			if err == nil {
				m.c.onResponse(m.gen, sq.broker.ID, req, resp)
				break
			}
			if peerClosed(err) && !resent {
				// Kafka's RequestSendThread asks NetworkClientUtils.isReady
				// before each send, which polls the connection first: an
				// idle connection the broker closed (it exited, or was
				// killed and restarted) is seen as gone and the request
				// goes over a new connection at once. Here the dead
				// connection shows only when the request fails on it, so
				// it is sent again at once, once; further failures back
				// off as Kafka's do (RequestSendThread.backoff).
				resent = true
				continue
			}
			select {
			case <-sq.ctx.Done():
				return
			case <-time.After(m.c.cfg.RetryBackoff):
			}
			if attempt == 1 || attempt%20 == 0 {
				m.c.log.Printf("send %s to broker %d (%s) failed (attempt %d), retrying: %v",
					kmsg.NameForKey(req.Key()), sq.broker.ID, sq.broker.addr(), attempt, err)
			}
		}
	}
}

// logSent logs one attempt of req as sent, unless sq was stopped; it
// reports whether the attempt may go on. Every attempt is logged with its
// own correlation id: a retry may reach a different process than the first
// attempt would have, and the checker pairs receipts with sends by id.
func (m *channelManager) logSent(sq *sendQueue, item queued, attempt int) bool {
	sq.sending.Lock()
	defer sq.sending.Unlock()
	if sq.ctx.Err() != nil {
		return false
	}
	ev := describeSent(item.req, sq.broker.ID)
	ev.CorrelationID = sq.client.NextCorrelationID()
	ev.MeantBrokerEpoch, ev.Attempt, ev.Queued = item.meant, attempt, item.at.UnixNano()
	m.c.log.Emit(history.Event{Kind: history.KindControlSent, Control: &ev})
	return true
}

// describeSent renders a queued request for a control_sent event.
func describeSent(req kmsg.Request, target int32) history.Control {
	c := history.Control{TargetBroker: target, APIVersion: req.GetVersion()}
	switch r := req.(type) {
	case *kmsg.LeaderAndISRRequest:
		c.API, c.ControllerID, c.ControllerEpoch, c.BrokerEpoch = history.APILeaderAndIsr, r.ControllerID, r.ControllerEpoch, r.BrokerEpoch
		for _, t := range r.TopicStates {
			for _, p := range t.PartitionStates {
				c.Partitions = append(c.Partitions, history.ControlPartition{Topic: t.Topic, Partition: p.Partition, Leader: p.Leader,
					LeaderEpoch: p.LeaderEpoch, ISR: p.ISR, Replicas: p.Replicas, ZkVersion: p.ZKVersion, IsNew: p.IsNew})
			}
		}
	case *kmsg.StopReplicaRequest:
		c.API, c.ControllerID, c.ControllerEpoch, c.BrokerEpoch = history.APIStopReplica, r.ControllerID, r.ControllerEpoch, r.BrokerEpoch
		for _, t := range r.Topics {
			for _, p := range t.PartitionStates {
				c.Partitions = append(c.Partitions, history.ControlPartition{Topic: t.Topic, Partition: p.Partition, Leader: -1, LeaderEpoch: p.LeaderEpoch})
				c.DeletePartition = c.DeletePartition || p.Delete
			}
		}
	case *kmsg.UpdateMetadataRequest:
		c.API, c.ControllerID, c.ControllerEpoch, c.BrokerEpoch = history.APIUpdateMetadata, r.ControllerID, r.ControllerEpoch, r.BrokerEpoch
		for _, t := range r.TopicStates {
			for _, p := range t.PartitionStates {
				c.Partitions = append(c.Partitions, history.ControlPartition{Topic: t.Topic, Partition: p.Partition, Leader: p.Leader,
					LeaderEpoch: p.LeaderEpoch, ISR: p.ISR, Replicas: p.Replicas, ZkVersion: p.ZKVersion})
			}
		}
	}
	return c
}

// peerClosed says whether a request failed because the broker had closed
// the connection (end of stream, reset, broken pipe), not because it could
// not be reached or did not answer in time.
func peerClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
