package power

import (
	"slices"
	"strconv"
	"strings"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/zklayout"
)

// A Combination is one kind of situation a nemesis fault struck: the fault,
// the role its target held when it started, the failpoint window it reached
// (failpoint faults only) and the class of the partitions its target
// replicated at that moment. Block coverage says which node code ran; the
// combinations say in which situations the faults hit, which is what a
// fencing bug needs (a pause of the controller while a partition is offline
// is another test than a pause of a follower with every ISR full), so
// chaos power counts both and a coverage-guided search keeps schedules that
// reach either.
type Combination struct {
	Fault string `json:"fault"`
	Role  string `json:"role"`
	// Window is the failpoint window a failpoint fault reached; "" for
	// other faults and for a failpoint fault whose window was not reached.
	Window string `json:"window,omitempty"`
	State  string `json:"state"`
}

// String is the combination as power.json lists it:
// fault/role/window/state, "-" for no window.
func (c Combination) String() string {
	w := c.Window
	if w == "" {
		w = "-"
	}
	return c.Fault + "/" + c.Role + "/" + w + "/" + c.State
}

// Target roles (Combination.Role). A broker's role is read off what the
// ZooKeeper watcher last saw before the fault started, in this order:
// /controller names it; some partition state names it leader; it is a
// replica of some partition; none of these. A ZooKeeper server's role is
// its mode the watcher last polled (server_mode), or what the fault's own
// record says when the server was not answering (see world.zkRole).
const (
	RoleController = "controller"
	RoleLeader     = "leader"   // of some partition, by its ZooKeeper state
	RoleFollower   = "follower" // a replica of some partition that leads none
	RoleOther      = "other"    // a broker that hosts no partition, as far as the history says
	RoleZKLeader   = "zk-leader"
	RoleZKFollower = "zk-follower"
	// RoleZKServer: a ZooKeeper server that did not answer the poll and
	// whose fault's record does not say whether it led.
	RoleZKServer = "zk-server"
	// RoleNone: the fault names no target (delete-recreate-topic acts on a
	// topic).
	RoleNone = "none"
)

// Partition state classes (Combination.State): the class of the partitions
// the target replicates (for a ZooKeeper server or a fault without target,
// of every partition), the first of this list that one of them is in. Each
// is read off the history up to the fault's start:
const (
	// StateDeleting: a controller logged topic_deletion started for the
	// partition's topic and no controller has logged it completed.
	StateDeleting = "deleting"
	// StateOffline: ZooKeeper's partition state names leader -1.
	StateOffline = "offline"
	// StateLeaderOutsideISR: ZooKeeper's partition state names a leader
	// its own ISR leaves out.
	StateLeaderOutsideISR = "leader-outside-isr"
	// StateReassigning: the control-plane workload asked for the
	// partition's reassignment (its reassign invoke) and has not yet seen
	// it complete (its completion).
	StateReassigning = "reassigning"
	// StateISRShrunk: the ISR in ZooKeeper is smaller than the replica set
	// the last LeaderAndIsr sent for the partition carried.
	StateISRShrunk = "isr-shrunk"
	// StateISRFull: the ISR holds every replica of that replica set.
	StateISRFull = "isr-full"
	// StateUnknown: no partition qualifies (the target replicates none,
	// or nothing of its partitions is known yet).
	StateUnknown = "-"
)

// stateOrder is the order of the classes: a target with partitions in
// several classes is in the first.
var stateOrder = []string{StateDeleting, StateOffline, StateLeaderOutsideISR, StateReassigning, StateISRShrunk, StateISRFull}

// Combinations returns the distinct combinations the nemesis's faults in h
// reached, in the order they were first reached. Only the nemesis's own
// fault_start events count (a node reports the failpoints it hits as faults
// too: those are windows, read off the nemesis's fault_stop as Judge does).
// Two kinds of record struck nothing and are left out: a step the nemesis
// could not apply (no target, detail "not applied") and a step it left
// alone because the controller was retrying a failed write (its fault_stop's
// detail begins "left alone"). Composite faults record their parts as
// faults of their own (failover-on-lagging-zk's cut and pause, a failpoint
// fault's provoking bounce): each part is a strike of its own.
func Combinations(h *history.History) []Combination {
	windows, idle := readStops(h)
	w := newWorld()
	var out []Combination
	seen := map[Combination]bool{}
	for i := range h.Events {
		e := &h.Events[i]
		if e.Kind == history.KindFaultStart && e.Source == "nemesis" && e.Fault != nil && struck(e.Fault) && !idle[e.Fault.ID] {
			c := Combination{Fault: e.Fault.Name, Window: windows[e.Fault.ID]}
			c.Role, c.State = w.classify(e.Fault)
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
		w.add(e)
	}
	return out
}

// CombinationStrings lists cs as power.json does.
func CombinationStrings(cs []Combination) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return out
}

