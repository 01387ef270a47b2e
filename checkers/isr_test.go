package checkers

import (
	"slices"
	"testing"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

const isrStatePath = "/brokers/topics/t/partitions/0/state"

// isrWrite appends a successful state write of t-0 by node: a controller's
// when ctrlEpoch > 0, a leader's own ISR write otherwise.
func isrWrite(b *hb.Builder, node, ctrlEpoch int32, zxid int64, expected, version int32, leader, leaderEpoch int32, isr ...int32) int {
	return b.Add(history.Event{Kind: history.KindZKWrite, Node: node, ZKWrite: &history.ZKWrite{
		Start: b.Now() - hb.Ms/2, Path: isrStatePath, Op: "set", Conditional: ctrlEpoch > 0, ControllerEpoch: ctrlEpoch,
		ExpectedVersion: expected, Outcome: history.ZKOK, NewVersion: version, Zxid: zxid,
		State: &history.PartitionState{Topic: "t", Partition: 0, Leader: leader, LeaderEpoch: leaderEpoch, ControllerEpoch: max(ctrlEpoch, 1), ISR: isr}}})
}

// isrWatch appends the watcher's observation of t-0's state at zxid and
// znode version.
func isrWatch(b *hb.Builder, zxid int64, version int32, leader, leaderEpoch int32, isr ...int32) int {
	return b.Add(history.Event{Kind: history.KindZKWatch, Watch: &history.Watch{Path: isrStatePath, Type: history.WatchChanged,
		Mzxid: zxid, Version: version,
		State: &history.PartitionState{Topic: "t", Partition: 0, Leader: leader, LeaderEpoch: leaderEpoch, ControllerEpoch: 1, ISR: isr}}})
}

func startPolicy(b *hb.Builder, node int32, policy string) int {
	return b.Add(history.Event{Kind: history.KindNodeStart, Node: node, Process: &history.Process{Incarnation: b.Now(), Policy: policy}})
}

// started appends a node_start of each of ids, in order.
func started(b *hb.Builder, ids ...int32) {
	for _, id := range ids {
		b.Start(id)
	}
}

func hwMove(b *hb.Builder, node int32, old, new int64, epoch int32) int {
	return b.Add(history.Event{Kind: history.KindHWAdvance, Node: node, HW: &history.HWAdvance{Topic: "t", Partition: 0, Old: old, New: new, LeaderEpoch: epoch}})
}

func truncate(b *hb.Builder, node int32, from, to int64) int {
	return b.Add(history.Event{Kind: history.KindTruncation, Node: node, Truncation: &history.Truncation{Topic: "t", Partition: 0, From: from, To: to, Reason: "leader-epoch"}})
}

func roleISR(b *hb.Builder, node int32, r string, leader, epoch int32, isr ...int32) int {
	return b.Add(history.Event{Kind: history.KindRoleChange, Node: node, Role: &history.Role{Topic: "t", Partition: 0, Role: r, Leader: leader, LeaderEpoch: epoch, ISR: isr}})
}

func isrChange(b *hb.Builder, node int32, action string, epoch int32, old, new []int32) int {
	return b.Add(history.Event{Kind: history.KindISRChange, Node: node, ISR: &history.ISRChange{Topic: "t", Partition: 0, Action: action,
		Old: old, New: new, LeaderEpoch: epoch, Outcome: history.ZKOK}})
}

// offlineElection builds mutant 07's story on t-0: broker 1 leads with ISR
// [1 2 3], broker 3 falls behind and leader 1 shrinks the ISR to [1 2]
// (event prev), offsets 2 and 3 are acknowledged without broker 3 (ack:
// offset 3), broker 1 dies and controller 2 elects broker 2 with ISR isr.
// mid runs before the election.
func offlineElection(b *hb.Builder, policy string, mid func(b *hb.Builder), isr ...int32) (prev, ack, write int) {
	startPolicy(b, 2, policy)
	isrWatch(b, 10, 0, 1, 1, 1, 2, 3)
	b.ProduceOK(0, tp0, "a", 0)
	b.ProduceOK(0, tp0, "b", 1)
	prev = isrWrite(b, 1, 0, 11, 0, 1, 1, 1, 1, 2)
	b.ProduceOK(0, tp0, "c", 2)
	_, ack = b.ProduceOK(0, tp0, "d", 3)
	if mid != nil {
		mid(b)
	}
	write = isrWrite(b, 2, 1, 12, 1, 2, isr[0], 2, isr...)
	return prev, ack, write
}

// uncleanElection builds an election from outside the ISR: leader 1 alone
// in the ISR (event shrink) after offset 1 was acknowledged with ISR [1 2]
// (event ack), then controller 2, whose process ran with policy, makes
// broker 3 leader with ISR [3] (event write).
func uncleanElection(b *hb.Builder, policy string) []int {
	startPolicy(b, 2, policy)
	isrWatch(b, 10, 0, 1, 1, 1, 2)
	_, ack := b.ProduceOK(0, tp0, "a", 1)
	shrink := isrWrite(b, 1, 0, 11, 0, 1, 1, 1, 1)
	write := isrWrite(b, 2, 1, 12, 1, 2, 3, 3, 3)
	return []int{shrink, ack, write}
}

func TestISRControllerGrowth(t *testing.T) {
	runCases(t, ISR{}, []tcase{
		{name: "offline election puts a lagging follower back", want: Invalid,
			explain: "adding broker 3, which the ISR [1 2] it replaced", build: func(b *hb.Builder) []int {
				prev, ack, write := offlineElection(b, "offline", nil, 2, 3)
				return []int{prev, ack, write}
			}},
		{name: "offline election keeps the live ISR", want: Valid, build: func(b *hb.Builder) []int {
			offlineElection(b, "offline", nil, 2)
			return nil
		}},
		{name: "the follower's high watermark passed every acknowledgement", want: Valid, build: func(b *hb.Builder) []int {
			offlineElection(b, "offline", func(b *hb.Builder) { hwMove(b, 3, 2, 4, 1) }, 2, 3)
			return nil
		}},
		{name: "high watermark passed, then truncated below", want: Invalid, explain: "broker 3 did not hold every acknowledged record",
			build: func(b *hb.Builder) []int {
				_, ack, write := offlineElection(b, "offline", func(b *hb.Builder) {
					hwMove(b, 3, 2, 4, 1)
					truncate(b, 3, 4, 3)
				}, 2, 3)
				return []int{ack, write}
			}},
		{name: "a state in between went unseen", want: Valid, build: func(b *hb.Builder) []int {
			startPolicy(b, 2, "offline")
			isrWatch(b, 10, 0, 1, 1, 1, 2)
			b.ProduceOK(0, tp0, "a", 0)
			isrWrite(b, 2, 1, 13, 2, 3, 2, 2, 2, 3) // expects version 2; the history shows version 0 only
			return nil
		}},
		{name: "nothing acknowledged yet", want: Valid, build: func(b *hb.Builder) []int {
			startPolicy(b, 2, "offline")
			isrWatch(b, 10, 0, 1, 1, 1, 2)
			isrWrite(b, 2, 1, 12, 0, 1, 2, 2, 2, 3)
			return nil
		}},
		{name: "the leader's own expansion", want: Valid, build: func(b *hb.Builder) []int {
			startPolicy(b, 2, "offline")
			isrWatch(b, 10, 0, 1, 1, 1, 2)
			b.ProduceOK(0, tp0, "a", 0)
			isrWrite(b, 1, 0, 12, 0, 1, 1, 1, 1, 2, 3)
			return nil
		}},
		{name: "unclean election configured: known anomaly", want: Valid, explain: "unclean-election ×1", build: func(b *hb.Builder) []int {
			uncleanElection(b, "unclean")
			return nil
		}},
		{name: "unclean election not configured", want: Invalid, explain: "elected broker 3 leader of t-0 at leader epoch 3 with ISR [3]",
			build: func(b *hb.Builder) []int {
				evs := uncleanElection(b, "offline")
				return []int{evs[0], evs[2]}
			}},
	})
}

// divergence builds mutant 10's story on t-0: broker 1 leads at epoch 1
// with ISR [1 2], appends offsets 0-4 (committed) and 5-7 (not
// replicated), and is cut off; broker 2 leads at epoch 2 with ISR [2] and
// appends 5-9 itself (event own2); broker 1 returns as follower (mid runs
// then) and fetches up to 10; broker 2 takes it into its ISR (event join).
func divergence(b *hb.Builder, mid func(b *hb.Builder)) (own1, own2, join int) {
	return divergenceCut(b, nil, mid)
}

// divergenceCut is divergence with cut run when broker 1 is cut off,
// before broker 2 leads.
func divergenceCut(b *hb.Builder, cut, mid func(b *hb.Builder)) (own1, own2, join int) {
	started(b, 1, 2)
	roleISR(b, 1, history.RoleLeader, 1, 1, 1, 2)
	roleISR(b, 2, history.RoleFollower, 1, 1, 1, 2)
	appendEv(b, history.KindProduceAppend, 1, 1, 0, 4)
	hwMove(b, 1, 0, 5, 1)
	hwMove(b, 2, 0, 5, 1)
	own1 = appendEv(b, history.KindProduceAppend, 1, 1, 5, 7)
	if cut != nil {
		cut(b)
	}
	roleISR(b, 2, history.RoleLeader, 2, 2, 2)
	own2 = appendEv(b, history.KindProduceAppend, 2, 2, 5, 9)
	hwMove(b, 2, 5, 10, 2)
	roleISR(b, 1, history.RoleFollower, 2, 2, 2)
	if mid != nil {
		mid(b)
	}
	join = isrChange(b, 2, history.ISRExpand, 2, []int32{2}, []int32{1, 2})
	return own1, own2, join
}

// reelected builds the story of a leader re-elected while it leads: broker
// 2 leads t-0 at epoch 1 with ISR [1 2 3] and commits 0-4; broker 1, cut
// off, leads at epoch 2 and appends 5 itself (event own1); broker 2, still
// at epoch 1, appends 5-7 (event own2); a LeaderAndIsr makes broker 2
// leader at epoch 3 with ISR isr. As the node logs it, Partition.makeLeader
// moves the high watermark to 8 under the new ISR (event hw) before the
// request's role change (event lead).
func reelected(b *hb.Builder, isr ...int32) (own1, own2, hw, lead int) {
	started(b, 1, 2, 3)
	roleISR(b, 2, history.RoleLeader, 2, 1, 1, 2, 3)
	roleISR(b, 1, history.RoleFollower, 2, 1, 1, 2, 3)
	roleISR(b, 3, history.RoleFollower, 2, 1, 1, 2, 3)
	appendEv(b, history.KindProduceAppend, 2, 1, 0, 4)
	hwMove(b, 2, 0, 5, 1)
	roleISR(b, 1, history.RoleLeader, 1, 2, 1, 2, 3)
	own1 = appendEv(b, history.KindProduceAppend, 1, 2, 5, 5)
	own2 = appendEv(b, history.KindProduceAppend, 2, 1, 5, 7)
	hw = hwMove(b, 2, 5, 8, 3)
	lead = roleISR(b, 2, history.RoleLeader, 2, 3, isr...)
	return own1, own2, hw, lead
}

// ackAhead builds an acknowledgement a re-elected leader logs before its
// role change, as in a LeaderAndIsr that shrinks the ISR: broker 3 leads
// t-0 at epoch 1 with ISR [1 2 3] and commits 0-4; broker 1 crashes (its
// log cut to 0 when lost is set); broker 3 appends 5 at epoch 1; a
// LeaderAndIsr re-elects broker 3 at epoch 2 with ISR isr2, and the node
// logs the high-watermark move to 6 (event hw) and the acknowledgement of
// 5 (event ack) before the role change. Then brokers 2 and 3 lose offset
// 5, broker 3 leads at epoch 3 alone and appends 5-9, and broker 1
// returns as its follower and is taken into the ISR (event join).
func ackAhead(b *hb.Builder, lost bool, isr2 ...int32) (hw, ack, join int) {
	started(b, 1, 2, 3)
	roleISR(b, 3, history.RoleLeader, 3, 1, 1, 2, 3)
	appendEv(b, history.KindProduceAppend, 3, 1, 0, 4)
	hwMove(b, 3, 0, 5, 1)
	appendEv(b, history.KindProduceAck, 3, 1, 0, 4)
	if lost {
		truncate(b, 1, 5, 0)
	}
	appendEv(b, history.KindProduceAppend, 3, 1, 5, 5)
	hw = hwMove(b, 3, 5, 6, 2)
	ack = appendEv(b, history.KindProduceAck, 3, 1, 5, 5)
	roleISR(b, 3, history.RoleLeader, 3, 2, isr2...)
	truncate(b, 2, 6, 5)
	truncate(b, 3, 6, 5)
	b.Start(3)
	roleISR(b, 3, history.RoleLeader, 3, 3, 3)
	appendEv(b, history.KindProduceAppend, 3, 3, 5, 9)
	hwMove(b, 3, 5, 10, 3)
	b.Start(1)
	roleISR(b, 1, history.RoleFollower, 3, 3, 3)
	join = isrChange(b, 3, history.ISRExpand, 3, []int32{3}, []int32{1, 3})
	return hw, ack, join
}

func TestISRDivergentMember(t *testing.T) {
	runCases(t, ISR{}, []tcase{
		{name: "deposed leader keeps its tail and rejoins", want: Invalid,
			explain: "took broker 1 into its ISR with its high watermark at 10", build: func(b *hb.Builder) []int {
				own1, own2, join := divergence(b, nil)
				return []int{own1, own2, join}
			}},
		{name: "a restart keeps the log", want: Invalid, explain: "differed from its own at offset 5", build: func(b *hb.Builder) []int {
			own1, own2, join := divergence(b, func(b *hb.Builder) { b.Start(1) })
			return []int{own1, own2, join}
		}},
		{name: "truncated to the divergence first", want: Valid, build: func(b *hb.Builder) []int {
			divergence(b, func(b *hb.Builder) { truncate(b, 1, 8, 5) })
			return nil
		}},
		{name: "truncated, but above the divergence", want: Invalid, explain: "had not truncated to 5 or below since", build: func(b *hb.Builder) []int {
			_, _, join := divergence(b, func(b *hb.Builder) { truncate(b, 1, 8, 6) })
			return []int{join}
		}},
		{name: "log restarted at a later offset", want: Valid, build: func(b *hb.Builder) []int {
			divergence(b, func(b *hb.Builder) { truncate(b, 1, 8, 10) })
			return nil
		}},
		{name: "replica stopped (its log may be deleted)", want: Valid, build: func(b *hb.Builder) []int {
			divergence(b, func(b *hb.Builder) {
				b.Control(1, history.Control{API: history.APIStopReplica, ControllerID: 3, ControllerEpoch: 1, Verdict: history.VerdictAccepted,
					Partitions: []history.ControlPartition{{Topic: "t", Partition: 0, Leader: -1, LeaderEpoch: 2}}})
			})
			return nil
		}},
		{name: "joined while the divergence is above the high watermark, then it passes", want: Invalid,
			explain: "moved its high watermark to 10 with broker 1 in its ISR since event", build: func(b *hb.Builder) []int {
				started(b, 1, 2)
				roleISR(b, 1, history.RoleLeader, 1, 1, 1, 2)
				roleISR(b, 2, history.RoleFollower, 1, 1, 1, 2)
				appendEv(b, history.KindProduceAppend, 1, 1, 0, 4)
				hwMove(b, 2, 0, 5, 1)
				appendEv(b, history.KindProduceAppend, 1, 1, 5, 7)
				// A preferred election keeps broker 1 in the ISR.
				join := roleISR(b, 2, history.RoleLeader, 2, 2, 1, 2)
				roleISR(b, 1, history.RoleFollower, 2, 2, 1, 2)
				own2 := appendEv(b, history.KindProduceAppend, 2, 2, 5, 9)
				hw := hwMove(b, 2, 5, 10, 2)
				return []int{join, own2, hw}
			}},
		{name: "records the new leader replicated are not a divergence", want: Valid, build: func(b *hb.Builder) []int {
			started(b, 1, 2)
			roleISR(b, 1, history.RoleLeader, 1, 1, 1, 2)
			appendEv(b, history.KindProduceAppend, 1, 1, 0, 7)
			roleISR(b, 2, history.RoleLeader, 2, 2, 2)
			hwMove(b, 2, 0, 8, 2)
			appendEv(b, history.KindProduceAppend, 2, 2, 8, 9)
			hwMove(b, 2, 8, 10, 2)
			roleISR(b, 1, history.RoleFollower, 2, 2, 2)
			isrChange(b, 2, history.ISRExpand, 2, []int32{2}, []int32{1, 2})
			return nil
		}},
		{name: "divergence above the leader's high watermark", want: Valid, build: func(b *hb.Builder) []int {
			started(b, 1, 2)
			roleISR(b, 1, history.RoleLeader, 1, 1, 1, 2)
			appendEv(b, history.KindProduceAppend, 1, 1, 0, 7)
			roleISR(b, 2, history.RoleLeader, 2, 2, 1, 2)
			hwMove(b, 2, 0, 5, 2)
			appendEv(b, history.KindProduceAppend, 2, 2, 5, 9)
			return nil
		}},
		{name: "the new leader holds another leader's acknowledged records", want: Invalid,
			explain: "broker 3 acknowledged it at event", build: func(b *hb.Builder) []int {
				started(b, 1, 2, 3)
				roleISR(b, 1, history.RoleLeader, 1, 1, 1, 2, 3)
				appendEv(b, history.KindProduceAppend, 1, 1, 0, 4)
				appendEv(b, history.KindProduceAck, 1, 1, 0, 4)
				own1 := appendEv(b, history.KindProduceAppend, 1, 1, 5, 7)
				roleISR(b, 3, history.RoleLeader, 3, 2, 2, 3)
				appendEv(b, history.KindProduceAppend, 3, 2, 5, 9)
				ack := appendEv(b, history.KindProduceAck, 3, 2, 5, 9)
				roleISR(b, 2, history.RoleLeader, 2, 3, 2)
				hwMove(b, 2, 5, 10, 3)
				roleISR(b, 1, history.RoleFollower, 2, 3, 2)
				join := isrChange(b, 2, history.ISRExpand, 3, []int32{2}, []int32{1, 2})
				return []int{own1, ack, join}
			}},
		{name: "a retried batch acknowledged at a newer epoch keeps its epoch", want: Valid, build: func(b *hb.Builder) []int {
			started(b, 1, 2, 3)
			roleISR(b, 1, history.RoleLeader, 1, 1, 1, 2, 3)
			appendEv(b, history.KindProduceAppend, 1, 1, 0, 7)
			appendEv(b, history.KindProduceAck, 1, 1, 0, 7)
			roleISR(b, 2, history.RoleLeader, 2, 2, 2, 3)
			appendEv(b, history.KindProduceAck, 2, 2, 5, 7) // the duplicate, answered at epoch 2
			roleISR(b, 3, history.RoleLeader, 3, 3, 3)
			hwMove(b, 3, 0, 8, 3)
			roleISR(b, 1, history.RoleFollower, 3, 3, 3)
			isrChange(b, 3, history.ISRExpand, 3, []int32{3}, []int32{1, 3})
			return nil
		}},
		{name: "a re-elected leader's high watermark moves under its new ISR before its role change is logged", want: Valid, build: func(b *hb.Builder) []int {
			reelected(b, 2, 3)
			return nil
		}},
		{name: "a re-elected leader's new ISR keeps the diverged member", want: Invalid,
			explain: "became leader with broker 1 in its ISR and its high watermark at 8, having moved it there under that ISR at event 11", build: func(b *hb.Builder) []int {
				own1, own2, hw, lead := reelected(b, 1, 2, 3)
				return []int{own1, own2, hw, lead}
			}},
		{name: "an acknowledgement logged before its role change credits the new ISR, not the old", want: Valid, build: func(b *hb.Builder) []int {
			ackAhead(b, true, 2, 3)
			return nil
		}},
		{name: "an acknowledgement logged before its role change credits a member the new ISR keeps", want: Invalid,
			explain: "broker 3, leader of t-0 at leader epoch 3, took broker 1 into its ISR with its high watermark at 10 (event 19, +20ms), although broker 1's log differed from its own at offset 5", build: func(b *hb.Builder) []int {
				_, ack, join := ackAhead(b, false, 1, 2, 3)
				return []int{ack, join}
			}},
		{name: "the acknowledgement named is the one that showed the member's epoch, not a later one of the offset", want: Invalid,
			explain: "broker 1 held offset 5 from leader epoch 1 (broker 3 acknowledged it at event 5, +10ms, with broker 1 in its ISR)", build: func(b *hb.Builder) []int {
				started(b, 1, 2, 3)
				roleISR(b, 3, history.RoleLeader, 3, 1, 1, 2, 3)
				appendEv(b, history.KindProduceAppend, 3, 1, 0, 5)
				ack1 := appendEv(b, history.KindProduceAck, 3, 1, 0, 5)
				truncate(b, 3, 6, 5)
				truncate(b, 2, 6, 5)
				roleISR(b, 3, history.RoleLeader, 3, 2, 2, 3)
				appendEv(b, history.KindProduceAppend, 3, 2, 5, 5)
				hwMove(b, 3, 0, 6, 2)
				appendEv(b, history.KindProduceAck, 3, 2, 5, 5) // broker 1 is not in this ISR
				join := isrChange(b, 3, history.ISRExpand, 2, []int32{2, 3}, []int32{1, 2, 3})
				return []int{ack1, join}
			}},
		{name: "an ISR change of a leadership the history does not show", want: Valid, build: func(b *hb.Builder) []int {
			appendEv(b, history.KindProduceAppend, 1, 1, 0, 7)
			appendEv(b, history.KindProduceAppend, 2, 2, 5, 9)
			hwMove(b, 2, 5, 10, 2)
			isrChange(b, 2, history.ISRExpand, 2, []int32{2}, []int32{1, 2})
			return nil
		}},
	})
}

// expand appends leader node's expand of t-0's ISR at epoch from old to
// new, taking in follower on a fetch from fetchOffset while its high
// watermark was hw, with the write's outcome.
func expand(b *hb.Builder, node, epoch int32, old, new []int32, follower int32, fetchOffset, hw int64, outcome string) int {
	return b.Add(history.Event{Kind: history.KindISRChange, Node: node, ISR: &history.ISRChange{Topic: "t", Partition: 0, Action: history.ISRExpand,
		Old: old, New: new, LeaderEpoch: epoch, Outcome: outcome, Join: &history.ISRJoin{Follower: follower, FetchOffset: fetchOffset, HW: hw}}})
}

// TestISRLaggingJoin is mutant 09's story on t-0: broker 1 leads at epoch
// 2 with ISR [1 2] and commits up to 7 (event hw) while broker 3 is down;
// broker 3 restarts with its log ending at 4 and fetches.
func TestISRLaggingJoin(t *testing.T) {
	lagging := func(b *hb.Builder, mid func(b *hb.Builder)) (hw int) {
		b.Start(1)
		roleISR(b, 1, history.RoleLeader, 1, 2, 1, 2)
		hw = hwMove(b, 1, 0, 7, 2)
		if mid != nil {
			mid(b)
		}
		b.Start(3)
		return hw
	}
	runCases(t, ISR{}, []tcase{
		{name: "taken in on its first fetch, below the high watermark", want: Invalid,
			explain: "took broker 3 into its ISR [1 2] → [1 2 3]", build: func(b *hb.Builder) []int {
				hw := lagging(b, nil)
				join := expand(b, 1, 2, []int32{1, 2}, []int32{1, 2, 3}, 3, 4, 7, history.ZKOK)
				return []int{hw, join}
			}},
		{name: "names the offsets it lacked", want: Invalid, explain: "on a fetch from offset 4 while its high watermark was 7", build: func(b *hb.Builder) []int {
			lagging(b, nil)
			return []int{expand(b, 1, 2, []int32{1, 2}, []int32{1, 2, 3}, 3, 4, 7, history.ZKOK)}
		}},
		{name: "the high watermark moved on before the write returned", want: Invalid, explain: "lacked the committed offsets [4, 7)", build: func(b *hb.Builder) []int {
			hw := lagging(b, nil)
			hwMove(b, 1, 7, 9, 2)
			join := expand(b, 1, 2, []int32{1, 2}, []int32{1, 2, 3}, 3, 4, 7, history.ZKOK)
			return []int{hw, join}
		}},
		{name: "high watermark set by an earlier process", want: Invalid, explain: "while its high watermark was 7:", build: func(b *hb.Builder) []int {
			b.Start(1)
			hwMove(b, 1, 0, 7, 2)
			b.Start(1)
			roleISR(b, 1, history.RoleLeader, 1, 2, 1, 2)
			return []int{expand(b, 1, 2, []int32{1, 2}, []int32{1, 2, 3}, 3, 4, 7, history.ZKOK)}
		}},
		{name: "caught up to the high watermark", want: Valid, build: func(b *hb.Builder) []int {
			lagging(b, nil)
			expand(b, 1, 2, []int32{1, 2}, []int32{1, 2, 3}, 3, 7, 7, history.ZKOK)
			return nil
		}},
		{name: "past the high watermark", want: Valid, build: func(b *hb.Builder) []int {
			lagging(b, nil)
			expand(b, 1, 2, []int32{1, 2}, []int32{1, 2, 3}, 3, 9, 7, history.ZKOK)
			return nil
		}},
		{name: "the write failed: the ISR did not grow", want: Valid, build: func(b *hb.Builder) []int {
			lagging(b, nil)
			expand(b, 1, 2, []int32{1, 2}, []int32{1, 2, 3}, 3, 4, 7, history.ZKBadVersion)
			return nil
		}},
		{name: "an expand that does not say what the leader saw", want: Valid, build: func(b *hb.Builder) []int {
			lagging(b, nil)
			isrChange(b, 1, history.ISRExpand, 2, []int32{1, 2}, []int32{1, 2, 3})
			return nil
		}},
	})
}

func TestHeldLog(t *testing.T) {
	var l heldLog
	l = l.add(0, 4, 1)
	l = l.add(5, 7, 1)
	if len(l) != 1 || l[0] != (heldRun{0, 7, 1}) {
		t.Fatalf("contiguous appends at one epoch: %v", l)
	}
	l = l.add(6, 9, 2) // a leader appends at its end: 6-7 were gone
	if len(l) != 2 || l[0] != (heldRun{0, 5, 1}) || l[1] != (heldRun{6, 9, 2}) {
		t.Fatalf("append below the end: %v", l)
	}
	if got := l.within(nil, 4, 7); len(got) != 2 || got[0] != (heldRun{4, 5, 1}) || got[1] != (heldRun{6, 7, 2}) {
		t.Fatalf("within 4-7: %v", got)
	}
	if l = l.cut(3); len(l) != 1 || l[0] != (heldRun{0, 2, 1}) {
		t.Fatalf("cut at 3: %v", l)
	}
	for _, tt := range []struct {
		l    heldLog
		x    heldRun
		want heldLog
	}{
		{nil, heldRun{3, 4, 2}, heldLog{{3, 4, 2}}},
		{heldLog{{0, 9, 1}}, heldRun{3, 4, 2}, heldLog{{0, 2, 1}, {3, 4, 2}, {5, 9, 1}}},
		{heldLog{{0, 2, 1}, {8, 9, 3}}, heldRun{3, 4, 1}, heldLog{{0, 4, 1}, {8, 9, 3}}},
		{heldLog{{0, 2, 1}, {3, 5, 2}, {6, 9, 3}}, heldRun{2, 7, 4}, heldLog{{0, 1, 1}, {2, 7, 4}, {8, 9, 3}}},
		{heldLog{{5, 9, 1}}, heldRun{0, 1, 2}, heldLog{{0, 1, 2}, {5, 9, 1}}},
		{heldLog{{0, 1, 1}}, heldRun{5, 6, 2}, heldLog{{0, 1, 1}, {5, 6, 2}}},
	} {
		if got := tt.l.overlay(tt.x); !slices.Equal(got, tt.want) {
			t.Errorf("%v overlay %v = %v, want %v", tt.l, tt.x, got, tt.want)
		}
	}
	a := heldLog{{0, 4, 1}, {5, 9, 3}}
	b := heldLog{{2, 6, 1}, {7, 8, 2}}
	if o, x, y, ok := diverge(a, b); !ok || o != 5 || x.epoch != 3 || y.epoch != 1 {
		t.Fatalf("diverge = %d %v %v %v", o, x, y, ok)
	}
	if _, _, _, ok := diverge(a, heldLog{{10, 12, 4}}); ok {
		t.Fatal("disjoint logs diverge")
	}
}
