package checkers

// This file measures whether a run tested the fences: for each epoch or
// version check the system relies on, how many stale inputs reached it and
// how many it refused. A run whose faults never made a stale request reach
// a fence proves nothing about that fence, however green it is; the counts
// say which fences a verdict covers. The counting judges nothing: a stale
// input that was obeyed is for the fencing checkers to judge.

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/zklayout"
)

// Fence names, in the order results list them.
const (
	// FenceBrokerControllerEpoch: a broker's check of a control request's
	// controller epoch against the highest it has seen (KAFKA-532's fix,
	// ReplicaManager's STALE_CONTROLLER_EPOCH).
	FenceBrokerControllerEpoch = "broker-controller-epoch"
	// FenceBrokerBrokerEpoch: a broker's check of a control request's
	// broker epoch against its own registration (KIP-380,
	// KafkaApis.isBrokerEpochStale, STALE_BROKER_EPOCH).
	FenceBrokerBrokerEpoch = "broker-broker-epoch"
	// FenceControllerBrokerEpoch: the controller's check of a
	// ControlledShutdown's broker epoch against the one it caches for the
	// broker (KIP-380).
	FenceControllerBrokerEpoch = "controller-broker-epoch"
	// FenceLeaderAndIsrLeaderEpoch: a broker's per-partition check that a
	// LeaderAndIsr's leader epoch is newer than its replica's
	// (ReplicaManager.becomeLeaderOrFollower).
	FenceLeaderAndIsrLeaderEpoch = "leaderandisr-leader-epoch"
	// FenceFetchLeaderEpoch: a leader's check of a fetch's current leader
	// epoch, a client's or a follower's (KIP-320, FENCED_LEADER_EPOCH).
	FenceFetchLeaderEpoch = "fetch-leader-epoch"
	// FenceControllerZK: ZooKeeper's check of /controller_epoch's version
	// on a controller's write (the multi's CheckVersion, KIP-380's
	// controller half).
	FenceControllerZK = "controller-zk-epoch"
	// FenceLeaderISRZK: ZooKeeper's check of the partition state's version
	// on a leader's ISR write (Partition.updateIsr's conditional set).
	FenceLeaderISRZK = "leader-isr-zkversion"
)

// Fences lists every fence counted, in result order: the control plane's,
// then those of groups and transactions (fences_txn.go).
var Fences = []string{
	FenceBrokerControllerEpoch, FenceBrokerBrokerEpoch, FenceControllerBrokerEpoch,
	FenceLeaderAndIsrLeaderEpoch, FenceFetchLeaderEpoch, FenceControllerZK, FenceLeaderISRZK,
	FenceGroupGeneration, FenceTxnProducerEpoch, FenceTxnCoordinatorEpoch, FenceTxnVerification,
}

// maxFenceEvents caps the example events a FenceCount keeps.
const maxFenceEvents = 3

// FenceCount is what one fence saw in one history.
type FenceCount struct {
	Fence string `json:"fence"`
	// Inputs counts the stale inputs that reached the fence; Rejected how
	// many of them it refused. Inputs > Rejected: a stale input was
	// obeyed.
	Inputs   int `json:"inputs"`
	Rejected int `json:"rejected"`
	// Examples are the first few inputs' events; Obeyed the first few
	// inputs that were not refused.
	Examples []int `json:"examples,omitempty"`
	Obeyed   []int `json:"obeyed,omitempty"`
	// NotApplicable: the history has no traffic that could bring the
	// fence an input (a group fence in a run without consumer groups, a
	// transaction fence in one without transactions), so the run neither
	// tested it nor left it untested. Absent (false) in runs stored before
	// it existed, whose fences all applied.
	NotApplicable bool `json:"not_applicable,omitempty"`
}

