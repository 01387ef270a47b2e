package checkers

import (
	"testing"

	"github.com/zkchaos/zkchaos/history"
	hb "github.com/zkchaos/zkchaos/history/historytest"
)

// Builders of the data-plane events, partition t-0 unless told.

func roleEv(b *hb.Builder, node int32, role string, leader, epoch int32, isr ...int32) int {
	return b.Add(history.Event{Kind: history.KindRoleChange, Node: node, Role: &history.Role{
		Topic: "t", Partition: 0, Role: role, Leader: leader, LeaderEpoch: epoch, ISR: isr}})
}

// hwEv is node's hw_advance with its log end offset (leo < 0: not logged).
func hwEv(b *hb.Builder, node int32, old, new int64, epoch int32, leo int64) int {
	hw := &history.HWAdvance{Topic: "t", Partition: 0, Old: old, New: new, LeaderEpoch: epoch}
	if leo >= 0 {
		hw.LEO = &leo
	}
	return b.Add(history.Event{Kind: history.KindHWAdvance, Node: node, HW: hw})
}

func truncEv(b *hb.Builder, node int32, from, to int64, epoch int32, reason string) int {
	return b.Add(history.Event{Kind: history.KindTruncation, Node: node, Truncation: &history.Truncation{
		Topic: "t", Partition: 0, From: from, To: to, Reason: reason, LeaderEpoch: epoch}})
}

func pAppend(b *hb.Builder, node int32, base, last int64, epoch int32, pb *history.ProducerBatch, values ...string) int {
	return b.Add(history.Event{Kind: history.KindProduceAppend, Node: node, Append: &history.Append{
		Topic: "t", Partition: 0, BaseOffset: base, LastOffset: last, LeaderEpoch: epoch, Acks: history.AcksAll, Values: values, Producer: pb}})
}

func pAck(b *hb.Builder, node int32, base, last int64, epoch int32) int {
	return b.Add(history.Event{Kind: history.KindProduceAck, Node: node, Append: &history.Append{
		Topic: "t", Partition: 0, BaseOffset: base, LastOffset: last, LeaderEpoch: epoch, Acks: history.AcksAll}})
}

func pbatch(id int64, seq int32) *history.ProducerBatch {
	return &history.ProducerBatch{ID: id, FirstSeq: seq, LastSeq: seq}
}

// idemInvoke and idemDone append an idempotent produce of value by proc
// and its completion (typ, with error code code).
func idemInvoke(b *hb.Builder, proc int, value string) int {
	return b.Op(history.ClientOp{Type: history.OpInvoke, Process: proc, F: history.FProduce, Topic: "t", Value: value, Acks: history.AcksAll, Idempotent: true})
}

func idemDone(b *hb.Builder, proc int, value string, typ history.OpType, offset int64, code int16) int {
	return b.Op(history.ClientOp{Type: typ, Process: proc, F: history.FProduce, Topic: "t", Value: value, Acks: history.AcksAll, Idempotent: true, Offset: offset, ErrorCode: code})
}

// producedThenNext is process 0's acknowledged produce p0-1 (producer 7,
// sequence 0, broker 1 at leader epoch 1), broker 2 then leading epoch 2,
// and the invoke of process 0's next produce, p0-2; it returns the first
// produce's append and ok.
func producedThenNext(b *hb.Builder) (app, ok int) {
	roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2)
	idemInvoke(b, 0, "p0-1")
	app = pAppend(b, 1, 0, 0, 1, pbatch(7, 0), "p0-1")
	pAck(b, 1, 0, 0, 1)
	ok = idemDone(b, 0, "p0-1", history.OpOK, 0, 0)
	roleEv(b, 1, history.RoleFollower, 2, 2, 2, 1)
	roleEv(b, 2, history.RoleLeader, 2, 2, 2, 1)
	idemInvoke(b, 0, "p0-2")
	return app, ok
}

// twoLeaders puts t-0's states in ZooKeeper: broker 1 leads epoch 0 with
// ISR [1 2 3], then broker second leads epoch 1, elected from that ISR
// when clean, else from outside it.
func twoLeaders(b *hb.Builder, second int32, clean bool) {
	b.State(tp0, 1, 0, 1, 10, 1, 2, 3)
	if clean {
		b.State(tp0, second, 1, 1, 11, second, 3)
	} else {
		b.State(tp0, 1, 0, 1, 11, 1)
		b.State(tp0, second, 1, 1, 12, second)
	}
}

