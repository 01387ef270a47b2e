package nemesis_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/zkchaos/zkchaos/fourletter"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/internal/clustertest"
	"github.com/zkchaos/zkchaos/nemesis"
)

// fastZK has short ticks so elections and session expiry happen in seconds.
var fastZK = cluster.ZKOptions{Servers: 3, TickTime: 100 * time.Millisecond, InitLimit: 20, SyncLimit: 5}

// zkLeader finds c's ZooKeeper leader and returns it with the other
// servers' ids and containers.
func zkLeader(t *testing.T, c *cluster.Cluster) (leader int, ids []int, cs []*docker.Container) {
	t.Helper()
	leader, err := c.ZKLeaderAmong(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.ZKServers() {
		if s.ID != leader {
			ids = append(ids, s.ID)
			cs = append(cs, s.Container)
		}
	}
	return leader, ids, cs
}

// waitFor polls cond until it holds or within passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	start := time.Now()
	var last error
	for time.Since(start) < within {
		if last = cond(); last == nil {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s: %v", what, within, last)
	return 0
}

func TestPartitionZKLeaderFromFollowers(t *testing.T) {
	c, _ := clustertest.Start(t, cluster.Options{ZK: fastZK})
	ctx := t.Context()
	old, ids, rest := zkLeader(t, c)
	net := nemesis.NewNet()
	t.Cleanup(func() { net.HealAll(context.Background()) })
	if err := net.Partition(ctx, []*docker.Container{c.ZKServer(old).Container}, rest); err != nil {
		t.Fatal(err)
	}

	var newLeader int
	took := waitFor(t, 30*time.Second, "followers elect a new leader", func() error {
		var err error
		newLeader, err = c.ZKLeaderAmong(ctx, ids...)
		return err
	})
	t.Logf("majority elected zk%d %s after the partition", newLeader, took)

	maj := clustertest.Connect(t, []string{c.ZKServer(ids[0]).ClientAddr(), c.ZKServer(ids[1]).ClientAddr()}, 4*time.Second, nil)
	clustertest.WaitConnected(t, maj, 10*time.Second)
	if _, err := maj.Create("/majority", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("write through the majority: %v", err)
	}

	// The isolated server loses its quorum and stops serving: no session can
	// be had through it, so no write either.
	waitFor(t, 20*time.Second, "isolated old leader stops serving", func() error {
		if st, err := fourletter.Srvr(ctx, c.ZKServer(old).ClientAddr(), time.Second); err == nil {
			return fmt.Errorf("still serving as %s", st.Mode)
		}
		return nil
	})
	iso := clustertest.Connect(t, []string{c.ZKServer(old).ClientAddr()}, 2*time.Second, nil)
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := createWithin(wctx, iso, "/minority"); err == nil {
		t.Fatal("the isolated old leader accepted a write")
	}

	if err := net.HealAll(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "old leader rejoins as follower", func() error {
		if _, err := c.WaitZKReady(ctx, time.Second); err != nil {
			return err
		}
		st, err := fourletter.Srvr(ctx, c.ZKServer(old).ClientAddr(), time.Second)
		if err != nil {
			return err
		}
		if st.Mode != "follower" {
			return fmt.Errorf("zk%d is %s", old, st.Mode)
		}
		return nil
	})
}

// createWithin bounds a create: go-zookeeper has no per-call timeout, and a
// request on a session that never forms would wait forever.
func createWithin(ctx context.Context, conn *zk.Conn, path string) error {
	done := make(chan error, 1)
	go func() {
		_, err := conn.Create(path, nil, 0, zk.WorldACL(zk.PermAll))
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		conn.Close() // unblocks the goroutine
		<-done
		return ctx.Err()
	}
}

func TestPauseServerExpiresItsSession(t *testing.T) {
	c, _ := clustertest.Start(t, cluster.Options{ZK: fastZK})
	ctx := t.Context()
	_, ids, _ := zkLeader(t, c)
	victim := c.ZKServer(ids[0])
	watcher := c.ZKServer(ids[1])

	var expired atomic.Bool
	only := clustertest.Connect(t, []string{victim.ClientAddr()}, time.Second, func(e zk.Event) {
		if e.State == zk.StateExpired {
			expired.Store(true)
		}
	})
	clustertest.WaitConnected(t, only, 10*time.Second)
	if _, err := only.Create("/eph", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	obs := clustertest.Connect(t, []string{watcher.ClientAddr()}, 4*time.Second, nil)
	clustertest.WaitConnected(t, obs, 10*time.Second)

	if err := nemesis.Pause(ctx, victim.Container); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			nemesis.Resume(context.Background(), victim.Container)
		}
	}()
	// The leader expires a session it stops hearing about; its ephemeral
	// node vanishes for everyone else.
	took := waitFor(t, 20*time.Second, "session on the paused server expires", func() error {
		obs.Sync("/eph")
		ok, _, err := obs.Exists("/eph")
		if err != nil {
			return err
		}
		if ok {
			return errors.New("ephemeral still present")
		}
		return nil
	})
	t.Logf("session of paused zk%d expired after %s (timeout 1s)", victim.ID, took)

	if err := nemesis.Resume(ctx, victim.Container); err != nil {
		t.Fatal(err)
	}
	resumed = true
	waitFor(t, 30*time.Second, "paused server rejoins", func() error {
		_, err := c.WaitZKReady(ctx, time.Second)
		return err
	})
	waitFor(t, 20*time.Second, "client learns its session expired", func() error {
		if !expired.Load() {
			return errors.New("no StateExpired event yet")
		}
		return nil
	})
}

func TestSlowLinkGivesStaleFollowerReads(t *testing.T) {
	c, _ := clustertest.Start(t, cluster.Options{ZK: cluster.ZKOptions{Servers: 3, TickTime: 200 * time.Millisecond, SyncLimit: 25}})
	ctx := t.Context()
	leader, ids, _ := zkLeader(t, c)
	slow, fast := c.ZKServer(ids[0]), c.ZKServer(ids[1])

	wconn := clustertest.Connect(t, []string{fast.ClientAddr()}, 4*time.Second, nil)
	rconn := clustertest.Connect(t, []string{slow.ClientAddr()}, 10*time.Second, nil)
	clustertest.WaitConnected(t, wconn, 10*time.Second)
	clustertest.WaitConnected(t, rconn, 10*time.Second)
	if _, err := wconn.Create("/v", []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}

	net := nemesis.NewNet()
	t.Cleanup(func() { net.HealAll(context.Background()) })
	if err := net.Slow(ctx, c.ZKServer(leader).Container, slow.Container, nemesis.SlowSpec{RateKbit: 64, Loss: 0.85}); err != nil {
		t.Fatal(err)
	}

	const rounds = 10
	stale := 0
	for i := 1; i <= rounds; i++ {
		want := fmt.Sprint(i)
		if _, err := wconn.Set("/v", []byte(want), -1); err != nil {
			t.Fatalf("round %d: write through zk%d: %v", i, fast.ID, err)
		}
		// Acknowledged by a quorum (leader + fast follower); the commit to
		// the slow follower is still queued on the shaped link.
		got, _, err := rconn.Get("/v")
		if err != nil {
			t.Fatalf("round %d: read through zk%d: %v", i, slow.ID, err)
		}
		if string(got) != want {
			stale++
			t.Logf("round %d: zk%d served stale %q after %q was acknowledged", i, slow.ID, got, want)
		}
		if _, err := rconn.Sync("/v"); err != nil {
			t.Fatalf("round %d: sync through zk%d: %v", i, slow.ID, err)
		}
		got, _, err = rconn.Get("/v")
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Fatalf("round %d: after Sync zk%d read %q, want %q", i, slow.ID, got, want)
		}
	}
	if stale == 0 {
		t.Fatalf("no stale read in %d rounds: the slow link did not delay the follower", rounds)
	}
	t.Logf("%d/%d reads through the slowed follower were stale; every read after Sync was fresh", stale, rounds)
}

