package faults

import (
	"math/rand/v2"
	"slices"
	"time"
)

// A random schedule's faults rarely line up with the windows where the
// fencing and replication bugs live (a random SIGSTOP lands on an
// idle controller, a random kill on a leader whose followers are caught
// up). So a seeded schedule begins with openings: one fault aimed at each
// known window, run one after another, each healed (its window over) before
// the next starts, and no other fault starts until OpeningQuiet after the
// last. Which broker each hits and when it starts are drawn from the seed;
// the steps are ordinary steps marked Opening, saved with the schedule, so
// a replay arms the same failpoints at the same offsets. nemesis's runners
// run a schedule's leading Opening steps one at a time.

// OpeningQuiet is how long after the last opening's end the schedule's
// other faults may start: the cluster settles (a resumed zombie controller
// resigns, a restarted leader catches up) before faults overlap it, so a
// violation an opening provoked is not confused with the next fault's.
const OpeningQuiet = 8 * time.Second

// openingGap separates two openings: the controller a failover just elected
// is known before the next opening looks its role up (a role without a
// holder is looked up again for a session timeout, so a second is enough;
// the six openings fit a 60 s run only with gaps this short).
const openingGap = time.Second

// openingSpec is one opening: the fault kind and, for the failpoint fault,
// the window, action and provocation its pick must plan.
type openingSpec struct {
	bug                     string // the seed bug whose window it opens
	kind                    FaultKind
	window, action, provoke string
	// alt are other provocations of the same window that open the same
	// seed bug's window; each seed draws one of provoke and alt, so the
	// nightly's seeds between them open every one.
	alt []string
	// hold is the planned hold: about when the window ends (the fault's
	// heal waits for its window's end beyond it).
	hold time.Duration
	// was lists plans the opening drew in schedules saved before it
	// changed: OpeningBug still names their bug, and no new seed draws
	// them.
	was []fpChoice
	// txn: only a run whose workload has transactional producers reaches
	// the window; other runs plan without it.
	txn bool
}

// fpChoice is a failpoint plan's action and provocation.
type fpChoice struct{ action, provoke string }

// openingSpecs are the openings in the order a schedule runs them.
var openingSpecs = []openingSpec{
	// A transactional producer's first batch of a transaction on a
	// partition is held at the leader before its append, past the
	// producer's own give-up (the queue workload's 5 s operation timeout,
	// 2 s grace for the answer and 2 s wait while aborting): the producer
	// aborts the transaction with EndTxn at its epoch, the coordinator
	// writes the ABORT marker, and the producer restarts under a new
	// transactional id. Released after that, the batch reaches a log whose
	// transaction is over: Kafka 2.6.3 appends it, a transaction no
	// coordinator will end, and the partition's LSO stays below its high
	// watermark for good (KAFKA-12671); with verification (Kafka 3.6) the
	// marker has ended the batch's verification and the leader refuses it.
	// It runs first: it needs nothing of a controller, and at 13 s it
	// would not fit after the others in a 60 s run.
	{bug: "KAFKA-12671", kind: FailpointFault, window: "leader-before-txn-append", action: FPPause, provoke: ProvokeWorkload, hold: 12 * time.Second, txn: true},
	// The controller holds at the broker change a bounce provokes while
	// an operator's forced election makes another broker controller; let
	// go with its session alive, before its successor's failover, it
	// writes the change under its old controller epoch, and ZooKeeper's
	// version check on /controller_epoch refuses it (the controller's half
	// of KAFKA-532's fix; with the bug, the write lands). Until 2026-12-06 this opening stopped the
	// controller past its session instead (was): under Kafka 2.6.3's
	// session-expiry handling that zombie resigns before it writes, so the
	// fence was never met.
	{bug: "KAFKA-532", kind: FailpointFault, window: "controller-before-broker-change", action: FPPause, provoke: ProvokeDeleteController, hold: 8 * time.Second,
		was: []fpChoice{{FPSigstop, ProvokeBounceOther}}},
	// The controller stops with a LeaderAndIsr or UpdateMetadata in hand
	// and resumes once its successor has reached the receiver: the zombie's
	// request arrives under the old controller epoch. The opening before
	// tests the controller's own ZooKeeper fence, whose zombie resigns
	// before it sends anything; this one tests the brokers' check behind
	// it, so a run with every fix on exercises both. It runs second, not
	// last: the lagging-leader opening often overruns its plan by ten
	// seconds, and an opening pushed past the time limit does not run.
	{bug: "KAFKA-532", kind: FailpointFault, window: "controller-before-send", action: FPSigstop, provoke: ProvokeBounceOther, hold: 8 * time.Second},
	// The controller holds between its ZooKeeper write and its
	// LeaderAndIsr, and a broker it is sending to restarts meanwhile: the
	// request carries the previous process's broker epoch. Half the seeds
	// get there by a bounce and a third broker's bounce (the LeaderAndIsr
	// of a failure), half by a broker's controlled shutdown and its restart
	// (the StopReplica of KIP-380's own story): a broker that checks the
	// epoch on one request type and not the other is found either way.
	{bug: "KAFKA-7235", kind: FailpointFault, window: "controller-after-zk-write", action: FPPause, provoke: ProvokeBounceTwo, alt: []string{ProvokeShutdownRestart}, hold: 6 * time.Second},
	// A broker's ControlledShutdown waits in the controller while the
	// broker restarts: it reaches the event loop after the new process
	// registered, under the previous broker epoch, and the controller's own
	// broker-epoch check (the other half of KIP-380) refuses it.
	{bug: "KAFKA-7235", kind: FailpointFault, window: "controller-before-controlled-shutdown", action: FPPause, provoke: ProvokeShutdownRestart, hold: 6 * time.Second},
	// A leader dies once its followers lag out of the ISR.
	{bug: "KAFKA-3861", kind: KillLaggingLeader, hold: 12 * time.Second},
	// The controller fails over to a broker whose ZooKeeper server lags.
	{bug: "KAFKA-16667", kind: FailoverOnLaggingZK, hold: 12 * time.Second},
}