func TestFollowerTruncation(t *testing.T) {
	runCases(t, FollowerTruncation{}, []tcase{
		{name: "follower truncates below its high watermark under a clean leader", want: Invalid,
			explain: "truncated t-0 from 200 to 0", build: func(b *hb.Builder) []int {
				twoLeaders(b, 2, true)
				hw := hwEv(b, 3, 0, 188, 0, 200)
				tr := truncEv(b, 3, 200, 0, 1, "leader-epoch (leader's end offset for epoch 0)")
				return []int{hw, tr}
			}},
		{name: "restored high watermark counts after a restart", want: Invalid,
			explain: "restored from its checkpoint write", build: func(b *hb.Builder) []int {
				twoLeaders(b, 2, true)
				cp := checkpoint(b, 3, nil, cpe(0, 50))
				b.Start(3)
				tr := truncEv(b, 3, 60, 10, 1, "leader-epoch")
				return []int{cp, tr}
			}},
		{name: "follower cuts only its uncommitted tail", want: Valid, build: func(b *hb.Builder) []int {
			twoLeaders(b, 2, true)
			hwEv(b, 3, 0, 188, 0, 200)
			truncEv(b, 3, 200, 188, 1, "leader-epoch")
			return nil
		}},
		{name: "leader from outside the ISR is not judged here", want: Valid, build: func(b *hb.Builder) []int {
			twoLeaders(b, 2, false)
			hwEv(b, 3, 0, 188, 0, 200)
			truncEv(b, 3, 200, 0, 1, "leader-epoch")
			return nil
		}},
		{name: "start-up recovery is another rule's", want: Valid, build: func(b *hb.Builder) []int {
			twoLeaders(b, 2, true)
			hwEv(b, 3, 0, 188, 0, 200)
			b.Start(3)
			truncEv(b, 3, 100, 100, 0, "start-up recovery: torn tail")
			return nil
		}},
	})
}

func TestLogRetention(t *testing.T) {
	runCases(t, LogRetention{}, []tcase{
		{name: "start-up recovery drops acknowledged records", want: Invalid,
			explain: "across its restart", build: func(b *hb.Builder) []int {
				ack := pAck(b, 1, 0, 9, 0)
				st := b.Start(1)
				tr := truncEv(b, 1, 5, 5, 0, "start-up recovery: torn tail")
				return []int{ack, st, tr}
			}},
		{name: "log shorter than the checkpointed high watermark, no truncation logged", want: Invalid,
			explain: "its log end offset when its high watermark moved", build: func(b *hb.Builder) []int {
				cp := checkpoint(b, 2, nil, cpe(0, 20))
				b.Start(2)
				hw := hwEv(b, 2, 12, 12, 1, 12)
				return []int{cp, hw}
			}},
		{name: "a logged truncation explains a shorter log", want: Valid, build: func(b *hb.Builder) []int {
			pAck(b, 1, 0, 9, 0)
			truncEv(b, 1, 10, 5, 1, "leader-epoch")
			hwEv(b, 1, 3, 5, 1, 7)
			return nil
		}},
		{name: "recovery cuts a torn tail above what was acknowledged", want: Valid, build: func(b *hb.Builder) []int {
			pAck(b, 1, 0, 9, 0)
			b.Start(1)
			truncEv(b, 1, 10, 10, 0, "start-up recovery: torn tail")
			pAppend(b, 1, 10, 10, 1, nil)
			return nil
		}},
		{name: "checkpoint read before a truncation it is logged after", want: Valid, build: func(b *hb.Builder) []int {
			truncEv(b, 2, 20, 12, 1, "leader-epoch")
			checkpoint(b, 2, nil, cpe(0, 18))
			hwEv(b, 2, 18, 12, 1, 12)
			return nil
		}},
		{name: "a deleted log starts over", want: Valid, build: func(b *hb.Builder) []int {
			pAck(b, 1, 0, 9, 0)
			b.Control(1, history.Control{API: history.APIStopReplica, Verdict: history.VerdictAccepted, DeletePartition: true,
				Partitions: []history.ControlPartition{{Topic: "t", Partition: 0}}})
			pAppend(b, 1, 0, 0, 3, nil)
			return nil
		}},
	})
}

