// Package observer owns the harness's read-only observers of the system under
// test. Today that is the ZooKeeper watcher: it follows the znodes that carry
// Kafka's fencing state (/controller, /controller_epoch, /brokers/ids with
// each registration's czxid, and every partition's state znode) and records
// what it sees as zk_watch events; beside it, PollModes records which
// server leads the ensemble.
//
// It never writes to ZooKeeper and never talks to the node program: what it
// records is ZooKeeper's view, to be compared with what the nodes logged.
package observer

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/zkdial"
	"github.com/zkchaos/zkchaos/zklayout"
)

// Watcher follows the fencing znodes until its context ends.
type Watcher struct {
	ctx  context.Context // ends every watch loop
	conn *zk.Conn
	w    *history.Writer

	mu      sync.Mutex
	watched map[string]bool // znodes with a live data-watch loop
	wg      sync.WaitGroup
}

// WatchZK connects to servers and records into w until ctx is cancelled;
// Wait returns when every watch loop has ended. ZooKeeper watches are one-shot,
// so a change that lands between a trigger and the re-arm is seen only as its
// end state; the watcher records states, not every transition.
func WatchZK(ctx context.Context, servers []string, sessionTimeout time.Duration, w *history.Writer) (*Watcher, error) {
	wt := &Watcher{ctx: ctx, w: w, watched: map[string]bool{}}
	// As ZooKeeper's Java client bounds a connection attempt.
	handshake := zkdial.Handshake(sessionTimeout, len(servers))
	conn, _, err := zk.Connect(servers, sessionTimeout, zk.WithLogger(quiet{}), zk.WithDialer(zkdial.BoundedHandshake(handshake)), zk.WithEventCallback(func(e zk.Event) {
		if e.Type == zk.EventSession {
			w.Write(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: "/", Type: history.WatchState, SessionState: e.State.String()}})
		}
	}))
	if err != nil {
		return nil, fmt.Errorf("zookeeper watcher: connect %v: %w", servers, err)
	}
	wt.conn = conn
	wt.loop(zklayout.ControllerPath, wt.watchData)
	wt.loop(zklayout.ControllerEpochPath, wt.watchData)
	wt.loop(zklayout.BrokerIDsPath, wt.watchBrokers)
	wt.loop(zklayout.TopicsPath, wt.watchTopics)
	wt.wg.Add(1)
	go func() {
		defer wt.wg.Done()
		<-ctx.Done()
		conn.Close()
	}()
	return wt, nil
}

// Wait blocks until all watch loops have stopped and the session is closed
// (after ctx ends).
func (wt *Watcher) Wait() { wt.wg.Wait() }

