package checkers

// The control plane's own promises, each judged where it is kept rather
// than by the lost records a broken one may end in: a broker's
// registration (KIP-380 broker epochs), the controller election
// (/controller_epoch), a controller's tenure (what it may send, write and
// handle, and at which epoch) and what a node's ZooKeeper writes left in
// ZooKeeper. Rows, one per rule:
//
//	layer | promise | Kafka 2.6.3 code that keeps it | event-log evidence | checker rule
//
//	broker registration | every registration is a new znode: no two registrations of a broker share a czxid, and a later one has a larger czxid | KafkaZkClient.registerBroker (checkedEphemeralCreate returns the czxid of the znode this session created), called by KafkaServer.startup and, after a session expiry, by KafkaController's RegisterBrokerAndReelect; ZooKeeper gives every create a larger zxid | broker_registered (BrokerEpoch) of every process of the broker, in its event log's order | registration: a registration whose czxid equals or is below one an earlier registration of that broker logged
//	broker registration | a process's registration is its own: a znode that existed before the process started belongs to a predecessor's session | KafkaZkClient.checkedEphemeralCreate (CheckedEphemeral takes an existing znode only when its ephemeralOwner is this session) | zk_watch /brokers/ids listing the broker with that czxid before the process's node_start | registration: the process logs a czxid the watcher listed for its broker before the process started
//	controller election | every election makes a new, higher controller epoch: no two elections share one, and ZooKeeper order is epoch order | KafkaController.elect → KafkaZkClient.registerControllerAndIncrementControllerEpoch (Multi: create /controller, setData /controller_epoch to epoch+1 at the version read) | controller_elected (Epoch, Zxid = mzxid of /controller_epoch) | controller-epoch: two elections at one epoch; an election later in ZooKeeper order (zxid), or later in one node's log, at an epoch not above an earlier one
//	/controller_epoch znode | each new version holds a higher epoch than the one before | registerControllerAndIncrementControllerEpoch (the only writer after KafkaZkClient.createControllerEpochRaw wrote 0) | zk_watch /controller_epoch (ControllerEpoch, Mzxid), between deletions | controller-epoch: a version with a larger mzxid holding an epoch not above the previous version's
//	controller election | the epoch and fencing version a controller acts on are the ones it wrote, and the /controller created with them names it | registerControllerAndIncrementControllerEpoch's Multi creates /controller (ControllerZNode.encode(controllerId, …)) and sets /controller_epoch, and returns the epoch it set with that setData's version; KafkaController.elect stores both in ControllerContext | controller_elected (Epoch, EpochZkVersion, Zxid) and the watcher's /controller_epoch at mzxid Zxid and /controller at czxid Zxid (one Multi, one zxid) | controller-epoch: the watcher saw that version hold another epoch or version, or that /controller name another broker
//	controller channel | a controller sends control requests only while it is controller: from its election to its resignation, in its own process | KafkaController.onControllerFailover starts the ControllerChannelManager; onControllerResignation → ControllerChannelManager.shutdown → removeExistingBroker → RequestSendThread.shutdown (awaits the thread) before the resignation completes | control_sent, controller_elected, controller_resigned, node_start in the node's log order: the node logs control_sent before handing the request to the network and controller_resigned only after every send thread stopped (one abandoned mid-request sends nothing more) | controller-tenure: a control_sent after the process's resignation and before its next election, or from a process never elected
//	controller ZooKeeper writes | a controller writes only while it is controller | the event thread: KafkaController.process runs every write and onControllerResignation one at a time | zk_write carrying a controller epoch (not /controller or /controller_epoch, which the election itself writes), in the node's log order | controller-tenure: such a write logged outside its process's tenure
//	controller event thread | a controller handles a ControlledShutdown only while it is controller | KafkaController.doControlledShutdown throws ControllerMovedException unless isActive | controlled_shutdown accepted by the node, in its log order | controller-tenure: an accepted ControlledShutdown outside its process's tenure, or at another epoch
//	controller context epoch | every control request and ZooKeeper write of a controller carries the epoch it was elected at, and its own id: nothing a controller does goes back in epoch | ControllerContext.epoch and epochZkVersion set by KafkaController.elect; AbstractControllerBrokerRequestBatch.sendRequestsToBrokers(controllerEpoch); PartitionStateMachine and ReplicaStateMachine build LeaderIsrAndControllerEpoch(…, controllerContext.epoch); KafkaZkClient's writes check controllerEpochZkVersion | control_sent (ControllerID, ControllerEpoch), zk_write (ControllerEpoch, EpochZkVersion, State.ControllerEpoch), accepted controlled_shutdown (ControllerEpoch) within a tenure | controller-tenure: a value that differs from the tenure's election
//	zkdata / ZooKeeper writes | what a node caches as written is what ZooKeeper holds at that write's zxid | TopicPartitionStateZNode.encode and decode; KafkaZkClient.updateLeaderAndIsr, whose written LeaderIsrAndControllerEpoch the controller caches with the new zkVersion (ControllerContext.partitionLeadershipInfo); Partition.updateIsr caching the ISR it wrote; registerControllerAndIncrementControllerEpoch returning the epoch it set | zk_write (ok, Zxid, State; Data of /controller_epoch) and the watcher's zk_watch of the same path at mzxid Zxid | zk-writes: the two differ in leader, leader epoch, controller epoch, ISR or epoch
//	leader ISR write | a leader takes no other ISR between ZooKeeper applying its ISR write and its own memory taking it | Partition.shrinkIsr and expandIsr hold leaderIsrUpdateLock through ZkPartitionStateStore's write; ZooKeeperClient.handleRequests waits without a deadline; retryRequestsUntilConnected resends across a lost connection (an answer lost to an expired session is the one exception) | the leader's zk_write of the state and its isr_change (outcome unknown), the watcher's zk_watch of the write's exact state at its expected zkVersion + 1, the leader's hw_advance of the partition at that leader epoch before its next ok isr_change, role change or restart | zk-writes: such an advance, with no new registration of the leader since the write
//
// Not judged here: whether a broker accepts a stale controller epoch and
// whether a superseded controller's write lands (controller-fencing),
// which broker process a request reaches (broker-fencing), a state znode's
// epochs in ZooKeeper order (leader-uniqueness, controller-fencing), and a
// resignation while /controller still names the controller (liveness).

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/zklayout"
)

