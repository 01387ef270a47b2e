package checkers

import (
	"fmt"
	"sort"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/zklayout"
)

// Liveness checks that the controller finishes its pending work once every
// fault healed (KAFKA-16667 class): Grace after healing, no partition is
// left with leader -1 while a replica in its ISR is alive (registered in
// ZooKeeper; partition states in zxid order), and no controller write is
// stuck: failing with BADVERSION more than MaxBadVersionRetries times after
// the grace and never succeeding (a conflict resolved by a re-read and a
// successful write is not stuck, nor is a write of a controller that then
// resigned or restarted). A history that ends before the grace ran out
// while a partition awaits a leader, or while a controller keeps retrying
// (more than MaxBadVersionRetries failures since healing), is unknown, not
// valid.
//
// At any time, faults healed or not, a controller must not resign while
// /controller still names it: Kafka resigns only when the znode no longer
// names the broker (KafkaController.maybeResign, after a
// ControllerMovedException or a /controller change), when its session
// expired (Expire; the ephemeral is gone), or when it shuts down (its
// session, and with it the znode, ends as the process stops). Every other
// broker sees a controller named and does not stand for election, so a
// resignation that leaves the znode in place leaves the cluster without an
// acting controller for as long as it stays. A resignation is a violation
// when the watcher's /controller still named the resigning broker (the same
// znode) for longer than ResignGrace afterwards, with no controller elected
// and the resigning process still running (no node_stop or node_start of
// that broker) meanwhile.
type Liveness struct {
	Grace                time.Duration
	MaxBadVersionRetries int
	// ResignGrace is how long /controller may still name a controller
	// that resigned (0: DefaultResignGrace).
	ResignGrace time.Duration
}

// DefaultResignGrace covers the watcher's lag behind a legitimate
// resignation. In 19 every-fix-on runs (3 s ZooKeeper sessions, 58
// resignations) the watcher's /controller stopped naming a controller that
// resigned at shutdown within 8 to 47 ms (20 cases), and every other
// resignation came after the znode had changed; a controller that resigns
// by mistake stays named until its session ends, which takes a session
// timeout once the broker is cut off, and never while it runs. A second is
// twenty times the lag seen and a third of the session timeout.
const DefaultResignGrace = time.Second

// Name implements Checker.
func (Liveness) Name() string { return "liveness" }

// aliveness answers "which brokers were registered at time t" from the
// watcher's /brokers/ids listings, or, when there are none, from the nodes'
// own registration events (a process start or clean stop unregisters).
type aliveness struct {
	listings []struct {
		time int64
		ids  map[int32]bool
	}
	fromNodes map[int32][]struct {
		time  int64
		alive bool
	}
}

func newAliveness(h *history.History) *aliveness {
	a := &aliveness{fromNodes: map[int32][]struct {
		time  int64
		alive bool
	}{}}
	for e := range eventsOf(h, history.KindZKWatch, history.KindBrokerRegistered, history.KindNodeStart, history.KindNodeStop) {
		switch e.Kind {
		case history.KindZKWatch:
			if e.Watch.Path == zklayout.BrokerIDsPath && (e.Watch.Type == history.WatchChildren || e.Watch.Brokers != nil) {
				ids := map[int32]bool{}
				for _, b := range e.Watch.Brokers {
					ids[b.ID] = true
				}
				a.listings = append(a.listings, struct {
					time int64
					ids  map[int32]bool
				}{e.Time, ids})
			}
		case history.KindBrokerRegistered, history.KindNodeStart, history.KindNodeStop:
			id := e.Node
			if e.Registration != nil && e.Registration.BrokerID != 0 {
				id = e.Registration.BrokerID
			}
			a.fromNodes[id] = append(a.fromNodes[id], struct {
				time  int64
				alive bool
			}{e.Time, e.Kind == history.KindBrokerRegistered})
		}
	}
	return a
}

func (a *aliveness) alive(id int32, t int64) bool {
	if len(a.listings) > 0 {
		i := sort.Search(len(a.listings), func(i int) bool { return a.listings[i].time > t }) - 1
		return i >= 0 && a.listings[i].ids[id]
	}
	alive := false
	for _, x := range a.fromNodes[id] {
		if x.time > t {
			break
		}
		alive = x.alive
	}
	return alive
}

