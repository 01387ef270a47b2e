package checkers

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/zkchaos/zkchaos/history"
)

// ISR checks Kafka's in-sync replica promise: every replica in a
// partition's ISR holds the partition's committed log, identical to the
// leader's up to the high watermark. That is what makes electing any ISR
// member safe, so a replica wrongly in the ISR loses acknowledged records
// the day it is elected. Four ways in, and the elections that rely on it, are judged, each from what the
// replicas did rather than from how the ISR was computed:
//
//   - A controller's state write that puts a broker into the ISR which the
//     state it replaced did not have, while that broker does not hold every
//     acknowledged record. Kafka's controller never grows an ISR: offline,
//     controlled-shutdown, reassignment and preferred elections keep or
//     shrink it (PartitionStateMachine), and only the leader adds a
//     follower, once it has caught up (Partition.maybeExpandIsr). A leader
//     elected from outside the ISR is judged by the election rule instead.
//   - An election from outside the ISR ZooKeeper held (election.go): the
//     known anomaly "unclean-election", listing the acknowledged records it
//     cost, when the controller's process ran the unclean policy (invalid
//     with StrictElections); a violation otherwise (for the query-leo
//     policy, when the elected replica lacked an acknowledged record).
//   - A leader whose ISR holds a replica whose log differs from the
//     leader's at an offset below the leader's high watermark. A replica
//     that follows a leader truncates to where their leader epochs agree
//     (KIP-101, KIP-279) before it fetches, so it never holds another
//     lineage's record below what the leader has committed. The history
//     shows which leader epoch a broker's log holds at offset o when the
//     broker appended o itself, as leader (produce_append), or when a
//     leader acknowledged o to an acks=all producer while the broker was in
//     that leader's ISR (produce_ack: the high watermark had passed o, so
//     every member held the leader's record); a truncation to o or below
//     forgets it. A member whose log crash-lose-unflushed cut after the
//     acknowledging leader began leading, and that no leader took back
//     into an ISR since, is not credited: the leader counted its last
//     fetch from before the crash (Partition.makeLeader keeps a follower's
//     fetch state across the leader's own re-election). Other replicated
//     records are not in the history, and an offset the history does not
//     show never counts as a difference.
//   - A leader whose successful ISR expand took in a follower whose fetch
//     offset, which is its log end offset, was below the leader's high
//     watermark when it decided (isr_change's join). Kafka's leader takes
//     a follower in only once its fetch offset has reached the high
//     watermark (Partition.maybeExpandIsr), so the new member lacked the
//     committed offsets [fetch offset, high watermark).
//   - A partition state, written by a controller or by a leader, whose
//     leader is not in its own ISR (isr_leader.go). Every Kafka election
//     picks the leader from the ISR, and an unclean one sets ISR
//     [leader], so such a leader can lack committed records that every
//     follower then truncates away.
type ISR struct {
	// StrictElections makes the known anomaly unclean-election invalid;
	// it is still reported by name.
	StrictElections bool
}

// KnownUncleanElection: a controller whose process ran with the unclean
// offline-election policy made a replica outside the ISR ZooKeeper held
// leader, as Kafka does with unclean.leader.election.enable; the example
// lists the acknowledged records it cost (possibly none).
const KnownUncleanElection = "unclean-election"

// Name implements Checker.
func (ISR) Name() string { return "isr" }

// Check implements Checker.
func (c ISR) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	grown := checkControllerISRGrowth(h, r)
	joins, advances := checkDivergentISRMembers(h, r)
	expands := checkLaggingJoins(h, r)
	checkLeaderInISR(h, r)
	elections, outside := checkElections(h, r, c.StrictElections)
	// Both passes append in history order; keep the report so.
	sort.SliceStable(r.violations, func(a, b int) bool {
		return slices.Max(r.violations[a].Events) < slices.Max(r.violations[b].Events)
	})
	r.detail("controller_isr_additions", grown)
	r.detail("isr_joins", joins)
	r.detail("leader_hw_advances", advances)
	r.detail("leader_isr_expands", expands)
	r.detail("elections", elections)
	r.detail("elections_outside_isr_allowed", outside)
	picked := fmt.Sprintf("all %d controller elections picked their leader inside the ISR ZooKeeper held", elections)
	if elections == 1 {
		picked = "the one controller election picked its leader inside the ISR ZooKeeper held"
	}
	if outside > 0 {
		picked = fmt.Sprintf("the %d controller elections picked their leader inside the ISR ZooKeeper held but %d that the electing process's offline-election policy allowed outside it", elections, outside)
	}
	return r.result(fmt.Sprintf("no controller put a replica lacking acknowledged records into an ISR (%d additions judged), no leader took a replica into its ISR (%d joins) or advanced its high watermark (%d advances) while that replica's log differed from its own below the high watermark, no leader took in a follower whose fetch offset was below its high watermark (%d expands judged), no partition state named a leader outside its ISR, and %s.",
		grown, joins, advances, expands, picked))
}

// ---- acknowledged records (shared with electable.go) ----------------------