// Registration checks that every broker registration is the registering
// process's own new znode (KIP-380): no registration of a broker repeats
// or goes below the czxid of an earlier one, and no process takes as its
// registration a znode the watcher had listed before the process started.
// Such a process fences nothing: the controller sees no bounce, requests
// meant for the predecessor carry the epoch the new process believes is
// its own, and the znode vanishes when the predecessor's session expires.
type Registration struct{}

// Name implements Checker.
func (Registration) Name() string { return "registration" }

// Check implements Checker.
func (c Registration) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	t0 := firstTime(h)
	type reg struct {
		czxid int64
		idx   int
		start int // node_start of the process that logged it, -1 if none
	}
	regs := map[int32][]reg{}           // broker → registrations in its log's order
	started := map[int32]int{}          // node → its latest node_start
	listed := map[int32]map[int64]int{} // broker → czxid → first watcher listing
	proc := func(start int) string {
		if start < 0 {
			return "a process whose start is not in the history"
		}
		return fmt.Sprintf("the process started at event %d (+%s)", start, rel(h.Events[start].Time, t0))
	}
	n := 0
	for e := range eventsOf(h, history.KindNodeStart, history.KindZKWatch, history.KindBrokerRegistered) {
		switch e.Kind {
		case history.KindNodeStart:
			started[e.Node] = e.Index
		case history.KindZKWatch:
			for _, b := range e.Watch.Brokers {
				if listed[b.ID] == nil {
					listed[b.ID] = map[int64]int{}
				}
				if _, ok := listed[b.ID][b.Czxid]; !ok {
					listed[b.ID][b.Czxid] = e.Index
				}
			}
		case history.KindBrokerRegistered:
			n++
			id := e.Registration.BrokerID
			if id == 0 {
				id = e.Node
			}
			czxid := e.Registration.BrokerEpoch
			start, ok := started[e.Node]
			if !ok {
				start = -1
			}
			// The earliest earlier registration at or above this czxid
			// is the one it repeats or goes below.
			bad := -1
			for j, p := range regs[id] {
				if p.czxid >= czxid {
					bad = j
					break
				}
			}
			switch {
			case bad >= 0:
				p := regs[id][bad]
				how := "the same czxid as"
				if p.czxid > czxid {
					how = fmt.Sprintf("a czxid below the %d of", p.czxid)
				}
				whose := "the same process"
				if p.start != start {
					whose = proc(p.start)
				}
				r.violate([]int{p.idx, e.Index},
					"%s registered with broker epoch (czxid) %d at event %d (+%s), from %s, %s its registration at event %d (+%s) from %s: every registration creates a new /brokers/ids/%d znode, whose czxid is larger than any before it (KafkaZkClient.registerBroker), so this process did not register anew.",
					nodeName(id), czxid, e.Index, rel(e.Time, t0), proc(start), how, p.idx, rel(h.Events[p.idx].Time, t0), whose, id)
			case start >= 0:
				if w, ok := listed[id][czxid]; ok && w < start && h.Events[w].Time < h.Events[start].Time {
					r.violate([]int{w, start, e.Index},
						"%s registered with broker epoch (czxid) %d at event %d (+%s), from %s, but the ZooKeeper watcher had listed /brokers/ids/%d with that czxid at event %d (+%s), before the process started: it took a predecessor's znode as its own registration (KafkaZkClient.checkedEphemeralCreate takes an existing znode only when this session owns it).",
						nodeName(id), czxid, e.Index, rel(e.Time, t0), proc(start), id, w, rel(h.Events[w].Time, t0))
				}
			}
			regs[id] = append(regs[id], reg{czxid, e.Index, start})
		}
	}
	r.detail("registrations", n)
	return r.result(fmt.Sprintf("%d broker registrations each had a czxid of their own, larger than every earlier registration of the broker, and none was a znode listed before its process started.", n))
}