// Check implements Checker.
func (c Liveness) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	c.resignedWhileNamed(h, r)
	hi := heal(h)
	if !hi.healed {
		r.cannotDecide("%s, so liveness after healing cannot be judged.", hi.inForce)
		return r.result("")
	}
	deadline := hi.at + int64(c.Grace)
	judgeAt := deadline
	ended := hi.end < deadline
	if ended {
		judgeAt = hi.end
	}
	al := newAliveness(h)
	tl := leaderTimelines(h)
	dw := findDeletionWindows(h)
	for _, tp := range sortedTPs(tl) {
		o, ok := stateAt(tl[tp], judgeAt)
		if !ok || o.Leader >= 0 || dw.during(tp.Topic, judgeAt) {
			continue
		}
		var eligible []int32
		for _, id := range o.ISR {
			if al.alive(id, judgeAt) {
				eligible = append(eligible, id)
			}
		}
		if len(eligible) == 0 {
			continue
		}
		if ended {
			r.cannotDecide("partition %s has no leader (event %d) although ISR member(s) %v are alive, and the history ends before the %s grace after healing ran out.", tp, o.idx, eligible, c.Grace)
			continue
		}
		r.violateAt(deadline, []int{o.idx}, "partition %s still had leader -1 (event %d) %s after every fault healed although ISR member(s) %v were alive: the controller did not finish electing a leader.",
			tp, o.idx, c.Grace, eligible)
	}

	// A controller write is stuck when it keeps failing with BADVERSION
	// and never succeeds: each success of the same controller on the same
	// path (a re-read resolved the conflict) ends the streak.
	type key struct {
		node int32
		path string
	}
	type streak struct {
		epoch       int32
		n           int // failures after the grace
		since       int // failures after healing
		first, last int
		// over is when the failures after the grace exceeded
		// MaxBadVersionRetries: from then on the controller is stuck.
		over int64
	}
	open := map[key]*streak{}
	var order []key
	// stuck are streaks that had already retried past the grace more than
	// MaxBadVersionRetries times when their controller resigned or
	// restarted: the restart (an operator's, or the admin workload's
	// controlled shutdown) ends the retrying, not the fact that the
	// controller was stuck.
	type stuckStreak struct {
		k  key
		st *streak
	}
	var stuck []stuckStreak
	for e := range eventsOf(h, history.KindControllerResigned, history.KindNodeStart, history.KindZKWrite) {
		if e.Time <= hi.at {
			continue
		}
		if e.Kind == history.KindControllerResigned || e.Kind == history.KindNodeStart {
			// A controller that resigned (fenced, or its session lost)
			// or restarted has no write pending any more.
			for k, st := range open {
				if k.node == e.Node {
					if st.n > c.MaxBadVersionRetries {
						stuck = append(stuck, stuckStreak{k, st})
					}
					delete(open, k)
				}
			}
			continue
		}
		if e.Kind != history.KindZKWrite {
			continue
		}
		k := key{e.Node, e.ZKWrite.Path}
		switch e.ZKWrite.Outcome {
		case history.ZKOK:
			delete(open, k)
		case history.ZKBadVersion:
			st := open[k]
			if st == nil {
				st = &streak{first: -1}
				open[k] = st
				order = append(order, k)
			}
			st.since++
			st.epoch, st.last = e.ZKWrite.ControllerEpoch, e.Index
			if e.Time > deadline {
				if st.first < 0 {
					st.first = e.Index
				}
				if st.n++; st.n == c.MaxBadVersionRetries+1 {
					st.over = e.Time
				}
			}
		}
	}
	for _, s := range stuck {
		r.violateAt(s.st.over, []int{s.st.first, s.st.last},
			"controller %d (epoch %d) failed its write to %s with BADVERSION %d times more than %s after every fault healed (events %d to %d) and never succeeded until it stopped being controller: it was stuck retrying a stale zkVersion.",
			s.k.node, s.st.epoch, s.k.path, s.st.n, c.Grace, s.st.first, s.st.last)
	}
	seen := map[key]bool{}
	for _, k := range order {
		st, ok := open[k]
		if !ok || seen[k] {
			continue
		}
		seen[k] = true
		switch {
		case st.n > c.MaxBadVersionRetries:
			r.violateAt(st.over, []int{st.first, st.last},
				"controller %d (epoch %d) failed its write to %s with BADVERSION %d times more than %s after every fault healed (events %d to %d) and never succeeded: it is stuck retrying a stale zkVersion.",
				k.node, st.epoch, k.path, st.n, c.Grace, st.first, st.last)
		case ended && st.since > c.MaxBadVersionRetries:
			r.cannotDecide("controller %d's write to %s failed with BADVERSION %d times after healing (last at event %d) without succeeding, and the history ends before the %s grace after healing ran out.",
				k.node, k.path, st.since, st.last, c.Grace)
		}
	}
	c.adminOps(h, r, hi.at, deadline, dw)
	return r.result(fmt.Sprintf("within %s of every fault healing, every partition with a live ISR member had a leader, no controller was stuck retrying a write, no admin operation was left pending, and no controller resigned while /controller kept naming it.", c.Grace))
}

