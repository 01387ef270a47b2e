package scenarios

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/fourletter"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/ctxsleep"
	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/rundir"
)

// kafka16667 is KAFKA-16667: a new controller reads partition state right
// after winning /controller, through a ZooKeeper server that lags the
// leader, and caches a zkVersion that a broker's ISR change has already
// moved past. Its conditional write then fails with BADVERSION, and with the
// bug it retries the same cached version forever inside its event loop.
//
// ZooKeeper applies commits in order, so the new controller's reads are
// stale only against writes committed after its own /controller create. The
// driver makes one: the old controller stops cleanly (SIGTERM with
// controlled shutdown off: it closes its session, so the election follows
// at once instead of after a session expiry), and the leader of the
// partition it followed shrinks it out of the ISR past
// replica.lag.time.max, writing the state znode itself, while the new
// controller is held between its election and its reads and its server's
// link from the ZooKeeper leader is slowed. Each broker's session is pinned
// to its own ZooKeeper server (--zk-server-by-id) so the driver knows which
// server serves whose reads; no write to partition state comes from the
// harness.
func kafka16667() Scenario {
	check := checkers.DefaultConfig()
	check.LivenessGrace = kafka16667Grace
	return oneSwitch(Scenario{
		Bug:     "KAFKA-16667",
		Summary: "after a failover the new controller reads partition state through a lagging ZooKeeper follower, caches a stale zkVersion and retries its write with it forever",
		Fix:     "on BADVERSION the controller re-reads the partition state and decides again until done, instead of retrying the cached zkVersion (Kafka 2.6.3's state machines)",
		Catches: checkers.Liveness{Grace: check.LivenessGrace, MaxBadVersionRetries: check.MaxBadVersionRetries},
		Check:   check,
	}, harness.RunConfig{
		RunSpec: rundir.RunSpec{
			Nodes: 3,
			// Replication factor 2 over three partitions: the dead
			// controller follows exactly one partition, led by O, and the
			// new controller's broker leads none that it follows, so its
			// session has no write pending on the slowed server.
			Partitions: 3,
			RF:         2,
			// A slowed follower must stay in the quorum while it lags: its
			// sync limit is well above the lag the slow link builds.
			ZK:               rundir.ZK{Servers: 3, TickTime: 200 * time.Millisecond, SyncLimit: 50},
			ZKSessionTimeout: 6 * time.Second, // outlives the new controller's first write waiting on the lagging server
			TimeLimit:        60 * time.Second,
			Settle:           time.Second,
			NoWorkload:       true,
			NodeFlags: []string{
				"--zk-server-by-id",
				// The leaders shrink the dead controller out of their
				// ISRs after the new controller is elected and held.
				"--replica-lag-time-max=" + kafka16667Lag.String(),
				// SIGTERM stops a broker cleanly: its session closes and
				// /controller goes at once; nothing is moved first.
				"--controlled-shutdown=false",
			},
		},
		Driver: kafka16667Driver{grace: check.LivenessGrace, retries: check.MaxBadVersionRetries},
	})
}

const (
	// kafka16667Grace is how long after healing the controller has to
	// finish; the liveness checker counts BADVERSION retries after it.
	kafka16667Grace = 2 * time.Second
	// kafka16667Lag: replica.lag.time.max. The shrink must commit after the
	// new controller holds and its server's link is slowed (the election
	// comes 0.03 to 0.09 s after the old controller's stop, then the
	// shaping), and late enough that the slowed server's backlog is
	// seconds long by then.
	kafka16667Lag = 3 * time.Second

	failpointBeforeElect  = history.FailpointControllerBeforeElect
	failpointAfterElected = history.FailpointControllerAfterElected
)

// kafka16667Slow is the shaping of the link from the ZooKeeper leader to the
// new controller's server: a low rate and no loss, so the follower's backlog
// (pings, proposals, commits) grows steadily and it falls behind by seconds
// without a gap long enough to drop it from the quorum or to expire the
// sessions it serves (their pings reach the leader in the follower's
// replies to the leader's pings, which keep arriving, late).
var kafka16667Slow = nemesis.SlowSpec{RateKbit: 4}

type kafka16667Driver struct {
	grace   time.Duration
	retries int
}

