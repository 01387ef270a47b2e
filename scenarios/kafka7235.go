package scenarios

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/rundir"
)

// kafka7235 is KAFKA-7235 / KIP-380: the controller has a request queued for
// broker B when B restarts so fast that the controller's view of
// /brokers/ids looks unchanged. The queued request, built for B's previous
// incarnation, reaches the new process. Without broker epochs the new
// process obeys it, and since it is the first LeaderAndIsr the process
// handles, it starts the high-watermark checkpoint task from it: the
// request covers only the partitions B shares with the dead broker X, so
// B's next checkpoint drops every other partition it hosts.
//
// Replication factor 2 over four partitions makes the request partial: B
// shares some partitions with X and others with the controller only.
func kafka7235() Scenario {
	return oneSwitch(Scenario{
		Bug:     "KAFKA-7235",
		Summary: "a restarted broker obeys a LeaderAndIsr queued for its previous incarnation, covering only some partitions, and its HW checkpoint drops the rest",
		Fix:     "control requests carry the broker epoch (czxid of /brokers/ids/N); a broker rejects those of an older epoch with STALE_BROKER_EPOCH",
		Catches: checkers.HWCheckpoint{TellGrace: checkers.DefaultConfig().RegisteredElectGrace},
		Check:   checkers.DefaultConfig(),
	}, harness.RunConfig{
		RunSpec: rundir.RunSpec{
			Nodes:      3,
			Partitions: kafka7235Partitions,
			RF:         kafka7235RF,
			// Two sessions run out in the window (the dead broker's, then the
			// bounced one's): short sessions make both quick.
			ZKSessionTimeout: kafka7235Session,
			TimeLimit:        90 * time.Second,
			NoWorkload:       true,
			// A short socket timeout makes the controller retry the queued
			// request (on a new connection, to the new process) soon after
			// the link heals; a short checkpoint interval writes the
			// partial checkpoint within 100 ms of the stale request, before
			// the released controller's fresh requests fill the partition
			// map, and the driver waits for that write.
			NodeFlags: []string{"--controller-socket-timeout=2s", "--hw-checkpoint-interval=100ms"},
		},
		Driver: kafka7235Driver{},
	})
}

const (
	kafka7235Partitions = 4
	kafka7235RF         = 2
	kafka7235Session    = 2 * time.Second
	// kafka7235GraceMargin: past the grace, for the controller's events
	// that mark the time it acted.
	kafka7235GraceMargin = 500 * time.Millisecond
)

type kafka7235Driver struct{}

