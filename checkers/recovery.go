package checkers

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/zklayout"
)

// Recovery checks that the cluster is whole again once every fault healed:
// a broker restarted, cut off or paused comes back as a full member, and
// nothing of the faults lingers. Judged at the end of the history, each
// finding holding for longer than Grace after every fault healed (and after
// it began) is a violation; one that began less than Grace before the end,
// or a history whose faults never healed, is unknown. A history whose end
// state is whole is valid however soon after healing it ends.
//
//	layer | promise | Kafka code | event-log evidence | checker rule
//	registration | a running broker is registered under its own session | KafkaServer.startup → KafkaZkClient.registerBroker; KafkaController's session-expiration handler re-registers (registerBrokerAndReelect) | node_start, broker_registered (czxid), the watcher's /brokers/ids listings with czxids, the harness's list of running brokers (heal phase end) | every broker process running at the end is listed in the last /brokers/ids listing with the czxid its process logged
//	replication | a restarted replica rejoins the ISR | KafkaController.onBrokerStartup → ReplicaStateMachine (OnlineReplica: LeaderAndIsr to the new replica); Partition.maybeExpandIsr once the follower caught up | the watcher's partition states (ISR, leader, leader epoch), the replica set of the latest LeaderAndIsr, role_change of each replica's current process | every partition has a leader and an ISR holding every replica whose broker runs; each such replica's current process took its role (leader, or follower of the leader) at the current leader epoch
//	controller | a controller exists and acts | KafkaController.elect (ControllerChangeHandler, session re-election) | the watcher's /controller and /controller_epoch, controller_elected / controller_resigned of the named broker's current process | /controller names a running broker whose current process was elected at the newest controller epoch and has not resigned
//
// A fourth rule, that every running broker's metadata cache converged on
// ZooKeeper's partition states, is in recovery_metadata.go.
//
// The brokers running at the end are those the harness listed at the end
// of its heal phase; a history without that list (older runs) takes each
// broker's latest process unless it logged node_stop or a kill or bounce
// fault hit it afterwards (a crash leaves no node_stop).
type Recovery struct {
	Grace time.Duration
}

// Name implements Checker.
func (Recovery) Name() string { return "recovery" }

// nodeProc is one node process and what it logged: the events the recovery
// rules compare with ZooKeeper's end state.
type nodeProc struct {
	node    int32
	start   *history.Event // node_start; nil for events before any
	reg     *history.Event // latest broker_registered
	ctl     *history.Event // latest controller_elected or controller_resigned
	stopped *history.Event // node_stop
	killed  *history.Event // a kill or bounce fault_start naming the node
	roles   map[history.TopicPartition]*history.Event
}

// since is when the process began: its node_start, else t0.
func (p *nodeProc) since(t0 int64) int64 {
	if p.start != nil {
		return p.start.Time
	}
	return t0
}

// nodeProcs holds each broker's latest process, and whether the history
// has any node log at all.
type nodeProcs struct {
	cur     map[int32]*nodeProc
	running map[int32]bool // the brokers running at the end
	// listed: running comes from the harness's list, not inference.
	listed  bool
	anyNode bool
}