// resignedWhileNamed flags each controller_resigned after which /controller
// kept naming the resigning broker for longer than the resign grace. Only a
// resignation the watcher saw the znode name its broker at (its latest
// /controller observation up to the resignation, or its first one after it
// when that shows the znode of the resigned term: see seenLater) is judged:
// a history without those observations shows nothing about the znode. The naming
// ends, and the cluster may elect again, when the watcher sees the znode
// deleted or replaced, a controller is elected, the broker's process stops
// or restarts, or the broker registers again with a newer czxid (a new
// session: the one that held the ephemeral /controller is gone). A
// resignation after a newer controller epoch was elected is the controller
// moving, whatever the watcher (on a lagging server) still shows.
func (c Liveness) resignedWhileNamed(h *history.History, r *report) {
	grace := c.ResignGrace
	if grace <= 0 {
		grace = DefaultResignGrace
	}
	if len(h.Events) == 0 {
		return
	}
	t0, end := h.Events[0].Time, h.Events[len(h.Events)-1].Time
	var named *history.Event                 // the watcher's latest /controller observation
	var newest int32                         // the highest controller epoch known elected so far
	stopped := map[int32]bool{}              // node → its current process logged node_stop
	won := map[int32]history.ControllerRun{} // node → its latest election
	for e := range eventsOf(h, history.KindZKWatch, history.KindControllerElected, history.KindNodeStart, history.KindNodeStop, history.KindControllerResigned) {
		i := e.Index
		switch e.Kind {
		case history.KindZKWatch:
			switch w := e.Watch; {
			case w == nil:
			case w.Path == zklayout.ControllerPath && (w.Type == history.WatchDeleted || w.ControllerID != nil):
				named = e
			case w.Path == zklayout.ControllerEpochPath && w.ControllerEpoch != nil:
				newest = max(newest, *w.ControllerEpoch)
			}
		case history.KindControllerElected:
			if e.Controller != nil {
				newest = max(newest, e.Controller.Epoch)
				won[e.Node] = *e.Controller
			}
		case history.KindNodeStart:
			delete(stopped, e.Node)
		case history.KindNodeStop:
			stopped[e.Node] = true
		case history.KindControllerResigned:
			if e.Controller == nil {
				continue
			}
			at := named
			if at == nil || !names(at, e.Node) {
				at = seenLater(h, i, e.Node, won[e.Node], e.Controller.Epoch)
			}
			if at == nil {
				continue
			}
			// A process that already logged its clean stop resigns as part
			// of stopping (its session closes with it); one that a newer
			// epoch superseded, or whose session was replaced (it
			// registered again since), resigns because it is no longer
			// the controller.
			if stopped[e.Node] || newest > e.Controller.Epoch || reregisteredSince(h, i, e.Node, at.Watch.Czxid) {
				continue
			}
			until, by := end, -1
			for j := i + 1; j < len(h.Events); j++ {
				if x := &h.Events[j]; x != at && endsNaming(x, e.Node, e.Controller.Epoch, at.Watch.Czxid) {
					until, by = x.Time, j
					break
				}
			}
			if time.Duration(until-e.Time) <= grace {
				continue
			}
			evs := []int{e.Index, at.Index}
			ended := fmt.Sprintf("and it still named the broker when the history ended (+%s)", rel(end, t0))
			if by >= 0 {
				evs = append(evs, by)
				ended = "until " + namingEnd(&h.Events[by], t0)
			}
			r.violateAt(e.Time+int64(grace), evs,
				"controller %d (epoch %d) resigned at event %d (+%s) while /controller still named it (watcher event %d, czxid %d), and /controller kept naming it for %s, %s: the cluster had no acting controller while ZooKeeper named one, longer than the %s grace.",
				e.Node, e.Controller.Epoch, e.Index, rel(e.Time, t0), at.Index, at.Watch.Czxid,
				time.Duration(until-e.Time).Round(10*time.Millisecond), ended, grace)
		}
	}
}

