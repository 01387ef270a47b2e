package scenarios

import (
	"context"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/ctxsleep"
)

// kafka532 is KAFKA-532: a controller paused past its ZooKeeper session
// between reading the cluster state and acting on it comes back as a zombie.
// A new controller has been elected at a higher epoch meanwhile; the zombie's
// writes and LeaderAndIsr requests carry its old epoch. Before the fix,
// brokers did not check the controller epoch and the zombie's ZooKeeper
// writes were unconditional, so brokers obeyed both controllers.
func kafka532() Scenario {
	return oneSwitch(Scenario{
		Bug:     "KAFKA-532",
		Summary: "a paused controller resumes as a zombie; brokers obey its stale controller epoch",
		Fix:     "brokers reject requests from an older controller epoch; controller writes are conditional on /controller_epoch",
		Catches: checkers.ControllerFencing{},
		Check:   checkers.DefaultConfig(),
	}, harness.RunConfig{
		Nodes:      3,
		Partitions: 3,
		// Short sessions so the paused controller loses its role quickly.
		ZKSessionTimeout: 2 * time.Second,
		// The broker change comes from a clean stop: the broker's session
		// closes with it, so the controller hears of it at once instead of
		// a session timeout later (the frozen controller's own expiry is
		// the window and stays).
		NodeFlags: []string{"--controlled-shutdown=false"},
		TimeLimit: 90 * time.Second,
		// acks=all producers and readers run through the whole window, so
		// the zombie's damage shows up as lost or divergent records too.
		Driver: kafka532Driver{},
	})
}

const failpointBrokerChange = "controller-before-broker-change"

type kafka532Driver struct{}

// Drive: arm the controller to stop when a broker change arrives, stop a
// broker cleanly to trigger it, freeze the controller there (SIGSTOP, as a GC pause)
// and bring the killed broker back while another broker is elected
// controller, wait for the new controller to act, then let the zombie go
// on.
func (kafka532Driver) Drive(ctx context.Context, l *harness.Live) error {
	start, c, err := begin(ctx, l, "KAFKA-532")
	if err != nil {
		return err
	}
	l.Note("controller is n%d; arming %s on it", c, failpointBrokerChange)
	if err := l.ArmFailpoint(ctx, c, failpointBrokerChange, "1*sigstop"); err != nil {
		return err
	}
	victim := c%3 + 1
	ts, err := l.Nodes(victim, c)
	if err != nil {
		return err
	}
	vt, ct := ts[0], ts[1]
	l.Note("stopping n%d (SIGTERM, controlled shutdown off) so the controller handles a broker change", victim)
	restartV, err := stopCleanly(ctx, l, "KAFKA-532", vt)
	if err != nil {
		return err
	}
	if _, err := l.WaitEvent(ctx, start, 30*time.Second, "the controller at its failpoint", func(e *history.Event) bool {
		return e.Kind == history.KindFaultStart && e.Fault != nil && e.Fault.Failpoint == failpointBrokerChange
	}); err != nil {
		return err
	}
	l.Note("n%d stopped at its failpoint; freezing it with SIGSTOP", c)
	if err := l.Nemesis.PauseTarget(ctx, ct); err != nil {
		return err
	}
	// The frozen controller never handles the death: its view keeps
	// n<victim>'s old registration whenever n<victim> comes back. Back
	// before the election (which waits for the frozen controller's session
	// to expire), it gets the new controller's LeaderAndIsr at once, and
	// the restart overlaps the wait for the election.
	l.Note("restarting n%d so the next controller finds it and sends it leadership", victim)
	if err := restartV(ctx); err != nil {
		return err
	}
	elected, err := l.WaitEvent(ctx, start, 60*time.Second, "a new controller", func(e *history.Event) bool {
		return e.Kind == history.KindControllerElected && int(e.Node) != c
	})
	if err != nil {
		return err
	}
	l.Note("n%d elected controller at epoch %d while n%d is frozen", elected.Node, elected.Controller.Epoch, c)
	if _, err := l.WaitEvent(ctx, start, 30*time.Second, "the new controller's LeaderAndIsr", func(e *history.Event) bool {
		return e.Kind == history.KindControlRequest && e.Control != nil && e.Control.API == history.APILeaderAndIsr &&
			e.Control.ControllerEpoch == elected.Controller.Epoch
	}); err != nil {
		return err
	}
	l.Note("resuming the zombie n%d (controller epoch %d is stale now)", c, elected.Controller.Epoch-1)
	// Taken before the resume: the zombie acts within milliseconds of
	// SIGCONT, before ResumeTarget has returned.
	since := time.Now().UnixNano()
	if err := l.Nemesis.ResumeTarget(ctx, ct); err != nil {
		return err
	}
	// The zombie goes on from its failpoint: it reads the broker set, makes
	// leader decisions, writes them and sends LeaderAndIsr. With the fix its
	// first conditional write fails and it resigns; with the bug a broker
	// obeys its stale controller epoch. Either ends the window.
	stale := elected.Controller.Epoch - 1
	ev, err := l.WaitEvent(ctx, since, 20*time.Second, "the zombie's resignation or a broker obeying it", func(e *history.Event) bool {
		switch {
		case e.Kind == history.KindControllerResigned && int(e.Node) == c:
			return true
		case e.Kind == history.KindControlRequest && e.Control != nil && e.Control.ControllerEpoch == stale &&
			int(e.Control.ControllerID) == c && e.Control.Verdict == history.VerdictAccepted:
			return true
		}
		return false
	})
	if err != nil {
		return err
	}
	l.Note("n%d: %s", ev.Node, ev.Kind)
	// Producers and readers run a moment longer against what the zombie
	// left, so its damage shows as lost or divergent records too: with
	// the bug every broker has obeyed the zombie within tens of
	// milliseconds of the first, and a producer (one produce per 10 ms)
	// meets the new leaders within a few operations.
	if !ctxsleep.For(ctx, 300*time.Millisecond) {
		return ctx.Err()
	}
	return nil
}
