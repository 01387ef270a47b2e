package dataplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/node/zkdata"
	"github.com/zkchaos/zkchaos/node/zkutil"
)

// Producer ids come in blocks claimed from ZooKeeper, as Kafka 2.x's
// ProducerIdManager claims them: /latest_producer_id_block holds the last
// block handed out, and a broker takes the next one with a conditional
// write, so no two brokers ever give out the same id.
const producerIDBlockSize = 1000

// nextProducerID hands out the next id of this broker's block, claiming a
// new block when it is used up.
func (m *Manager) nextProducerID(ctx context.Context) (int64, error) {
	m.pidMu.Lock()
	defer m.pidMu.Unlock()
	if m.pidNext > m.pidEnd || m.pidEnd == 0 {
		start, end, err := m.claimProducerIDBlock(ctx)
		if err != nil {
			return -1, err
		}
		m.pidNext, m.pidEnd = start, end
	}
	id := m.pidNext
	m.pidNext++
	return id, nil
}

func (m *Manager) claimProducerIDBlock(ctx context.Context) (start, end int64, err error) {
	sess := m.session()
	if sess == nil {
		return 0, 0, errors.New("no ZooKeeper session yet")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		d, st, err := getZNode(ctx, sess, zkdata.ProducerIDBlockPath)
		next, version := int64(0), int32(-1)
		switch {
		case errors.Is(err, zk.ErrNoNode):
		case err != nil:
			return 0, 0, fmt.Errorf("read %s: %w", zkdata.ProducerIDBlockPath, err)
		default:
			last, err := zkdata.DecodeProducerIDBlockEnd(d)
			if err != nil {
				return 0, 0, err
			}
			next, version = last+1, st.Version
		}
		data := zkdata.EncodeProducerIDBlock(m.cfg.BrokerID, next, next+producerIDBlockSize-1)
		_, err = zkutil.Call(ctx, sess, func(c *zk.Conn) (struct{}, error) {
			if version < 0 {
				_, err := c.Create(zkdata.ProducerIDBlockPath, data, 0, zk.WorldACL(zk.PermAll))
				return struct{}{}, err
			}
			_, err := c.Set(zkdata.ProducerIDBlockPath, data, version)
			return struct{}{}, err
		})
		switch {
		case err == nil:
			m.log.Printf("claimed producer id block [%d, %d]", next, next+producerIDBlockSize-1)
			return next, next + producerIDBlockSize - 1, nil
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNodeExists):
			continue // another broker claimed a block first
		default:
			return 0, 0, fmt.Errorf("write %s: %w", zkdata.ProducerIDBlockPath, err)
		}
	}
	return 0, 0, fmt.Errorf("claim a producer id block: %w", ctx.Err())
}

// InitProducerID is TransactionCoordinator.handleInitProducerId for a
// producer without a transactional id: a fresh producer id at epoch 0 from
// any broker. The node hands a request with a transactional id to the
// transaction coordinator (node/txns.go); one that reaches this handler is
// refused as a broker whose ACLs deny it would refuse it.
func (m *Manager) InitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) kmsg.Response {
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.SetVersion(req.Version)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp
	}
	id, err := m.nextProducerID(ctx)
	if err != nil {
		m.log.Printf("InitProducerId: %v", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp
}

// getZNode reads a znode's data and stat through sess.
func getZNode(ctx context.Context, sess *zkutil.Session, path string) ([]byte, *zk.Stat, error) {
	type got struct {
		d  []byte
		st *zk.Stat
	}
	g, err := zkutil.Call(ctx, sess, func(c *zk.Conn) (got, error) {
		d, st, err := c.Get(path)
		return got{d, st}, err
	})
	return g.d, g.st, err
}

// NextProducerID is ProducerIdManager.generateProducerId for the
// transaction coordinator.
func (m *Manager) NextProducerID(ctx context.Context) (int64, error) {
	return m.nextProducerID(ctx)
}
