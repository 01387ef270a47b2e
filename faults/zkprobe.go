package faults

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/fourletter"
	"github.com/zkchaos/zkchaos/nemesis"
)

// zkfOps is what the fault does to processes and links, and how it learns
// which server serves whom: the Nemesis, or a fake in tests.
type zkfOps interface {
	procs
	slow(ctx context.Context, from, to Target, s nemesis.SlowSpec) error
	partition(ctx context.Context, name string, a, b []Target) error
	healNet(ctx context.Context) error
	// sessions maps a broker's name to the name of the ZooKeeper server
	// its session is connected to now; brokers not found are absent.
	sessions(ctx context.Context, nodes, zks []Target) map[string]string
	// stateAt reads a partition's state through ZooKeeper server zk
	// alone, without Sync, with the zxid of its last change.
	stateAt(ctx context.Context, zk Target, topic string, partition int32) (PartitionState, error)
	// appliedZxid is the last zxid ZooKeeper server zk has applied (`srvr`).
	appliedZxid(ctx context.Context, zk Target) (int64, error)
	// electPreferred asks the controller, as an operator would, to move
	// the leadership of partitions to their preferred replicas, and
	// returns once it took the request.
	// ctl is the controller that leads them, named in the history.
	electPreferred(ctx context.Context, ctl Target, topic string, partitions []int32) error
}

// zkfNemesis is zkfOps on a run's Nemesis and Env: links through the
// Nemesis, sessions and applied zxids through the four-letter words, reads
// through one server and preferred elections through the Env, when it
// offers them.
type zkfNemesis struct {
	nemesisProcs
	env Env
}

func (o zkfNemesis) slow(ctx context.Context, from, to Target, s nemesis.SlowSpec) error {
	return o.n.SlowLink(ctx, from, to, s)
}
func (o zkfNemesis) sessions(ctx context.Context, nodes, zks []Target) map[string]string {
	return consSessions(ctx, nodes, zks)
}
func (o zkfNemesis) stateAt(ctx context.Context, zk Target, topic string, partition int32) (PartitionState, error) {
	if o.env.StateVia == nil {
		return PartitionState{}, errors.New("the run cannot read through one ZooKeeper server")
	}
	var id int
	if _, err := fmt.Sscanf(zk.Name, "zk%d", &id); err != nil {
		return PartitionState{}, fmt.Errorf("ZooKeeper server %q: %w", zk.Name, err)
	}
	return o.env.StateVia.PartitionStateVia(ctx, id, topic, partition)
}

// electPreferred is recorded as a fault of its own: it changes roles.
func (o zkfNemesis) electPreferred(ctx context.Context, ctl Target, topic string, partitions []int32) error {
	if o.env.Elector == nil {
		return errors.New("the run cannot ask for a preferred replica election")
	}
	parts := make([]string, len(partitions))
	for i, q := range partitions {
		parts[i] = fmt.Sprintf("%s-%d", topic, q)
	}
	detail := fmt.Sprintf("%s led by the controller %s: moved to their preferred replicas, so a survivor shrinks %s out of an ISR once it is cut off",
		strings.Join(parts, ", "), ctl.Name, ctl.Name)
	targets := []string{ctl.Name}
	id := o.n.Rec.Start(preferredElection, targets, detail)
	err := o.env.Elector.ElectPreferred(ctx, topic, partitions)
	o.n.Rec.Stop(id, preferredElection, targets, err)
	return err
}

func (o zkfNemesis) appliedZxid(ctx context.Context, zk Target) (int64, error) {
	if zk.Container == nil {
		return 0, fmt.Errorf("%s has no container", zk.Name)
	}
	st, err := fourletter.Srvr(ctx, netip.AddrPortFrom(zk.Container.IP, zkClientPort).String(), time.Second)
	if err != nil {
		return 0, err
	}
	return st.Zxid, nil
}

// consSessions asks every ZooKeeper server for its client connections
// (`cons`) and maps each broker to the server it is connected to. A server
// that does not answer (paused, cut off) serves nobody it can name. A
// broker seen on two servers has moved: the server that still lists its
// old connection (cut off, it never learnt the client left) established it
// earlier, so the latest established one wins; with no times to tell, the
// broker is left out.
func consSessions(ctx context.Context, nodes, zks []Target) map[string]string {
	byIP := map[netip.Addr]string{}
	for _, t := range nodes {
		if t.Container != nil {
			byIP[t.Container.IP] = t.Name
		}
	}
	var outs []serverCons
	for _, z := range zks {
		if z.Container == nil {
			continue
		}
		out, err := fourletter.Ask(ctx, netip.AddrPortFrom(z.Container.IP, zkClientPort).String(), "cons", time.Second)
		if err == nil {
			outs = append(outs, serverCons{z.Name, out})
		}
	}
	return servedBy(byIP, outs)
}

// serverCons is one server's `cons` reply.
type serverCons struct{ server, out string }

// servedBy maps each broker (by address) to the server of its latest
// established connection.
func servedBy(byIP map[netip.Addr]string, outs []serverCons) map[string]string {
	type seen struct {
		server string
		est    int64
		tie    bool // another server's connection has the same est
	}
	latest := map[string]*seen{}
	for _, o := range outs {
		for _, c := range fourletter.ParseCons(o.out) {
			n, ok := byIP[c.Addr.Addr()]
			if !ok {
				continue
			}
			switch s := latest[n]; {
			case s == nil:
				latest[n] = &seen{server: o.server, est: c.Established}
			case s.server == o.server:
				s.est = max(s.est, c.Established)
			case c.Established > s.est:
				*s = seen{server: o.server, est: c.Established}
			case c.Established == s.est:
				s.tie = true
			}
		}
	}
	served := map[string]string{}
	for n, s := range latest {
		if !s.tie {
			served[n] = s.server
		}
	}
	return served
}
