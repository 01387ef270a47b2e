package checkers

import (
	"fmt"
	"slices"
	"strings"

	"github.com/zkchaos/zkchaos/history"
)

// The election rule, judged by the ISR checker (checkElections) and relied
// on by Durability:
//
// Every leader election a controller writes (offline, controlled shutdown,
// preferred, reassignment) picks a leader inside the partition's ISR as
// ZooKeeper held it, the state the write replaced. Kafka 2.6.3's Election
// (leaderForOffline, leaderForReassign, leaderForPreferredReplica,
// leaderForControlledShutdown) takes the first live assigned replica that
// is in the ISR; only the offline election with unclean.leader.election
// enabled falls back to a live replica outside it, with ISR [that replica]
// (PartitionStateMachine.doElectLeaderForPartitions). So:
//
//   - an election from outside the ISR by a controller whose process ran
//     the unclean policy (node_start's Process.Policy "unclean") is the
//     known anomaly "unclean-election", listing the acknowledged records it
//     cost: those acknowledged before it that its leader is not known to
//     hold and that the final reads lack (possibly none). Durability does
//     not count those records as violations; Config.StrictElections makes
//     the anomaly invalid, still by name;
//   - an election from outside the ISR by a process running the node's
//     query-leo policy (the KAFKA-3861 report's proposal, not Kafka 2.6.3)
//     is held to that policy's promise: the elected replica holds every
//     acknowledged record, or it is a violation;
//   - an election from outside the ISR by any other process is a violation.

// election is a controller's partition-state write that names a leader
// other than the one of the state it replaced.
type election struct {
	write *history.Event
	prev  zkState // the state the write replaced, in ZooKeeper order
	// policy is the offline-election policy of the writer's process, and
	// started its node_start (nil when the history has none before it).
	policy  string
	started *history.Event
}

func (e election) state() *history.PartitionState { return e.write.ZKWrite.State }

// outside reports whether the elected leader was not in the ISR the write
// replaced.
func (e election) outside() bool { return !slices.Contains(e.prev.ISR, e.state().Leader) }

// unclean reports whether e is an unclean election: from outside the ISR,
// by a process that ran the unclean policy.
func (e election) unclean() bool { return e.outside() && e.policy == uncleanPolicy }

// describe says who elected whom, when, and from which ISR.
func (e election) describe(t0 int64) string {
	w, st := e.write.ZKWrite, e.state()
	where := "inside"
	if e.outside() {
		where = "from outside"
	}
	return fmt.Sprintf("controller %d (epoch %d) elected broker %d leader of %s at leader epoch %d with ISR %v (event %d, +%s) %s the ISR %v ZooKeeper held (event %d)",
		e.write.Node, w.ControllerEpoch, st.Leader, st.TP(), st.LeaderEpoch, st.ISR, e.write.Index, rel(e.write.Time, t0), where, e.prev.ISR, e.prev.idx)
}

// ran says which policy the electing process ran with, naming its start.
func (e election) ran() string {
	switch {
	case e.started == nil:
		return "the history has no node_start of its process, so no offline-election policy is known for it"
	case e.policy == "":
		return fmt.Sprintf("its process (node_start event %d) logged no offline-election policy", e.started.Index)
	}
	return fmt.Sprintf("its process ran with offline-election policy %q (node_start event %d)", e.policy, e.started.Index)
}

// queryLEOPolicy is the node program's --offline-election value for the
// KAFKA-3861 report's proposal: elect the longest log among the replicas.
const queryLEOPolicy = "query-leo"

// electionsOf returns, in history order, every successful controller write
// of a partition state that names a leader (not -1) other than the one of
// the state it replaced, when the history shows that state.
func electionsOf(h *history.History) []election {
	versions := partitionStates(h)
	var pols policies
	var out []election
	for e := range eventsOf(h, history.KindZKWrite) {
		if e.Kind != history.KindZKWrite {
			continue
		}
		w := e.ZKWrite
		if w.Outcome != history.ZKOK || w.State == nil || w.ControllerEpoch <= 0 || w.Op == "create" || w.Zxid <= 0 || w.State.Leader < 0 {
			continue
		}
		prev, ok := replaced(versions[w.State.TP()].ordered, w.Zxid, w.ExpectedVersion)
		if !ok || prev.Leader == w.State.Leader {
			continue
		}
		if pols == nil {
			pols = nodePolicies(h)
		}
		el := election{write: e, prev: prev}
		for _, s := range pols[e.Node] {
			if s.Time > e.Time {
				break
			}
			el.started, el.policy = s, s.Process.Policy
		}
		out = append(out, el)
	}
	return out
}

// uncleanCost is an unclean election and the acknowledged records it cost.
type uncleanCost struct {
	election
	lost  []ackedProduce
	found []string // per lost record, the value the final read had at its offset ("" when none)
	final int      // the partition's first final read (-1: none, so the cost is unknown)
}

// finalReads is what the final reads of one partition returned.
type finalReads struct {
	from   int64 // lowest fetch offset: records below it are not shown
	idx    int   // completion of the first final read
	values map[int64]string
}

// finalReadsOf gathers the final reads per partition.
func finalReadsOf(ops []history.Operation) map[history.TopicPartition]*finalReads {
	out := map[history.TopicPartition]*finalReads{}
	for _, op := range ops {
		if !op.Final() || op.Outcome() != history.OpOK || op.Op().F != history.FRead {
			continue
		}
		tp := op.Op().TP()
		f := out[tp]
		if f == nil {
			f = &finalReads{from: op.Op().Offset, idx: op.Complete.Index, values: map[int64]string{}}
			out[tp] = f
		}
		f.from = min(f.from, op.Op().Offset)
		for _, rec := range op.Records() {
			if _, ok := f.values[rec.Offset]; !ok {
				f.values[rec.Offset] = rec.Value
			}
		}
	}
	return out
}

