package faults

import (
	"fmt"
	"github.com/zkchaos/zkchaos/history"
	"math/rand/v2"
	"slices"
)

// The failpoint fault (FailpointFault) arms one of the node program's
// failpoint windows on the node holding a role, then provokes the work that
// reaches it. A random SIGSTOP almost always lands on an idle controller; a
// failpoint stops the node inside the window where a seed bug lives. This
// file is its plans: the windows, what a pick draws, and the picks'
// generations, which keep a saved schedule's picks planning what they
// planned when it was saved.

// FailpointDoc describes the fault for the catalogue.
const FailpointDoc = "arm a node failpoint window on a role (controller, partition leader, follower, restarted broker) and provoke it"

// Roles a failpoint is armed on.
const (
	RoleController = "controller"
	RoleLeader     = "partition-leader"
	RoleFollower   = "follower"
	RoleRestarted  = "restarted-broker"
)

// Failpoint actions the fault draws from (the node's action syntax).
const (
	// FPSigstop: the node stops in the window (the fault SIGSTOPs it as
	// soon as it reports reaching it) and stays stopped past the ZooKeeper
	// session timeout, so it resumes as a zombie.
	FPSigstop = "sigstop"
	// FPPause: the node holds in the window for the fault's hold, then is
	// released; its session survives.
	FPPause = "pause"
	// FPError: the window's code path fails once.
	FPError = "error"
)

// Ways to provoke the work that reaches a window.
const (
	ProvokeBounceOther = "bounce-other"   // kill and restart a broker other than the armed one
	ProvokeBounceLead  = "bounce-leader"  // kill and restart the partition's leader
	ProvokeTerminate   = "terminate"      // SIGTERM the armed broker: its controlled shutdown
	ProvokeRestart     = "restart-target" // kill the armed broker, start it and arm it while it starts
	// ProvokeBounceTwo bounces a broker other than the armed one to reach
	// the window and, once the armed node holds there, bounces a third:
	// whatever the held controller sends next carries the third broker's
	// previous broker epoch to its new process, a request in flight across
	// a broker restart (KAFKA-7235's window).
	ProvokeBounceTwo = "bounce-other-then-third"
	// ProvokeShutdownRestart SIGTERMs a broker other than the armed
	// controller, one that follows a partition: its ControlledShutdown
	// brings the controller to its window (the ISR shrink written, the
	// StopReplica for the broker not sent yet), and once the controller
	// holds there the broker, still waiting for the answer, is killed and
	// started again. Released, the controller sends the StopReplica it
	// meant for the previous process to the new one (the same address):
	// only the broker-epoch check (KIP-380) keeps it from stopping a
	// replica there.
	ProvokeShutdownRestart = "terminate-other-then-restart"
	// ProvokeDeleteController bounces a broker other than the armed
	// controller to bring it to its window and, once it holds there, has
	// every other broker hold right after winning an election
	// (controller-after-elected), deletes /controller (an operator's
	// forced election) and lets the held controller go as soon as ZooKeeper
	// names its successor. The held controller's session lives on, so it
	// handles the broker change under the controller epoch it was elected
	// at, on states no newer controller has written yet (its successor
	// holds before its failover; Kafka 2.6.3 aborts a change to a state a
	// newer controller wrote): its write meets the controller's ZooKeeper
	// fence, the multi's version check on /controller_epoch. A controller
	// stopped past its session never makes that write (it resigns as it
	// finds its session expired), so no other plan reaches the fence. Pause
	// only (provokeAction).
	ProvokeDeleteController = "bounce-other-then-delete-controller"
	// ProvokeWorkload provokes nothing: the workload's own traffic
	// reaches the window. A transactional producer's first batch of a
	// transaction on the armed leader's partition is held before its
	// append (leader-before-txn-append) past the producer's own timeout;
	// the producer gives up and aborts the transaction at its epoch, and
	// the release lets the held batch reach the log after the abort
	// marker (KAFKA-12671's window). Pause only.
	ProvokeWorkload = "workload-produce"
)

// laterProvocations are provocations a window gained after the generation
// that added it: picks of generation Since and later draw from the
// window's Provoke followed by these, picks of earlier generations from
// Provoke alone, so a saved schedule plans what it planned.
var laterProvocations = []struct {
	since   int
	window  string
	provoke string
}{
	{3, history.FailpointControllerBeforeBrokerChange, ProvokeDeleteController},
}

// provokeAction is the one action a provocation works with, where it has
// one: the forced election needs the held controller's session alive.
var provokeAction = map[string]string{ProvokeDeleteController: FPPause, ProvokeWorkload: FPPause}

// provocations returns what window w draws its provocation from in pick
// generation g.
func provocations(w FPWindow, g int) []string {
	out := w.Provoke
	for _, l := range laterProvocations {
		if l.window == w.Name && g >= l.since {
			out = append(slices.Clip(out), l.provoke)
		}
	}
	return out
}

