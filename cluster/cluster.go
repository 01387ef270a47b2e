// Package cluster owns the topology of one run: a real ZooKeeper ensemble and
// the node-program containers, their static addresses, and the run-directory
// folders their data and logs live in (bind mounts, so they outlive the
// containers and can be read after a crash).
//
// It starts, finds and removes things; it does not break them (nemesis/) and
// it does not look inside the node program (only its flags, its address and
// the files it writes).
package cluster

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/zkchaos/zkchaos/fourletter"
	"io"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/reaper"
)

// ZKOptions configures the ensemble. Scenarios need sub-second sessions, so
// tick time and session bounds are explicit rather than ZooKeeper's defaults.
type ZKOptions struct {
	Servers           int           // 1, 3 or 5
	TickTime          time.Duration // default 200ms
	InitLimit         int           // ticks; default 20
	SyncLimit         int           // ticks; default 10
	MinSessionTimeout time.Duration // default 2 ticks
	MaxSessionTimeout time.Duration // default 30s
	HeapMB            int           // JVM heap per server; default 128
}

// MinTickTime is the shortest ZooKeeper tick an ensemble accepts.
const MinTickTime = 10 * time.Millisecond

// ValidServers reports whether an ensemble of n servers can be started:
// 1, 3 or 5 (an even ensemble tolerates no more failures than one fewer).
func ValidServers(n int) bool { return n == 1 || n == 3 || n == 5 }

func (o *ZKOptions) defaults() error {
	if o.Servers == 0 {
		o.Servers = 3
	}
	if !ValidServers(o.Servers) {
		return fmt.Errorf("zookeeper servers: %d (want 1, 3 or 5)", o.Servers)
	}
	if o.TickTime == 0 {
		o.TickTime = 200 * time.Millisecond
	}
	if o.TickTime < MinTickTime {
		return fmt.Errorf("zookeeper tick time %s is below %s", o.TickTime, MinTickTime)
	}
	if o.InitLimit == 0 {
		o.InitLimit = 20
	}
	if o.SyncLimit == 0 {
		o.SyncLimit = 10
	}
	if o.MinSessionTimeout == 0 {
		o.MinSessionTimeout = 2 * o.TickTime
	}
	if o.MaxSessionTimeout == 0 {
		o.MaxSessionTimeout = 30 * time.Second
	}
	if o.MaxSessionTimeout < o.MinSessionTimeout {
		return fmt.Errorf("zookeeper max session timeout %s below min %s", o.MaxSessionTimeout, o.MinSessionTimeout)
	}
	if o.HeapMB == 0 {
		o.HeapMB = 128
	}
	return nil
}

// Options configures Start.
type Options struct {
	RunID    string // labels every object; generated when empty
	RunDir   string // host directory for data and logs; required
	ZK       ZKOptions
	Image    docker.BaseImage // zero value: docker.DefaultBaseImage()
	Progress io.Writer        // one line per step; nil for silence
	// NoWait makes Start return once the ensemble's containers run,
	// before it has a leader; the caller then calls WaitEnsemble.
	NoWait bool
	// Beside, when set, runs once the run's network exists, side by side
	// with the start of the ZooKeeper containers: what retries ZooKeeper
	// anyway (the brokers) starts without waiting for the ensemble, and
	// the engine works on all the containers at once. Start returns once
	// both are done and fails when either does.
	Beside func(ctx context.Context, c *Cluster) error
}

// ZKServer is one ZooKeeper server of the ensemble.
type ZKServer struct {
	ID        int // myid, 1-based
	IP        netip.Addr
	Container *docker.Container
	Dir       string // host dir mounted at /zk: zoo.cfg, data/, log/
}

// ClientAddr is the server's client port, reachable from the host.
func (s *ZKServer) ClientAddr() string { return s.IP.String() + ":2181" }