// ackedProduce is one acks=all produce a client saw acknowledged.
type ackedProduce struct {
	invoke int64 // when the client sent it: no broker held the record before
	time   int64 // when the acknowledgement reached the client
	idx    int   // the completion event
	offset int64
	value  string
}

// ackedProduces returns, per partition, the acks=all produces acknowledged
// to a client, in completion-time order.
func ackedProduces(ops []history.Operation) map[history.TopicPartition][]ackedProduce {
	acks := map[history.TopicPartition][]ackedProduce{}
	for _, op := range ops {
		if op.Op().F != history.FProduce || op.Outcome() != history.OpOK || op.Acks() != history.AcksAll {
			continue
		}
		tp := op.Op().TP()
		acks[tp] = append(acks[tp], ackedProduce{op.Invoke.Time, op.Complete.Time, op.Complete.Index, op.Offset(), op.Op().Value})
	}
	for _, as := range acks {
		slices.SortStableFunc(as, func(a, b ackedProduce) int { return cmp.Compare(a.time, b.time) })
	}
	return acks
}

// ---- rule 1: a controller grows an ISR --------------------------------------

// replaced returns the state a write with zxid and expected znode version
// replaced: the newest one before it in zxid order, provided its version is
// the one the write expected (else a state in between went unseen, and
// what was replaced is unknown). vs are the partition's versions in
// ZooKeeper order, which is zxid order since the write has one.
func replaced(vs []zkState, zxid int64, expected int32) (zkState, bool) {
	k := sort.Search(len(vs), func(j int) bool { return vs[j].zxid >= zxid }) - 1
	if k < 0 || (expected >= 0 && vs[k].version != expected) {
		return zkState{}, false
	}
	return vs[k], true
}

// ackHolders answers whether a broker held every record acknowledged
// before some time.
type ackHolders struct {
	acks   map[history.TopicPartition][]ackedProduce
	top    map[history.TopicPartition][]int // top[tp][k]: index in acks[tp] of the highest offset among acks[tp][:k+1]
	tl     map[history.TopicPartition][]leaderObs
	truncs map[history.TopicPartition][]*history.Event
	hws    map[history.TopicPartition][]*history.Event
}

func newAckHolders(h *history.History, ops []history.Operation) *ackHolders {
	a := &ackHolders{acks: ackedProduces(ops), top: map[history.TopicPartition][]int{}, tl: leaderTimelines(h),
		truncs: map[history.TopicPartition][]*history.Event{}, hws: map[history.TopicPartition][]*history.Event{}}
	for tp, as := range a.acks {
		top := make([]int, len(as))
		for k := range as {
			top[k] = k
			if k > 0 && as[top[k-1]].offset >= as[k].offset {
				top[k] = top[k-1]
			}
		}
		a.top[tp] = top
	}
	for e := range eventsOf(h, history.KindTruncation, history.KindHWAdvance) {
		switch e.Kind {
		case history.KindTruncation:
			a.truncs[e.Truncation.TP()] = append(a.truncs[e.Truncation.TP()], e)
		case history.KindHWAdvance:
			a.hws[e.HW.TP()] = append(a.hws[e.HW.TP()], e)
		}
	}
	return a
}

// lacking reports whether broker b is not known to hold every record of tp
// acknowledged before t (judged at until), and the highest such
// acknowledgement. A broker holds them when it was in the ISR at that
// acknowledgement (the high watermark had passed it, and the high
// watermark is the smallest log end in the ISR), or when its own high
// watermark, which never exceeds its log end, passed that offset after the
// record was produced; either way, unless it truncated the offset away
// since.
func (a *ackHolders) lacking(tp history.TopicPartition, b int32, t, until int64) (best ackedProduce, isr string, lacks bool) {
	as := a.acks[tp]
	k := sort.Search(len(as), func(j int) bool { return as[j].time >= t }) - 1
	if k < 0 {
		return ackedProduce{}, "", false // nothing acknowledged: nothing to lack
	}
	best = as[a.top[tp][k]]
	isr = "an ISR the history does not show"
	if st, ok := stateAt(a.tl[tp], best.time); ok {
		isr = fmt.Sprintf("ISR %v", st.ISR)
	}
	return best, isr, !a.holds(tp, b, best, until)
}

// holds reports whether broker b is known to hold acknowledged record ack
// of tp at until: it was in the ISR at the acknowledgement, or its own high
// watermark passed the offset after the record was produced, and it has
// not truncated the offset away since.
func (a *ackHolders) holds(tp history.TopicPartition, b int32, ack ackedProduce, until int64) bool {
	if st, ok := stateAt(a.tl[tp], ack.time); ok && slices.Contains(st.ISR, b) && !truncatedBelow(a.truncs[tp], b, ack.time, until, ack.offset) {
		return true
	}
	for _, e := range a.hws[tp] {
		if e.Node != b || e.Time < ack.invoke || e.Time > until || e.HW.New <= ack.offset {
			continue
		}
		if !truncatedBelow(a.truncs[tp], b, e.Time, until, ack.offset) {
			return true
		}
	}
	return false
}

// policies tells which offline-election policy each node's process ran
// with (node_start).
type policies map[int32][]*history.Event