// seenLater returns the watcher's first /controller observation after
// event i when it shows the znode that node created when it was elected at
// epoch (its czxid is that election's zxid, as one Multi creates the znode
// and bumps /controller_epoch): the znode existed from the election through
// the resignation at i, which the watcher had not caught up with yet (a
// controller resigning during its failover). Nil otherwise.
func seenLater(h *history.History, i int, node int32, won history.ControllerRun, epoch int32) *history.Event {
	if won.Epoch != epoch || won.Zxid == 0 {
		return nil
	}
	for j := i + 1; j < len(h.Events); j++ {
		x := &h.Events[j]
		if x.Kind != history.KindZKWatch || x.Watch == nil || x.Watch.Path != zklayout.ControllerPath {
			continue
		}
		if names(x, node) && x.Watch.Czxid == won.Zxid {
			return x
		}
		return nil
	}
	return nil
}

// names says whether watcher observation w shows /controller naming node.
func names(w *history.Event, node int32) bool {
	return w.Watch.Type != history.WatchDeleted && w.Watch.ControllerID != nil && *w.Watch.ControllerID == node
}

// reregisteredSince says whether node registered with a czxid newer than
// czxid (the /controller znode's) between that znode and event i: its
// broker znode is ephemeral too, so a newer one means a new session, and
// the session that held /controller is gone.
func reregisteredSince(h *history.History, i int, node int32, czxid int64) bool {
	if czxid == 0 {
		return false
	}
	for j := i - 1; j >= 0; j-- {
		x := &h.Events[j]
		if x.Kind == history.KindNodeStart && x.Node == node {
			return false
		}
		if newSession(x, node, czxid) {
			return true
		}
	}
	return false
}

// newSession says whether x is node registering with a czxid above czxid.
func newSession(x *history.Event, node int32, czxid int64) bool {
	if x.Kind != history.KindBrokerRegistered || x.Registration == nil || czxid == 0 {
		return false
	}
	id := x.Registration.BrokerID
	if id == 0 {
		id = x.Node
	}
	return id == node && x.Registration.BrokerEpoch > czxid
}

// endsNaming says whether x ends /controller's naming node (epoch, the
// znode with czxid) as a controller that had resigned: the watcher saw the
// znode deleted or replaced, a controller (any) was elected, a newer epoch
// appeared in /controller_epoch, node's process stopped or restarted (what
// follows a crash is not the resignation's doing), or node registered in a
// new session.
func endsNaming(x *history.Event, node, epoch int32, czxid int64) bool {
	switch x.Kind {
	case history.KindZKWatch:
		w := x.Watch
		switch {
		case w == nil:
			return false
		case w.Path == zklayout.ControllerEpochPath:
			return w.ControllerEpoch != nil && *w.ControllerEpoch > epoch
		case w.Path != zklayout.ControllerPath:
			return false
		case w.Type == history.WatchDeleted:
			return true
		}
		return w.ControllerID != nil && (*w.ControllerID != node || (czxid != 0 && w.Czxid != czxid))
	case history.KindControllerElected:
		return true
	case history.KindNodeStop, history.KindNodeStart:
		return x.Node == node
	case history.KindBrokerRegistered:
		return newSession(x, node, czxid)
	}
	return false
}

