package checkers

import (
	"cmp"
	"slices"
	"sync"

	"github.com/zkchaos/zkchaos/history"
)

// zkState is one version of a partition's state znode
// (/brokers/topics/T/partitions/P/state) as the history shows it: a node's
// successful write of it (zk_write) or the ZooKeeper watcher's observation
// of it (zk_watch). The write and the watcher's observation of one version
// are two zkStates with the same zxid.
type zkState struct {
	*history.PartitionState
	zxid    int64 // the write's zxid, the observation's mzxid; 0 when not logged
	version int32 // the znode version it has in ZooKeeper
	time    int64 // when its event was logged, which is not when ZooKeeper applied it
	idx     int   // its event
	writer  int32 // the node that wrote it, unless watcher
	watcher bool
	// inc counts the partition's incarnations before this version's: 0
	// until its topic is deleted and created again, when the znode
	// version starts again at 0 (deletion.go).
	inc int
}

// zkStates is what the history shows of one partition's state znode.
type zkStates struct {
	// ordered are the versions in ZooKeeper order. ZooKeeper orders every
	// update by zxid, so the versions that carry one (a write's zxid, an
	// observation's mzxid) are ordered by it, those with equal zxids in
	// history order. When none carries one (nodes and watcher that logged
	// no zxids), the watcher's own observations are the order: one
	// ZooKeeper session sees a znode's updates in the order they were
	// applied, and the watcher logs them in that order. Log time is never
	// the order: a node paused between its write and its log line logs an
	// old version late. So watcher observations without a zxid, when other
	// versions have one, have no place in the order and are left out.
	ordered []zkState
	// unordered are the node-logged writes without a zxid, in history
	// order: ZooKeeper applied them, but nothing says where among the
	// ordered versions.
	unordered []zkState
}

// byZxid says whether the versions are ordered by zxid, not by the
// watcher's session.
func (s zkStates) byZxid() bool { return len(s.ordered) > 0 && s.ordered[0].zxid > 0 }

// zkVersions holds the partition states of the histories Run is checking,
// by history: several checkers judge the state znode's versions, and each
// collecting and ordering them again was one more pass over every event.
var zkVersions sync.Map // *history.History → map[history.TopicPartition]zkStates

// partitionStates returns, for every partition whose state the history
// shows, its versions in ZooKeeper order (see zkStates), collected once per
// Run; a checker called on its own collects them itself. Checkers only read
// them: they are shared by the checkers running concurrently.
func partitionStates(h *history.History) map[history.TopicPartition]zkStates {
	if v, ok := zkVersions.Load(h); ok {
		return v.(map[history.TopicPartition]zkStates)
	}
	return collectPartitionStates(h)
}

func collectPartitionStates(h *history.History) map[history.TopicPartition]zkStates {
	type collected struct {
		byZxid, watched, unordered []zkState
	}
	all := map[history.TopicPartition]*collected{}
	for e := range eventsOf(h, history.KindZKWatch, history.KindZKWrite) {
		var s zkState
		switch {
		case e.Kind == history.KindZKWatch && e.Watch != nil && e.Watch.State != nil:
			w := e.Watch
			s = zkState{PartitionState: w.State, zxid: w.Mzxid, version: w.Version, watcher: true}
		case e.Kind == history.KindZKWrite && e.ZKWrite != nil && e.ZKWrite.State != nil && e.ZKWrite.Outcome == history.ZKOK:
			w := e.ZKWrite
			s = zkState{PartitionState: w.State, zxid: w.Zxid, version: w.NewVersion, writer: e.Node}
		default:
			continue
		}
		s.time, s.idx = e.Time, e.Index
		tp := s.TP()
		c := all[tp]
		if c == nil {
			c = &collected{}
			all[tp] = c
		}
		switch {
		case s.zxid > 0:
			c.byZxid = append(c.byZxid, s)
		case s.watcher:
			c.watched = append(c.watched, s)
		default:
			c.unordered = append(c.unordered, s)
		}
	}
	out := make(map[history.TopicPartition]zkStates, len(all))
	for tp, c := range all {
		ordered := c.watched
		if len(c.byZxid) > 0 {
			ordered = c.byZxid
			slices.SortStableFunc(ordered, func(a, b zkState) int { return cmp.Compare(a.zxid, b.zxid) })
		}
		countIncarnations(ordered)
		out[tp] = zkStates{ordered: ordered, unordered: c.unordered}
	}
	return out
}

// countIncarnations numbers the incarnations of ordered versions: a
// version lower than one before it is a new znode (a znode's version only
// grows), which only a deletion of the topic and its creation at the same
// name make. The new znode's version 0 is often missing: the controller's
// create logs no zxid, and the watcher may not have seen it.
func countIncarnations(ordered []zkState) {
	inc, top := 0, int32(0)
	for i := range ordered {
		if v := ordered[i].version; v < top {
			inc, top = inc+1, v
		} else {
			top = v
		}
		ordered[i].inc = inc
	}
}