// notRunning names the brokers of isr the harness did not list as running
// at the end, with how their latest process ended: a partition whose ISR
// holds no running broker stays without a leader in Kafka, so the broker
// that is gone is what did not recover. "" when all run, or without the
// harness's list.
func (ps *nodeProcs) notRunning(isr []int32, t0 int64) string {
	if !ps.listed {
		return ""
	}
	var parts []string
	for _, b := range isr {
		if ps.running[b] {
			continue
		}
		p := ps.cur[b]
		switch {
		case p == nil || p.start == nil:
			parts = append(parts, fmt.Sprintf("broker %d (no process of it logged a start)", b))
		case p.stopped != nil:
			parts = append(parts, fmt.Sprintf("broker %d (its process, started at %s, stopped at %s)", b, at(p.start, t0), at(p.stopped, t0)))
		case p.killed != nil && p.killed.Time >= p.start.Time:
			parts = append(parts, fmt.Sprintf("broker %d (its process, started at %s, was killed by fault %s at %s)", b, at(p.start, t0), p.killed.Fault.ID, at(p.killed, t0)))
		case p.reg == nil || p.reg.Time < p.start.Time:
			parts = append(parts, fmt.Sprintf("broker %d (its process, started at %s, ended without registering and logged no node_stop)", b, at(p.start, t0)))
		default:
			parts = append(parts, fmt.Sprintf("broker %d (its process, started at %s and registered at %s, ended and logged no node_stop)", b, at(p.start, t0), at(p.reg, t0)))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; not running at the end: " + strings.Join(parts, ", ")
}

// brokerTarget parses a fault target that names a broker ("n2").
func brokerTarget(s string) (int32, bool) {
	if !strings.HasPrefix(s, "n") {
		return 0, false
	}
	id, err := strconv.Atoi(s[1:])
	if err != nil || id <= 0 {
		return 0, false
	}
	return int32(id), true
}

// killsProcess says whether a fault of this name ends the process of the
// broker it targets (the nemesis's kill and bounce).
func killsProcess(name string) bool { return name == "kill" || name == "bounce" }

func collectProcesses(h *history.History) *nodeProcs {
	ps := &nodeProcs{cur: map[int32]*nodeProc{}}
	get := func(node int32) *nodeProc {
		p := ps.cur[node]
		if p == nil {
			p = &nodeProc{node: node, roles: map[history.TopicPartition]*history.Event{}}
			ps.cur[node] = p
		}
		return p
	}
	var list *history.RunningBrokers
	for e := range eventsOf(h, history.KindNodeStart, history.KindNodeStop, history.KindBrokerRegistered, history.KindControllerElected, history.KindControllerResigned, history.KindRoleChange, history.KindFaultStart, history.KindPhase) {
		switch e.Kind {
		case history.KindNodeStart:
			ps.anyNode = true
			ps.cur[e.Node] = &nodeProc{node: e.Node, start: e, roles: map[history.TopicPartition]*history.Event{}}
		case history.KindNodeStop:
			ps.anyNode = true
			get(e.Node).stopped = e
		case history.KindBrokerRegistered:
			ps.anyNode = true
			get(e.Node).reg = e
		case history.KindControllerElected, history.KindControllerResigned:
			ps.anyNode = true
			get(e.Node).ctl = e
		case history.KindRoleChange:
			ps.anyNode = true
			get(e.Node).roles[e.Role.TP()] = e
		case history.KindFaultStart:
			if e.Fault == nil || !killsProcess(e.Fault.Name) {
				continue
			}
			for _, t := range e.Fault.Targets {
				if id, ok := brokerTarget(t); ok {
					get(id).killed = e
				}
			}
		case history.KindPhase:
			if e.Phase != nil && e.Phase.Running != nil {
				list = e.Phase.Running
			}
		}
	}
	ps.running = map[int32]bool{}
	if list != nil {
		ps.listed = true
		for _, id := range list.IDs {
			ps.running[id] = true
		}
		return ps
	}
	for id, p := range ps.cur {
		if p.stopped == nil && p.killed == nil && (p.start != nil || p.reg != nil) {
			ps.running[id] = true
		}
	}
	return ps
}

// sortedRunning returns the running brokers in id order.
func (ps *nodeProcs) sortedRunning() []int32 {
	var out []int32
	for id := range ps.running {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// brokerListing is one watcher observation of /brokers/ids with czxids.
type brokerListing struct {
	ev      *history.Event
	brokers map[int32]int64 // id → czxid
}

func brokerListings(h *history.History) []brokerListing {
	var out []brokerListing
	for e := range eventsOf(h, history.KindZKWatch) {
		if e.Kind != history.KindZKWatch || e.Watch == nil || e.Watch.Path != zklayout.BrokerIDsPath ||
			(e.Watch.Type != history.WatchChildren && e.Watch.Brokers == nil) {
			continue
		}
		m := make(map[int32]int64, len(e.Watch.Brokers))
		for _, b := range e.Watch.Brokers {
			m[b.ID] = b.Czxid
		}
		out = append(out, brokerListing{e, m})
	}
	return out
}

// at formats an event with its time from the history's first event, as
// the other checkers do ("event 12, +3.45s").
func at(e *history.Event, t0 int64) string {
	return fmt.Sprintf("event %d, +%s", e.Index, rel(e.Time, t0))
}

// Check implements Checker.
func (c Recovery) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	t0 := firstTime(h)
	hi := heal(h)
	ps := collectProcesses(h)
	// judge reports a finding that held from since until the end.
	judge := func(since int64, evs []int, what string) {
		from := max(since, hi.at)
		switch {
		case !hi.healed:
			r.cannotDecide("%s, but %s, so recovery cannot be judged.", what, hi.inForce)
		case hi.end-from > int64(c.Grace):
			r.violateAt(from+int64(c.Grace), evs, "%s, still so when the history ended (+%s), %s after every fault healed (+%s) and after it began (grace %s): the cluster did not recover.",
				what, rel(hi.end, t0), time.Duration(hi.end-from).Round(10*time.Millisecond), rel(hi.at, t0), c.Grace)
		default:
			r.cannotDecide("%s, and the history ends (+%s) within the %s grace after every fault healed (+%s) and it began.", what, rel(hi.end, t0), c.Grace, rel(hi.at, t0))
		}
	}
	c.registrations(h, ps, judge, t0)
	c.partitions(h, ps, judge, t0)
	c.metadata(h, ps, judge, t0)
	c.controller(h, ps, judge, t0)
	r.detail("running_brokers", ps.sortedRunning())
	r.detail("running_listed_by_harness", ps.listed)
	return r.result(fmt.Sprintf("at the end, %s after every fault healed, every running broker (%v) was registered under its own session, every partition's ISR held its running replicas with each following the leader at its epoch, every running broker's metadata named each partition's leader, epoch and ISR as ZooKeeper did, and a controller was acting.",
		time.Duration(hi.end-hi.at).Round(10*time.Millisecond), ps.sortedRunning()))
}

type judgeFunc func(since int64, evs []int, what string)

// registrations: each running broker's process is in the last /brokers/ids
// listing with the czxid it logged.
func (Recovery) registrations(h *history.History, ps *nodeProcs, judge judgeFunc, t0 int64) {
	ls := brokerListings(h)
	if len(ls) == 0 || !ps.anyNode {
		return // no watcher or no node logs: nothing to compare
	}
	last := ls[len(ls)-1]
	for _, id := range ps.sortedRunning() {
		p := ps.cur[id]
		if p == nil {
			continue
		}
		started := "its first logged event"
		var evs []int
		if p.start != nil {
			started = at(p.start, t0)
			evs = append(evs, p.start.Index)
		}
		if p.reg == nil {
			judge(p.since(t0), append(evs, last.ev.Index), fmt.Sprintf("broker %d's process (started at %s) runs at the end but never logged a registration; the last /brokers/ids listing (%s) %s",
				id, started, at(last.ev, t0), listedAs(last, id)))
			continue
		}
		czxid := p.reg.Registration.BrokerEpoch
		if cz, ok := last.brokers[id]; ok && cz == czxid {
			continue
		}
		// Since when: the first of the trailing listings without it.
		since, by := p.reg.Time, p.reg
		for k := len(ls) - 1; k >= 0; k-- {
			if cz, ok := ls[k].brokers[id]; ok && cz == czxid {
				break
			}
			if ls[k].ev.Time < p.reg.Time {
				break
			}
			since, by = ls[k].ev.Time, ls[k].ev
		}
		evs = append(evs, p.reg.Index, by.Index, last.ev.Index)
		judge(since, dedupe(evs), fmt.Sprintf("broker %d's process (started at %s) registered with czxid %d (%s) and runs at the end, but /brokers/ids has not listed it with that czxid since %s: the last listing (%s) %s",
			id, started, czxid, at(p.reg, t0), at(by, t0), at(last.ev, t0), listedAs(last, id)))
	}
}

// listedAs says how listing l shows broker id.
func listedAs(l brokerListing, id int32) string {
	if cz, ok := l.brokers[id]; ok {
		return fmt.Sprintf("lists it with czxid %d, another session's", cz)
	}
	return "does not list it"
}

// replicaSets returns each partition's replica set as the LeaderAndIsr
// requests controllers logged sending, or brokers logged accepting, said
// (replicaTracker), or, for a partition without one, its state's replicas
// when ZooKeeper's state carried them.
func replicaSets(h *history.History) map[history.TopicPartition][]int32 {
	sets := newReplicaTracker()
	for e := range eventsOf(h, history.KindControlSent, history.KindControlRequest, history.KindTopicDeletion) {
		switch {
		case e.Kind == history.KindTopicDeletion:
			sets.deleted(e.Deletion)
		case e.Control == nil || e.Control.API != history.APILeaderAndIsr:
		case e.Kind == history.KindControlRequest && e.Control.Verdict != history.VerdictAccepted:
		default:
			sets.leaderAndIsr(e.Control)
		}
	}
	return sets.all()
}

// partitions: every partition has a leader, a full ISR of its running
// replicas, and every running replica's current process took its role at
// the current leader epoch.
func (Recovery) partitions(h *history.History, ps *nodeProcs, judge judgeFunc, t0 int64) {
	tl := leaderTimelines(h)
	sets := replicaSets(h)
	_, useRoles := roleEvents(h)
	dw := findDeletionWindows(h)
	for _, tp := range sortedTPs(tl) {
		obs := tl[tp]
		if len(obs) == 0 {
			continue
		}
		last := obs[len(obs)-1]
		if dw.during(tp.Topic, last.at) {
			continue // deleted, or being deleted, when the history ends
		}
		lastEv := &h.Events[last.idx]
		if last.Leader < 0 {
			k := len(obs) - 1
			for k > 0 && obs[k-1].Leader < 0 {
				k--
			}
			judge(obs[k].at, dedupe([]int{obs[k].idx, last.idx}), fmt.Sprintf("partition %s has had no leader since %s (ISR %v; last state %s)%s",
				tp, at(&h.Events[obs[k].idx], t0), last.ISR, at(lastEv, t0), ps.notRunning(last.ISR, t0)))
			continue
		}
		replicas := sets[tp]
		if len(replicas) == 0 {
			replicas = last.Replicas
		}
		var want []int32 // replicas whose broker runs
		for _, b := range replicas {
			if !ps.anyNode || ps.running[b] {
				want = append(want, b)
			}
		}
		if miss := missingFrom(last.ISR, want); len(miss) > 0 {
			k := len(obs) - 1
			for k > 0 && len(missingFrom(obs[k-1].ISR, want)) > 0 {
				k--
			}
			judge(obs[k].at, dedupe([]int{obs[k].idx, last.idx}), fmt.Sprintf("partition %s's ISR is %v of replicas %v (leader %d at epoch %d, %s): running broker(s) %v have been missing from it since %s",
				tp, last.ISR, replicas, last.Leader, last.LeaderEpoch, at(lastEv, t0), miss, at(&h.Events[obs[k].idx], t0)))
		}
		if !useRoles || !ps.anyNode {
			continue
		}
		// The state has had this leader and epoch since obs[k].
		k := len(obs) - 1
		for k > 0 && obs[k-1].Leader == last.Leader && obs[k-1].LeaderEpoch == last.LeaderEpoch {
			k--
		}
		for _, b := range want {
			p := ps.cur[b]
			if p == nil {
				continue
			}
			wantRole := fmt.Sprintf("follower of broker %d", last.Leader)
			if b == last.Leader {
				wantRole = "leader"
			}
			re := p.roles[tp]
			since, evs := max(obs[k].at, p.since(t0)), []int{last.idx}
			if p.start != nil {
				evs = append(evs, p.start.Index)
			}
			var what string
			switch {
			case re == nil:
				what = fmt.Sprintf("broker %d's current process (started at %s) took no role for partition %s, whose state names leader %d at epoch %d (%s): it should be %s at epoch %d",
					b, startedAt(p, t0), tp, last.Leader, last.LeaderEpoch, at(lastEv, t0), wantRole, last.LeaderEpoch)
			case b == last.Leader && (re.Role.Role != history.RoleLeader || re.Role.LeaderEpoch != last.LeaderEpoch),
				b != last.Leader && (re.Role.Role != history.RoleFollower || re.Role.Leader != last.Leader || re.Role.LeaderEpoch != last.LeaderEpoch):
				since = max(since, re.Time)
				evs = append(evs, re.Index)
				what = fmt.Sprintf("broker %d's current process last took role %s for partition %s at epoch %d (%s), but the state names leader %d at epoch %d (%s): it should be %s at epoch %d",
					b, describeRole(re.Role), tp, re.Role.LeaderEpoch, at(re, t0), last.Leader, last.LeaderEpoch, at(lastEv, t0), wantRole, last.LeaderEpoch)
			default:
				continue
			}
			judge(since, dedupe(evs), what)
		}
	}
}

func startedAt(p *nodeProc, t0 int64) string {
	if p.start == nil {
		return "before its first logged event"
	}
	return at(p.start, t0)
}

func describeRole(r *history.Role) string {
	if r.Role == history.RoleFollower {
		return fmt.Sprintf("follower of broker %d", r.Leader)
	}
	return r.Role
}

// missingFrom returns the members of want not in isr.
func missingFrom(isr, want []int32) []int32 {
	var out []int32
	for _, b := range want {
		if !slices.Contains(isr, b) {
			out = append(out, b)
		}
	}
	return out
}

// dedupe returns evs sorted without repeats.
func dedupe(evs []int) []int {
	slices.Sort(evs)
	return slices.Compact(evs)
}

// controller: /controller names a running broker whose current process was
// elected at the newest controller epoch and has not resigned.
func (Recovery) controller(h *history.History, ps *nodeProcs, judge judgeFunc, t0 int64) {
	var named *history.Event // the watcher's last /controller observation
	var newest int32
	var newestEv *history.Event
	anyCtl := false
	for e := range eventsOf(h, history.KindZKWatch, history.KindControllerElected) {
		switch e.Kind {
		case history.KindZKWatch:
			w := e.Watch
			switch {
			case w == nil:
			case w.Path == zklayout.ControllerPath && (w.Type == history.WatchDeleted || w.ControllerID != nil):
				named = e
			case w.Path == zklayout.ControllerEpochPath && w.ControllerEpoch != nil && *w.ControllerEpoch > newest:
				newest, newestEv = *w.ControllerEpoch, e
			}
		case history.KindControllerElected:
			anyCtl = true
			if e.Controller != nil && e.Controller.Epoch > newest {
				newest, newestEv = e.Controller.Epoch, e
			}
		}
	}
	if !anyCtl || !ps.anyNode {
		return // no controller logs: nothing says who acts
	}
	if named == nil {
		// No watcher: some running process must be the newest controller.
		for _, id := range ps.sortedRunning() {
			if p := ps.cur[id]; p != nil && acting(p, newest) {
				return
			}
		}
		judge(newestEv.Time, []int{newestEv.Index}, fmt.Sprintf("no running broker's current process is the controller at the newest epoch %d (%s)", newest, at(newestEv, t0)))
		return
	}
	if named.Watch.Type == history.WatchDeleted {
		judge(named.Time, []int{named.Index}, fmt.Sprintf("no broker has been controller since the watcher saw /controller deleted (%s)", at(named, t0)))
		return
	}
	id := *named.Watch.ControllerID
	p := ps.cur[id]
	switch {
	case !ps.running[id]:
		judge(named.Time, []int{named.Index}, fmt.Sprintf("/controller has named broker %d since %s, but broker %d does not run at the end", id, at(named, t0), id))
	case p == nil:
		judge(named.Time, []int{named.Index}, fmt.Sprintf("/controller has named broker %d since %s, but broker %d logged nothing", id, at(named, t0), id))
	case p.ctl == nil:
		judge(max(named.Time, p.since(t0)), []int{named.Index}, fmt.Sprintf("/controller has named broker %d since %s, but broker %d's current process (started at %s) never became controller", id, at(named, t0), id, startedAt(p, t0)))
	case !acting(p, newest):
		what := "resigned"
		if p.ctl.Kind == history.KindControllerElected {
			what = fmt.Sprintf("was elected at epoch %d", p.ctl.Controller.Epoch)
		}
		judge(max(named.Time, p.ctl.Time), dedupe([]int{named.Index, p.ctl.Index, newestEv.Index}), fmt.Sprintf("/controller has named broker %d since %s, but its current process last %s (%s) while the newest controller epoch is %d (%s)",
			id, at(named, t0), what, at(p.ctl, t0), newest, at(newestEv, t0)))
	}
}

// acting says whether p's latest controller event is its election at epoch.
func acting(p *nodeProc, epoch int32) bool {
	return p.ctl != nil && p.ctl.Kind == history.KindControllerElected && p.ctl.Controller != nil && p.ctl.Controller.Epoch == epoch
}
