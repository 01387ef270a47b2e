package scenarios

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/nemesis"
)

// kafka3861 is KAFKA-3861: with replication factor 3 and
// min.insync.replicas 2, the followers fall out of the ISR one after the
// other, so the ISR shrinks to the leader and acks=all produces are refused
// (NOT_ENOUGH_REPLICAS): every acknowledged record is on a follower. Then
// the leader dies. The three offline-election policies run on the same
// schedule:
//
//   - offline (Kafka's default, the bug): no live ISR member, no leader; the
//     partition stays offline until the dead leader returns.
//   - unclean: the first live replica in assignment order leads. The driver
//     makes that the follower that left the ISR first, so it lacks the
//     records acknowledged after it left, and they are lost.
//   - query-leo (the bug report's proposal, the fix): the controller asks
//     the live replicas for their log end offsets and elects the longest
//     log: available, and nothing acknowledged is lost.
//
// The dead leader stays down for longer than the availability grace, then
// comes back (a replaced machine), which bounds the offline run and lets
// the final reads find every partition.
func kafka3861() Scenario {
	check := checkers.DefaultConfig()
	check.OfflineGrace = kafka3861Grace
	return Scenario{
		Bug:     "KAFKA-3861",
		Summary: "the ISR shrinks to the leader (acks=all refused), the leader dies, and no follower may lead although they hold every acknowledged record",
		Fix:     "query-leo: with an ISR below min.insync.replicas the controller asks the live replicas their log end offsets and elects the longest",
		Catches: checkers.Availability{Grace: check.OfflineGrace, ElectGrace: check.ElectGrace, Strict: check.StrictAvailability},
		Check:   check,
		Modes: []Mode{
			{Name: "offline", About: "Kafka's default: no leader outside the ISR"},
			{Name: "unclean", About: "unclean.leader.election: first live replica"},
			{Name: "query-leo", Fixed: true, About: "the bug report's proposal: longest log among the live replicas"},
		},
		config: func(m Mode) harness.RunConfig {
			return harness.RunConfig{
				Nodes:            3,
				Partitions:       1,
				RF:               3,
				ZKSessionTimeout: 2 * time.Second,
				TimeLimit:        90 * time.Second,
				Settle:           5 * time.Second,
				Driver:           kafka3861Driver{},
				NodeFlags: []string{
					"--offline-election=" + m.Name,
					"--min-insync-replicas=2",
					// Followers leave the ISR 2 s after they stop fetching.
					"--replica-lag-time-max=2s",
				},
			}
		},
	}
}

// kafka3861Grace is how long the partition may stay offline after the
// faults end; the dead leader stays away for longer than this.
const kafka3861Grace = 4 * time.Second

type kafka3861Driver struct{}

// Drive: cut the leader from the follower an unclean election would pick,
// wait until it leaves the ISR, let acks=all writes go on with the other
// follower, cut that one too, wait until the ISR is the leader alone
// (produces refused), crash the leader, heal the network, keep the leader
// away past the grace, then bring it back.
func (kafka3861Driver) Drive(ctx context.Context, l *harness.Live) error {
	const topic, part = "chaos", 0
	start := time.Now().UnixNano()
	leader, err := l.World.PartitionLeader(ctx, topic, part)
	if err != nil || leader < 0 {
		return fmt.Errorf("KAFKA-3861: leader of %s-%d: %d, %v", topic, part, leader, err)
	}
	// Assignment of partition 0 is [1 2 3]: unclean election picks the first
	// live replica in that order, so that one falls behind.
	var followers []int
	for id := 1; id <= 3; id++ {
		if id != leader {
			followers = append(followers, id)
		}
	}
	behind, current := followers[0], followers[1]
	ts, err := l.Nodes(leader, behind, current)
	if err != nil {
		return err
	}
	lt, bt, ct := ts[0], ts[1], ts[2]

	shrunkTo := func(since int64, want []int32, what string) error {
		_, err := l.WaitEvent(ctx, since, 20*time.Second, what, func(e *history.Event) bool {
			return e.Kind == history.KindISRChange && int(e.Node) == leader && e.ISR.Outcome == history.ZKOK &&
				e.ISR.Partition == part && slices.Equal(sorted(e.ISR.New), want)
		})
		return err
	}
	if !sleepCtx(ctx, 1500*time.Millisecond) {
		return ctx.Err()
	}
	l.Note("n%d leads %s-%d; cutting it from n%d, the replica an unclean election would pick", leader, topic, part, behind)
	if err := l.Nemesis.PartitionTargets(ctx, "partition", []nemesis.Target{lt}, []nemesis.Target{bt}); err != nil {
		return err
	}
	if err := shrunkTo(start, sorted([]int32{int32(leader), int32(current)}), fmt.Sprintf("n%d out of the ISR", behind)); err != nil {
		return err
	}
	l.Note("ISR is [n%d n%d]: acks=all writes go on without n%d", leader, current, behind)
	if !sleepCtx(ctx, 2*time.Second) {
		return ctx.Err()
	}
	since := time.Now().UnixNano()
	l.Note("cutting n%d from n%d too", leader, current)
	if err := l.Nemesis.PartitionTargets(ctx, "partition", []nemesis.Target{lt}, []nemesis.Target{ct}); err != nil {
		return err
	}
	if err := shrunkTo(since, []int32{int32(leader)}, "the ISR shrunk to the leader"); err != nil {
		return err
	}
	l.Note("ISR is [n%d], below min.insync.replicas 2: acks=all produces are refused", leader)
	if !sleepCtx(ctx, time.Second) {
		return ctx.Err()
	}
	// A crash, not a kill the nemesis heals: the machine is gone until the
	// driver replaces it below, and the fault is over when it is gone.
	id := l.Nemesis.Rec.Start("crash", []string{lt.Name}, "SIGKILL; stays down until replaced")
	err = nemesis.Kill(ctx, lt.Container)
	l.Nemesis.Rec.Stop(id, "crash", []string{lt.Name}, err)
	if err != nil {
		return err
	}
	l.Note("n%d crashed; healing the network", leader)
	if err := l.Nemesis.Heal(ctx); err != nil {
		return err
	}
	away := kafka3861Grace + 5*time.Second
	l.Note("keeping n%d down for %s", leader, away)
	if !sleepCtx(ctx, away) {
		return ctx.Err()
	}
	l.Note("replacing n%d", leader)
	if err := lt.Container.Start(ctx); err != nil {
		return fmt.Errorf("KAFKA-3861: restart n%d: %w", leader, err)
	}
	_, err = l.WaitEvent(ctx, since, 30*time.Second, fmt.Sprintf("n%d registered again", leader), func(e *history.Event) bool {
		return e.Kind == history.KindBrokerRegistered && int(e.Node) == leader
	})
	return err
}

func sorted(ids []int32) []int32 {
	s := slices.Clone(ids)
	slices.Sort(s)
	return s
}

// sleepCtx sleeps for d; false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
