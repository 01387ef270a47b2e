package nemesis

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zkchaos/zkchaos/docker"
)

// Chains this package owns inside each target's network namespace. They are
// hooked into INPUT/OUTPUT once and flushed on heal; nothing else is touched.
const (
	chainIn  = "ZKCHAOS-IN"
	chainOut = "ZKCHAOS-OUT"
)

// Link is a directed pair: traffic from From to To.
type Link struct {
	From, To *docker.Container
}

// SlowSpec shapes one direction of a link. The kernels seen here have no
// netem, so delay is made by queueing: a low-rate htb class for the one
// destination (a packet waits behind the ones before it) plus random loss
// with iptables' statistic match (TCP then waits for a retransmit).
type SlowSpec struct {
	RateKbit int     // bandwidth for this destination; 0 means unshaped
	Loss     float64 // probability in [0,1) that a packet is dropped
}

// Net applies and heals network faults. It remembers what it applied so a
// restarted container (new network namespace, rules gone) can get them back
// with Reapply, and so HealAll can undo everything.
type Net struct {
	mu    sync.Mutex
	drops map[Link]bool     // directed drops: packets From→To are lost
	slows map[Link]SlowSpec // directed slow links
	// touched are containers whose namespace holds our rules.
	touched map[*docker.Container]bool
}

// NewNet returns an empty fault set.
func NewNet() *Net {
	return &Net{drops: map[Link]bool{}, slows: map[Link]SlowSpec{}, touched: map[*docker.Container]bool{}}
}

// Partition cuts every link between a member of side a and a member of side
// b, in both directions.
func (n *Net) Partition(ctx context.Context, a, b []*docker.Container) error {
	var errs []error
	for _, x := range a {
		for _, y := range b {
			errs = append(errs, n.Drop(ctx, x, y), n.Drop(ctx, y, x))
		}
	}
	return errors.Join(errs...)
}

// Drop makes packets from `from` to `to` vanish (a one-way partition). The
// rule is installed on both ends, OUTPUT at the sender and INPUT at the
// receiver, so it holds even while one end restarts.
func (n *Net) Drop(ctx context.Context, from, to *docker.Container) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := Link{from, to}
	if n.drops[l] {
		return nil
	}
	if err := n.applyDrop(ctx, l); err != nil {
		return err
	}
	n.drops[l] = true
	return nil
}

func (n *Net) applyDrop(ctx context.Context, l Link) error {
	if err := n.iptables(ctx, l.From, "-A", chainOut, "-d", l.To.IP.String(), "-j", "DROP"); err != nil {
		return fmt.Errorf("drop %s→%s: %w", l.From.Name, l.To.Name, err)
	}
	if err := n.iptables(ctx, l.To, "-A", chainIn, "-s", l.From.IP.String(), "-j", "DROP"); err != nil {
		return fmt.Errorf("drop %s→%s: %w", l.From.Name, l.To.Name, err)
	}
	return nil
}

// Partitioned cuts a from b in both directions, as Partition does, and
// returns the links it cut itself: a link another fault had cut already
// stays that fault's, so healing these links (Undrop) leaves it in force.
func (n *Net) Partitioned(ctx context.Context, a, b []*docker.Container) ([]Link, error) {
	var (
		mine []Link
		errs []error
	)
	for _, x := range a {
		for _, y := range b {
			for _, l := range []Link{{x, y}, {y, x}} {
				n.mu.Lock()
				had := n.drops[l]
				n.mu.Unlock()
				if had {
					continue
				}
				err := n.Drop(ctx, l.From, l.To)
				if err == nil {
					mine = append(mine, l)
				}
				errs = append(errs, err)
			}
		}
	}
	return mine, errors.Join(errs...)
}

// Undrop heals the one-way drop of l and no other rule, so one fault can end
// its own cut while other faults' cuts hold. An end whose process has exited
// lost its rules with its namespace; a link already healed (HealAll) is left.
func (n *Net) Undrop(ctx context.Context, l Link) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.drops[l] {
		return nil
	}
	delete(n.drops, l)
	var errs []error
	del := func(c *docker.Container, args ...string) {
		if !n.touched[c] || gone(ctx, c) {
			return
		}
		if err := n.iptables(ctx, c, append([]string{"-D"}, args...)...); err != nil && !gone(ctx, c) {
			errs = append(errs, fmt.Errorf("heal %s→%s: %w", l.From.Name, l.To.Name, err))
		}
	}
	del(l.From, chainOut, "-d", l.To.IP.String(), "-j", "DROP")
	del(l.To, chainIn, "-s", l.From.IP.String(), "-j", "DROP")
	return errors.Join(errs...)
}

