package docker

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// Network is a per-run user-defined bridge with its own /24, so every
// container gets a static address that survives restarts (go-zookeeper
// resolves names once, and peers cache addresses).
type Network struct {
	ID      string
	Name    string
	Subnet  netip.Prefix
	Gateway netip.Addr
}

// Host returns the i-th usable address of the subnet (i >= 2; .1 is the
// gateway, which is the host's side of the bridge).
func (n *Network) Host(i int) netip.Addr {
	a := n.Subnet.Addr().As4()
	a[3] = byte(i)
	return netip.AddrFrom4(a)
}

// subnetBase is the /16 runs carve their /24s from. It is private space that
// Docker's default pools (172.17+/16, 192.168/16) do not use.
const subnetBase = "10.213.0.0"

// CreateNetwork makes an internal network (no route out of the machine) for
// run runID. It picks a /24 from the run id and walks on when the engine
// reports an overlap with a network that already exists.
func (e *Engine) CreateNetwork(ctx context.Context, runID string) (*Network, error) {
	h := fnv.New32a()
	h.Write([]byte(runID))
	start := int(h.Sum32() % 250)
	base := netip.MustParseAddr(subnetBase).As4()
	name := "zkchaos-" + runID
	var lastErr error
	for i := 0; i < 250; i++ {
		a := base
		a[2] = byte((start+i)%250 + 1)
		subnet := netip.PrefixFrom(netip.AddrFrom4(a), 24)
		gw := a
		gw[3] = 1
		res, err := e.cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{
			Driver:   "bridge",
			Internal: true,
			IPAM: &network.IPAM{
				Driver: "default",
				Config: []network.IPAMConfig{{Subnet: subnet, Gateway: netip.AddrFrom4(gw)}},
			},
			Labels: RunLabels(runID, "network"),
		})
		if err == nil {
			return &Network{ID: res.ID, Name: name, Subnet: subnet, Gateway: netip.AddrFrom4(gw)}, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "overlap") {
			return nil, fmt.Errorf("create network %s (%s): %w", name, subnet, err)
		}
	}
	return nil, fmt.Errorf("create network %s: no free /24 in %s/16: %w", name, subnetBase, lastErr)
}

// RemoveNetwork deletes a network; one that is already gone is not an error.
// A network some container is still attached to (one the run's removal did
// not list, or whose endpoint the engine had not released yet under load:
// "has active endpoints") has those endpoints disconnected, forcibly, and
// is removed again: the network is the run's, and leaving it would leak it.
func (e *Engine) RemoveNetwork(ctx context.Context, id string) error {
	_, err := e.cli.NetworkRemove(ctx, id, client.NetworkRemoveOptions{})
	if err == nil || isNotFound(err) {
		return nil
	}
	if !strings.Contains(err.Error(), "active endpoints") {
		return fmt.Errorf("remove network %s: %w", id, err)
	}
	ins, ierr := e.cli.NetworkInspect(ctx, id, client.NetworkInspectOptions{})
	if ierr != nil {
		return fmt.Errorf("remove network %s: %w (and inspecting it: %w)", id, err, ierr)
	}
	for cid := range ins.Network.Containers {
		if _, derr := e.cli.NetworkDisconnect(ctx, id, client.NetworkDisconnectOptions{Container: cid, Force: true}); derr != nil && !isNotFound(derr) {
			return fmt.Errorf("remove network %s: %w (and disconnecting %s: %w)", id, err, cid, derr)
		}
	}
	if _, err := e.cli.NetworkRemove(ctx, id, client.NetworkRemoveOptions{}); err != nil && !isNotFound(err) {
		return fmt.Errorf("remove network %s after disconnecting its endpoints: %w", id, err)
	}
	return nil
}

func isNotFound(err error) bool {
	return errors.Is(err, ErrNotFound) || cerrdefs.IsNotFound(err)
}

// IsNotRunning reports whether err is the engine refusing to signal a
// container that has no running process (a broker the nemesis left down).
func IsNotRunning(err error) bool {
	return cerrdefs.IsConflict(err)
}