// Cluster is one run's ensemble and nodes.
type Cluster struct {
	RunID   string
	RunDir  string
	Image   string
	Network *docker.Network
	opts    Options

	eng  *docker.Engine
	zk   []*ZKServer
	mu   sync.Mutex
	node map[int]*Node
	// zkStart is when the ensemble's containers were asked for, zkRunning
	// how long they took to run: WaitEnsemble reports both.
	zkStart   time.Time
	zkRunning time.Duration
	// reaper removes the run if this process dies holding reaperHold
	// (reaper.go); both nil when it could not be started.
	reaper     *docker.Container
	reaperHold *reaper.Hold
}

// NewRunID returns a sortable, unique run id.
func NewRunID() string {
	var b [3]byte
	rand.Read(b[:])
	return time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// Start builds (or reuses) the base image, creates the run's network and
// starts the ZooKeeper ensemble, returning once every server answers `srvr`
// and exactly one is leader (with NoWait, once its containers run). On error
// everything it created is removed.
func Start(ctx context.Context, eng *docker.Engine, o Options) (_ *Cluster, err error) {
	if o.RunDir == "" {
		return nil, errors.New("cluster: RunDir is required")
	}
	if err := o.ZK.defaults(); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if o.RunID == "" {
		o.RunID = NewRunID()
	}
	if o.Image.Suite == "" {
		o.Image = docker.DefaultBaseImage()
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if err := os.MkdirAll(o.RunDir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: create run dir: %w", err)
	}
	type built struct {
		path string
		err  error
	}
	reaperBin := make(chan built, 1)
	go func() {
		path, err := buildReaper(ctx)
		reaperBin <- built{path, err}
	}()
	rep, err := eng.EnsureImage(ctx, o.Image, o.Progress)
	if err != nil {
		<-reaperBin
		return nil, fmt.Errorf("cluster: base image: %w", err)
	}
	c := &Cluster{RunID: o.RunID, RunDir: o.RunDir, Image: rep.Ref, opts: o, eng: eng, node: map[int]*Node{}}
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			c.Close(cctx)
		}
	}()
	// Without a reaper Close still removes the run; only a kill -9 leaves
	// it to `chaos clean`. That is said, not fatal.
	reaperStart := time.Now()
	bin := <-reaperBin
	rerr := bin.err
	if rerr == nil {
		rerr = c.startReaper(ctx, bin.path)
	}
	if rerr != nil {
		fmt.Fprintf(o.Progress, "no reaper for run %s (after a kill -9 of this process, `chaos clean` removes the run): %v\n", o.RunID, rerr)
	} else {
		fmt.Fprintf(o.Progress, "reaper watching run %s in %s\n", o.RunID, time.Since(reaperStart).Round(time.Millisecond))
	}
	c.Network, err = eng.CreateNetwork(ctx, o.RunID)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	// The servers' addresses are known before Beside runs: the brokers'
	// flags name them.
	if err := c.prepareZK(); err != nil {
		return nil, err
	}
	beside := make(chan error, 1)
	beside <- nil
	if o.Beside != nil {
		<-beside
		go func() { beside <- o.Beside(ctx, c) }()
	}
	zerr := c.startZK(ctx)
	if err := errors.Join(zerr, <-beside); err != nil {
		return nil, err
	}
	if o.NoWait {
		return c, nil
	}
	if err := c.WaitEnsemble(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// WaitEnsemble waits (up to a minute) until every ZooKeeper server serves
// and one leads, and says on Progress how long the ensemble took from the
// request for its containers.
func (c *Cluster) WaitEnsemble(ctx context.Context) error {
	if _, err := c.WaitZKReady(ctx, 60*time.Second); err != nil {
		return err
	}
	fmt.Fprintf(c.opts.Progress, "zookeeper ensemble of %d ready in %s (containers running after %s)\n",
		len(c.zk), time.Since(c.zkStart).Round(time.Millisecond), c.zkRunning.Round(time.Millisecond))
	return nil
}

// zkIP is where server id (1-based) lives: .11, .12, ...
func (c *Cluster) zkIP(id int) netip.Addr { return c.Network.Host(10 + id) }

// prepareZK writes every server's directory, configuration and id, and
// fills c.zk, so that addresses are known before any container starts.
func (c *Cluster) prepareZK() error {
	o := c.opts.ZK
	ips := make([]string, o.Servers)
	for i := range ips {
		ips[i] = c.zkIP(i + 1).String()
	}
	cfg := zooCfg(o, ips)
	c.zk = make([]*ZKServer, o.Servers)
	for i := 0; i < o.Servers; i++ {
		id := i + 1
		dir := filepath.Join(c.RunDir, "zk", fmt.Sprintf("zk%d", id))
		for _, sub := range []string{"data", "log"} {
			if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
				return fmt.Errorf("cluster: %w", err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
			return fmt.Errorf("cluster: write zoo.cfg: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "data", "myid"), []byte(strconv.Itoa(id)+"\n"), 0o644); err != nil {
			return fmt.Errorf("cluster: write myid: %w", err)
		}
		c.zk[i] = &ZKServer{ID: id, IP: c.zkIP(id), Dir: dir}
	}
	return nil
}

// startZK starts the prepared servers' containers. They start in parallel:
// each JVM takes a couple of seconds and a quorum needs them all up anyway.
func (c *Cluster) startZK(ctx context.Context) error {
	c.zkStart = time.Now()
	errs := make([]error, len(c.zk))
	var wg sync.WaitGroup
	for i, s := range c.zk {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Container, errs[i] = c.eng.StartContainer(ctx, docker.ContainerSpec{
				RunID: c.RunID, Role: "zookeeper", Name: c.containerName(fmt.Sprintf("zk%d", s.ID)),
				Image: c.Image, Network: c.Network, IP: s.IP,
				Cmd:   zkCommand(c.opts.ZK),
				Binds: []string{s.Dir + ":/zk"},
			})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster: start zookeeper: %w", err)
	}
	c.zkRunning = time.Since(c.zkStart)
	return nil
}

// zkCommand runs the JVM as PID 1 (exec, no shell), so SIGSTOP sent to the
// container freezes ZooKeeper itself. The classpath names exactly one slf4j
// binding (log4j 1.2, which Debian's log4j.properties configures): without
// one ZooKeeper logs nothing at all, and with every jar under /usr/share/java
// slf4j finds several bindings. Logs go to the console (container logs) and
// to /zk/log/zookeeper.log on the bind mount, which outlives the container.
// The jars come first, exactly as the image's class-data-sharing archive
// was made for them (docker.ZKArchive), and the configuration directory
// after them: a JVM maps the archive only when its class path starts with
// the archive's, which cannot hold a non-empty directory.
func zkCommand(o ZKOptions) []string {
	return []string{
		"java",
		fmt.Sprintf("-Xmx%dm", o.HeapMB), "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Xshare:auto", "-XX:SharedArchiveFile=" + docker.ZKArchive, "-XX:-UsePerfData",
		"-Dzookeeper.log.dir=/zk/log", "-Dzookeeper.root.logger=INFO,CONSOLE,ROLLINGFILE",
		"-Dzookeeper.log.file=zookeeper.log",
		"-cp", docker.ZKClassPath + ":/etc/zookeeper/conf",
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", "/zk/zoo.cfg",
	}
}

func (c *Cluster) containerName(suffix string) string { return "zkchaos-" + c.RunID + "-" + suffix }

// WaitZKReady polls until every server answers `srvr` and exactly one is the
// leader (or the single server is standalone). It returns the leader's id.
func (c *Cluster) WaitZKReady(ctx context.Context, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		leader, err := c.zkLeader(ctx, c.zk)
		if err == nil {
			return leader, nil
		}
		last = err
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("cluster: zookeeper not ready after %s: %w%s", timeout, last, c.zkLogTails(ctx))
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("cluster: waiting for zookeeper: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// zkLeader checks that every server in set serves and exactly one leads.
func (c *Cluster) zkLeader(ctx context.Context, set []*ZKServer) (int, error) {
	leader := 0
	for _, s := range set {
		st, err := fourletter.Srvr(ctx, s.ClientAddr(), time.Second)
		if err != nil {
			return 0, err
		}
		if st.Mode == "leader" || st.Mode == "standalone" {
			if leader != 0 {
				return 0, fmt.Errorf("two leaders: zk%d and zk%d", leader, s.ID)
			}
			leader = s.ID
		}
	}
	if leader == 0 {
		return 0, errors.New("no leader")
	}
	return leader, nil
}

// ZKLeaderAmong returns the single leader among servers ids (all when empty),
// for tests and nemesis targeting by ZooKeeper role.
func (c *Cluster) ZKLeaderAmong(ctx context.Context, ids ...int) (int, error) {
	set := c.zk
	if len(ids) > 0 {
		set = nil
		for _, id := range ids {
			set = append(set, c.ZKServer(id))
		}
	}
	return c.zkLeader(ctx, set)
}

func (c *Cluster) zkLogTails(ctx context.Context) string {
	var out string
	for _, s := range c.zk {
		if s.Container == nil {
			continue
		}
		if l, err := s.Container.Logs(ctx, 8); err == nil {
			out += fmt.Sprintf("\n--- last log lines of zk%d:\n%s", s.ID, l)
		}
	}
	return out
}

// ZKServers returns the ensemble in id order.
func (c *Cluster) ZKServers() []*ZKServer { return c.zk }

// ZKServer returns server id (1-based), or nil.
func (c *Cluster) ZKServer(id int) *ZKServer {
	if id < 1 || id > len(c.zk) {
		return nil
	}
	return c.zk[id-1]
}

// ZKConnect lists every server's client address, as a ZooKeeper client wants.
func (c *Cluster) ZKConnect() []string {
	out := make([]string, len(c.zk))
	for i, s := range c.zk {
		out[i] = s.ClientAddr()
	}
	return out
}

// Nodes returns the node containers in id order.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.SortedFunc(maps.Values(c.node), func(a, b *Node) int { return cmp.Compare(a.ID, b.ID) })
}

// Node returns node id, or nil.
func (c *Cluster) Node(id int) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.node[id]
}

// Close removes every container and the network of the run, the reaper's
// included, and then lets go of the reaper. The run directory stays: it
// holds the history and logs. The containers it knows are removed side by
// side (each force-removal waits for the engine to kill and unmount, a few
// hundred ms on a loaded machine, and a run's verdict waits for its
// teardown); the label sweep after them catches anything else of the run
// and the network.
func (c *Cluster) Close(ctx context.Context) error {
	var cts []*docker.Container
	for _, s := range c.zk {
		if s != nil && s.Container != nil {
			cts = append(cts, s.Container)
		}
	}
	for _, n := range c.Nodes() {
		cts = append(cts, n.Container)
	}
	if c.reaper != nil {
		cts = append(cts, c.reaper)
	}
	defer c.releaseReaper()
	errs := make([]error, len(cts))
	var wg sync.WaitGroup
	for i, ct := range cts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = ct.Remove(ctx)
		}()
	}
	wg.Wait()
	if _, err := c.eng.RemoveLabelled(ctx, c.RunID); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster: remove run %s: %w", c.RunID, err)
	}
	return nil
}

// ZKLeaderNow returns the server that currently says it leads, ignoring the
// ones that do not answer (paused, partitioned): fault targeting needs the
// leader while other faults may be in force.
func (c *Cluster) ZKLeaderNow(ctx context.Context) (int, error) {
	var leaders []int
	for _, s := range c.zk {
		st, err := fourletter.Srvr(ctx, s.ClientAddr(), time.Second)
		if err == nil && (st.Mode == "leader" || st.Mode == "standalone") {
			leaders = append(leaders, s.ID)
		}
	}
	switch len(leaders) {
	case 1:
		return leaders[0], nil
	case 0:
		return 0, errors.New("no zookeeper server says it leads")
	default:
		return 0, fmt.Errorf("zookeeper servers %v all say they lead", leaders)
	}
}