// struck says whether a fault_start is a fault that happened: the Set
// records a step it could not apply as a fault without targets whose detail
// says so (faults.Set.Apply).
func struck(f *history.Fault) bool {
	return len(f.Targets) > 0 || !strings.Contains(f.Detail, "not applied")
}

// readStops reads the nemesis's fault_stop events: the window each
// failpoint fault reached, by fault id, and the ids of the steps left alone.
func readStops(h *history.History) (windows map[string]string, idle map[string]bool) {
	windows, idle = map[string]string{}, map[string]bool{}
	for _, e := range h.Events {
		if e.Source != "nemesis" || e.Kind != history.KindFaultStop || e.Fault == nil {
			continue
		}
		if e.Fault.Failpoint != "" && e.Fault.Detail == "window reached" {
			windows[e.Fault.ID] = e.Fault.Failpoint
		}
		if strings.HasPrefix(e.Fault.Detail, "left alone") {
			idle[e.Fault.ID] = true
		}
	}
	return windows, idle
}

// world is what the history said of the cluster up to an event: the
// controller ZooKeeper named, every partition's state there, the replica
// sets the controllers sent, the topics being deleted and the partitions
// being reassigned.
type world struct {
	controller int32 // -1: none
	states     map[history.TopicPartition]*history.PartitionState
	replicas   map[history.TopicPartition][]int32
	deleting   map[string]bool
	// reassigning maps the admin process with a reassign in flight to its
	// partition.
	reassigning map[int]history.TopicPartition
	// zkMode is each ZooKeeper server's last polled mode ("" while it did
	// not answer).
	zkMode map[string]string
}

func newWorld() *world {
	return &world{controller: -1, states: map[history.TopicPartition]*history.PartitionState{},
		replicas: map[history.TopicPartition][]int32{}, deleting: map[string]bool{}, reassigning: map[int]history.TopicPartition{}, zkMode: map[string]string{}}
}

// add takes in one event.
func (w *world) add(e *history.Event) {
	switch {
	case e.Kind == history.KindZKWatch && e.Watch != nil:
		w.watch(e.Watch)
	case e.Kind == history.KindControlSent && e.Control != nil && e.Control.API == history.APILeaderAndIsr:
		for _, p := range e.Control.Partitions {
			if len(p.Replicas) > 0 {
				w.replicas[p.TP()] = slices.Clone(p.Replicas)
			}
		}
	case e.Kind == history.KindTopicDeletion && e.Deletion != nil:
		switch e.Deletion.Step {
		case history.DeletionStarted:
			w.deleting[e.Deletion.Topic] = true
		case history.DeletionCompleted:
			delete(w.deleting, e.Deletion.Topic)
			for tp := range w.replicas {
				if tp.Topic == e.Deletion.Topic {
					delete(w.replicas, tp)
				}
			}
		}
	case e.Kind == history.KindOp && e.Op != nil && e.Op.F == history.FReassign:
		if e.Op.Type == history.OpInvoke {
			w.reassigning[e.Op.Process] = history.TP(e.Op.Topic, e.Op.Partition)
		} else {
			delete(w.reassigning, e.Op.Process)
		}
	}
}

func (w *world) watch(wa *history.Watch) {
	if wa.Type == history.WatchServerMode {
		w.zkMode[wa.Server] = wa.Mode
		return
	}
	if wa.Path == zklayout.ControllerPath {
		switch {
		case wa.Type == history.WatchDeleted:
			w.controller = -1
		case wa.ControllerID != nil:
			w.controller = *wa.ControllerID
		}
		return
	}
	topic, p, ok := zklayout.ParseStatePath(wa.Path)
	if !ok {
		return
	}
	tp := history.TP(topic, p)
	switch {
	case wa.Type == history.WatchDeleted:
		delete(w.states, tp)
	case wa.State != nil:
		s := *wa.State
		w.states[tp] = &s
	}
}