// String says what the fence saw, e.g. "broker-controller-epoch 3 stale
// inputs, 3 rejected", "fetch-leader-epoch untested" or "coordinator-generation
// not applicable".
func (f FenceCount) String() string {
	if f.NotApplicable {
		return f.Fence + " not applicable"
	}
	if f.Inputs == 0 {
		return f.Fence + " untested"
	}
	return fmt.Sprintf("%s %d stale inputs, %d rejected", f.Fence, f.Inputs, f.Rejected)
}

func (f *FenceCount) count(idx int, rejected bool) {
	f.Inputs++
	// A request's partitions are inputs of one event: listed once.
	if len(f.Examples) < maxFenceEvents && !slices.Contains(f.Examples, idx) {
		f.Examples = append(f.Examples, idx)
	}
	if rejected {
		f.Rejected++
	} else if len(f.Obeyed) < maxFenceEvents && !slices.Contains(f.Obeyed, idx) {
		f.Obeyed = append(f.Obeyed, idx)
	}
}

// epochChange is a replica's leader epoch from an event on (-1: none, the
// replica is not hosted).
type epochChange struct {
	idx   int
	epoch int32
}

// CountFences counts, per fence, the stale inputs that reached it in h and
// those it refused. The definitions, which follow what the node logs:
//
//   - broker-controller-epoch: a control_request whose controller epoch
//     is below the broker's KnownControllerEpoch, unless the broker-epoch
//     check, which Kafka applies first, refused it with
//     STALE_BROKER_EPOCH; refused: rejected with STALE_CONTROLLER_EPOCH.
//   - broker-broker-epoch: a control_request meant for a registration
//     older than the receiving process's own (OwnBrokerEpoch): the broker
//     epoch it carried, or, when it carried none, the one the controller
//     logged as meant on the send it pairs with (MeantBrokerEpoch, by
//     controller, target and correlation id); refused: rejected with
//     STALE_BROKER_EPOCH.
//   - controller-broker-epoch: a ControlledShutdown the active controller
//     handled (CachedBrokerEpoch known) from a sender older than the cached
//     epoch: the epoch carried, or, when it carried none, the epoch on the
//     broker's latest own record of sending one; refused: rejected with
//     STALE_BROKER_EPOCH.
//   - leaderandisr-leader-epoch: each partition of a LeaderAndIsr that
//     passed the whole-request checks whose leader epoch is not newer than
//     the replica's: the epoch of the replica's last applied LeaderAndIsr
//     partition in that process (one answered NONE but not_applied leaves
//     it as it was; a StopReplica that deletes the partition,
//     by its own or its send's delete flag, forgets it), or any partition
//     the broker refused with STALE_CONTROLLER_EPOCH, the code the node
//     answers a stale leader epoch with; refused: that code.
//   - fetch-leader-epoch: a client read refused with FENCED_LEADER_EPOCH,
//     or a read answered while carrying a current leader epoch below the
//     answering broker's replica epoch (as above) when the read began, or
//     a follower's fetch the receiving broker logged (replica_fetch) with
//     a current leader epoch below its replica's; refused:
//     FENCED_LEADER_EPOCH. A follower's fetch at the replica's own epoch
//     is not logged and has nothing to judge.
//   - controller-zk-epoch: a controller's write (a controller epoch it was
//     elected at, not /controller or /controller_epoch) whose outcome
//     ZooKeeper decided, issued after a higher controller epoch was
//     elected (by zxid when both carry one, else the write's start after
//     the election was logged), or refused with "controller moved" (its
//     CheckVersion on /controller_epoch failed); refused: a conditional
//     write answered badversion or nonode.
//   - leader-isr-zkversion: a leader's ISR write (a partition state write
//     with no controller epoch) whose expected version was not the znode's:
//     ZooKeeper answered badversion or nonode, or it was written
//     unconditionally over a version other than the one the leader held
//     (its last applied LeaderAndIsr's zkVersion, or its own last ISR
//     write's); refused: badversion or nonode.
//   - coordinator-generation: an OffsetCommit, Heartbeat or SyncGroup whose
//     member id was not the group's, or whose generation was not the
//     group's, by what the coordinator held when it checked them
//     (GroupRequest.Checked; Kafka compares generations with !=); from a
//     writer before Checked, such a request answered ILLEGAL_GENERATION or
//     UNKNOWN_MEMBER_ID; refused: either code.
//   - txn-producer-epoch: a client's AddPartitionsToTxn, AddOffsetsToTxn
//     or EndTxn, or a leader's verification, whose producer epoch was not
//     the one the coordinator held for the producer id
//     (KnownProducerEpoch); a marker whose producer epoch was below the
//     leader's producer state's; a batch a leader refused for an older
//     producer epoch (produce_refused); refused: INVALID_PRODUCER_EPOCH
//     (a verification's PRODUCER_FENCED). A batch at an older epoch
//     appended would not be seen: the node has no switch that skips the
//     leader's check, and produce_append does not log the epoch it held.
//   - txn-coordinator-epoch: a marker whose coordinator epoch was below
//     that of the producer's last marker on the partition, unless the
//     producer-epoch check, which comes first, refused it; refused:
//     TRANSACTION_COORDINATOR_FENCED.
//   - txn-verification: a transactional batch that started its
//     producer's transaction on a partition (the first since its last
//     marker there) and was appended although the coordinator had never
//     added the partition for the producer, or a marker had ended there
//     the last transaction it was added to; or one a leader refused by
//     verification (produce_refused); refused: the latter.
//
// Writes whose outcome is unknown (connection loss) are not counted: it is
// not known that they reached ZooKeeper. The group fence is not applicable
// in a history with no OffsetCommit, Heartbeat or SyncGroup, the
// transaction fences in one with no client transaction request, marker or
// refused transactional batch, unless an input reached them.
func CountFences(h *history.History) []FenceCount {
	out := make([]FenceCount, len(Fences))
	for i, f := range Fences {
		out[i].Fence = f
	}
	get := func(name string) *FenceCount { return &out[slices.Index(Fences, name)] }
	ctrlEpoch, brokerEpoch, shutdown := get(FenceBrokerControllerEpoch), get(FenceBrokerBrokerEpoch), get(FenceControllerBrokerEpoch)
	laiEpoch, fetchEpoch, ctrlZK, isrZK := get(FenceLeaderAndIsrLeaderEpoch), get(FenceFetchLeaderEpoch), get(FenceControllerZK), get(FenceLeaderISRZK)

	meantBySend := map[string]int64{} // attempt → the broker epoch the controller meant
	deleteBySend := map[string]bool{}
	lastShutdownSend := map[int32]int64{} // broker → its latest own record of sending ControlledShutdown
	epochs := map[nodeTP]int32{}          // replica → its leader epoch now
	epochLog := map[nodeTP][]epochChange{}
	zkVersion := map[nodeTP]int32{} // replica → the state znode version it holds
	setEpoch := func(k nodeTP, idx int, epoch int32) {
		if epoch < 0 {
			delete(epochs, k)
		} else {
			epochs[k] = epoch
		}
		epochLog[k] = append(epochLog[k], epochChange{idx, epoch})
	}
	// Elections count for a write only once logged before it in history
	// order: the fence is met by a write its node made after it could
	// have known.
	elections, ranAt := controllerElections(h)
	seenElections := 0

	for e := range eventsOf(h, history.KindNodeStart, history.KindControlSent, history.KindControlRequest, history.KindISRChange, history.KindControlledShutdown, history.KindZKWrite) {
		switch e.Kind {
		case history.KindNodeStart:
			for k := range epochs {
				if k.node == e.Node {
					setEpoch(k, e.Index, -1)
				}
			}
			forgetProcess(zkVersion, e.Node)
		case history.KindControlSent:
			if e.Control.Attempt > 0 {
				key := attemptKey(e.Node, e.Control.TargetBroker, e.Control)
				meantBySend[key] = e.Control.MeantBrokerEpoch
				deleteBySend[key] = e.Control.DeletePartition
			}
		case history.KindControlRequest:
			cr := e.Control
			if cr.API == history.APIControlledShutdown {
				continue
			}
			rejected := cr.Verdict == history.VerdictRejected
			staleBroker := rejected && cr.ErrorCode == history.ErrStaleBrokerEpoch
			if cr.ControllerEpoch < cr.KnownControllerEpoch && !staleBroker {
				ctrlEpoch.count(e.Index, rejected && cr.ErrorCode == history.ErrStaleControllerEpoch)
			}
			key := attemptKey(cr.ControllerID, e.Node, cr)
			meant := cr.BrokerEpoch
			if meant == -1 {
				meant = meantBySend[key]
			}
			if cr.OwnBrokerEpoch > 0 && meant > 0 && meant < cr.OwnBrokerEpoch {
				brokerEpoch.count(e.Index, staleBroker)
			}
			if rejected {
				continue
			}
			switch cr.API {
			case history.APILeaderAndIsr:
				for _, p := range cr.Partitions {
					k := nodeTP{p.TP(), e.Node}
					cur, hosted := epochs[k]
					stale := p.ErrorCode == history.ErrStaleControllerEpoch
					if stale || (hosted && p.LeaderEpoch <= cur) {
						laiEpoch.count(e.Index, stale)
					}
					// A partition answered NONE but not applied keeps the
					// replica's epoch (ReplicaManager.makeFollowers with
					// the leader not in the broker's metadata cache).
					if p.ErrorCode == history.ErrNone && !p.NotApplied {
						setEpoch(k, e.Index, p.LeaderEpoch)
						zkVersion[k] = p.ZkVersion
					}
				}
			case history.APIStopReplica:
				if !cr.DeletePartition && !deleteBySend[key] {
					continue
				}
				for _, p := range cr.Partitions {
					if p.ErrorCode == history.ErrNone {
						setEpoch(nodeTP{p.TP(), e.Node}, e.Index, -1)
					}
				}
			}
		case history.KindISRChange:
			if c := e.ISR; c.Outcome == history.ZKOK && c.ZkVersion >= 0 {
				zkVersion[nodeTP{c.TP(), e.Node}] = c.ZkVersion
			}
		case history.KindControlledShutdown:
			sd := e.Shutdown
			if sd.Verdict == history.VerdictSent {
				if sd.MeantBrokerEpoch > 0 {
					lastShutdownSend[sd.BrokerID] = sd.MeantBrokerEpoch
				}
				continue
			}
			sender := sd.BrokerEpoch
			if sender <= 0 {
				sender = lastShutdownSend[sd.BrokerID]
			}
			if sender > 0 && sender < sd.CachedBrokerEpoch {
				shutdown.count(e.Index, sd.Verdict == history.VerdictRejected && sd.ErrorCode == history.ErrStaleBrokerEpoch)
			}
		case history.KindZKWrite:
			zw := e.ZKWrite
			decided := zw.Outcome == history.ZKOK || zw.Outcome == history.ZKBadVersion || zw.Outcome == history.ZKNoNode
			refused := zw.Outcome == history.ZKBadVersion || zw.Outcome == history.ZKNoNode
			if !decided {
				continue
			}
			switch {
			case zw.ControllerEpoch > 0:
				if zw.Path == zklayout.ControllerPath || zw.Path == zklayout.ControllerEpochPath || !ranAt[nodeEpoch{e.Node, zw.ControllerEpoch}] {
					continue
				}
				for seenElections < len(elections) && elections[seenElections].idx < e.Index {
					seenElections++
				}
				// The node's error for a failed CheckVersion on
				// /controller_epoch (controller.errControllerMoved).
				_, superseded := supersededBy(elections[:seenElections], zw)
				if strings.HasPrefix(zw.Error, "controller moved") || superseded {
					ctrlZK.count(e.Index, zw.Conditional && refused)
				}
			case zw.State != nil && zw.Op == "set":
				k := nodeTP{zw.State.TP(), e.Node}
				held, known := zkVersion[k]
				overwrote := zw.ExpectedVersion < 0 && zw.Outcome == history.ZKOK && known && zw.NewVersion-1 != held
				if refused || overwrote {
					isrZK.count(e.Index, refused)
				}
			}
		}
	}

	countFencedReads(h, epochLog, fetchEpoch)
	countGroupTxnFences(h, get)
	return out
}