// ControllerEpoch checks the controller election's promise: each election
// increments /controller_epoch, so no two controllers share an epoch,
// ZooKeeper order is epoch order, the epoch and fencing version a
// controller acts on are what it wrote, and the /controller it created
// names it. Brokers fence a controller only by a lower epoch, so two
// controllers at one epoch are not fenced from each other.
type ControllerEpoch struct{}

// Name implements Checker.
func (ControllerEpoch) Name() string { return "controller-epoch" }

// Check implements Checker.
func (c ControllerEpoch) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	t0 := firstTime(h)
	type election struct {
		node  int32
		epoch int32
		ver   int32
		zxid  int64
		idx   int
	}
	type version struct {
		epoch int32
		ver   int32
		mzxid int64
		idx   int
	}
	type named struct {
		id  int32
		idx int
	}
	controllerAt := map[int64]named{} // watcher: /controller by czxid
	var elections []election
	byEpoch := map[int32]election{}
	lastOf := map[int32]election{} // node → its latest election
	atZxid := map[int64]version{}  // watcher: /controller_epoch by mzxid
	var versions []version         // since the latest deletion, in watcher order
	var eras [][]version
	describe := func(el election) string {
		return fmt.Sprintf("controller %d's election at epoch %d (event %d, +%s)", el.node, el.epoch, el.idx, rel(h.Events[el.idx].Time, t0))
	}
	for e := range eventsOf(h, history.KindControllerElected, history.KindZKWatch) {
		switch e.Kind {
		case history.KindControllerElected:
			el := election{e.Node, e.Controller.Epoch, e.Controller.EpochZkVersion, e.Controller.Zxid, e.Index}
			if p, ok := byEpoch[el.epoch]; ok {
				r.violate([]int{p.idx, el.idx}, "%s and %s share one controller epoch: every election increments /controller_epoch (KafkaZkClient.registerControllerAndIncrementControllerEpoch), and brokers fence only a lower epoch, so neither controller is fenced from the other.",
					describe(p), describe(el))
			} else if p, ok := lastOf[el.node]; ok && el.epoch < p.epoch {
				r.violate([]int{p.idx, el.idx}, "%s came after %s in its own log: a later election must be at a higher epoch.", describe(el), describe(p))
			}
			if _, ok := byEpoch[el.epoch]; !ok {
				byEpoch[el.epoch] = el
			}
			lastOf[el.node] = el
			elections = append(elections, el)
		case history.KindZKWatch:
			w := e.Watch
			if w.Path == zklayout.ControllerPath && w.ControllerID != nil && w.Czxid != 0 {
				if _, ok := controllerAt[w.Czxid]; !ok {
					controllerAt[w.Czxid] = named{*w.ControllerID, e.Index}
				}
			}
			if w.Path != zklayout.ControllerEpochPath {
				continue
			}
			if w.Type == history.WatchDeleted {
				eras = append(eras, versions)
				versions = nil
				continue
			}
			if w.ControllerEpoch == nil || w.Mzxid == 0 {
				continue
			}
			v := version{*w.ControllerEpoch, w.Version, w.Mzxid, e.Index}
			if _, ok := atZxid[v.mzxid]; !ok {
				atZxid[v.mzxid] = v
			}
			versions = append(versions, v)
		}
	}
	eras = append(eras, versions)

	// ZooKeeper order among elections that logged their zxid.
	ordered := slices.DeleteFunc(slices.Clone(elections), func(el election) bool { return el.zxid == 0 })
	slices.SortStableFunc(ordered, func(a, b election) int { return cmp.Compare(a.zxid, b.zxid) })
	for i := 1; i < len(ordered); i++ {
		p, el := ordered[i-1], ordered[i]
		if el.zxid > p.zxid && el.epoch < p.epoch {
			r.violate([]int{p.idx, el.idx}, "%s, at zxid %d, came after %s at zxid %d in ZooKeeper's order but at a lower epoch.",
				describe(el), el.zxid, describe(p), p.zxid)
		}
	}
	// The znode's versions, per era between deletions, in mzxid order.
	watched := 0
	for _, vs := range eras {
		slices.SortStableFunc(vs, func(a, b version) int { return cmp.Compare(a.mzxid, b.mzxid) })
		for i := 1; i < len(vs); i++ {
			watched++
			p, v := vs[i-1], vs[i]
			if v.mzxid > p.mzxid && v.epoch <= p.epoch {
				r.violate([]int{p.idx, v.idx}, "/controller_epoch was rewritten from %d (mzxid %d, event %d, +%s) to %d (mzxid %d, event %d, +%s): only an election writes it after its creation, and it writes the epoch read plus one.",
					p.epoch, p.mzxid, p.idx, rel(h.Events[p.idx].Time, t0), v.epoch, v.mzxid, v.idx, rel(h.Events[v.idx].Time, t0))
			}
		}
	}
	// Each election against what its Multi wrote.
	for _, el := range elections {
		if el.zxid == 0 {
			continue
		}
		if v, ok := atZxid[el.zxid]; ok && (v.epoch != el.epoch || v.ver != el.ver) {
			r.violate([]int{v.idx, el.idx}, "%s with /controller_epoch version %d wrote /controller_epoch at zxid %d, where the ZooKeeper watcher saw it hold %d at version %d (event %d, +%s): the controller acts at an epoch and fencing version ZooKeeper does not hold.",
				describe(el), el.ver, el.zxid, v.epoch, v.ver, v.idx, rel(h.Events[v.idx].Time, t0))
		}
		if n, ok := controllerAt[el.zxid]; ok && n.id != el.node {
			r.violate([]int{n.idx, el.idx}, "%s created /controller at zxid %d, where the ZooKeeper watcher saw it name broker %d (event %d, +%s): the controller acts while ZooKeeper names another.",
				describe(el), el.zxid, n.id, n.idx, rel(h.Events[n.idx].Time, t0))
		}
	}
	r.detail("elections", len(elections))
	r.detail("controller_epoch_versions", watched)
	return r.result(fmt.Sprintf("%d controller elections each made a higher controller epoch of their own, in ZooKeeper order, matching what /controller_epoch and /controller held where the watcher saw them.", len(elections)))
}

