package scenarios

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/ctxsleep"
	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/rundir"
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
//     records acknowledged after it left, and they are lost. That is
//     documented Kafka behaviour with unclean.leader.election.enable: the
//     run is valid with the known anomaly unclean-election, which lists
//     the acknowledged records the election cost (invalid with
//     --strict-elections).
//   - query-leo (the bug report's proposal, the fix): the controller asks
//     the live replicas for their log end offsets and elects the longest
//     log: available, and nothing acknowledged is lost.
//
// The dead leader stays down for kafka3861Hold after the controller decided
// the partition's fate (wrote its new state), longer than the availability
// grace, then comes back (a replaced machine), which bounds the offline run
// and lets the final reads find every partition.
func kafka3861() Scenario {
	check := checkers.DefaultConfig()
	check.OfflineGrace = kafka3861Grace
	check.ElectGrace = kafka3861Grace
	return Scenario{
		Bug:     "KAFKA-3861",
		Summary: "the ISR shrinks to the leader (acks=all refused), the leader dies, and no follower may lead although they hold every acknowledged record",
		Fix:     "query-leo: with an ISR below min.insync.replicas the controller asks the live replicas their log end offsets and elects the longest",
		Catches: checkers.Availability{Grace: check.OfflineGrace, ElectGrace: check.ElectGrace, Strict: check.StrictAvailability, RegisteredElectGrace: check.RegisteredElectGrace},
		Check:   check,
		Modes: []Mode{
			{Name: "offline", About: "Kafka's default: no leader outside the ISR"},
			{Name: "unclean", About: "unclean.leader.election: first live replica; known anomaly unclean-election lists what it cost"},
			{Name: "query-leo", Fixed: true, About: "the bug report's proposal: longest log among the live replicas"},
		},
		config: func(m Mode) harness.RunConfig {
			return harness.RunConfig{
				RunSpec: rundir.RunSpec{
					Nodes:            3,
					Partitions:       1,
					RF:               3,
					ZKSessionTimeout: 2 * time.Second,
					TimeLimit:        90 * time.Second,
					Settle:           5 * time.Second,
					NodeFlags: []string{
						"--offline-election=" + m.Name,
						"--min-insync-replicas=2",
						// Followers leave the ISR 1 s after they stop
						// fetching (checked every 0.5 s).
						"--replica-lag-time-max=" + kafka3861Lag.String(),
					},
				},
				Driver: kafka3861Driver{},
			}
		},
	}
}

const (
	// kafka3861Grace is how long the partition may stay offline after the
	// faults end (availability's grace) and after a controller left it
	// without a leader (its elect grace). With query-leo the new leader is
	// in its role well within it: the controller writes the new state once
	// the dead leader's session expires (2 s after the crash, after the
	// heal), and the leader takes its role within milliseconds.
	kafka3861Grace = 2 * time.Second
	// kafka3861Hold is how long the dead leader stays away after the
	// controller wrote the partition's state without it: with offline
	// election the partition is then offline for the hold plus the
	// restart, clearly past the grace.
	kafka3861Hold = 3500 * time.Millisecond
	// kafka3861Lag is replica.lag.time.max.
	kafka3861Lag = time.Second
)

type kafka3861Driver struct{}

// Drive: cut the leader from the follower an unclean election would pick,
// wait until it leaves the ISR, let acks=all writes go on with the other
// follower, cut that one too, wait until the ISR is the leader alone
// (produces refused), crash the leader, heal the network, wait for the
// controller to write the partition's state without the leader, keep the
// leader away for kafka3861Hold after that, then bring it back.
// Write phases: 0.5 s on the full ISR, 1 s with the other follower, 0.5 s
// of refused produces.
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
	if !ctxsleep.For(ctx, 500*time.Millisecond) {
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
	if !ctxsleep.For(ctx, time.Second) {
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
	if !ctxsleep.For(ctx, 500*time.Millisecond) {
		return ctx.Err()
	}
	crashed := time.Now().UnixNano()
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
	// The controller decides once the dead leader's session expires (and,
	// when the leader was the controller, once a new one is elected):
	// leader -1 with offline election, a live replica otherwise.
	decided, err := l.WaitEvent(ctx, crashed, 20*time.Second, fmt.Sprintf("the controller's new state for %s-%d", topic, part), func(e *history.Event) bool {
		return e.Kind == history.KindZKWrite && e.ZKWrite.Outcome == history.ZKOK && e.ZKWrite.State != nil &&
			e.ZKWrite.State.Topic == topic && e.ZKWrite.State.Partition == part && int(e.ZKWrite.State.Leader) != leader
	})
	if err != nil {
		return err
	}
	l.Note("controller n%d wrote %s-%d leader %d, ISR %v; keeping n%d down until %s after that write",
		decided.Node, topic, part, decided.ZKWrite.State.Leader, decided.ZKWrite.State.ISR, leader, kafka3861Hold)
	if !ctxsleep.For(ctx, time.Until(time.Unix(0, decided.Time).Add(kafka3861Hold))) {
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