// Drive: the controller C follows one partition, led by O; W, the other
// survivor, must be on a ZooKeeper follower F. Keep O out of the election
// (controller-before-elect), hold W right after it wins
// (controller-after-elected), stop C cleanly (SIGTERM, controlled shutdown
// off). Once W holds, slow the link from the ZooKeeper leader to F and let
// O go. Past replica.lag.time.max O shrinks C out of its ISR, committed
// through another server; check that F has not applied that write (else
// the window was missed: a harness error, not a valid run), release W (it
// reads through F) and unslow the link, so W's writes come back. Restart C
// after W's first partition-state write (W must see it dead), then wait
// until the run is decided: C hears from W (the fix), or W's write has
// failed with BADVERSION more often after the grace than liveness allows
// (the bug).
func (d kafka16667Driver) Drive(ctx context.Context, l *harness.Live) error {
	start, c1, err := begin(ctx, l, "KAFKA-16667")
	if err != nil {
		return err
	}
	lead, err := l.World.ZKLeader(ctx)
	if err != nil {
		return fmt.Errorf("KAFKA-16667: find the ZooKeeper leader: %w", err)
	}
	servers := len(l.Cluster.ZKServers())
	serverOf := func(node int) int { return (node-1)%servers + 1 } // --zk-server-by-id
	// The harness assigns partition p to brokers p%n+1 and (p+1)%n+1: the
	// dead controller follows the partition led by the broker before it,
	// O; the other survivor is W.
	nodes := len(l.Cluster.Nodes())
	o := (c1+nodes-2)%nodes + 1
	w := c1%nodes + 1
	zkt := func(id int) (nemesis.Target, error) {
		for _, t := range l.Nemesis.World.ZKServers() {
			if t.Name == fmt.Sprintf("zk%d", id) {
				return t, nil
			}
		}
		return nemesis.Target{}, fmt.Errorf("KAFKA-16667: no ZooKeeper server zk%d", id)
	}
	if serverOf(w) == lead {
		if lead, err = moveZKLeader(ctx, l, lead, w, serverOf, zkt); err != nil {
			return err
		}
	}
	f := serverOf(w)
	l.Note("controller n%d; ZooKeeper leader zk%d; n%d (on follower zk%d) will take over, n%d (on zk%d) stays out of the election",
		c1, lead, w, f, o, serverOf(o))
	if err := l.ArmFailpoint(ctx, o, failpointBeforeElect, "1*pause"); err != nil {
		return err
	}
	if err := l.ArmFailpoint(ctx, w, failpointAfterElected, "1*pause"); err != nil {
		return err
	}
	lt, err := zkt(lead)
	if err != nil {
		return err
	}
	ft, err := zkt(f)
	if err != nil {
		return err
	}
	ct, err := l.Node(c1)
	if err != nil {
		return err
	}
	// A clean stop: the session closes, /controller goes at once and W is
	// elected in under 0.1 s (bench: 0.03 to 0.09 s). The stop stays a fault until the driver
	// starts C again below.
	l.Note("stopping the controller n%d (SIGTERM, controlled shutdown off)", c1)
	restartC, err := stopCleanly(ctx, l, "KAFKA-16667", ct)
	if err != nil {
		return err
	}
	held, err := l.WaitEvent(ctx, start, 20*time.Second, fmt.Sprintf("n%d held after its election", w), func(e *history.Event) bool {
		return e.Kind == history.KindFaultStart && int(e.Node) == w && e.Fault != nil && e.Fault.Failpoint == failpointAfterElected
	})
	if err != nil {
		return err
	}
	elected, _ := l.WaitEvent(ctx, start, time.Second, "the election", func(e *history.Event) bool {
		return e.Kind == history.KindControllerElected && int(e.Node) == w
	})
	if elected != nil {
		l.Note("n%d elected controller at epoch %d and held before it reads the cluster state", w, elected.Controller.Epoch)
	}
	l.Note("slowing zk%d → zk%d to %d kbit/s", lead, f, kafka16667Slow.RateKbit)
	if err := l.Nemesis.SlowLink(ctx, lt, ft, kafka16667Slow); err != nil {
		return err
	}
	// The run has no workload, and a leader shrinks only a follower that
	// lacks records it has (Partition.isFollowerOutOfSync): give O one
	// record that C, stopped, never fetches.
	p := int32((o - 1) % len(l.Cluster.Nodes()))
	topic := rundir.Default().Topic
	if err := l.Append(ctx, topic, p, "kafka16667"); err != nil {
		return fmt.Errorf("KAFKA-16667: %w", err)
	}
	l.Note("appended one record to %s-%d, led by n%d, which n%d lacks", topic, p, o, c1)
	if err := l.ReleaseFailpoint(ctx, o, failpointBeforeElect); err != nil {
		return err
	}
	if err := l.ArmFailpoint(ctx, o, failpointBeforeElect, "off"); err != nil {
		return err
	}
	// O's shrink as its state write, which carries the zxid it committed
	// at (the node logs the write, then the ISR change).
	shrink, err := l.WaitEvent(ctx, held.Time, 20*time.Second, fmt.Sprintf("n%d shrinking n%d out of an ISR", o, c1), func(e *history.Event) bool {
		return e.Kind == history.KindZKWrite && int(e.Node) == o && e.ZKWrite.Outcome == history.ZKOK && e.ZKWrite.State != nil &&
			int(e.ZKWrite.State.Leader) == o && !containsID(e.ZKWrite.State.ISR, c1) && e.ZKWrite.Zxid > 0
	})
	if err != nil {
		return err
	}
	// The window: F must not have applied O's write when W reads through
	// it. srvr tells the last zxid F applied.
	zf, err := fourletter.Srvr(ctx, l.Cluster.ZKServer(f).ClientAddr(), time.Second)
	if err != nil {
		return fmt.Errorf("KAFKA-16667: zk%d's applied zxid: %w", f, err)
	}
	l.Note("n%d wrote %s ISR %v (zkVersion %d, zxid %#x) through zk%d; zk%d has applied up to zxid %#x",
		o, shrink.ZKWrite.Path, shrink.ZKWrite.State.ISR, shrink.ZKWrite.NewVersion, shrink.ZKWrite.Zxid, serverOf(o), f, zf.Zxid)
	if zf.Zxid >= shrink.ZKWrite.Zxid {
		return fmt.Errorf("KAFKA-16667: window missed: zk%d had applied up to zxid %#x, past n%d's ISR write to %s (zxid %#x), before n%d read through it",
			f, zf.Zxid, o, shrink.ZKWrite.Path, shrink.ZKWrite.Zxid, w)
	}
	since := time.Now().UnixNano()
	l.Note("releasing n%d: it reads partition state through zk%d", w, f)
	if err := l.ReleaseFailpoint(ctx, w, failpointAfterElected); err != nil {
		return err
	}
	// W's reads are served by F at once; its writes wait for F to apply
	// them, behind the backlog, and a session whose request waits that long
	// loses its connection. Unslow the link now (W has read), but keep C
	// down until W has written: W must see it dead.
	if err := l.Nemesis.Net.HealAll(ctx); err != nil {
		return err
	}
	l.Note("zk%d → zk%d unslowed", lead, f)
	statePath := func(e *history.Event) bool {
		return e.Kind == history.KindZKWrite && int(e.Node) == w && e.ZKWrite.State != nil && strings.HasSuffix(e.ZKWrite.Path, "/state")
	}
	// The first write comes at once either way (every read is served by F
	// as it is); fixed, a BADVERSION makes the controller read again until
	// F has caught up.
	first, err := l.WaitEvent(ctx, since, 3*time.Second, fmt.Sprintf("n%d's first partition-state write", w), statePath)
	if err == nil {
		l.Note("n%d wrote %s expecting zkVersion %d: %s", w, first.ZKWrite.Path, first.ZKWrite.ExpectedVersion, first.ZKWrite.Outcome)
	}
	if err := restartC(ctx); err != nil {
		return err
	}
	if err := l.Nemesis.Heal(ctx); err != nil {
		return err
	}
	l.Note("healed: n%d restarted", c1)
	return d.awaitDecision(ctx, l, c1, w, elected, statePath)
}