// classify names the role of f's first target and the class of the
// partitions it replicates (of all partitions for a target that is no
// broker).
func (w *world) classify(f *history.Fault) (role, state string) {
	if len(f.Targets) == 0 {
		return RoleNone, w.class(func(history.TopicPartition) bool { return true })
	}
	t := f.Targets[0]
	if id, ok := brokerID(t); ok {
		return w.brokerRole(id), w.class(func(tp history.TopicPartition) bool { return w.replicates(tp, id) })
	}
	return w.zkRole(f), w.class(func(history.TopicPartition) bool { return true })
}

// zkRole is a ZooKeeper server's role when f struck it: its last polled
// mode, or what f's own record says when the server was not answering
// (or the history predates the poll).
func (w *world) zkRole(f *history.Fault) string {
	switch w.zkMode[f.Targets[0]] {
	case "leader", "standalone":
		return RoleZKLeader
	case "follower":
		return RoleZKFollower
	}
	return zkRole(f)
}

// brokerID parses "n3".
func brokerID(target string) (int32, bool) {
	if !strings.HasPrefix(target, "n") {
		return 0, false
	}
	id, err := strconv.ParseInt(target[1:], 10, 32)
	return int32(id), err == nil
}

func (w *world) brokerRole(id int32) string {
	if w.controller == id {
		return RoleController
	}
	follows := false
	for tp, s := range w.states {
		if s.Leader == id {
			return RoleLeader
		}
		follows = follows || w.replicates(tp, id)
	}
	if follows {
		return RoleFollower
	}
	return RoleOther
}

// replicates says whether broker id is a replica of tp: in the replica set
// the last LeaderAndIsr carried, or, when none was seen, named in its
// ZooKeeper state.
func (w *world) replicates(tp history.TopicPartition, id int32) bool {
	if rs, ok := w.replicas[tp]; ok {
		return slices.Contains(rs, id)
	}
	s := w.states[tp]
	return s != nil && (s.Leader == id || slices.Contains(s.ISR, id))
}

// class is the first class of stateOrder that a partition in ZooKeeper
// that in accepts is in; a partition nothing classifies does not count.
func (w *world) class(in func(history.TopicPartition) bool) string {
	best := len(stateOrder)
	for tp, s := range w.states {
		if !in(tp) {
			continue
		}
		if i := slices.Index(stateOrder, w.partitionClass(tp, s)); i >= 0 {
			best = min(best, i)
		}
	}
	if best == len(stateOrder) {
		return StateUnknown
	}
	return stateOrder[best]
}

// partitionClass is one partition's class, "" when nothing decides it (no
// replica set seen and nothing amiss).
func (w *world) partitionClass(tp history.TopicPartition, s *history.PartitionState) string {
	switch {
	case w.deleting[tp.Topic]:
		return StateDeleting
	case s.Leader < 0:
		return StateOffline
	case !slices.Contains(s.ISR, s.Leader):
		return StateLeaderOutsideISR
	}
	for _, r := range w.reassigning {
		if r == tp {
			return StateReassigning
		}
	}
	rs, ok := w.replicas[tp]
	if !ok {
		return ""
	}
	for _, r := range rs {
		if !slices.Contains(s.ISR, r) {
			return StateISRShrunk
		}
	}
	return StateISRFull
}

// zkRole is a ZooKeeper server's role as its fault's own record states it.
// The faults that strike ZooKeeper servers choose them by role and record
// it: isolate-zk-leader cuts the leader (its first target) from the rest;
// a slowed link between two servers runs from the leader (slow-zk-follower
// and failover-on-lagging-zk slow the leader's link to a follower); only
// pause-zk-follower pauses a ZooKeeper server; stall-zk-session-server says
// in its detail whether the server it stalls led.
func zkRole(f *history.Fault) string {
	t := f.Targets[0]
	switch {
	case f.Name == "isolate-zk-leader":
		return RoleZKLeader
	case f.Name == "slow-link" && len(f.Targets) == 3 && f.Targets[1] == "->" && strings.HasPrefix(f.Targets[2], "zk"):
		return RoleZKLeader
	case f.Name == "pause":
		return RoleZKFollower
	case f.Name == "stall-zk-session-server" && strings.Contains(f.Detail, t+" (the ZooKeeper leader)"):
		return RoleZKLeader
	case f.Name == "stall-zk-session-server" && strings.Contains(f.Detail, t+" (a follower)"):
		return RoleZKFollower
	}
	return RoleZKServer
}