// Slow shapes traffic from `from` to `to`.
func (n *Net) Slow(ctx context.Context, from, to *docker.Container, s SlowSpec) error {
	if s.Loss < 0 || s.Loss >= 1 {
		return fmt.Errorf("slow %s→%s: loss %v outside [0,1)", from.Name, to.Name, s.Loss)
	}
	if s.RateKbit < 0 {
		return fmt.Errorf("slow %s→%s: negative rate", from.Name, to.Name)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	l := Link{from, to}
	if _, ok := n.slows[l]; ok {
		return fmt.Errorf("slow %s→%s: already slowed; heal first", from.Name, to.Name)
	}
	n.slows[l] = s
	if err := n.applySlows(ctx, from); err != nil {
		delete(n.slows, l)
		return err
	}
	return nil
}

// applySlows rebuilds the whole shaping tree of one sender: htb classes are
// numbered per destination, and rebuilding is simpler and safer than editing.
func (n *Net) applySlows(ctx context.Context, from *docker.Container) error {
	var links []Link
	for l := range n.slows {
		if l.From == from {
			links = append(links, l)
		}
	}
	sort.Slice(links, func(i, j int) bool { return links[i].To.IP.Less(links[j].To.IP) })
	n.tc(ctx, from, "qdisc", "del", "dev", "eth0", "root") // absent is fine
	if err := n.iptables(ctx, from, "-F", chainOut+"-LOSS"); err != nil {
		return err
	}
	if len(links) == 0 {
		return nil
	}
	cmds := [][]string{
		{"qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "1"},
		{"class", "add", "dev", "eth0", "parent", "1:", "classid", "1:1", "htb", "rate", "10gbit"},
	}
	for i, l := range links {
		s := n.slows[l]
		if s.RateKbit > 0 {
			cls := fmt.Sprintf("1:%d", 10+i)
			// A tiny burst keeps htb from letting a backlog through at line
			// rate; the pfifo leaf queues instead of dropping.
			cmds = append(cmds,
				[]string{"class", "add", "dev", "eth0", "parent", "1:", "classid", cls, "htb", "rate", fmt.Sprintf("%dkbit", s.RateKbit), "burst", "1600", "cburst", "1600"},
				[]string{"qdisc", "add", "dev", "eth0", "parent", cls, "pfifo", "limit", "10000"},
				[]string{"filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip", "dst", l.To.IP.String() + "/32", "flowid", cls},
			)
		}
	}
	for _, args := range cmds {
		if err := n.tc(ctx, from, args...); err != nil {
			return fmt.Errorf("slow link from %s: %w", from.Name, err)
		}
	}
	for _, l := range links {
		if s := n.slows[l]; s.Loss > 0 {
			if err := n.iptables(ctx, from, "-A", chainOut+"-LOSS", "-d", l.To.IP.String(), "-m", "statistic", "--mode", "random", "--probability", strconv.FormatFloat(s.Loss, 'f', 4, 64), "-j", "DROP"); err != nil {
				return fmt.Errorf("slow link %s→%s: %w", from.Name, l.To.Name, err)
			}
		}
	}
	return nil
}

// unshape lets what c's slowed classes queued go at line rate before the
// shaping tree is deleted: deleting it drops the queued packets, and TCP
// resends them only after its retransmission timeout, which a slow link has
// stretched to seconds, so a slowed ZooKeeper follower would stay behind
// for that long after the heal.
func (n *Net) unshape(ctx context.Context, c *docker.Container) {
	var links []Link
	for l, s := range n.slows {
		if l.From == c && s.RateKbit > 0 {
			links = append(links, l)
		}
	}
	if len(links) == 0 {
		return
	}
	var all []Link
	for l := range n.slows {
		if l.From == c {
			all = append(all, l)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].To.IP.Less(all[j].To.IP) })
	for i, l := range all {
		if n.slows[l].RateKbit > 0 {
			n.tc(ctx, c, "class", "change", "dev", "eth0", "parent", "1:", "classid", fmt.Sprintf("1:%d", 10+i), "htb", "rate", "10gbit")
		}
	}
	time.Sleep(50 * time.Millisecond)
}

// HealAll removes every fault this Net applied. It tries every container
// even when one fails (a container may be gone) and reports all failures.
func (n *Net) HealAll(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for c := range n.touched {
		st, err := containerState(ctx, c)
		if err != nil || !st.Running {
			continue // a stopped container's namespace is gone, and its rules with it
		}
		exited := false
		for _, ch := range []string{chainIn, chainOut, chainOut + "-LOSS"} {
			err := n.iptables(ctx, c, "-F", ch)
			if errors.Is(err, errNotRunning) {
				// Killed by another fault while this heal ran: its
				// namespace went with its process, and a later start
				// gets a fresh one without our rules.
				exited = true
				break
			}
			// A chain that does not exist is in a namespace created since
			// (the container restarted while another fault held it, in a
			// dense schedule): nothing of ours is left there to remove.
			if err != nil && !strings.Contains(err.Error(), "No chain/target/match") && !gone(ctx, c) {
				errs = append(errs, err)
			}
		}
		if exited {
			continue
		}
		n.unshape(ctx, c)
		n.tc(ctx, c, "qdisc", "del", "dev", "eth0", "root")
	}
	n.drops = map[Link]bool{}
	n.slows = map[Link]SlowSpec{}
	n.touched = map[*docker.Container]bool{}
	return errors.Join(errs...)
}

// Reapply puts back every rule that involves c, after c restarted in a fresh
// network namespace, so a partition holds across a node's restart as it
// would for a real machine.
func (n *Net) Reapply(ctx context.Context, c *docker.Container) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	// Faults held together restart and kill the same container around
	// each other: it may be gone before the rules go in (whatever starts it
	// next re-applies them), or gone and started again by another fault
	// while they went in, in a fresh namespace that needs them again.
	var err error
	for range 3 {
		delete(n.touched, c) // chains must be created again
		if gone(ctx, c) {
			return nil
		}
		if err = n.reapplyOnce(ctx, c); err == nil || gone(ctx, c) {
			return nil
		}
	}
	return err
}