func TestHWWithinISR(t *testing.T) {
	runCases(t, HWWithinISR{}, []tcase{
		{name: "leader's high watermark passes what an ISR member holds", want: Invalid,
			explain: "broker 2's log ended at 6", build: func(b *hb.Builder) []int {
				roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2)
				adv := hwEv(b, 1, 0, 10, 1, 10)
				obs := hwEv(b, 2, 0, 5, 1, 6)
				return []int{adv, obs}
			}},
		{name: "leader's high watermark above its own log end", want: Invalid,
			explain: "while its own log ended at 8", build: func(b *hb.Builder) []int {
				roleEv(b, 1, history.RoleLeader, 1, 1, 1)
				return []int{hwEv(b, 1, 0, 10, 1, 8)}
			}},
		{name: "member holds the high watermark", want: Valid, build: func(b *hb.Builder) []int {
			roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2)
			hwEv(b, 1, 0, 10, 1, 10)
			hwEv(b, 2, 0, 10, 1, 10)
			return nil
		}},
		{name: "member following a newer leader is not counted", want: Valid, build: func(b *hb.Builder) []int {
			roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2)
			truncEv(b, 2, 9, 6, 2, "leader-epoch")
			hwEv(b, 1, 0, 10, 1, 10)
			hwEv(b, 2, 0, 5, 2, 6)
			return nil
		}},
		{name: "advance logged before its role change, judged under that leadership's ISR", want: Invalid,
			explain: "broker 1 advanced t-0's high watermark to 10 at leader epoch 2", build: func(b *hb.Builder) []int {
				roleEv(b, 1, history.RoleFollower, 3, 1, 1, 2, 3)
				adv := hwEv(b, 1, 0, 10, 2, 10)
				roleEv(b, 1, history.RoleLeader, 1, 2, 1, 2)
				obs := hwEv(b, 2, 0, 5, 2, 6)
				return []int{adv, obs}
			}},
		{name: "advance logged before its role change, member holds it", want: Valid, build: func(b *hb.Builder) []int {
			roleEv(b, 1, history.RoleFollower, 3, 1, 1, 2, 3)
			hwEv(b, 1, 0, 10, 2, 10)
			roleEv(b, 1, history.RoleLeader, 1, 2, 1, 2)
			hwEv(b, 2, 0, 10, 2, 10)
			return nil
		}},
		{name: "advance logged before a role change of another epoch is not judged", want: Valid, build: func(b *hb.Builder) []int {
			hwEv(b, 1, 0, 10, 2, 10)
			roleEv(b, 1, history.RoleLeader, 1, 3, 1, 2)
			hwEv(b, 2, 0, 5, 3, 6)
			return nil
		}},
		{name: "member truncated between an early advance and its role change is not held to it", want: Valid, build: func(b *hb.Builder) []int {
			hwEv(b, 1, 0, 10, 2, 10)
			truncEv(b, 2, 12, 8, 2, "leader-epoch")
			roleEv(b, 1, history.RoleLeader, 1, 2, 1, 2)
			hwEv(b, 2, 0, 5, 2, 8)
			return nil
		}},
		{name: "member shrunk out of the ISR is not counted", want: Valid, build: func(b *hb.Builder) []int {
			roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2)
			b.Add(history.Event{Kind: history.KindISRChange, Node: 1, ISR: &history.ISRChange{Topic: "t", Action: history.ISRShrink,
				Old: []int32{1, 2}, New: []int32{1}, LeaderEpoch: 1, Outcome: history.ZKOK}})
			hwEv(b, 1, 0, 10, 1, 10)
			hwEv(b, 2, 0, 5, 1, 6)
			return nil
		}},
	})
}