// ControllerTenure checks what a controller does with its tenure: it
// sends control requests and writes to ZooKeeper only between its election
// and its resignation, within one process, and everything it sends and
// writes carries the epoch, fencing version and id of that election.
//
// The node logs control_sent when a send thread hands a request to the
// network, before the request is sent, and logs controller_resigned only
// after every send thread has stopped (a thread abandoned in the middle
// of a request returns without sending again). So a request handed to
// the network before the resignation, even one a paused zombie delivers
// later, is logged before controller_resigned and stays within the
// tenure; a control_sent after it is a send thread the resignation did
// not stop.
type ControllerTenure struct{}

// Name implements Checker.
func (ControllerTenure) Name() string { return "controller-tenure" }

// ctrlTenure is one controller run of a node process.
type ctrlTenure struct {
	epoch, epochZkVersion int32
	elected               int // controller_elected
	resigned              int // controller_resigned ending it, -1 while it runs
}

// Check implements Checker.
func (c ControllerTenure) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	t0 := firstTime(h)
	at := func(i int) string { return fmt.Sprintf("event %d, +%s", i, rel(h.Events[i].Time, t0)) }
	cur := map[int32]*ctrlTenure{} // node → its process's latest tenure, nil before any
	started := map[int32]int{}     // node → its latest node_start
	// Out-of-tenure acts: one violation per node and idle stretch, with
	// the first act, the last and how many.
	type idle struct {
		node        int32
		after       *ctrlTenure // the tenure it follows, nil: none in this process
		start       int         // node_start of the process, -1 if not in the history
		first, last int
		sends       int
		writes      int
		shutdowns   int
	}
	var stretches []*idle
	open := map[int32]*idle{}
	// Acts at the wrong epoch: one violation per tenure and kind.
	type wrongKey struct {
		t    *ctrlTenure
		kind history.Kind
	}
	wrong := map[wrongKey]bool{}
	sends, writes, shutdowns, unjudged := 0, 0, 0, 0
	for e := range eventsOf(h, history.KindNodeStart, history.KindControllerElected, history.KindControllerResigned, history.KindControlSent, history.KindZKWrite, history.KindControlledShutdown) {
		switch e.Kind {
		case history.KindNodeStart:
			delete(cur, e.Node)
			delete(open, e.Node)
			started[e.Node] = e.Index
		case history.KindControllerElected:
			cur[e.Node] = &ctrlTenure{epoch: e.Controller.Epoch, epochZkVersion: e.Controller.EpochZkVersion, elected: e.Index, resigned: -1}
			delete(open, e.Node)
		case history.KindControllerResigned:
			if t := cur[e.Node]; t != nil && t.resigned < 0 {
				t.resigned = e.Index
			}
		case history.KindControlSent, history.KindZKWrite, history.KindControlledShutdown:
			isSend := e.Kind == history.KindControlSent
			switch {
			case isSend:
				sends++
			case e.Kind == history.KindControlledShutdown:
				// The controller's own record of handling one: the
				// broker's record of sending it says "sent", and a
				// refusal (NOT_CONTROLLER among them) does nothing.
				if e.Shutdown.Verdict != history.VerdictAccepted {
					continue
				}
				shutdowns++
			default:
				zw := e.ZKWrite
				// The election's own writes come before controller_elected,
				// and a leader's ISR write carries no controller epoch.
				if zw.Path == zklayout.ControllerPath || zw.Path == zklayout.ControllerEpochPath || (zw.ControllerEpoch == 0 && !zw.Conditional) {
					continue
				}
				writes++
			}
			t := cur[e.Node]
			if t == nil || t.resigned >= 0 {
				start, ok := started[e.Node]
				if t == nil && !ok {
					// Neither the process's start nor an election of it
					// is in the history (a trimmed one): nothing says
					// it was not elected.
					unjudged++
					continue
				}
				s := open[e.Node]
				if s == nil {
					s = &idle{node: e.Node, after: t, start: start, first: e.Index}
					open[e.Node] = s
					stretches = append(stretches, s)
				}
				s.last = e.Index
				switch {
				case isSend:
					s.sends++
				case e.Kind == history.KindControlledShutdown:
					s.shutdowns++
				default:
					s.writes++
				}
				continue
			}
			k := wrongKey{t, e.Kind}
			if wrong[k] {
				continue
			}
			if msg := offEpoch(e, t); msg != "" {
				wrong[k] = true
				r.violate([]int{t.elected, e.Index}, "controller %d, elected at epoch %d with /controller_epoch version %d (%s), %s (%s): a controller acts only at the epoch of its election (ControllerContext.epoch, epochZkVersion).",
					e.Node, t.epoch, t.epochZkVersion, at(t.elected), msg, at(e.Index))
			}
		}
	}
	for _, s := range stretches {
		what := describeActs(s.sends, s.writes, s.shutdowns)
		span := fmt.Sprintf("from %s", at(s.first))
		if s.last != s.first {
			span += fmt.Sprintf(" to %s", at(s.last))
		}
		ex := &h.Events[s.first]
		var first string
		switch ex.Kind {
		case history.KindControlSent:
			first = fmt.Sprintf("the first being %s to %s at controller epoch %d", ex.Control.API, nodeName(ex.Control.TargetBroker), ex.Control.ControllerEpoch)
		case history.KindControlledShutdown:
			first = fmt.Sprintf("the first being the ControlledShutdown of %s at controller epoch %d", nodeName(ex.Shutdown.BrokerID), ex.Shutdown.ControllerEpoch)
		default:
			first = fmt.Sprintf("the first being a %s of %s at controller epoch %d", ex.ZKWrite.Op, ex.ZKWrite.Path, ex.ZKWrite.ControllerEpoch)
		}
		if s.after != nil {
			r.violate([]int{s.after.elected, s.after.resigned, s.first, s.last},
				"controller %d resigned epoch %d (%s) and then %s %s, %s, without being elected again: onControllerResignation stops the ControllerChannelManager's send threads before it completes, and only a controller's event thread writes.",
				s.node, s.after.epoch, at(s.after.resigned), what, span, first)
			continue
		}
		r.violate([]int{s.start, s.first, s.last}, "broker %d %s %s, %s, without having been elected controller since its process started (%s): only an elected controller starts a ControllerChannelManager (onControllerFailover).",
			s.node, what, span, first, at(s.start))
	}
	r.detail("control_sent", sends)
	r.detail("controller_writes", writes)
	r.detail("controlled_shutdowns_handled", shutdowns)
	r.detail("acts_of_processes_without_start", unjudged)
	ok := fmt.Sprintf("%d control requests sent, %d controller ZooKeeper writes and %d ControlledShutdowns handled all came from an elected controller before it resigned, at the epoch of its election", sends, writes, shutdowns)
	if unjudged > 0 {
		ok += fmt.Sprintf(" (%d of them by processes whose start and election the history does not hold, judged for neither)", unjudged)
	}
	return r.result(ok + ".")
}