// moveZKLeader restarts the ZooKeeper leader lead, n's server, so that the
// other servers elect a leader and it comes back as a follower (n's
// session, 6 s, outlives that), and returns the new leader once every
// broker is connected to its server again.
func moveZKLeader(ctx context.Context, l *harness.Live, lead, n int, serverOf func(int) int, zkt func(int) (nemesis.Target, error)) (int, error) {
	l.Note("zk%d, n%d's server, leads the ensemble; restarting it so another server leads", lead, n)
	zt, err := zkt(lead)
	if err != nil {
		return 0, err
	}
	if err := l.Nemesis.KillTarget(ctx, zt); err != nil {
		return 0, err
	}
	if err := l.Nemesis.StartTarget(ctx, zt); err != nil {
		return 0, err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		nl, err := l.Cluster.ZKLeaderAmong(ctx) // every server serving, one leading
		if err == nil && nl != serverOf(n) {
			lead = nl
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("KAFKA-16667: after restarting zk%d: leader %d, %v", serverOf(n), nl, err)
		}
		if !ctxsleep.For(ctx, 200*time.Millisecond) {
			return 0, ctx.Err()
		}
	}
	// Restarting the leader made the other servers drop their
	// clients; a broker still reconnecting when it is stopped cannot
	// close its session, and the election would wait for its expiry.
	if err := waitSessions(ctx, l, serverOf, 15*time.Second); err != nil {
		return 0, err
	}
	l.Note("zk%d leads now; every broker is connected to its server again", lead)
	return lead, nil
}

