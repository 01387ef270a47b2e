package scenarios

import (
	"context"
	"fmt"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/ctxsleep"
	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/rundir"
)

// kafka532 is KAFKA-532: a controller paused past its ZooKeeper session
// with a control request already built comes back as a zombie. A new
// controller has been elected at a higher epoch meanwhile and has reached
// every broker; the zombie's request carries its old epoch. Before the fix,
// brokers did not check the controller epoch (and the zombie's ZooKeeper
// writes were unconditional), so a broker obeyed the zombie after its
// successor. With the fix the broker refuses it (STALE_CONTROLLER_EPOCH):
// the scenario stops the zombie with the request in hand, in its send
// thread, because a zombie that resumes before building one resigns at its
// first fenced ZooKeeper write and never tests the brokers' check.
func kafka532() Scenario {
	return oneSwitch(Scenario{
		Bug:     "KAFKA-532",
		Summary: "a paused controller resumes as a zombie; brokers obey its stale controller epoch",
		Fix:     "brokers reject requests from an older controller epoch; controller writes are conditional on /controller_epoch",
		Catches: checkers.ControllerFencing{},
		Check:   checkers.DefaultConfig(),
	}, harness.RunConfig{
		RunSpec: rundir.RunSpec{
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
		},
		Driver: kafka532Driver{},
	})
}

const (
	failpointBeforeSend   = history.FailpointControllerBeforeSend
	failpointBrokerChange = history.FailpointControllerBeforeBrokerChange
)

type kafka532Driver struct{}

// Drive: arm the controller to stop in its send thread with a request in
// hand, stop a broker cleanly so that the controller sends the remaining one
// LeaderAndIsr, freeze the controller there (SIGSTOP, as a GC pause) and
// bring the stopped broker back while another broker is elected controller,
// wait until the new controller has reached the broker the zombie holds a
// request for, then let the zombie go on.
func (kafka532Driver) Drive(ctx context.Context, l *harness.Live) error {
	start, c, err := begin(ctx, l, "KAFKA-532")
	if err != nil {
		return err
	}
	l.Note("controller is n%d; arming %s on it", c, failpointBeforeSend)
	if err := l.ArmFailpoint(ctx, c, failpointBeforeSend, "1*sigstop"); err != nil {
		return err
	}
	victim := c%3 + 1
	// The one broker left running besides the controller: the controller's
	// requests about the stopped broker go to it (and to its own broker,
	// which never stops at the failpoint).
	receiver := 6 - c - victim
	ts, err := l.Nodes(victim, c)
	if err != nil {
		return err
	}
	vt, ct := ts[0], ts[1]
	l.Note("stopping n%d (SIGTERM, controlled shutdown off) so the controller sends n%d its decisions", victim, receiver)
	restartV, err := stopCleanly(ctx, l, "KAFKA-532", vt)
	if err != nil {
		return err
	}
	hit, err := l.WaitEvent(ctx, start, 30*time.Second, "the controller at its failpoint", func(e *history.Event) bool {
		return e.Kind == history.KindFaultStart && e.Fault != nil && e.Fault.Failpoint == failpointBeforeSend && int(e.Node) == c
	})
	if err != nil {
		return err
	}
	l.Note("n%d stopped at its failpoint with a request in hand; freezing it with SIGSTOP", c)
	if err := l.Nemesis.PauseTarget(ctx, ct); err != nil {
		return err
	}
	// The failpoint fires once, on the first request for another broker
	// since it was armed, after that request was logged as sent: the
	// controller's first such control_sent is the request in hand.
	held, err := l.WaitEvent(ctx, start, 5*time.Second, "the request in hand", func(e *history.Event) bool {
		return e.Kind == history.KindControlSent && int(e.Node) == c && int(e.Control.TargetBroker) != c && e.Time <= hit.Time
	})
	if err != nil {
		return err
	}
	if int(held.Control.TargetBroker) != receiver {
		return fmt.Errorf("KAFKA-532: n%d stopped with a %s for n%d in hand, not for n%d", c, held.Control.API, held.Control.TargetBroker, receiver)
	}
	l.Note("restarting n%d so the next controller finds it", victim)
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
	if _, err := l.WaitEvent(ctx, start, 30*time.Second, "the new controller's request at the receiver", func(e *history.Event) bool {
		return e.Kind == history.KindControlRequest && e.Control != nil && int(e.Node) == receiver &&
			e.Control.ControllerEpoch == elected.Controller.Epoch
	}); err != nil {
		return err
	}
	stale := held.Control.ControllerEpoch
	l.Note("resuming the zombie n%d: its %s for n%d carries controller epoch %d, n%d knows epoch %d",
		c, held.Control.API, receiver, stale, receiver, elected.Controller.Epoch)
	// The zombie resumes cut off from ZooKeeper for a moment: its send
	// thread delivers the request in hand at once, while its event thread
	// cannot learn yet that its session expired. Resumed with ZooKeeper in
	// reach, the resignation that news brings stops the send thread first
	// in about one run of ten (repro-bench KAFKA-532 --fixed at f0a7edc:
	// 9 of 10, the tenth waited 20 s for a request that never came), as
	// Kafka 2.6.3's RequestSendThread.initiateShutdown closes its network
	// client under a send that has not gone out yet.
	if err := l.Nemesis.PartitionTargets(ctx, "partition", []nemesis.Target{ct}, l.World.ZKServers()); err != nil {
		return err
	}
	// Taken before the resume: the zombie acts within milliseconds of
	// SIGCONT, before ResumeTarget has returned.
	since := time.Now().UnixNano()
	if err := l.Nemesis.ResumeTarget(ctx, ct); err != nil {
		return err
	}
	// The send thread goes on from its failpoint and delivers the request;
	// the receiver refuses it with the fix and obeys it with the bug. Its
	// receipt ends the window either way.
	ev, err := l.WaitEvent(ctx, since, 20*time.Second, "the receiver judging the zombie's request", func(e *history.Event) bool {
		return e.Kind == history.KindControlRequest && e.Control != nil && int(e.Node) == receiver &&
			int(e.Control.ControllerID) == c && e.Control.ControllerEpoch == stale
	})
	if err != nil {
		return err
	}
	l.Note("n%d %s the zombie's %s (controller epoch %d)", ev.Node, ev.Control.Verdict, ev.Control.API, stale)
	healed := time.Now().UnixNano()
	if err := l.Nemesis.HealNet(ctx); err != nil {
		return err
	}
	// Back in reach of ZooKeeper, the zombie learns its session expired,
	// resigns and registers again; the run ends once it has, so the
	// cluster it leaves is whole (recovery).
	if _, err := l.WaitEvent(ctx, healed, 20*time.Second, "the zombie registering again", func(e *history.Event) bool {
		return e.Kind == history.KindBrokerRegistered && int(e.Node) == c
	}); err != nil {
		return err
	}
	// Producers and readers run a moment longer against what the zombie
	// left, so any damage shows as lost or divergent records too.
	if !ctxsleep.For(ctx, 300*time.Millisecond) {
		return ctx.Err()
	}
	return nil
}