func nodePolicies(h *history.History) policies {
	p := policies{}
	for e := range eventsOf(h, history.KindNodeStart) {
		if e.Kind == history.KindNodeStart {
			p[e.Node] = append(p[e.Node], e)
		}
	}
	return p
}

// uncleanPolicy is the node program's --offline-election value for
// Kafka's unclean.leader.election.enable.
const uncleanPolicy = "unclean"

// checkControllerISRGrowth reports controller state writes that put a
// broker lacking acknowledged records into an ISR that did not have it,
// and returns how many brokers controllers added to an ISR.
func checkControllerISRGrowth(h *history.History, r *report) int {
	versions := partitionStates(h)
	// Built on the first growth: most histories have none, and pairing
	// the client operations is most of the cost.
	var holders *ackHolders
	t0 := firstTime(h)
	added := 0
	for e := range eventsOf(h, history.KindZKWrite) {
		if e.Kind != history.KindZKWrite {
			continue
		}
		w := e.ZKWrite
		if w.Outcome != history.ZKOK || w.State == nil || w.ControllerEpoch <= 0 || w.Op == "create" || w.Zxid <= 0 {
			continue
		}
		tp := w.State.TP()
		prev, ok := replaced(versions[tp].ordered, w.Zxid, w.ExpectedVersion)
		if !ok {
			continue
		}
		for _, b := range w.State.ISR {
			if slices.Contains(prev.ISR, b) {
				continue
			}
			added++
			if holders == nil {
				holders = newAckHolders(h, operations(h))
			}
			if b == w.State.Leader && b != prev.Leader {
				// A leader elected from outside the ISR: the election
				// rule (checkElections) judges it.
				continue
			}
			start := w.Start
			if start == 0 || start > e.Time {
				start = e.Time
			}
			ack, ackISR, lacks := holders.lacking(tp, b, start, e.Time)
			if !lacks {
				continue
			}
			evs := []int{prev.idx, ack.idx, e.Index}
			lack := fmt.Sprintf("although broker %d did not hold every acknowledged record: the highest acknowledged offset, %d (event %d, +%s), was acknowledged with %s, and broker %d showed no high watermark above it afterwards",
				b, ack.offset, ack.idx, rel(h.Events[ack.idx].Time, t0), ackISR, b)
			r.violate(evs, "controller %d (epoch %d) wrote %s's state with leader %d at leader epoch %d and ISR %v (event %d, +%s), adding broker %d, which the ISR %v it replaced (event %d) did not have, %s; Kafka's controller never adds a replica to the ISR, only the leader does, once the replica has caught up.",
				e.Node, w.ControllerEpoch, tp, w.State.Leader, w.State.LeaderEpoch, w.State.ISR, e.Index, rel(e.Time, t0), b, prev.ISR, prev.idx, lack)
		}
	}
	return added
}

// ---- rule 3: a leader takes in a follower below its high watermark ---------

// checkLaggingJoins reports leaders' successful ISR expands whose joining
// follower fetched from below the leader's high watermark, and returns how
// many expands it judged (those whose event says what the leader saw).
func checkLaggingJoins(h *history.History, r *report) int {
	// hws[k]: the high watermark moves of broker k.node's current process,
	// to name the one that set the high watermark the leader decided at.
	hws := map[nodeTP][]*history.Event{}
	t0 := firstTime(h)
	judged := 0
	for e := range eventsOf(h, history.KindNodeStart, history.KindHWAdvance, history.KindISRChange) {
		switch e.Kind {
		case history.KindNodeStart:
			forgetProcess(hws, e.Node)
			continue
		case history.KindHWAdvance:
			k := nodeTP{e.HW.TP(), e.Node}
			hws[k] = append(hws[k], e)
			continue
		case history.KindISRChange:
		default:
			continue
		}
		c := e.ISR
		j := c.Join
		if c.Action != history.ISRExpand || c.Outcome != history.ZKOK || j == nil {
			continue
		}
		judged++
		if j.FetchOffset >= j.HW {
			continue
		}
		evs := []int{e.Index}
		since := ""
		moves := hws[nodeTP{c.TP(), e.Node}]
		// The event comes after the ZooKeeper write: the high watermark
		// may have moved on since the decision, so look back.
		for n := len(moves) - 1; n >= 0; n-- {
			if x := moves[n]; x.HW.New == j.HW {
				evs = append([]int{x.Index}, evs...)
				since = fmt.Sprintf(" (since event %d, +%s)", x.Index, rel(x.Time, t0))
				break
			} else if x.HW.New < j.HW {
				break
			}
		}
		r.violate(evs, "broker %d, leader of %s at leader epoch %d, took broker %d into its ISR %v → %v (event %d, +%s) on a fetch from offset %d while its high watermark was %d%s: the new member lacked the committed offsets [%d, %d); Kafka takes a follower into the ISR only once its fetch offset has reached the leader's high watermark (Partition.maybeExpandIsr).",
			e.Node, c.TP(), c.LeaderEpoch, j.Follower, c.Old, c.New, e.Index, rel(e.Time, t0), j.FetchOffset, j.HW, since, j.FetchOffset, j.HW)
	}
	return judged
}