// OpeningBug names the seed bug whose window an opening step aims at, from
// its kind and (for the failpoint fault) the plan its pick draws; "" for a
// step that matches no opening.
func OpeningBug(st Step) string {
	for _, o := range openingSpecs {
		if o.kind != st.Kind {
			continue
		}
		if o.kind != FailpointFault {
			return o.bug
		}
		p := PlanFailpoint(st.Pick)
		if p.Window.Name != o.window {
			continue
		}
		if p.Action == o.action && (p.Provoke == o.provoke || slices.Contains(o.alt, p.Provoke)) {
			return o.bug
		}
		if slices.Contains(o.was, fpChoice{p.Action, p.Provoke}) {
			return o.bug
		}
	}
	return ""
}

// openingPick draws a failpoint pick that plans o's window, action and
// provocation (one of provoke and alt, drawn first); the rest of the plan
// (partition, candidate) stays random.
func openingPick(r *rand.Rand, o openingSpec) (int, bool) {
	provoke := o.provoke
	if len(o.alt) > 0 {
		if i := r.IntN(len(o.alt) + 1); i > 0 {
			provoke = o.alt[i-1]
		}
	}
	for range 1 << 16 {
		p := NewPick(r)
		if pl := PlanFailpoint(p); pl.Window.Name == o.window && pl.Action == o.action && pl.Provoke == provoke {
			return p, true
		}
	}
	return 0, false
}

// planOpenings returns the openings a schedule of seed over kinds begins
// with (those whose kind is among kinds, that fit in total, and, for
// those only a transactional produce reaches, only when txn says the
// run's workload has transactional producers) and when the schedule's
// other faults may start. The openings draw from their own generator, so
// the other steps a seed gives keep their shape; an opening left out
// draws nothing.
func planOpenings(seed uint64, total time.Duration, kinds []FaultKind, txn bool) ([]Step, time.Duration) {
	r := rand.New(rand.NewPCG(seed, 0x0be41195))
	// The first opening starts once the workload has written for a second
	// or two: a zombie's harm needs acknowledged records to lose.
	at := time.Second + time.Duration(r.Int64N(int64(time.Second)))
	var steps []Step
	for _, o := range openingSpecs {
		if !slices.Contains(kinds, o.kind) || at+o.hold > total || (o.txn && !txn) {
			continue
		}
		pick := NewPick(r)
		if o.kind == FailpointFault {
			p, ok := openingPick(r, o)
			if !ok {
				continue
			}
			pick = p
		}
		steps = append(steps, Step{At: at, Kind: o.kind, Hold: o.hold, Pick: pick, Opening: true})
		at += o.hold + openingGap
	}
	if len(steps) == 0 {
		return nil, 0
	}
	last := steps[len(steps)-1]
	return steps, last.At + last.Hold + OpeningQuiet
}