func TestFollowerHW(t *testing.T) {
	// followedAt5: broker 1 leads t-0 at leader epoch 1 with its high
	// watermark at 5 (event lead, log end 8), and broker 2 follows it.
	followedAt5 := func(b *hb.Builder) (lead int) {
		roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2)
		lead = hwEv(b, 1, 0, 5, 1, 8)
		roleEv(b, 2, history.RoleFollower, 1, 1, 1, 2)
		return lead
	}
	runCases(t, FollowerHW{}, []tcase{
		{name: "follower's high watermark above its leader's", want: Invalid,
			explain: "above the highest high watermark its leader had logged for that leadership, 5", build: func(b *hb.Builder) []int {
				lead := followedAt5(b)
				f := hwEv(b, 2, 0, 7, 1, 8)
				hwEv(b, 1, 5, 8, 1, 8)
				return []int{lead, f}
			}},
		{name: "follower's high watermark above its own log end", want: Invalid,
			explain: "while its log ended at 4", build: func(b *hb.Builder) []int {
				roleEv(b, 2, history.RoleFollower, 1, 1, 1, 2)
				return []int{hwEv(b, 2, 0, 5, 1, 4)}
			}},
		{name: "follower takes its leader's high watermark", want: Valid, build: func(b *hb.Builder) []int {
			followedAt5(b)
			hwEv(b, 2, 0, 5, 1, 8)
			hwEv(b, 1, 5, 8, 1, 8)
			return nil
		}},
		{name: "a long poll answered after the leader moved to a newer epoch", want: Valid, build: func(b *hb.Builder) []int {
			roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2)
			hwEv(b, 1, 0, 5, 1, 9)
			roleEv(b, 2, history.RoleFollower, 1, 1, 1, 2)
			hwEv(b, 1, 5, 9, 2, 9) // broker 1 leads epoch 2 alone
			hwEv(b, 2, 0, 9, 1, 9)
			hwEv(b, 1, 9, 10, 2, 10)
			return nil
		}},
		// Broker 2 was paused with a fetch response of broker 1's first
		// process in its socket; broker 1 then crashed, lost its log and
		// led again from 0; broker 2 resumes and takes the old answer's 5.
		{name: "a response of the leader's previous process, read after its restart", want: Valid, build: func(b *hb.Builder) []int {
			followedAt5(b)
			hwEv(b, 1, 5, 8, 1, 8)
			b.Add(history.Event{Kind: history.KindNodeStart, Node: 1})
			roleEv(b, 1, history.RoleLeader, 1, 2, 1)
			hwEv(b, 1, 0, 3, 2, 3)
			hwEv(b, 2, 0, 5, 1, 8)
			hwEv(b, 1, 3, 4, 2, 4)
			return nil
		}},
		{name: "leader's later moves missing (trimmed history): not judged", want: Valid, build: func(b *hb.Builder) []int {
			followedAt5(b)
			hwEv(b, 2, 0, 7, 1, 8)
			hwEv(b, 1, 7, 8, 1, 8)
			return nil
		}},
	})
}

