package nemesis

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkchaos/zkchaos/docker"
)

// fakeHost plays one container's process and the engine's view of it: the
// process with pid dies at its death (0: never); the engine keeps reporting
// it running until engineSeesExit, then reports the container stopped, or
// running newPid when newPid is set (another fault started it again).
type fakeHost struct {
	pid            int
	death          time.Duration
	dead           bool          // dead from the start
	engineSeesExit time.Duration // 0: the engine never notices
	newPid         int
	// failing is what iptables says in a live namespace (empty: it works).
	failing string

	start time.Time
	ran   []string // "pid: argv" of every command that ran (one at a time)
}

func (h *fakeHost) since() time.Duration { return time.Since(h.start) }

func (h *fakeHost) state(context.Context, *docker.Container) (docker.State, error) {
	if h.engineSeesExit > 0 && h.since() >= h.engineSeesExit {
		if h.newPid != 0 {
			return docker.State{Running: true, Pid: h.newPid}, nil
		}
		return docker.State{}, nil
	}
	return docker.State{Running: true, Pid: h.pid}, nil
}

func (h *fakeHost) nsenter(_ context.Context, pid int, argv []string) ([]byte, error) {
	alive := pid == h.newPid || (pid == h.pid && !h.dead && (h.death == 0 || h.since() < h.death))
	if !alive {
		return []byte(fmt.Sprintf("nsenter: cannot open /proc/%d/ns/net: No such file or directory", pid)), errors.New("exit status 1")
	}
	if h.failing != "" {
		return []byte(h.failing), errors.New("exit status 4")
	}
	h.ran = append(h.ran, fmt.Sprintf("%d: %s", pid, strings.Join(argv, " ")))
	return nil, nil
}

// A heal of network rules on a container whose process a fault held
// together with it killed has nothing to remove: the namespace went with
// the process, even while the engine still names the dead pid as running
// (a random run's isolate-node heal found a SIGKILLed broker so, and the
// run ended as a harness error). A container whose process runs and whose
// command fails still fails the heal.
func TestHealOfAnExitedContainersRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		host    fakeHost
		heal    func(ctx context.Context, n *Net, a, b *docker.Container) error
		wantErr string // "" for a heal that succeeds
		wantRan string // a command that must have run, "pid: argv"
	}{
		{
			name: "flush, process dead, engine reports the stop later",
			host: fakeHost{pid: 11331, dead: true, engineSeesExit: 600 * time.Millisecond},
			heal: func(ctx context.Context, n *Net, _, _ *docker.Container) error { return n.HealAll(ctx) },
		},
		{
			name: "flush, process dies during the heal, engine reports the stop later",
			host: fakeHost{pid: 11331, death: time.Nanosecond, engineSeesExit: 300 * time.Millisecond},
			heal: func(ctx context.Context, n *Net, _, _ *docker.Container) error {
				time.Sleep(time.Millisecond)
				return n.HealAll(ctx)
			},
		},
		{
			name:    "flush, process dead, engine reports it started again",
			host:    fakeHost{pid: 11331, dead: true, engineSeesExit: 400 * time.Millisecond, newPid: 12000},
			heal:    func(ctx context.Context, n *Net, _, _ *docker.Container) error { return n.HealAll(ctx) },
			wantRan: "12000: iptables -w 5 -F ZKCHAOS-IN",
		},
		{
			name: "undrop, process dead, engine reports the stop later",
			host: fakeHost{pid: 11331, dead: true, engineSeesExit: 600 * time.Millisecond},
			heal: func(ctx context.Context, n *Net, a, b *docker.Container) error { return n.Undrop(ctx, Link{a, b}) },
		},
		{
			name:    "flush, process runs, iptables fails",
			host:    fakeHost{pid: 11331, failing: "iptables: Resource temporarily unavailable."},
			heal:    func(ctx context.Context, n *Net, _, _ *docker.Container) error { return n.HealAll(ctx) },
			wantErr: "Resource temporarily unavailable",
		},
		{
			name:    "flush, pid without namespace the engine never lets go of",
			host:    fakeHost{pid: 11331, dead: true},
			heal:    func(ctx context.Context, n *Net, _, _ *docker.Container) error { return n.HealAll(ctx) },
			wantErr: "cannot open /proc/11331/ns/net",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := tc.host
				h.start = time.Now()
				oldState, oldRun := containerState, runInNetns
				containerState, runInNetns = h.state, h.nsenter
				defer func() { containerState, runInNetns = oldState, oldRun }()

				a := &docker.Container{Name: "n3", IP: netip.MustParseAddr("10.0.0.3")}
				b := &docker.Container{Name: "n1", IP: netip.MustParseAddr("10.0.0.1")}
				n := NewNet()
				// The cut is in force: a's namespace holds its rules.
				n.touched[a] = true
				n.drops[Link{a, b}] = true
				err := tc.heal(t.Context(), n, a, b)
				switch {
				case tc.wantErr == "" && err != nil:
					t.Fatalf("heal: %v", err)
				case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
					t.Fatalf("heal: %v, want an error with %q", err, tc.wantErr)
				}
				if tc.wantRan != "" && !strings.Contains(strings.Join(h.ran, "\n"), tc.wantRan) {
					t.Errorf("ran:\n%s\nwant %q among them", strings.Join(h.ran, "\n"), tc.wantRan)
				}
			})
		})
	}
}