func TestBounceRestartsQuickly(t *testing.T) {
	c, _ := clustertest.Start(t, cluster.Options{ZK: fastZK})
	ctx := t.Context()
	s := c.ZKServer(2)
	gap, err := nemesis.Bounce(ctx, s.Container)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Container.State(ctx)
	if err != nil || !st.Running {
		t.Fatalf("after bounce: running=%v err=%v", st.Running, err)
	}
	t.Logf("bounce gap %s", gap)
	waitFor(t, 30*time.Second, "bounced server rejoins", func() error {
		_, err := c.WaitZKReady(ctx, time.Second)
		return err
	})
}

// Faults held together: a paused server killed by another fault has nothing
// left to resume, and healing the pause must not end the run (seen as
// harness errors in two of four dense every-fix-on soak runs).
func TestResumeAfterKillIsNoError(t *testing.T) {
	c, _ := clustertest.Start(t, cluster.Options{ZK: cluster.ZKOptions{Servers: 1}})
	ctx := t.Context()
	s := c.ZKServer(1)
	if err := nemesis.Pause(ctx, s.Container); err != nil {
		t.Fatal(err)
	}
	if err := nemesis.Kill(ctx, s.Container); err != nil {
		t.Fatal(err)
	}
	if err := nemesis.Resume(ctx, s.Container); err != nil {
		t.Fatalf("resume of a killed container: %v", err)
	}
	if err := nemesis.Kill(ctx, s.Container); err != nil {
		t.Fatalf("kill of a killed container: %v", err)
	}
	if err := s.Container.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := nemesis.Resume(ctx, s.Container); err != nil {
		t.Fatalf("resume of a restarted container: %v", err)
	}
}