// FPWindow is one failpoint window the fault can arm: the node program's
// name for it, the role of the node that reaches it and what makes it
// reach it.
type FPWindow struct {
	Name    string
	Role    string
	Provoke []string
	// Actions the window draws from; nil: every action. A controller held
	// in its window by an error does nothing a checker can see (the
	// controller retries), so those windows draw sigstop (a zombie) and
	// pause (a stale request in flight).
	Actions []string
	// Weight is the window's share of the draws (0 counts as 1).
	Weight int
	// PerBroker: the window is reached once per other broker (a send
	// thread each; the controller's request to itself does not pass the
	// window), and the fault holds every one of them, not only the
	// first. A controller's decision goes to every broker at once; held
	// in one thread only, the request in hand is, as often as not, the one
	// for the broker the provocation restarted, whose new process refuses
	// it for its broker epoch before its controller epoch is looked at.
	PerBroker bool
}

// FPWindows lists every failpoint window of the node program, in the node's
// order (node/failpoint.Names; a test keeps them in step). New windows are
// appended so a saved schedule's picks keep their meaning.
var FPWindows = []FPWindow{
	{history.FailpointControllerAfterZKWrite, RoleController, []string{ProvokeBounceOther, ProvokeBounceTwo, ProvokeShutdownRestart}, controllerActions, 3, false},
	{history.FailpointControllerBeforeBrokerChange, RoleController, []string{ProvokeBounceOther, ProvokeBounceTwo}, controllerActions, 3, false},
	{history.FailpointBrokerBeforeRegister, RoleRestarted, []string{ProvokeRestart}, nil, 1, false},
	{history.FailpointBrokerControlledShutdown, RoleLeader, []string{ProvokeTerminate}, nil, 1, false},
	{history.FailpointBrokerAfterRegister, RoleRestarted, []string{ProvokeRestart}, nil, 1, false},
	// Bouncing the leader makes the ISR followers truncate to the new
	// leader (the follower the election passes over reaches it);
	// restarting the follower itself reaches it on its first LeaderAndIsr.
	{history.FailpointFollowerAfterTruncation, RoleFollower, []string{ProvokeBounceLead, ProvokeRestart}, nil, 1, false},
	// A bounce makes the controller send LeaderAndIsr and UpdateMetadata;
	// stopped with one of them in hand past its session, it resumes after
	// its successor has reached the receiver, and delivers it under the
	// old controller epoch: the input of the brokers' controller-epoch
	// check, which a zombie stopped before it built a request never sends
	// (it resigns as it finds its session expired).
	{history.FailpointControllerBeforeSend, RoleController, []string{ProvokeBounceOther}, []string{FPSigstop}, 2, true},
	// A broker's controlled shutdown sends ControlledShutdown; held in the
	// controller before its event loop sees it while the broker is killed
	// and started again, the request goes on once the controller knows the
	// new process: it carries the previous process's broker epoch, the
	// input of the controller's broker-epoch check (KIP-380), which no
	// other window reaches. Pause only: a stopped controller resigns and
	// answers NOT_CONTROLLER without looking at the epoch.
	{history.FailpointControllerBeforeControlledShutdown, RoleController, []string{ProvokeShutdownRestart}, []string{FPPause}, 1, false},
	// A transactional producer's batch that starts its transaction on the
	// leader's partition, held before its append while the producer gives
	// up on it and aborts the transaction (ProvokeWorkload). Only runs
	// whose workload has transactional producers draw it (TxnWindow).
	{history.FailpointLeaderBeforeTxnAppend, RoleLeader, []string{ProvokeWorkload}, []string{FPPause}, 1, false},
}

// TxnWindow reports whether only a transactional producer's produce
// reaches window: a schedule for a run without one never plans it.
func TxnWindow(window string) bool { return window == history.FailpointLeaderBeforeTxnAppend }

// newPickFor draws a step's pick for a step of kind k: for a failpoint
// step of a run without transactional producers (txn false) whose plan
// arms a window only they reach, the next pick of its generation that
// arms another window. It draws from r once, as NewPick does, so the
// starts and holds drawn after it stay those of the seed.
func newPickFor(r *rand.Rand, k FaultKind, txn bool) int {
	p := NewPick(r)
	if k != FailpointFault || txn {
		return p
	}
	g := pickGeneration(p) * PickGeneration
	for range PickGeneration {
		if !TxnWindow(PlanFailpoint(p).Window.Name) {
			break
		}
		p = g + (p-g+1)%PickGeneration
	}
	return p
}

// windowGenerations[g] is how many of FPWindows the picks of generation g
// (picks in [g*PickGeneration, (g+1)*PickGeneration)) draw from: the
// table as it was when that generation was the newest. A schedule.json
// holds its picks, so a window added later changes nothing it replays;
// NewPick draws from the last generation, which sees every window.
var windowGenerations = []int{6, 7, 8, 8, 9}

// PickGeneration is how many picks one generation holds.
const PickGeneration = 1 << 16