// countFencedReads counts on f the client reads the fetch leader epoch
// fence applied to: those refused FENCED_LEADER_EPOCH (met), and those a
// broker answered although they carried a leader epoch older than its
// replica's when the read began (missed; epochLog): a role change logged
// before the invoke was in force before the request could arrive.
func countFencedReads(h *history.History, epochLog map[nodeTP][]epochChange, f *FenceCount) {
	epochAt := func(k nodeTP, before int) (int32, bool) {
		log := epochLog[k]
		i := sort.Search(len(log), func(i int) bool { return log[i].idx >= before })
		if i == 0 || log[i-1].epoch < 0 {
			return 0, false
		}
		return log[i-1].epoch, true
	}
	type read struct {
		idx     int
		refused bool
	}
	var reads []read
	for _, o := range operations(h) {
		if o.Invoke == nil || o.Complete == nil || o.Invoke.Op.F != history.FRead {
			continue
		}
		c := o.Complete.Op
		switch {
		case c.ErrorCode == history.ErrFencedLeaderEpoch:
			reads = append(reads, read{o.Complete.Index, true})
		case c.Type == history.OpOK && c.LeaderEpoch != nil && *c.LeaderEpoch >= 0 && c.Broker > 0:
			cur, ok := epochAt(nodeTP{c.TP(), c.Broker}, o.Invoke.Index)
			if ok && *c.LeaderEpoch < cur {
				reads = append(reads, read{o.Complete.Index, false})
			}
		}
	}
	// A follower's fetch the leader side logged with an older current
	// leader epoch than its replica's: the check's input on the
	// replication path, which KIP-320 was written for.
	for e := range eventsOf(h, history.KindReplicaFetch) {
		if f := e.ReplicaFetch; f.Replica >= 0 && f.CurrentLeaderEpoch < f.LeaderEpoch {
			reads = append(reads, read{e.Index, f.ErrorCode == history.ErrFencedLeaderEpoch})
		}
	}
	sort.Slice(reads, func(a, b int) bool { return reads[a].idx < reads[b].idx })
	for _, r := range reads {
		f.count(r.idx, r.refused)
	}
}

