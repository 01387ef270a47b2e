package faults

import (
	"context"
	"fmt"

	"github.com/zkchaos/zkchaos/nemesis"
)

// procs is what the composite faults do to processes: the Nemesis's
// primitives (nemesisProcs), or a fake in tests.
type procs interface {
	bounce(ctx context.Context, t Target) error
	kill(ctx context.Context, t Target) error
	start(ctx context.Context, t Target) error
	terminate(ctx context.Context, t Target) error // SIGTERM; the node runs its controlled shutdown
	waitExited(ctx context.Context, t Target) error
	pause(ctx context.Context, t Target) error
	resume(ctx context.Context, t Target) error
	// cutOff cuts a from b until the returned heal, which ends this cut
	// alone (other faults' cuts hold).
	cutOff(ctx context.Context, name string, a, b []Target) (nemesis.Heal, error)
	// down reports whether t's process is not running (another fault
	// killed it); an error asking counts as up.
	down(ctx context.Context, t Target) bool
	// held reports whether another fault holds t (paused, killed, armed);
	// claim marks t held by this one until the returned release.
	held(t Target) bool
	claim(t Target) (release func())
}

// nemesisProcs is procs on a run's Nemesis: every pause, kill and restart
// is recorded and healed with the run's others.
type nemesisProcs struct{ n *nemesis.Nemesis }

func (p nemesisProcs) bounce(ctx context.Context, t Target) error {
	_, err := p.n.BounceTarget(ctx, t)
	return err
}
func (p nemesisProcs) kill(ctx context.Context, t Target) error  { return p.n.KillTarget(ctx, t) }
func (p nemesisProcs) start(ctx context.Context, t Target) error { return p.n.StartTarget(ctx, t) }
func (p nemesisProcs) pause(ctx context.Context, t Target) error { return p.n.PauseTarget(ctx, t) }
func (p nemesisProcs) resume(ctx context.Context, t Target) error {
	return p.n.ResumeTarget(ctx, t)
}
func (p nemesisProcs) terminate(ctx context.Context, t Target) error {
	return t.Container.Signal(ctx, "SIGTERM")
}
func (p nemesisProcs) waitExited(ctx context.Context, t Target) error {
	return t.Container.WaitExited(ctx)
}
func (p nemesisProcs) down(ctx context.Context, t Target) bool {
	st, err := t.Container.State(ctx)
	return err == nil && !st.Running
}
func (p nemesisProcs) partition(ctx context.Context, name string, a, b []Target) error {
	return p.n.PartitionTargets(ctx, name, a, b)
}
func (p nemesisProcs) healNet(ctx context.Context) error { return p.n.HealNet(ctx) }
func (p nemesisProcs) cutOff(ctx context.Context, name string, a, b []Target) (nemesis.Heal, error) {
	return p.n.CutTargets(ctx, name, a, b)
}
func (p nemesisProcs) holdPartition(topic string, q int32) (release func()) {
	return p.n.HoldPartition(topic, q)
}
func (p nemesisProcs) netOutcome(name, outcome string) { p.n.NetOutcome(name, outcome) }
func (p nemesisProcs) held(t Target) bool              { return p.n.Holds(t) }
func (p nemesisProcs) claim(t Target) (release func()) { return p.n.Claim(t) }

// free returns the brokers of ts no other fault holds, or ts when every one
// is held.
func free(pr procs, ts []Target) []Target {
	var out []Target
	for _, t := range ts {
		if !pr.held(t) {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return ts
	}
	return out
}

// nodeID is a broker's id from its target name ("n2" → 2).
func nodeID(t Target) int {
	var id int
	fmt.Sscanf(t.Name, "n%d", &id)
	return id
}