// namingEnd describes the event that ended /controller's naming a resigned
// controller.
func namingEnd(x *history.Event, t0 int64) string {
	at := fmt.Sprintf("event %d, +%s", x.Index, rel(x.Time, t0))
	switch x.Kind {
	case history.KindZKWatch:
		switch w := x.Watch; {
		case w.Path == zklayout.ControllerEpochPath:
			return fmt.Sprintf("the watcher saw /controller_epoch reach %d (%s)", *w.ControllerEpoch, at)
		case w.Type == history.WatchDeleted:
			return fmt.Sprintf("the watcher saw /controller deleted (%s)", at)
		}
		return fmt.Sprintf("the watcher saw /controller name broker %d with czxid %d (%s)", *x.Watch.ControllerID, x.Watch.Czxid, at)
	case history.KindControllerElected:
		epoch := int32(0)
		if x.Controller != nil {
			epoch = x.Controller.Epoch
		}
		return fmt.Sprintf("broker %d was elected controller at epoch %d (%s)", x.Node, epoch, at)
	case history.KindNodeStop:
		return fmt.Sprintf("broker %d's process stopped (%s)", x.Node, at)
	case history.KindBrokerRegistered:
		return fmt.Sprintf("broker %d registered in a new ZooKeeper session with czxid %d (%s)", x.Node, x.Registration.BrokerEpoch, at)
	default:
		return fmt.Sprintf("broker %d restarted (%s)", x.Node, at)
	}
}

// adminOps flags the control-plane operations (workloads/admin.go) the
// controller still owed at deadline: invoked before every fault healed and,
// by their completion (an info from the workload's own timeout or its end)
// or the end of the history, still not done after deadline. One that timed
// out before deadline proves nothing: the controller may have finished it
// afterwards unseen.
//
// A reassignment or preferred leader election invoked while its topic was
// queued for deletion is owed nothing: Kafka 2.6.3's controller skips it
// (KafkaController.maybeTriggerPartitionReassignment: "Skipping
// reassignment of ... since the topic is currently being deleted", then
// maybeRemoveFromZkReassignment drops the partition from
// /admin/reassign_partitions; processReplicaLeaderElection answers
// partitions of topics being deleted "The topic is being deleted" without
// electing). The client, which sees the znode
// go while the replicas stay, cannot tell that refusal from a slow
// controller and ends its operation info after its timeout; the next
// incarnation of the topic, created at the old assignment, never had the
// reassignment asked of it.
func (c Liveness) adminOps(h *history.History, r *report, healed, deadline int64, dw deletionWindows) {
	if len(h.Events) == 0 {
		return
	}
	ops := operations(h)
	end := h.Events[len(h.Events)-1].Time
	for _, o := range ops {
		op := o.Op()
		if !isAdminOp(op.F) || o.Invoke.Time > healed {
			continue
		}
		if out := o.Outcome(); out == history.OpOK || out == history.OpFail {
			continue
		}
		if (op.F == history.FReassign || op.F == history.FPreferredElection) && dw.during(op.Topic, o.Invoke.Time) {
			continue
		}
		still, last := end, -1
		if o.Complete != nil {
			still, last = o.Complete.Time, o.Complete.Index
		}
		if still <= deadline {
			continue
		}
		var what string
		switch op.F {
		case history.FControlledShutdown:
			what = fmt.Sprintf("%s of broker %d", op.F, op.Broker)
		case history.FCreateTopic, history.FDeleteTopic:
			what = fmt.Sprintf("%s %s", op.F, op.Topic)
		default:
			what = fmt.Sprintf("%s of %s-%d", op.F, op.Topic, op.Partition)
		}
		evs := []int{o.Invoke.Index}
		if last >= 0 {
			evs = append(evs, last)
		}
		r.violateAt(deadline, evs, "admin operation %s (invoked at event %d, before every fault healed) was still not completed %s after healing: the controller did not finish it.",
			what, o.Invoke.Index, c.Grace)
	}
}

func isAdminOp(f string) bool {
	switch f {
	case history.FCreateTopic, history.FDeleteTopic, history.FReassign, history.FPreferredElection, history.FControlledShutdown:
		return true
	}
	return false
}