// uncleanCosts returns the unclean elections of h, in history order, each
// with the acknowledged records it cost: acknowledged before the election
// was logged, not known to be held by the elected leader then, and absent
// from the final reads at their offsets (or another value there). A record
// is charged to the first unclean election that cost it.
func uncleanCosts(h *history.History, ops []history.Operation) []uncleanCost {
	var out []uncleanCost
	for _, el := range electionsOf(h) {
		if el.unclean() {
			out = append(out, uncleanCost{election: el, final: -1})
		}
	}
	if len(out) == 0 {
		return nil
	}
	holders := newAckHolders(h, ops)
	finals := finalReadsOf(ops)
	charged := map[int]bool{} // acknowledgement event → charged
	for i := range out {
		c := &out[i]
		st := c.state()
		f := finals[st.TP()]
		if f == nil {
			continue
		}
		c.final = f.idx
		for _, a := range holders.acks[st.TP()] {
			if a.time > c.write.Time {
				break
			}
			if charged[a.idx] || a.offset < f.from || holders.holds(st.TP(), st.Leader, a, c.write.Time) {
				continue
			}
			got, ok := f.values[a.offset]
			if ok && got == a.value {
				continue
			}
			charged[a.idx] = true
			c.lost = append(c.lost, a)
			c.found = append(c.found, got)
		}
	}
	return out
}

// maxCostListed caps the records an unclean election's explanation lists.
const maxCostListed = 5

// explain says what the unclean election did and what it cost.
func (c uncleanCost) explain(t0 int64) string {
	s := fmt.Sprintf("%s: an unclean election, which Kafka makes because %s", c.describe(t0), c.ran())
	tp := c.state().TP()
	switch {
	case c.final < 0:
		return s + fmt.Sprintf("; no final read of %s shows what it cost.", tp)
	case len(c.lost) == 0:
		return s + fmt.Sprintf("; it cost no acknowledged record: every one acknowledged before it that broker %d was not known to hold is in the final read (event %d).", c.state().Leader, c.final)
	}
	var parts []string
	for i, a := range c.lost {
		if i == maxCostListed {
			parts = append(parts, fmt.Sprintf("%d more", len(c.lost)-i))
			break
		}
		how := "missing from"
		if c.found[i] != "" {
			how = fmt.Sprintf("%q in", c.found[i])
		}
		parts = append(parts, fmt.Sprintf("%q at offset %d (acknowledged at event %d, +%s; %s the final read)", a.value, a.offset, a.idx, rel(a.time, t0), how))
	}
	return s + fmt.Sprintf("; it cost %d acknowledged %s that broker %d lacked: %s (final read event %d).",
		len(c.lost), plural(len(c.lost), "record", "records"), c.state().Leader, strings.Join(parts, "; "), c.final)
}

// checkElections judges every controller election (see the rule above)
// and returns how many it judged and how many of those picked from outside
// the ISR as their process's policy allowed.
func checkElections(h *history.History, r *report, strict bool) (judged, allowed int) {
	els := electionsOf(h)
	if len(els) == 0 {
		return 0, 0
	}
	t0 := firstTime(h)
	var holders *ackHolders
	var costs map[int]uncleanCost // by election write
	for _, el := range els {
		if !el.outside() {
			continue
		}
		evs := []int{el.prev.idx, el.write.Index}
		if el.started != nil {
			evs = append(evs, el.started.Index)
		}
		st := el.state()
		switch el.policy {
		case uncleanPolicy:
			if costs == nil {
				costs = map[int]uncleanCost{}
				for _, c := range uncleanCosts(h, operations(h)) {
					costs[c.write.Index] = c
				}
			}
			c := costs[el.write.Index]
			cevs := slices.Clone(evs)
			for _, a := range c.lost {
				cevs = append(cevs, a.idx)
			}
			if c.final >= 0 && len(c.lost) > 0 {
				cevs = append(cevs, c.final)
			}
			slices.Sort(cevs)
			allowed++
			text := c.explain(t0)
			r.knownAnomaly(KnownUncleanElection, cevs, "%s", text)
			if strict {
				r.violate(cevs, "known anomaly %s (strict elections): %s", KnownUncleanElection, text)
			}
		case queryLEOPolicy:
			if holders == nil {
				holders = newAckHolders(h, operations(h))
			}
			start := el.write.ZKWrite.Start
			if start == 0 || start > el.write.Time {
				start = el.write.Time
			}
			ack, ackISR, lacks := holders.lacking(st.TP(), st.Leader, start, el.write.Time)
			if !lacks {
				allowed++
				continue
			}
			r.violate(append(evs, ack.idx), "%s, and %s, which elects from outside the ISR only the replica with the longest log, yet broker %d did not hold every acknowledged record: the highest acknowledged offset, %d (event %d, +%s), was acknowledged with %s, and broker %d showed no high watermark above it afterwards.",
				el.describe(t0), el.ran(), st.Leader, ack.offset, ack.idx, rel(ack.time, t0), ackISR, st.Leader)
		default:
			r.violate(evs, "%s, and %s: Kafka's offline, controlled-shutdown, preferred and reassignment elections pick only an ISR member, and only an unclean election (unclean.leader.election.enable) picks from outside the ISR.",
				el.describe(t0), el.ran())
		}
	}
	return len(els), allowed
}