// loop runs step on p until ctx ends; step returns the channel that fires on
// the next change. Errors (connection loss, node missing) back off briefly.
func (wt *Watcher) loop(p string, step func(string) (<-chan zk.Event, error)) {
	ctx := wt.ctx
	wt.mu.Lock()
	if wt.watched[p] {
		wt.mu.Unlock()
		return
	}
	wt.watched[p] = true
	wt.mu.Unlock()
	wt.wg.Add(1)
	go func() {
		defer wt.wg.Done()
		for ctx.Err() == nil {
			ch, err := step(p)
			if err != nil {
				select {
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			select {
			case <-ctx.Done():
				return
			case <-ch:
			}
		}
	}()
}

// watchData records p's current content (or its absence) and re-arms.
func (wt *Watcher) watchData(p string) (<-chan zk.Event, error) {
	data, st, ch, err := wt.conn.GetW(p)
	if errors.Is(err, zk.ErrNoNode) {
		ok, _, ech, err := wt.conn.ExistsW(p)
		if err != nil {
			return nil, err
		}
		if ok {
			return fired(), nil // created meanwhile: read it now
		}
		wt.record(&history.Watch{Path: p, Type: history.WatchDeleted})
		return ech, nil
	}
	if err != nil {
		return nil, err
	}
	wt.record(describe(p, data, st))
	return ch, nil
}

func (wt *Watcher) watchBrokers(p string) (<-chan zk.Event, error) {
	ids, exists, ch, err := wt.childrenW(p)
	if err != nil || !exists {
		return ch, err
	}
	var brokers []history.BrokerZnode
	for _, id := range ids {
		n, err := zklayout.ParseBrokerID(id)
		if err != nil {
			continue
		}
		ok, st, err := wt.conn.Exists(path.Join(p, id))
		if err != nil || !ok {
			continue // gone between the list and the stat
		}
		brokers = append(brokers, history.BrokerZnode{ID: n, Czxid: st.Czxid})
	}
	slices.SortFunc(brokers, func(a, b history.BrokerZnode) int { return int(a.ID - b.ID) })
	wt.record(&history.Watch{Path: p, Type: history.WatchChildren, Brokers: brokers})
	return ch, nil
}

// watchTopics starts a partition watcher for every partition of every topic
// it sees; topics are only ever added in the scenarios, so it never stops one.
func (wt *Watcher) watchTopics(p string) (<-chan zk.Event, error) {
	return wt.eachChild(p, "partitions", wt.watchPartitions)
}

func (wt *Watcher) watchPartitions(p string) (<-chan zk.Event, error) {
	return wt.eachChild(p, "state", wt.watchData)
}

// eachChild watches p's children and starts step on child/sub for every
// child it lists.
func (wt *Watcher) eachChild(p, sub string, step func(string) (<-chan zk.Event, error)) (<-chan zk.Event, error) {
	children, _, ch, err := wt.childrenW(p)
	for _, c := range children {
		wt.loop(path.Join(p, c, sub), step)
	}
	return ch, err
}

// childrenW lists p's children and watches them; a missing p (exists
// false, no children) is watched for its creation instead.
func (wt *Watcher) childrenW(p string) (children []string, exists bool, ch <-chan zk.Event, err error) {
	children, _, ch, err = wt.conn.ChildrenW(p)
	if errors.Is(err, zk.ErrNoNode) {
		ch, err = wt.awaitCreate(p)
		return nil, false, ch, err
	}
	if err != nil {
		return nil, false, nil, err
	}
	return children, true, ch, nil
}

// awaitCreate arms a watch on p's creation. If p was created between the
// caller's NoNode and this call, ExistsW sets a data watch that would fire
// only on p's next change, not on its children: the caller must look again
// at once, or it would miss every child added from then on.
func (wt *Watcher) awaitCreate(p string) (<-chan zk.Event, error) {
	ok, _, ech, err := wt.conn.ExistsW(p)
	if err != nil {
		return nil, err
	}
	if ok {
		return fired(), nil
	}
	return ech, nil
}

// fired is a watch channel that has already fired.
func fired() <-chan zk.Event {
	ch := make(chan zk.Event, 1)
	ch <- zk.Event{Type: zk.EventNodeCreated}
	return ch
}

func (wt *Watcher) record(w *history.Watch) {
	wt.w.Write(history.Event{Kind: history.KindZKWatch, Watch: w})
}

// describe parses the znodes whose content the checkers compare with what
// the nodes logged; the raw data is kept too, so a malformed znode is visible.
func describe(p string, data []byte, st *zk.Stat) *history.Watch {
	w := &history.Watch{Path: p, Type: history.WatchChanged, Data: string(data), Czxid: st.Czxid, Mzxid: st.Mzxid, Version: st.Version}
	switch {
	case p == zklayout.ControllerPath:
		if id, err := zklayout.DecodeController(data); err == nil {
			c := int32(id)
			w.ControllerID = &c
		}
	case p == zklayout.ControllerEpochPath:
		if e, err := zklayout.DecodeControllerEpoch(data); err == nil {
			w.ControllerEpoch = &e
		}
	default:
		topic, part, ok := zklayout.ParseStatePath(p)
		if !ok {
			break
		}
		if v, err := zklayout.DecodePartitionState(p, data); err == nil {
			isr := make([]int32, len(v.ISR))
			for i, b := range v.ISR {
				isr[i] = int32(b)
			}
			w.State = &history.PartitionState{Topic: topic, Partition: part, Leader: int32(v.Leader), LeaderEpoch: int32(v.LeaderEpoch), ControllerEpoch: int32(v.ControllerEpoch), ISR: isr}
		}
	}
	return w
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}