func (n *Net) reapplyOnce(ctx context.Context, c *docker.Container) error {
	var errs []error
	for l := range n.drops {
		if l.From == c {
			errs = append(errs, n.iptables(ctx, c, "-A", chainOut, "-d", l.To.IP.String(), "-j", "DROP"))
		}
		if l.To == c {
			errs = append(errs, n.iptables(ctx, c, "-A", chainIn, "-s", l.From.IP.String(), "-j", "DROP"))
		}
	}
	errs = append(errs, n.applySlows(ctx, c))
	return errors.Join(errs...)
}

// gone reports whether c's process has exited (and its network namespace,
// rules included, with it): a fault held together with another one can see
// its target killed between looking at it and acting on it.
func gone(ctx context.Context, c *docker.Container) bool {
	st, err := containerState(ctx, c)
	return err == nil && (!st.Running || st.Pid == 0)
}

// Active describes the faults in force, for history events and reports.
func (n *Net) Active() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for l := range n.drops {
		out = append(out, fmt.Sprintf("drop %s→%s", l.From.Name, l.To.Name))
	}
	for l, s := range n.slows {
		out = append(out, fmt.Sprintf("slow %s→%s rate=%dkbit loss=%.2f", l.From.Name, l.To.Name, s.RateKbit, s.Loss))
	}
	sort.Strings(out)
	return out
}

// iptables runs iptables in c's namespace.
func (n *Net) iptables(ctx context.Context, c *docker.Container, args ...string) error {
	return n.exec(ctx, c, append([]string{"iptables", "-w", "5"}, args...))
}

// tc runs tc in c's namespace.
func (n *Net) tc(ctx context.Context, c *docker.Container, args ...string) error {
	return n.exec(ctx, c, append([]string{"tc"}, args...))
}

// exec runs argv in c's namespace, creating and hooking our chains the
// first time c is touched (for tc too, so HealAll finds c and can flush both
// kinds).
func (n *Net) exec(ctx context.Context, c *docker.Container, argv []string) error {
	if !n.touched[c] {
		if err := n.setup(ctx, c); err != nil {
			return err
		}
		n.touched[c] = true
	}
	return nsexec(ctx, c, argv...)
}