// FenceCoverage is a checker that never fails a run: it counts, per fence, the
// stale inputs that reached it and how many it refused (CountFences), and
// names the fences the run left untested. Its verdict is always valid.
type FenceCoverage struct{}

// Name implements Checker.
func (FenceCoverage) Name() string { return "fences" }

// Check implements Checker.
func (c FenceCoverage) Check(h *history.History) Result {
	counts := CountFences(h)
	r := &report{name: c.Name()}
	r.detail("fences", counts)
	var tested, untested, notApplicable []string
	for _, f := range counts {
		switch {
		case f.NotApplicable:
			notApplicable = append(notApplicable, f.Fence)
		case f.Inputs == 0:
			untested = append(untested, f.Fence)
		default:
			tested = append(tested, f.String())
		}
	}
	if len(untested) > 0 {
		r.detail("untested", untested)
	}
	if len(notApplicable) > 0 {
		r.detail("not_applicable", notApplicable)
	}
	var s string
	switch {
	case len(tested) == 0:
		s = "No stale input reached any fence: every fence is untested (" + strings.Join(untested, ", ") + ")."
	case len(untested) == 0:
		s = "Every fence was tested: " + strings.Join(tested, "; ") + "."
	default:
		s = "Fences tested: " + strings.Join(tested, "; ") + "; untested (no stale input reached them): " + strings.Join(untested, ", ") + "."
	}
	if len(notApplicable) > 0 {
		s += " Not applicable (no group or transaction traffic in the history): " + strings.Join(notApplicable, ", ") + "."
	}
	return r.result(s)
}

