package controller

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
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
	q      *queue[kmsg.Request]
	client *wire.Client
	stop   chan struct{}
	done   chan struct{}
}

type channelManager struct {
	c      *Controller
	mu     sync.Mutex
	queues map[int32]*sendQueue
}

func newChannelManager(c *Controller) *channelManager {
	return &channelManager{c: c, queues: map[int32]*sendQueue{}}
}

func (m *channelManager) addBroker(b brokerInfo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.queues[b.ID]; ok {
		return
	}
	sq := &sendQueue{broker: b, q: newQueue[kmsg.Request](),
		client: wire.NewClient(b.addr(), fmt.Sprintf("controller-%d", m.c.cfg.BrokerID)),
		stop:   make(chan struct{}), done: make(chan struct{})}
	m.queues[b.ID] = sq
	go m.sendThread(sq)
}

// removeBroker stops a broker's send thread and drops what was queued.
func (m *channelManager) removeBroker(id int32) {
	m.mu.Lock()
	sq, ok := m.queues[id]
	delete(m.queues, id)
	m.mu.Unlock()
	if !ok {
		return
	}
	close(sq.stop)
	sq.client.Close()
	<-sq.done
	if n := len(sq.q.drain()); n > 0 {
		m.c.log.Printf("dropped %d queued requests for broker %d", n, id)
	}
}

func (m *channelManager) shutdown() {
	m.mu.Lock()
	ids := make([]int32, 0, len(m.queues))
	for id := range m.queues {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	for _, id := range ids {
		m.removeBroker(id)
	}
}

func (m *channelManager) send(id int32, req kmsg.Request) {
	m.mu.Lock()
	sq, ok := m.queues[id]
	m.mu.Unlock()
	if !ok {
		m.c.log.Printf("no send queue for broker %d: dropping %s", id, kmsg.NameForKey(req.Key()))
		return
	}
	sq.q.push(req)
}

func (m *channelManager) sendThread(sq *sendQueue) {
	defer close(sq.done)
	for {
		req, ok := sq.q.pop()
		if !ok {
			select {
			case <-sq.stop:
				return
			case <-sq.q.wake:
				continue
			}
		}
		for attempt := 1; ; attempt++ {
			if attempt == 1 {
				ev := describeSent(req, sq.broker.ID)
				ev.CorrelationID = sq.client.NextCorrelationID()
				m.c.log.ControlSent(ev)
			}
			ctx, cancel := context.WithTimeout(context.Background(), m.c.cfg.SocketTimeout)
			go func() {
				select {
				case <-sq.stop:
					cancel()
				case <-ctx.Done():
				}
			}()
			resp, err := sq.client.Request(ctx, req)
			cancel()
			if err == nil {
				m.c.onResponse(sq.broker.ID, req, resp)
				break
			}
			select {
			case <-sq.stop:
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
	}
	return c
}