// pickWindows returns the windows pick draws from: its generation's, or
// the newest for a pick beyond every generation.
func pickWindows(pick int) []FPWindow {
	return FPWindows[:windowGenerations[pickGeneration(pick)]]
}

// pickGeneration is the generation pick belongs to (the newest for a pick
// beyond every generation).
func pickGeneration(pick int) int {
	return min(max(pick, 0)/PickGeneration, len(windowGenerations)-1)
}

// NewPick draws a step's pick from r, in the newest generation, which
// plans a failpoint over every window.
func NewPick(r *rand.Rand) int {
	return (len(windowGenerations)-1)*PickGeneration + r.IntN(PickGeneration)
}

var fpActions = []string{FPSigstop, FPPause, FPError}

// controllerActions: a controller's windows draw sigstop two times in three.
// A zombie controller is the window both of the control plane's fencing
// layers exist for (its conditional ZooKeeper writes, the brokers'
// controller-epoch check); a pause leaves a stale request in flight while a
// bounced broker restarts (the broker-epoch layer).
var controllerActions = []string{FPSigstop, FPSigstop, FPPause}

// FPPlan is what one failpoint fault does, drawn from its step's Pick: the
// same Pick in a replay gives the same plan.
type FPPlan struct {
	Window    FPWindow
	Action    string
	Provoke   string
	Partition int32 // for the leader and follower roles (mod the topic's partitions)
	Pick      int   // chooses among candidate nodes
}

// PlanFailpoint draws the plan of a failpoint fault from pick.
func PlanFailpoint(pick int) FPPlan {
	r := rand.New(rand.NewPCG(uint64(pick), 0xf417f417))
	// The controller's windows weigh triple: every fencing layer of the
	// control plane is exercised there (a zombie controller, a request in
	// flight across a broker restart), and a random run draws only a few
	// failpoint steps.
	windows := pickWindows(pick)
	total := 0
	for _, w := range windows {
		total += max(1, w.Weight)
	}
	n := r.IntN(total)
	w := windows[len(windows)-1]
	for _, c := range windows {
		if n < max(1, c.Weight) {
			w = c
			break
		}
		n -= max(1, c.Weight)
	}
	acts := w.Actions
	if acts == nil {
		acts = fpActions
	}
	provokes := provocations(w, pickGeneration(pick))
	// The draws keep their order (action, provocation, partition, pick):
	// an older pick's plan depends on it.
	plan := FPPlan{Window: w, Action: acts[r.IntN(len(acts))], Provoke: provokes[r.IntN(len(provokes))],
		Partition: int32(r.IntN(1 << 10)), Pick: r.IntN(1 << 16)}
	if a, ok := provokeAction[plan.Provoke]; ok {
		plan.Action = a
	}
	return plan
}

// FailpointAvailable says whether the fault can apply to a run of nodes
// brokers: every window's provocation needs a second broker.
func FailpointAvailable(nodes int) error {
	if nodes < 2 {
		return fmt.Errorf("%s: needs 2 brokers, the run has %d", FailpointFault, nodes)
	}
	return nil
}

// FailpointWindowNames lists the windows' names, in FPWindows order.
func FailpointWindowNames() []string {
	out := make([]string, len(FPWindows))
	for i, w := range FPWindows {
		out[i] = w.Name
	}
	return slices.Clip(out)
}

// GuideFailpoints biases s's failpoint steps toward the windows reached
// least often so far (reached: window → runs that reached it; a window
// absent from it counts as never reached), the coverage-guided search of
// `chaos power --guided`: each failpoint step's Pick is redrawn, from a
// generator seeded by the schedule's seed, until its plan arms one of the
// least-reached windows. Other steps are left alone. The result is an ordinary schedule:
// saved with the run, it replays exactly, whatever reached says later.
func GuideFailpoints(s Schedule, reached map[string]int) Schedule {
	// A window only a transactional produce reaches is left to its
	// opening: guided toward in a run without one, a step would hold
	// nothing.
	var windows []FPWindow
	for _, w := range FPWindows {
		if !TxnWindow(w.Name) {
			windows = append(windows, w)
		}
	}
	least := -1
	for _, w := range windows {
		if n := reached[w.Name]; least < 0 || n < least {
			least = n
		}
	}
	var targets []string
	for _, w := range windows {
		if reached[w.Name] == least {
			targets = append(targets, w.Name)
		}
	}
	r := rand.New(rand.NewPCG(s.Seed, 0x6a1de))
	out := s
	out.Steps = slices.Clone(s.Steps)
	for i, st := range out.Steps {
		if st.Kind != FailpointFault || st.Opening {
			// An opening aims at its seed bug's window; guidance leaves
			// it in place.
			continue
		}
		// Each step aims at one least-reached window drawn at random, so
		// several steps spread over them instead of piling on one.
		want := targets[r.IntN(len(targets))]
		for range 1 << 16 {
			p := NewPick(r)
			if PlanFailpoint(p).Window.Name == want {
				out.Steps[i].Pick = p
				break
			}
		}
	}
	return out
}
