package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/zkdata"
)

// ---- reading ZooKeeper --------------------------------------------------

func (c *Controller) childrenW(ctx context.Context, p string, mk func() event) ([]string, error) {
	type r struct {
		kids []string
		ch   <-chan zk.Event
	}
	v, _, err := zkDo(ctx, c, func(conn zkConn) (r, error) {
		kids, _, ch, err := conn.ChildrenW(p)
		return r{kids, ch}, err
	})
	if err != nil {
		return nil, fmt.Errorf("children of %s: %w", p, err)
	}
	c.waitWatch(v.ch, mk)
	slices.Sort(v.kids)
	return v.kids, nil
}

func (c *Controller) get(ctx context.Context, p string) ([]byte, *zk.Stat, error) {
	type r struct {
		d  []byte
		st *zk.Stat
	}
	v, _, err := zkDo(ctx, c, func(conn zkConn) (r, error) {
		d, st, err := conn.Get(p)
		return r{d, st}, err
	})
	return v.d, v.st, err
}

// readBrokers lists /brokers/ids (setting the BrokerChange watch) with each
// broker's registration and czxid.
func (c *Controller) readBrokers(ctx context.Context) (map[int32]brokerInfo, error) {
	gen := c.gen
	kids, err := c.childrenW(ctx, zkdata.BrokerIDsPath, func() event { return evBrokerChange{gen: gen} })
	if err != nil {
		return nil, err
	}
	out := map[int32]brokerInfo{}
	for _, k := range kids {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			c.log.Printf("ignoring malformed broker znode %s/%s", zkdata.BrokerIDsPath, k)
			continue
		}
		d, st, err := c.get(ctx, zkdata.BrokerPath(int32(id)))
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		reg, err := zkdata.DecodeBroker(int32(id), d)
		if err != nil {
			c.log.Printf("ignoring broker %d: %v", id, err)
			continue
		}
		out[int32(id)] = brokerInfo{ID: int32(id), Epoch: st.Czxid, Host: reg.Host, Port: reg.Port}
	}
	return out, nil
}

// readTopics lists /brokers/topics (setting the TopicChange watch) and reads
// the assignment of every topic not yet known.
func (c *Controller) readTopics(ctx context.Context) ([]string, error) {
	gen := c.gen
	kids, err := c.childrenW(ctx, zkdata.TopicsPath, func() event { return evTopicChange{gen: gen} })
	if err != nil {
		return nil, err
	}
	var added []string
	for _, t := range kids {
		if c.ctx.topics[t] {
			continue
		}
		d, _, err := c.get(ctx, zkdata.TopicPath(t))
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return added, err
		}
		as, err := zkdata.DecodeTopic(t, d)
		if err != nil {
			c.log.Printf("ignoring topic: %v", err)
			continue
		}
		c.ctx.topics[t] = true
		for p, r := range as {
			c.ctx.assign[history.TP(t, p)] = r
		}
		// A reassignment in progress (initializeControllerContext:
		// isBeingReassigned) is known by its adding and removing replicas.
		adding, removing, err := zkdata.DecodeTopicReassigning(t, d)
		if err != nil {
			c.log.Printf("topic %s: %v", t, err)
		}
		for p, r := range as {
			if len(adding[p]) > 0 || len(removing[p]) > 0 {
				c.ctx.reassigning[history.TP(t, p)] = &reassignment{target: without(r, removing[p]), adding: adding[p], removing: removing[p]}
			}
		}
		added = append(added, t)
	}
	return added, nil
}