func (n *Net) setup(ctx context.Context, c *docker.Container) error {
	for _, ch := range []string{chainIn, chainOut, chainOut + "-LOSS"} {
		// -N fails when the chain exists (Reapply after a failed heal); -F
		// then leaves it empty either way.
		nsexec(ctx, c, "iptables", "-w", "5", "-N", ch)
		if err := nsexec(ctx, c, "iptables", "-w", "5", "-F", ch); err != nil {
			return err
		}
	}
	hooks := [][]string{{"INPUT", chainIn}, {"OUTPUT", chainOut}, {"OUTPUT", chainOut + "-LOSS"}}
	for _, h := range hooks {
		if nsexec(ctx, c, "iptables", "-w", "5", "-C", h[0], "-j", h[1]) == nil {
			continue
		}
		if err := nsexec(ctx, c, "iptables", "-w", "5", "-I", h[0], "-j", h[1]); err != nil {
			return err
		}
	}
	return nil
}

// nsexec runs a host binary inside c's network namespace. It works while c is
// SIGSTOPped, because it needs only c's pid, not c's cooperation. When c's
// process has exited it fails with errNotRunning.
func nsexec(ctx context.Context, c *docker.Container, argv ...string) error {
	var err error
	// A process that exits between reading its pid and entering its
	// namespace leaves nsenter nothing to open; when the container was
	// started again meanwhile (another fault's bounce, in a dense schedule)
	// the command belongs in the new process's namespace, so it is run
	// again there.
	for range 3 {
		var pid int
		if pid, err = nsPid(ctx, c); err != nil {
			return err
		}
		var out []byte
		if out, err = runInNetns(ctx, pid, argv); err == nil {
			return nil
		}
		err = fmt.Errorf("in netns of %s: %s: %w: %s", c.Name, strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
		if !strings.Contains(string(out), "cannot open /proc/") {
			return err
		}
		// The pid has no namespace left: its process has exited. The
		// engine reports the exit only once the runtime has reaped it
		// (seed 10 of a random run: a heal's flush found a SIGKILLed
		// broker's namespace gone while the engine still named its pid
		// as running), so the engine is asked again until it says the
		// container stopped or runs a new process.
		now, perr := settledPid(ctx, c, pid)
		if perr != nil {
			return perr
		}
		if now == pid {
			return err // the engine never let go of a pid without a namespace
		}
	}
	return err
}

// errNotRunning says a container has no process, and so no network
// namespace: rules that were there went with it.
var errNotRunning = errors.New("not running; its network namespace is gone")

// exitSettle bounds how long nsexec waits for the engine to report the exit
// of a process whose namespace is gone. A SIGKILLed broker's kill waited
// over half a second for it in seed 10 of a random run.
const exitSettle = 5 * time.Second

// settledPid asks the engine for c's pid until it is no longer pid, for at
// most exitSettle; it returns pid when the engine still names it then.
func settledPid(ctx context.Context, c *docker.Container, pid int) (int, error) {
	deadline := time.Now().Add(exitSettle)
	for {
		now, err := nsPid(ctx, c)
		if err != nil || now != pid || !time.Now().Before(deadline) {
			return now, err
		}
		select {
		case <-ctx.Done():
			return pid, nil
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// nsPid returns the pid of c's process, whose network namespace is c's.
func nsPid(ctx context.Context, c *docker.Container) (int, error) {
	st, err := containerState(ctx, c)
	if err != nil {
		return 0, err
	}
	if !st.Running || st.Pid == 0 {
		return 0, fmt.Errorf("%s is %w", c.Name, errNotRunning)
	}
	return st.Pid, nil
}

// containerState and runInNetns are the engine's inspect and nsenter; the
// package's tests replace them to play a process that exits under a heal.
var (
	containerState = func(ctx context.Context, c *docker.Container) (docker.State, error) { return c.State(ctx) }
	runInNetns     = nsenter
)

func nsenter(ctx context.Context, pid int, argv []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	full := append([]string{"-t", strconv.Itoa(pid), "-n", "--"}, argv...)
	return exec.CommandContext(ctx, "nsenter", full...).CombinedOutput()
}