// offEpoch says how e, a send or controller write within tenure t, departs
// from t's election ("" if it does not).
func offEpoch(e *history.Event, t *ctrlTenure) string {
	if e.Kind == history.KindControlledShutdown {
		if sd := e.Shutdown; sd.ControllerEpoch != t.epoch {
			return fmt.Sprintf("handled the ControlledShutdown of %s at controller epoch %d", nodeName(sd.BrokerID), sd.ControllerEpoch)
		}
		return ""
	}
	if e.Kind == history.KindControlSent {
		cr := e.Control
		switch {
		case cr.ControllerEpoch != t.epoch:
			return fmt.Sprintf("sent %s to %s at controller epoch %d", cr.API, nodeName(cr.TargetBroker), cr.ControllerEpoch)
		case cr.ControllerID != e.Node:
			return fmt.Sprintf("sent %s to %s naming controller %d", cr.API, nodeName(cr.TargetBroker), cr.ControllerID)
		}
		return ""
	}
	zw := e.ZKWrite
	switch {
	case zw.ControllerEpoch != t.epoch:
		return fmt.Sprintf("wrote %s (%s, %s) at controller epoch %d", zw.Path, zw.Op, zw.Outcome, zw.ControllerEpoch)
	case zw.Conditional && zw.EpochZkVersion != t.epochZkVersion:
		return fmt.Sprintf("wrote %s (%s, %s) guarded by /controller_epoch version %d", zw.Path, zw.Op, zw.Outcome, zw.EpochZkVersion)
	case zw.State != nil && zw.State.ControllerEpoch != t.epoch:
		return fmt.Sprintf("wrote %s (%s, %s) holding controller_epoch %d", zw.Path, zw.Op, zw.Outcome, zw.State.ControllerEpoch)
	}
	return ""
}