// FencesOf returns the fence counts a "fences" result carries, whether
// built in this process or read back from results.json; ok is false when r
// carries none (a result of another checker, or of a run checked before
// fences were counted).
func FencesOf(r Result) (counts []FenceCount, ok bool) {
	v, found := r.Details["fences"]
	if !found {
		return nil, false
	}
	if fc, typed := v.([]FenceCount); typed {
		return fc, true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	if err := json.Unmarshal(b, &counts); err != nil {
		return nil, false
	}
	return counts, true
}

// FenceTally is one fence over several runs.
type FenceTally struct {
	Fence string `json:"fence"`
	// Runs counts the runs measured; RunsWithInput those in which at least
	// one stale input reached the fence, RunsWithRejection those in which
	// it refused at least one.
	Runs              int `json:"runs"`
	RunsWithInput     int `json:"runs_with_input"`
	RunsWithRejection int `json:"runs_with_rejection"`
	// Inputs and Rejected are summed over the runs.
	Inputs   int `json:"inputs"`
	Rejected int `json:"rejected"`
	// RunsNotApplicable counts the runs the fence did not apply to (no
	// traffic could reach it, or the run was counted before the fence
	// was); absent in tallies stored before it existed, whose fences
	// applied to every run.
	RunsNotApplicable int `json:"runs_not_applicable,omitempty"`
}

// Applicable counts the runs the fence applied to.
func (t FenceTally) Applicable() int { return t.Runs - t.RunsNotApplicable }

// NotApplicable says whether the fence applied to none of the runs.
func (t FenceTally) NotApplicable() bool { return t.Runs > 0 && t.Applicable() == 0 }

// Untested says whether the fence applied to some run and no run brought
// it a stale input.
func (t FenceTally) Untested() bool { return t.RunsWithInput == 0 && !t.NotApplicable() }

// TallyFences folds per-run fence counts into one tally per fence, in
// Fences order; fences not in Fences follow in name order. A fence a run
// does not list was not counted in it: a group or transaction fence is
// then not applicable there (those runs predate it, and such fences need
// traffic), any other untested, as before the distinction existed.
func TallyFences(runs [][]FenceCount) []FenceTally {
	names := slices.Clone(Fences)
	for _, run := range runs {
		for _, f := range run {
			if !slices.Contains(names, f.Fence) {
				names = append(names, f.Fence)
			}
		}
	}
	slices.Sort(names[len(Fences):])
	out := make([]FenceTally, len(names))
	for i, n := range names {
		out[i] = FenceTally{Fence: n, Runs: len(runs)}
	}
	for _, run := range runs {
		for i, n := range names {
			listed := slices.IndexFunc(run, func(f FenceCount) bool { return f.Fence == n })
			needsTraffic := slices.Contains(groupFences, n) || slices.Contains(txnFences, n)
			if (listed >= 0 && run[listed].NotApplicable) || (listed < 0 && needsTraffic) {
				out[i].RunsNotApplicable++
			}
		}
		for _, f := range run {
			t := &out[slices.Index(names, f.Fence)]
			t.Inputs += f.Inputs
			t.Rejected += f.Rejected
			if f.Inputs > 0 {
				t.RunsWithInput++
			}
			if f.Rejected > 0 {
				t.RunsWithRejection++
			}
		}
	}
	return out
}

// UntestedFences names the applicable fences no stale input reached.
func UntestedFences(counts []FenceCount) []string {
	var out []string
	for _, f := range counts {
		if f.Inputs == 0 && !f.NotApplicable {
			out = append(out, f.Fence)
		}
	}
	return out
}