// awaitDecision waits, after the heal, until the run is decided: the
// restarted controller c1 hears from the new controller w (elected, if
// seen; its event loop got past the failover: the fix), or one path has
// failed with BADVERSION more often after the grace than liveness allows
// (the bug).
func (d kafka16667Driver) awaitDecision(ctx context.Context, l *harness.Live, c1, w int, elected *history.Event, statePath func(*history.Event) bool) error {
	healed := time.Now()
	var epoch int32 = -1
	if elected != nil {
		epoch = elected.Controller.Epoch
	}
	bad := map[uint64]bool{}
	done, err := l.WaitEvent(ctx, healed.UnixNano(), d.grace+15*time.Second, "the new controller to finish or be stuck", func(e *history.Event) bool {
		if e.Kind == history.KindControlRequest && int(e.Node) == c1 && e.Control != nil &&
			e.Control.API == history.APILeaderAndIsr && e.Control.ControllerEpoch == epoch {
			return true
		}
		if statePath(e) && e.ZKWrite.Outcome == history.ZKBadVersion && e.Time > healed.Add(d.grace).UnixNano() {
			bad[e.Seq] = true
		}
		return len(bad) > d.retries+1
	})
	if err != nil {
		return fmt.Errorf("KAFKA-16667: %w", err)
	}
	if done.Kind == history.KindControlRequest {
		l.Note("n%d heard from controller n%d (epoch %d): the failover finished", c1, w, epoch)
	} else {
		l.Note("n%d failed its write to %s with BADVERSION %d times more than %s after healing", w, done.ZKWrite.Path, len(bad), d.grace)
	}
	return nil
}

func containsID(ids []int32, id int) bool {
	for _, x := range ids {
		if int(x) == id {
			return true
		}
	}
	return false
}

// waitSessions waits until every broker has an established session on its
// own ZooKeeper server: the server's `cons` lists a connection from the
// broker's address with a session id.
func waitSessions(ctx context.Context, l *harness.Live, serverOf func(int) int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		var missing []string
		for _, n := range l.Cluster.Nodes() {
			conns, err := fourletter.Cons(ctx, l.Cluster.ZKServer(serverOf(n.ID)).ClientAddr(), time.Second)
			if err != nil || !hasSession(conns, l.Cluster.NodeIP(n.ID)) {
				missing = append(missing, fmt.Sprintf("n%d on zk%d", n.ID, serverOf(n.ID)))
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("KAFKA-16667: waited %s for the brokers' ZooKeeper sessions: %s not connected", within, strings.Join(missing, ", "))
		}
		if !ctxsleep.For(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// hasSession says whether a server's connections include an established
// session from ip.
func hasSession(conns []fourletter.Conn, ip netip.Addr) bool {
	for _, c := range conns {
		if c.Session && c.Addr.Addr() == ip {
			return true
		}
	}
	return false
}