// Re-applying network rules to a container that is down again (its process
// failed at start-up while a kill-node was being healed, soak seed 1011) has
// nothing to do and must not fail the heal.
func TestReapplyToAStoppedContainerIsNoError(t *testing.T) {
	c, _ := clustertest.Start(t, cluster.Options{ZK: fastZK})
	ctx := t.Context()
	a, b := c.ZKServer(1), c.ZKServer(2)
	net := nemesis.NewNet()
	if err := net.Drop(ctx, a.Container, b.Container); err != nil {
		t.Fatal(err)
	}
	if err := nemesis.Kill(ctx, a.Container); err != nil {
		t.Fatal(err)
	}
	if err := net.Reapply(ctx, a.Container); err != nil {
		t.Fatalf("reapply to a stopped container: %v", err)
	}
	if err := a.Container.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := net.Reapply(ctx, a.Container); err != nil {
		t.Fatalf("reapply after the start: %v", err)
	}
	if err := net.HealAll(ctx); err != nil {
		t.Fatal(err)
	}
}

// A cut ended by its own heal lifts its links alone: another fault's cut
// between the same containers holds until that fault heals.
func TestCutTargetsHealsItsOwnLinksOnly(t *testing.T) {
	c, _ := clustertest.Start(t, cluster.Options{ZK: fastZK})
	ctx := t.Context()
	n := nemesis.New(nil, nemesis.NewRecorder(nil))
	t.Cleanup(func() { n.Heal(context.Background()) })
	a := nemesis.Target{Name: "zk1", Container: c.ZKServer(1).Container}
	b := nemesis.Target{Name: "zk2", Container: c.ZKServer(2).Container}
	z := nemesis.Target{Name: "zk3", Container: c.ZKServer(3).Container}
	if err := n.DropLink(ctx, a, b); err != nil { // another fault's one-way cut
		t.Fatal(err)
	}
	heal, err := n.CutTargets(ctx, "partition", []nemesis.Target{a}, []nemesis.Target{b, z})
	if err != nil {
		t.Fatal(err)
	}
	rulesOf := func(tg nemesis.Target) string {
		t.Helper()
		out, err := nemesis.DropRules(ctx, tg.Container)
		if err != nil {
			t.Fatalf("%s: %v: %s", tg.Name, err, out)
		}
		return out
	}
	for _, want := range []string{"-d " + b.Container.IP.String(), "-d " + z.Container.IP.String(), "-s " + b.Container.IP.String(), "-s " + z.Container.IP.String()} {
		if got := rulesOf(a); !strings.Contains(got, want) {
			t.Fatalf("zk1 after the cut: no rule with %q in\n%s", want, got)
		}
	}
	if err := heal(ctx); err != nil {
		t.Fatal(err)
	}
	got := rulesOf(a)
	if !strings.Contains(got, "-d "+b.Container.IP.String()) {
		t.Errorf("the other fault's zk1→zk2 drop went with the cut's heal:\n%s", got)
	}
	for _, gone := range []string{"-d " + z.Container.IP.String(), "-s " + b.Container.IP.String(), "-s " + z.Container.IP.String()} {
		if strings.Contains(got, gone) {
			t.Errorf("zk1 after the cut's heal still has a rule with %q:\n%s", gone, got)
		}
	}
	if strings.Contains(rulesOf(z), "DROP") {
		t.Errorf("zk3 after the cut's heal still drops:\n%s", rulesOf(z))
	}
	if act := n.Net.Active(); len(act) != 1 || act[0] != "drop "+a.Container.Name+"→"+b.Container.Name {
		t.Errorf("in force after the cut's heal: %v, want the other fault's drop alone", act)
	}
	// A heal after HealNet has nothing left to do and says so quietly.
	heal2, err := n.CutTargets(ctx, "partition", []nemesis.Target{z}, []nemesis.Target{b})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.HealNet(ctx); err != nil {
		t.Fatal(err)
	}
	if err := heal2(ctx); err != nil {
		t.Errorf("heal after HealNet: %v", err)
	}
}