// describeActs says what a node did: "sent 3 control requests and made 1
// controller ZooKeeper write".
func describeActs(sends, writes, shutdowns int) string {
	plural := func(n int, one, many string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmt.Sprintf("%d %s", n, many)
	}
	var parts []string
	if sends > 0 {
		parts = append(parts, "sent "+plural(sends, "control request", "control requests"))
	}
	if writes > 0 {
		parts = append(parts, "made "+plural(writes, "controller ZooKeeper write", "controller ZooKeeper writes"))
	}
	if shutdowns > 0 {
		parts = append(parts, "handled "+plural(shutdowns, "ControlledShutdown", "ControlledShutdowns"))
	}
	if len(parts) > 1 {
		return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
	}
	return parts[0]
}

// firstTime is the time of h's first event, the origin explanations'
// "+d" times count from (0 for an empty history).
func firstTime(h *history.History) int64 {
	if len(h.Events) == 0 {
		return 0
	}
	return h.Events[0].Time
}

// ZKWrites checks that what a node logged as written to ZooKeeper is what
// ZooKeeper holds at that write's zxid, as the watcher saw it: a partition
// state's leader, leader epoch, controller epoch and ISR, and
// /controller_epoch's value. A node acts on what it believes it wrote (the
// controller caches the state with its new zkVersion, a leader its ISR,
// a controller its epoch), so a difference is a decision ZooKeeper does
// not hold, made on by the writer and by nobody else.
type ZKWrites struct{}

// Name implements Checker.
func (ZKWrites) Name() string { return "zk-writes" }

