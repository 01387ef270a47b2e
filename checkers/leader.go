package checkers

import (
	"fmt"
	"sort"

	"github.com/zkchaos/zkchaos/history"
)

// LeaderUniqueness checks that one partition never has two leaders:
//   - never two brokers becoming leader of, appending to, or acknowledging
//     writes for one partition at the same leader epoch;
//   - never two leaders acknowledging acks=all writes in overlapping time:
//     once a leader of a newer epoch acknowledged offset o, no leader of an
//     older epoch on another broker acknowledges an offset at or above o.
//     (An old leader finishing an ack for an offset below the new leader's
//     first ack is benign: that record is already on the new leader.)
type LeaderUniqueness struct{}

// Name implements Checker.
func (LeaderUniqueness) Name() string { return "leader-uniqueness" }

// Check implements Checker.
func (c LeaderUniqueness) Check(h *history.History) Result {
	r := &report{name: c.Name()}
	type epochKey struct {
		tp    history.TopicPartition
		epoch int32
	}
	type claim struct {
		node int32
		idx  int
		what string
	}
	claims := map[epochKey]claim{} // first broker to act as leader at (tp, epoch)
	flagged := map[epochKey]bool{}
	type ackSpan struct {
		node     int32
		minBase  int64
		firstIdx int
	}
	acks := map[history.TopicPartition]map[int32]ackSpan{} // tp → epoch → first acks at that epoch
	nAcks, nClaims := 0, 0

	claimLeader := func(e *history.Event, tp history.TopicPartition, epoch int32, what string) {
		nClaims++
		k := epochKey{tp, epoch}
		first, ok := claims[k]
		if !ok {
			claims[k] = claim{e.Node, e.Index, what}
			return
		}
		if first.node != e.Node && !flagged[k] {
			flagged[k] = true
			r.violate([]int{first.idx, e.Index},
				"brokers %d and %d both acted as leader of %s at leader epoch %d (%s event %d, %s %s).",
				first.node, e.Node, tp, epoch, first.what, first.idx, what, ev(e))
		}
	}

	for i := range h.Events {
		e := &h.Events[i]
		switch e.Kind {
		case history.KindRoleChange:
			if e.Role.Role == history.RoleLeader {
				claimLeader(e, e.Role.TP(), e.Role.LeaderEpoch, "became leader")
			}
		case history.KindProduceAppend:
			claimLeader(e, e.Append.TP(), e.Append.LeaderEpoch, "appended")
		case history.KindProduceAck:
			a := e.Append
			tp := a.TP()
			claimLeader(e, tp, a.LeaderEpoch, "acknowledged")
			if a.Acks != history.AcksAll {
				continue
			}
			nAcks++
			byEpoch := acks[tp]
			if byEpoch == nil {
				byEpoch = map[int32]ackSpan{}
				acks[tp] = byEpoch
			}
			// The lowest newer epoch that conflicts, so output is deterministic.
			var (
				hit   ackSpan
				hitEp int32
				found bool
			)
			for epoch, s := range byEpoch {
				if epoch > a.LeaderEpoch && s.node != e.Node && a.LastOffset >= s.minBase && (!found || epoch < hitEp) {
					hit, hitEp, found = s, epoch, true
				}
			}
			if k := (epochKey{tp, a.LeaderEpoch}); found && !flagged[k] {
				flagged[k] = true
				r.violate([]int{hit.firstIdx, e.Index},
					"broker %d acknowledged acks=all offsets %d-%d of %s as leader epoch %d (%s) after broker %d had acknowledged offset %d as leader epoch %d (event %d): two leaders acknowledged overlapping writes.",
					e.Node, a.BaseOffset, a.LastOffset, tp, a.LeaderEpoch, ev(e), hit.node, hit.minBase, hitEp, hit.firstIdx)
			}
			if s, ok := byEpoch[a.LeaderEpoch]; !ok || a.BaseOffset < s.minBase {
				if ok {
					s.minBase = a.BaseOffset
				} else {
					s = ackSpan{node: e.Node, minBase: a.BaseOffset, firstIdx: e.Index}
				}
				byEpoch[a.LeaderEpoch] = s
			}
		}
	}
	// Keep violations in history order regardless of map iteration above.
	sort.SliceStable(r.violations, func(a, b int) bool {
		return r.violations[a].Events[len(r.violations[a].Events)-1] < r.violations[b].Events[len(r.violations[b].Events)-1]
	})
	r.detail("leader_claims", nClaims)
	r.detail("acks_all_acknowledgements", nAcks)
	return r.result(fmt.Sprintf("%d leader claims over %d (partition, leader epoch) pairs were unique and %d acks=all acknowledgements never overlapped another leader's.",
		nClaims, len(claims), nAcks))
}