// A SIGSTOP whose call fails may have been delivered anyway (the engine
// carried out a request whose client had given up: a run's ZooKeeper
// server, or a broker, then stayed stopped to the end, and the checkers
// read a cluster that never recovered). A failed pause must leave the
// process running; one seen landed and undone (the kernel's view of the
// process: the engine reports a SIGSTOPped container running) leaves it
// free for other faults.
func TestFailedPauseLeavesTheProcessRunning(t *testing.T) {
	c, _ := clustertest.Start(t, cluster.Options{ZK: cluster.ZKOptions{Servers: 1}})
	ctx := t.Context()
	n := nemesis.New(nil, nemesis.NewRecorder(nil))
	t.Cleanup(func() { n.Heal(context.Background()) })
	nemesis.PausesLandButFail(n)
	s := c.ZKServer(1)
	zk1 := nemesis.Target{Name: "zk1", Container: s.Container}
	if err := n.PauseTarget(ctx, zk1); err == nil {
		t.Fatal("PauseTarget reported no error for a failed signal call")
	}
	if _, err := fourletter.Srvr(ctx, s.ClientAddr(), 2*time.Second); err != nil {
		t.Fatalf("zk1 after a failed pause does not answer srvr: %v (left stopped)", err)
	}
	if stopped, err := nemesis.ProcessStopped(ctx, s.Container); err != nil || stopped {
		t.Errorf("zk1's process stopped after a failed pause: %v, %v", stopped, err)
	}
	if n.Holds(zk1) {
		t.Error("zk1 held after its failed pause landed and was undone")
	}
	if err := nemesis.Pause(ctx, s.Container); err != nil {
		t.Fatal(err)
	}
	// A JVM shows stopped once every thread has.
	waitFor(t, 5*time.Second, "zk1's process seen stopped after a pause", func() error {
		if stopped, err := nemesis.ProcessStopped(ctx, s.Container); err != nil || !stopped {
			return fmt.Errorf("stopped %v, %v", stopped, err)
		}
		return nil
	})
	if err := nemesis.Resume(ctx, s.Container); err != nil {
		t.Fatal(err)
	}
}

// An operator's stop on the engine: SIGTERM, the exit waited for, the
// process held down until its start.
func TestOperatorStopOnTheEngine(t *testing.T) {
	c, _ := clustertest.Start(t, cluster.Options{ZK: cluster.ZKOptions{Servers: 1}})
	ctx := t.Context()
	n := nemesis.New(nil, nemesis.NewRecorder(nil))
	t.Cleanup(func() { n.Heal(context.Background()) })
	s := c.ZKServer(1)
	zk1 := nemesis.Target{Name: "zk1", Container: s.Container}
	how, err := n.StopTarget(ctx, zk1, 20*time.Second)
	if err != nil || how.SignalErr != nil || how.Killed {
		t.Fatalf("stop: %+v, %v; want a SIGTERM and an exit", how, err)
	}
	if st, err := s.Container.State(ctx); err != nil || st.Running {
		t.Fatalf("zk1 after its stop: running %v, %v", st.Running, err)
	}
	if !n.Holds(zk1) {
		t.Error("zk1 free between its stop and its start")
	}
	if err := n.StartTarget(ctx, zk1); err != nil {
		t.Fatal(err)
	}
	if n.Holds(zk1) {
		t.Error("zk1 held after its start")
	}
	waitFor(t, 20*time.Second, "zk1 answers srvr after its start", func() error {
		_, err := fourletter.Srvr(ctx, s.ClientAddr(), 2*time.Second)
		return err
	})
}