// Check implements Checker.
func (c ZKWrites) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	t0 := firstTime(h)
	type key struct {
		path string
		zxid int64
	}
	seen := map[key]int{} // the watcher's first observation of a path at an mzxid
	for e := range eventsOf(h, history.KindZKWatch) {
		if e.Kind == history.KindZKWatch && e.Watch.Mzxid > 0 && (e.Watch.State != nil || e.Watch.ControllerEpoch != nil) {
			k := key{e.Watch.Path, e.Watch.Mzxid}
			if _, ok := seen[k]; !ok {
				seen[k] = e.Index
			}
		}
	}
	compared := 0
	for e := range eventsOf(h, history.KindZKWrite) {
		if e.Kind != history.KindZKWrite || e.ZKWrite.Outcome != history.ZKOK || e.ZKWrite.Zxid == 0 {
			continue
		}
		zw := e.ZKWrite
		wi, ok := seen[key{zw.Path, zw.Zxid}]
		if !ok {
			continue
		}
		w := h.Events[wi].Watch
		var wrote, held string
		switch {
		case zw.State != nil && w.State != nil:
			wrote, held = stateText(zw.State), stateText(w.State)
		case zw.Path == zklayout.ControllerEpochPath && w.ControllerEpoch != nil && zw.Data != "":
			wrote, held = zw.Data, fmt.Sprint(*w.ControllerEpoch)
		default:
			continue
		}
		compared++
		if wrote == held {
			continue
		}
		r.violate([]int{e.Index, wi}, "%s logged its write of %s (%s, event %d, +%s) as %s, but ZooKeeper held %s at that write's zxid %d (watcher, event %d, +%s): the node goes on from a value ZooKeeper does not hold.",
			nodeName(e.Node), zw.Path, zw.Op, e.Index, rel(e.Time, t0), wrote, held, zw.Zxid, wi, rel(h.Events[wi].Time, t0))
	}
	r.detail("writes_compared", compared)
	given, expired := givenUpISRWrites(h, r, t0)
	r.detail("isr_writes_given_up_applied", given)
	r.detail("isr_writes_given_up_session_expired", expired)
	return r.result(fmt.Sprintf("%d ZooKeeper writes the watcher saw at their zxid held what their writers logged; %d leader ISR writes logged as not written were applied by ZooKeeper, none followed by a high watermark advance on the ISR they replaced (%d of them across an expired session).", compared, given, expired))
}

// givenUpISRWrites judges the converse for leaders' ISR writes: a write a
// leader logged as not written (its outcome unknown: the client gave up or
// lost the connection) that ZooKeeper applied all the same, after which
// the leader advanced its high watermark while still counting the ISR its
// write replaced. Kafka 2.6.3's Partition.shrinkIsr and expandIsr hold
// leaderIsrUpdateLock for writing through the ZooKeeper write, which
// ZooKeeperClient.handleRequests waits for without a deadline and
// retryRequestsUntilConnected resends across a lost connection, so no high
// watermark is computed between ZooKeeper taking the new ISR and the leader
// taking it. The one way Kafka leaves the two apart is an answer lost to an
// expired session (waitUntilConnected throws): a leader that registered
// again between the write and the advance is not judged, only counted. It
// returns how many given-up writes ZooKeeper applied, and how many of
// those crossed a new registration.
func givenUpISRWrites(h *history.History, r *report, t0 int64) (given, expired int) {
	type key struct {
		node int32
		tp   history.TopicPartition
	}
	lastWrite := map[key]*history.Event{} // a leader's latest write of a partition's state
	for e := range eventsOf(h, history.KindZKWrite, history.KindISRChange) {
		switch {
		case e.Kind == history.KindZKWrite && e.ZKWrite.State != nil && e.ZKWrite.State.Leader == e.Node && e.ZKWrite.Op == "set":
			lastWrite[key{e.Node, e.ZKWrite.State.TP()}] = e
		case e.Kind == history.KindISRChange && e.ISR != nil &&
			(e.ISR.Outcome == history.ZKConnectionLoss || e.ISR.Outcome == history.ZKError):
			tp := history.TP(e.ISR.Topic, e.ISR.Partition)
			w := lastWrite[key{e.Node, tp}]
			if w == nil || w.ZKWrite.State.LeaderEpoch != e.ISR.LeaderEpoch || !slices.Equal(w.ZKWrite.State.ISR, e.ISR.New) {
				continue
			}
			applied := appliedAfter(h, w)
			if applied == nil {
				continue
			}
			given++
			adv, reg := wentOnWithISR(h, w, e)
			if reg != nil {
				expired++
				continue
			}
			if adv == nil {
				continue
			}
			zw := w.ZKWrite
			r.violate([]int{w.Index, e.Index, applied.Index, adv.Index},
				"broker %d gave up its write of %s-%d's ISR %v -> %v (leader epoch %d, expected zkVersion %d, sent +%s, outcome %s at +%s, event %d), but ZooKeeper applied it (the watcher saw leader %d, leader epoch %d, ISR %v at zkVersion %d, +%s, event %d); the broker then advanced the partition's high watermark %d -> %d at +%s (event %d) still counting ISR %v, the write it gave up no longer holding the partition, while ZooKeeper held ISR %v from +%s at the latest. Kafka holds the partition's leaderIsrUpdateLock until ZooKeeper answers the ISR write (Partition.shrinkIsr, expandIsr), so a leader never computes its high watermark from an ISR its own applied write replaced: the controller elects from ZooKeeper's ISR.",
				e.Node, tp.Topic, tp.Partition, e.ISR.Old, e.ISR.New, zw.State.LeaderEpoch, zw.ExpectedVersion, rel(zw.Start, t0), e.ISR.Outcome, rel(e.Time, t0), e.Index,
				applied.Watch.State.Leader, applied.Watch.State.LeaderEpoch, applied.Watch.State.ISR, applied.Watch.Version, rel(applied.Time, t0), applied.Index,
				adv.HW.Old, adv.HW.New, rel(adv.Time, t0), adv.Index, e.ISR.Old, e.ISR.New, rel(applied.Time, t0))
		}
	}
	return given, expired
}