// Drive: cut the controller's link to broker B so its requests to B queue,
// and kill a third broker X at the same moment so the controller queues a
// LeaderAndIsr for B (X replicates every partition, and the controller
// tells the surviving replicas of a dead replica's partitions whether or
// not X was in an ISR or led anything: X may not have caught up yet, and
// then no state changes); hold the controller before it handles broker
// changes; bounce B; then heal the link so the queued request reaches B's
// new process, and release the controller while X starts again.
func (kafka7235Driver) Drive(ctx context.Context, l *harness.Live) error {
	_, c, err := begin(ctx, l, "KAFKA-7235")
	if err != nil {
		return err
	}
	b, x := c%3+1, (c+1)%3+1
	ts, err := l.Nodes(c, b, x)
	if err != nil {
		return err
	}
	ct, bt, xt := ts[0], ts[1], ts[2]

	// The set-up can end inside the controller's start-up burst (it
	// checks ZooKeeper, where the partitions' states are written before
	// the LeaderAndIsr requests go out). A start-up request to B still
	// unsent when the link is cut would be taken for the queued one, or
	// reach B's new process first and cover all its partitions (run
	// 20261204-082525-8e2de2: "waited 30s for the queued request"). So:
	// first B knows a role in every partition it replicates.
	if err := waitRoles(ctx, l, b); err != nil {
		return err
	}
	// Side by side: X's death reaches the controller only when X's
	// session expires, seconds after the link is cut, so the order of the
	// two does not matter.
	l.Note("controller n%d; cutting its link to n%d so requests for n%d queue, and killing n%d so the controller queues a LeaderAndIsr for n%d (a surviving replica of n%d's partitions)",
		c, b, b, x, b, x)
	killed := time.Now()
	if err := both(
		func() error { return l.Nemesis.DropLink(ctx, ct, bt) },
		func() error { return l.Nemesis.KillTarget(ctx, xt) },
	); err != nil {
		return err
	}
	// The controller hears of X's death when X's session expires, never
	// before the session timeout: a request sent earlier is not the one.
	deathSeen := killed.Add(kafka7235Session / 2).UnixNano()
	// Kafka's KafkaController.onReplicasBecomeOffline elects X's
	// partitions first (a batch whose UpdateMetadata goes to every live
	// broker, B included) and only then sends the OfflineReplica
	// LeaderAndIsr to B: the request held in B's send thread is the
	// UpdateMetadata when X led anything, with the LeaderAndIsr queued
	// behind it. Either is queued for B's previous process.
	queued, err := l.WaitEvent(ctx, deathSeen, 30*time.Second, "a request sent towards the cut-off broker", func(e *history.Event) bool {
		return e.Kind == history.KindControlSent && int(e.Node) == c && e.Control != nil &&
			(e.Control.API == history.APILeaderAndIsr || e.Control.API == history.APIUpdateMetadata) && int(e.Control.TargetBroker) == b
	})
	if err != nil {
		return err
	}
	l.Note("%s for n%d queued with broker epoch %d; holding the controller before broker changes", queued.Control.API, b, queued.Control.BrokerEpoch)
	if err := l.ArmFailpoint(ctx, c, failpointBrokerChange, "1*pause"); err != nil {
		return err
	}
	since := time.Now().UnixNano()
	if _, err := l.Nemesis.BounceTarget(ctx, bt); err != nil {
		return err
	}
	reg, err := l.WaitEvent(ctx, since, 30*time.Second, "the bounced broker's re-registration", func(e *history.Event) bool {
		return e.Kind == history.KindBrokerRegistered && int(e.Node) == b
	})
	if err != nil {
		return err
	}
	// Only the link: X stays down until the request has arrived, so
	// nothing but the queued request reaches B meanwhile.
	l.Note("n%d restarted with broker epoch %d; healing the link so the queued request gets through", b, reg.Registration.BrokerEpoch)
	since = time.Now().UnixNano()
	if err := l.Nemesis.HealNet(ctx); err != nil {
		return err
	}
	if _, err := l.WaitEvent(ctx, since, 30*time.Second, "the queued request at the new process", func(e *history.Event) bool {
		return e.Kind == history.KindControlRequest && int(e.Node) == b && e.Control != nil &&
			e.Control.BrokerEpoch == queued.Control.BrokerEpoch
	}); err != nil {
		return err
	}
	l.Note("the request from n%d's previous incarnation reached the new process; releasing the controller and starting n%d", b, x)
	since = time.Now().UnixNano()
	if err := both(
		func() error { return l.ReleaseFailpoint(ctx, c, failpointBrokerChange) },
		func() error { return l.Nemesis.StartTarget(ctx, xt) },
	); err != nil {
		return err
	}
	// The damage is in n<b>'s next checkpoint writes (every 100 ms): wait
	// for two after the release (with the bug the first already lacks the
	// partitions the stale request did not cover; fixed, the controller's
	// fresh requests come first), instead of a fixed sleep. hw-checkpoint
	// owes n<b>'s process the LeaderAndIsr that would have told it only
	// once the released controller acted in its reach for the
	// registered-elect grace (until then a partition left out is Kafka's
	// behaviour): so the last of them is one logged after that grace.
	// Count distinct writes (by seq), whether or not match sees an event twice.
	seen := map[uint64]bool{}
	after := since + int64(checkers.DefaultConfig().RegisteredElectGrace+kafka7235GraceMargin)
	_, err = l.WaitEvent(ctx, since, 10*time.Second, fmt.Sprintf("n%d's checkpoint writes", b), func(e *history.Event) bool {
		if e.Kind == history.KindHWCheckpoint && int(e.Node) == b {
			seen[e.Seq] = true
			return len(seen) >= 2 && e.Time >= after
		}
		return false
	})
	return err
}

// waitRoles waits until broker b has taken a role (leader or follower) in
// every partition the set-up's assignment gives it (replica r of partition
// p is broker (p+r) mod 3 + 1, as harness.createTopic writes it).
func waitRoles(ctx context.Context, l *harness.Live, b int) error {
	want := map[int32]bool{}
	for p := range kafka7235Partitions {
		for r := range kafka7235RF {
			if (p+r)%3+1 == b {
				want[int32(p)] = true
			}
		}
	}
	got := map[int32]bool{}
	_, err := l.WaitEvent(ctx, 0, 30*time.Second, fmt.Sprintf("n%d's roles in its %d partitions", b, len(want)), func(e *history.Event) bool {
		if e.Kind == history.KindRoleChange && int(e.Node) == b && e.Role != nil && want[e.Role.Partition] {
			got[e.Role.Partition] = true
		}
		return len(got) == len(want)
	})
	return err
}

// both runs f and g side by side and returns their errors joined.
func both(f, g func() error) error {
	errc := make(chan error, 1)
	go func() { errc <- g() }()
	err := f()
	return errors.Join(err, <-errc)
}