func TestProducerContinuity(t *testing.T) {
	// appendedOn1: broker 1, leading t-0 at leader epoch 1, appends
	// producer 7's sequence 3 at offset 5 (event first); broker 2 follows.
	appendedOn1 := func(b *hb.Builder) (first int) {
		roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2)
		first = pAppend(b, 1, 5, 5, 1, pbatch(7, 3))
		roleEv(b, 2, history.RoleFollower, 1, 1, 1, 2)
		return first
	}
	runCases(t, ProducerContinuity{}, []tcase{
		{name: "new leader appends again a batch its log held", want: Invalid,
			explain: "appended producer 7 (epoch 0) sequences 3..3 to t-0 at offset 9", build: func(b *hb.Builder) []int {
				first := appendedOn1(b)
				held := hwEv(b, 2, 5, 6, 1, 9) // broker 2 replicated up to 9 at epoch 1
				roleEv(b, 2, history.RoleLeader, 2, 2, 2)
				again := pAppend(b, 2, 9, 9, 2, pbatch(7, 3))
				return []int{first, held, again}
			}},
		{name: "the first copy was cut from the new leader's log", want: Valid, build: func(b *hb.Builder) []int {
			appendedOn1(b)
			hwEv(b, 2, 4, 5, 1, 9)
			truncEv(b, 2, 9, 5, 2, "leader-epoch")
			roleEv(b, 2, history.RoleLeader, 2, 2, 2)
			pAppend(b, 2, 5, 5, 2, pbatch(7, 3))
			return nil
		}},
		// refilled: broker 1's log of t-0 is cut by crash-lose-unflushed
		// from 6 to cut and, leading leader epoch 1 again (a controller
		// failover keeps the epoch of a leader that is alive), it appends
		// producer 8's sequences at offsets cut..8 of the same epoch.
		{name: "the leader's crash-cut log refilled at the same leader epoch", want: Valid, build: func(b *hb.Builder) []int {
			appendedOn1(b)
			truncEv(b, 1, 6, 0, 1, "crash-lose-unflushed")
			roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2)
			for off := int64(0); off <= 8; off++ {
				pAppend(b, 1, off, off, 1, pbatch(8, int32(off)))
			}
			pAppend(b, 1, 9, 9, 1, pbatch(7, 3))
			return nil
		}},
		{name: "a crash cut above the batch leaves it in the refilled log", want: Invalid,
			explain: "appended producer 7 (epoch 0) sequences 3..3 to t-0 at offset 9", build: func(b *hb.Builder) []int {
				first := appendedOn1(b)
				truncEv(b, 1, 7, 6, 1, "crash-lose-unflushed")
				roleEv(b, 1, history.RoleLeader, 1, 1, 1, 2)
				var held int
				for off := int64(6); off <= 8; off++ {
					held = pAppend(b, 1, off, off, 1, pbatch(8, int32(off)))
				}
				again := pAppend(b, 1, 9, 9, 1, pbatch(7, 3))
				return []int{first, held, again}
			}},
		{name: "a follower replicated the epoch's records before its leader refilled them", want: Invalid,
			explain: "appended producer 7 (epoch 0) sequences 3..3 to t-0 at offset 9", build: func(b *hb.Builder) []int {
				first := appendedOn1(b)
				held := hwEv(b, 2, 5, 6, 1, 9)
				truncEv(b, 1, 9, 0, 1, "crash-lose-unflushed")
				pAppend(b, 1, 0, 0, 1, pbatch(8, 0))
				roleEv(b, 2, history.RoleLeader, 2, 2, 2)
				again := pAppend(b, 2, 9, 9, 2, pbatch(7, 3))
				return []int{first, held, again}
			}},
		{name: "a follower replicated only the refilled records of the epoch", want: Valid, build: func(b *hb.Builder) []int {
			appendedOn1(b)
			hwEv(b, 2, 2, 3, 1, 3)
			truncEv(b, 1, 6, 0, 1, "crash-lose-unflushed")
			for off := int64(0); off <= 8; off++ {
				pAppend(b, 1, off, off, 1, pbatch(8, int32(off)))
			}
			hwEv(b, 2, 3, 9, 1, 9)
			roleEv(b, 2, history.RoleLeader, 2, 2, 2)
			pAppend(b, 2, 9, 9, 2, pbatch(7, 3))
			return nil
		}},
		{name: "a group coordinator's TxnOffsetCommit batches repeat sequence 0", want: Valid, build: func(b *hb.Builder) []int {
			for _, base := range []int64{3, 4} {
				b.Add(history.Event{Kind: history.KindProduceAppend, Node: 1, Append: &history.Append{Topic: history.GroupMetadataTopic,
					BaseOffset: base, LastOffset: base, LeaderEpoch: 1, Acks: history.AcksAll, Producer: pbatch(7, 0)}})
			}
			return nil
		}},
		{name: "a new leader that never held the first copy", want: Valid, build: func(b *hb.Builder) []int {
			pAppend(b, 1, 5, 5, 1, pbatch(7, 3))
			pAppend(b, 2, 9, 9, 2, pbatch(7, 3))
			return nil
		}},
		{name: "client takes a new producer id after its committed produce", want: Invalid,
			explain: "appended under a new producer id 8", build: func(b *hb.Builder) []int {
				app, ok := producedThenNext(b)
				again := pAppend(b, 2, 1, 1, 2, pbatch(8, 0), "p0-2")
				idemDone(b, 0, "p0-2", history.OpOK, 1, 0)
				return []int{app, ok, again}
			}},
		{name: "client's next sequence refused", want: Invalid,
			explain: "was answered with error 45", build: func(b *hb.Builder) []int {
				_, ok := producedThenNext(b)
				done := idemDone(b, 0, "p0-2", history.OpInfo, 0, errOutOfOrderSequence)
				return []int{ok, done}
			}},
		{name: "producer continues on the new leader", want: Valid, build: func(b *hb.Builder) []int {
			producedThenNext(b)
			pAppend(b, 2, 1, 1, 2, pbatch(7, 1), "p0-2")
			idemDone(b, 0, "p0-2", history.OpOK, 1, 0)
			return nil
		}},
		{name: "a deposed leader that still leads in its view may refuse", want: Valid, build: func(b *hb.Builder) []int {
			roleEv(b, 3, history.RoleLeader, 3, 0, 3)
			producedThenNext(b)
			idemDone(b, 0, "p0-2", history.OpInfo, 0, errUnknownProducerID)
			return nil
		}},
	})
}