// appliedAfter returns the watcher's first sight of leader write w's exact
// state at the zkVersion w expected plus one, seen after w was sent and
// before the topic was next deleted; nil if the watcher never saw it.
func appliedAfter(h *history.History, w *history.Event) *history.Event {
	zw := w.ZKWrite
	if zw.ExpectedVersion < 0 {
		return nil
	}
	start := zw.Start
	if start == 0 {
		start = w.Time
	}
	for i := w.Index + 1; i < len(h.Events); i++ {
		e := &h.Events[i]
		switch {
		case e.Kind == history.KindTopicDeletion && e.Deletion != nil && e.Deletion.Topic == zw.State.Topic:
			return nil
		case e.Kind == history.KindZKWatch && e.Watch != nil && e.Watch.Path == zw.Path && e.Watch.State != nil && e.Time >= start:
			st := e.Watch.State
			if e.Watch.Version == zw.ExpectedVersion+1 && st.Leader == zw.State.Leader &&
				st.LeaderEpoch == zw.State.LeaderEpoch && slices.Equal(st.ISR, zw.State.ISR) {
				return e
			}
		}
	}
	return nil
}

// wentOnWithISR returns the first high watermark advance the leader of
// isr_change g made for g's partition at g's leader epoch after g, before
// it took an ISR again (an ISR change it logged ok), a role change of the
// partition or a restart; and the leader's new registration between its
// write w and that advance, if any (its session expired).
func wentOnWithISR(h *history.History, w, g *history.Event) (adv, reg *history.Event) {
	tp := history.TP(g.ISR.Topic, g.ISR.Partition)
	for i := w.Index + 1; i < len(h.Events); i++ {
		e := &h.Events[i]
		if e.Node != g.Node {
			continue
		}
		if e.Kind == history.KindBrokerRegistered {
			reg = e
		}
		if i <= g.Index {
			continue
		}
		switch {
		case e.Kind == history.KindNodeStart:
			return nil, reg
		case e.Kind == history.KindRoleChange && e.Role != nil && e.Role.TP() == tp:
			return nil, reg
		case e.Kind == history.KindISRChange && e.ISR != nil && history.TP(e.ISR.Topic, e.ISR.Partition) == tp && e.ISR.Outcome == history.ZKOK:
			return nil, reg
		case e.Kind == history.KindHWAdvance && e.HW != nil && history.TP(e.HW.Topic, e.HW.Partition) == tp &&
			e.HW.LeaderEpoch == g.ISR.LeaderEpoch && e.HW.New > e.HW.Old:
			return e, reg
		}
	}
	return nil, reg
}

// stateText is a partition state's leader, epochs and ISR, as compared.
func stateText(s *history.PartitionState) string {
	return fmt.Sprintf("leader %d, leader epoch %d, controller epoch %d, ISR %v", s.Leader, s.LeaderEpoch, s.ControllerEpoch, s.ISR)
}
