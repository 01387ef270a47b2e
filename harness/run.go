package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/docker"
	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/nodecover"
	"github.com/zkchaos/zkchaos/observer"
	"github.com/zkchaos/zkchaos/rundir"
	"github.com/zkchaos/zkchaos/workloads"
	"github.com/zkchaos/zkchaos/zklayout/zkio"
)

// RunConfig is one run: its settings (rundir.RunSpec, what run.json
// records) and what only the running process has, the hooks that run it.
// Zero settings take their defaults (RunSpec.Defaults).
type RunConfig struct {
	rundir.RunSpec

	// Schedule, when set, replays a stored schedule instead of planning one.
	Schedule *nemesis.Schedule
	// Driver, when set, replaces the fault schedule: a scenario drives the
	// exact fault window of a historical bug. The workload phase ends when
	// it returns (or at TimeLimit).
	Driver Driver
	// Linger keeps the healed cluster (and the admin workload) running at
	// least this long after healing, even once every partition has a
	// leader: a checker with a grace after healing (liveness,
	// availability) sees a controller stuck past it instead of a history
	// that ends first. Zero: no minimum. Not recorded: the command derives
	// it from the checkers' graces, and a replay does the same.
	Linger time.Duration

	// Progress receives what a person watching the run sees (progress.go):
	// whole lines per phase, and on a terminal a status line redrawn in
	// place; nil for silence.
	Progress io.Writer

	// Teardown, when set, is handed the end of a run that succeeded
	// (saving the containers' output under logs/, removing the containers
	// and the network) instead of Run doing it before it returns, so a
	// caller can check the history while the engine tears down: the
	// verdict need not wait for it. The brokers are killed first, so their
	// event logs are final when Run returns. The receiver must call finish
	// exactly once. After a failed run Run tears down itself.
	Teardown func(finish func() error)
}

// defaults gives the zero fields their defaults; the run's id and
// directory are placed by Run, with EnvConfig.Place.
func (c *RunConfig) defaults() {
	c.RunSpec.Defaults()
	if c.Progress == nil {
		c.Progress = io.Discard
	}
}

// Plan is the fault schedule a run of c executes: the stored one when c
// replays, otherwise the one its seed draws for its topology
// (planSpec).
func (c RunConfig) Plan() nemesis.Schedule {
	if c.Schedule != nil {
		return *c.Schedule
	}
	return planSpec(c.RunSpec)
}

// planSpec is the fault schedule s's seed draws for its topology (after
// defaults). `chaos run --dry-run` prints exactly this, so it needs no
// Docker. Kinds this build does not know are left out and named in
// Skipped; so is a density Validate would refuse, planned one fault at a
// time.
func planSpec(s rundir.RunSpec) nemesis.Schedule {
	s.Defaults()
	var kinds []nemesis.FaultKind
	var unknown []string
	for _, f := range s.Faults {
		if k := nemesis.FaultKind(f); slices.Contains(faults.Catalogue, k) {
			kinds = append(kinds, k)
		} else {
			unknown = append(unknown, fmt.Sprintf("%q: not a fault kind of this build", f))
		}
	}
	topo := faults.Topology{Nodes: s.Nodes, ZKServers: s.ZK.Servers}
	plan := func() nemesis.Schedule {
		return faults.Plan(s.Seed, topo, s.TimeLimit, s.MinHold, s.MaxHold, kinds)
	}
	var sched nemesis.Schedule
	if s.Density > 0 {
		usable, skipped := faults.Usable(topo, kinds)
		var err error
		if sched, err = faults.PlanDense(s.Seed, s.TimeLimit, s.MinHold, s.MaxHold, usable, s.Density); err != nil {
			sched = plan()
			sched.Skipped = append(sched.Skipped, err.Error())
		} else {
			sched.Skipped = skipped
		}
	} else {
		sched = plan()
	}
	sched.Skipped = append(sched.Skipped, unknown...)
	return sched
}

// Run is one chaos run: set-up, workload and nemesis, heal, final reads,
// collection. It leaves in RunDir the history (history/*.jsonl), the
// schedule executed (schedule.json), the run's configuration (run.json),
// container logs (logs/) and every process's data, whatever happens; it
// removes its containers and network on return, including on panic and on
// ctx cancellation. Checking and reporting are separate steps over RunDir.
func Run(ctx context.Context, cfg RunConfig) (runDir string, err error) {
	cfg.defaults()
	// The run's id and directory are placed as for an environment alone
	// (chaos up): a generated id, runs/RUN_ID, made absolute.
	var envCfg EnvConfig
	envCfg.RunID, envCfg.RunDir = cfg.RunID, cfg.RunDir
	envCfg.ZK = cluster.ZKOptions(cfg.ZK)
	if err := envCfg.Place(); err != nil {
		return envCfg.RunDir, err
	}
	cfg.RunID, cfg.RunDir = envCfg.RunID, envCfg.RunDir
	abs := cfg.RunDir
	hdir := filepath.Join(abs, rundir.HistoryDir)
	if err := EnsureDir(hdir); err != nil {
		return abs, err
	}
	spec := cfg.RunSpec
	spec.Build = rundir.BuildRevision()
	if err := rundir.WriteInfo(abs, spec); err != nil {
		return abs, err
	}
	hw, err := history.Create(filepath.Join(hdir, "harness.jsonl"), "harness", 0)
	if err != nil {
		return abs, err
	}
	defer hw.Close()
	// The progress lines are kept in the run directory too: runs whose
	// output nobody watches (chaos power, the nightly shards) would
	// otherwise leave no trace of where a slow set-up spent its time.
	ldir := filepath.Join(abs, rundir.LogsDir)
	if err := EnsureDir(ldir); err != nil {
		return abs, err
	}
	plog, err := os.OpenFile(filepath.Join(ldir, rundir.HarnessLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return abs, fmt.Errorf("progress log: %w", err)
	}
	defer plog.Close()
	// Every line of progress goes through prog: it follows the history
	// files and, on a terminal, keeps a status line under them.
	prog := newProgress(cfg.Progress, hdir, map[string]time.Duration{history.PhaseWorkload: cfg.TimeLimit})
	prog.log = plog
	prog.run()
	defer prog.stop()
	cfg.Progress = prog
	phaseWith := func(p history.Phase) {
		hw.Write(history.Event{Kind: history.KindPhase, Phase: &p})
		hw.Sync()
		prog.phaseMark(p.Name, p.Mark)
	}
	phase := func(name, mark string) { phaseWith(history.Phase{Name: name, Mark: mark}) }

	// --- setup
	// The steps overlap where nothing orders them: the node binary builds
	// while the run's network is made, and the brokers' containers start
	// beside the ensemble's (the brokers retry ZooKeeper until it serves).
	// The topic waits for every broker's registration: created earlier, the
	// controller would lead a partition from whichever replicas were up, and
	// the scenarios count on the first replica leading (KAFKA-16667's
	// driver picks its brokers by it).
	phase(history.PhaseSetup, history.PhaseBegin)
	setupStart := time.Now()
	type built struct {
		path string
		err  error
	}
	binc := make(chan built, 1)
	go func() {
		path, err := buildNode(ctx, cfg.Cover)
		binc <- built{path, err}
	}()
	envCfg.Progress = cfg.Progress
	envCfg.NoWait = true
	// alive receives the start-up check of the node processes (nodesAlive),
	// which looks a moment after the starts: the set-up goes on meanwhile
	// and the wait for the brokers' registrations takes its answer.
	alive := make(chan error, 1)
	envCfg.Beside = func(ctx context.Context, c *cluster.Cluster) error {
		bin := <-binc
		if bin.err != nil {
			return bin.err
		}
		if err := startNodes(ctx, c, cfg, bin.path); err != nil {
			return err
		}
		go func() { alive <- nodesAlive(ctx, c) }()
		return nil
	}
	env, err := StartEnv(ctx, envCfg)
	if err != nil {
		return abs, err
	}
	defer func() {
		finish := func() error {
			collectLogs(env.Cluster, filepath.Join(abs, rundir.LogsDir))
			cerr := env.Close()
			if cfg.Cover {
				// After Close: every node process has stopped and
				// written its last counters.
				if s, err := nodecover.Merge(context.WithoutCancel(ctx), abs); err != nil {
					fmt.Fprintf(plog, "coverage: %v\n", err)
				} else {
					fmt.Fprintf(plog, "coverage: %d of %d node program blocks reached (%.1f%%), %s\n", s.Covered, s.Blocks, s.Percent(), nodecover.File)
				}
			}
			return cerr
		}
		if err == nil && cfg.Teardown != nil {
			if err = stopNodes(env.Cluster); err == nil {
				cfg.Teardown(finish)
				return
			}
		}
		if cerr := finish(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	c := env.Cluster
	brokersUp := time.Since(setupStart)
	if err := c.WaitEnsemble(ctx); err != nil {
		return abs, err
	}

	zw, err := history.Create(filepath.Join(hdir, "zk.jsonl"), "zk", 0)
	if err != nil {
		return abs, err
	}
	defer zw.Close()
	wctx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	watcher, err := observer.WatchZK(wctx, c.ZKConnect(), 10*time.Second, zw)
	if err != nil {
		stopWatch()
		return abs, err
	}
	defer func() { stopWatch(); watcher.Wait() }()

	w, err := newWorld(c)
	if err != nil {
		return abs, err
	}
	defer w.close()
	if err := waitBrokerIDs(ctx, w, cfg.Nodes, 60*time.Second, alive); err != nil {
		return abs, fmt.Errorf("setup: %w%s", err, nodeLogTails(ctx, c))
	}
	if err := createTopics(ctx, w.conn, cfg); err != nil {
		return abs, err
	}
	if err := waitLeaders(ctx, w, cfg, 60*time.Second); err != nil {
		return abs, fmt.Errorf("setup: %w%s", err, nodeLogTails(ctx, c))
	}
	led := time.Since(setupStart)
	// A driver's first fault must not land in the controller's start-up
	// burst: the followers' first fetches grow each ISR to its replicas,
	// and each growth makes the controller send UpdateMetadata to every
	// broker. A request in flight on a link a driver cuts holds up every
	// later one to that broker (KAFKA-7235's driver waits for a
	// LeaderAndIsr queued behind it). Not fatal: a run whose ISRs never fill
	// shows why in its history.
	if err := waitSettled(ctx, w, cfg, 10*time.Second); err != nil {
		fmt.Fprintf(cfg.Progress, "setup: %v; going on\n", err)
	}
	if err := waitRoles(ctx, abs, cfg, 10*time.Second); err != nil {
		fmt.Fprintf(cfg.Progress, "setup: %v; going on\n", err)
	}
	fmt.Fprintf(cfg.Progress, "brokers' and ensemble's containers running after %s, every partition led after %s, ISRs full after %s\n",
		brokersUp.Round(time.Millisecond), led.Round(time.Millisecond), time.Since(setupStart).Round(time.Millisecond))
	phase(history.PhaseSetup, history.PhaseEnd)

	// --- workload and nemesis, side by side for TimeLimit
	rec := nemesis.NewFileRecorder(filepath.Join(hdir, "nemesis.jsonl"))
	defer rec.Close()
	fpw := newFailpointWorld(w, c, abs, cfg)
	nem := nemesis.New(fpw, rec)
	defer nem.Heal(context.WithoutCancel(ctx)) // also on panic and Ctrl-C
	fs, err := faults.New(nem, fpw.env())
	if err == nil {
		err = fs.Missing()
	}
	if err != nil {
		return abs, err
	}
	driver := cfg.Driver
	if driver == nil {
		sched := cfg.Plan()
		if err := sched.Save(filepath.Join(abs, rundir.ScheduleFile)); err != nil {
			return abs, err
		}
		driver = scheduleDriver{sched}
	}
	live := &Live{Cluster: c, Nemesis: nem, Faults: fs, World: w, RunDir: abs, Progress: cfg.Progress}
	lc := workloads.LogConfig{
		Brokers: brokerAddrs(c), Topic: cfg.Topic, Partitions: cfg.Partitions,
		Producers: cfg.Producers, Readers: cfg.Readers, Acks: cfg.Acks, Seed: cfg.Seed,
		NonIdempotent: cfg.NonIdempotent,
	}
	open := func(name string) (*history.Writer, error) {
		return history.Create(filepath.Join(hdir, name+".jsonl"), name, 0)
	}
	var wl workloads.Workload = idle{}
	if !cfg.NoWorkload {
		if wl, err = workloads.NewLog(lc, open); err != nil {
			return abs, err
		}
	}
	// The admin workload outlives the client workload by the heal and the
	// settle: an operation the controller owes when the faults end must be
	// seen completing (or not) for liveness to judge it.
	actx, stopAdmin := context.WithCancel(ctx)
	defer stopAdmin()
	aerr := make(chan error, 1)
	aerr <- nil
	if cfg.Admin {
		adm, err := newAdminWorkload(cfg, c, live, open)
		if err != nil {
			return abs, err
		}
		<-aerr
		go func() { aerr <- adm.Run(actx) }()
	}
	phase(history.PhaseWorkload, history.PhaseBegin)
	rctx, cancel := context.WithTimeout(ctx, cfg.TimeLimit)
	werr := make(chan error, 1)
	go func() { werr <- wl.Run(rctx) }()
	derr := driver.Drive(rctx, live)
	cancel()
	if err := errors.Join(derr, <-werr); err != nil {
		stopAdmin()
		<-aerr
		return abs, fmt.Errorf("workload: %w", err)
	}
	phase(history.PhaseWorkload, history.PhaseEnd)
	if ctx.Err() != nil {
		stopAdmin()
		<-aerr
		return abs, ctx.Err()
	}

	// --- heal, and give the cluster time to recover
	phase(history.PhaseHeal, history.PhaseBegin)
	if err := nem.Heal(ctx); err != nil {
		stopAdmin()
		<-aerr
		return abs, fmt.Errorf("heal: %w", err)
	}
	healed := time.Now()
	waitLeaders(ctx, w, cfg, cfg.Settle) // not fatal: staying offline is a finding
	if d := time.Until(healed.Add(cfg.Linger)); d > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	stopAdmin()
	if err := <-aerr; err != nil {
		return abs, fmt.Errorf("admin workload: %w", err)
	}
	// The recovery checker judges the broker processes running at the end;
	// a crash leaves no node_stop, so the harness says which it sees.
	phaseWith(history.Phase{Name: history.PhaseHeal, Mark: history.PhaseEnd, Running: runningBrokers(ctx, c)})

	// --- final reads
	if cfg.NoWorkload {
		return abs, nil
	}
	phase(history.PhaseFinalReads, history.PhaseBegin)
	fw, err := open("final")
	if err != nil {
		return abs, err
	}
	lc.OpTimeout = 5 * time.Second
	if err := workloads.FinalReads(ctx, lc, fw, 30*time.Second); err != nil {
		fmt.Fprintf(cfg.Progress, "final reads incomplete: %v\n", err)
	}
	fw.Close()
	phase(history.PhaseFinalReads, history.PhaseEnd)

	phase(history.PhaseCollect, history.PhaseBegin)
	phase(history.PhaseCollect, history.PhaseEnd)
	return abs, nil
}

// idle is the workload of a control-plane-only run: it waits out the time.
type idle struct{}

func (idle) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// buildNode builds the node program (cmd/kafkanode) from this checkout,
// instrumented for coverage when cover is set.
func buildNode(ctx context.Context, cover bool) (string, error) {
	if cover {
		return docker.BuildGoBinary(ctx, "./cmd/kafkanode", "kafkanode-cover", nodecover.BuildFlags()...)
	}
	return docker.BuildGoBinary(ctx, "./cmd/kafkanode", "kafkanode")
}

// nodeArgs are a node's flags: placement (which node, where; for a
// container, cluster.NodeFlags, whose event log goes straight into the
// run's history folder) and then the run's own.
func nodeArgs(placement []string, cfg RunConfig) []string {
	args := append(slices.Clone(placement),
		"--zk-session-timeout="+cfg.ZKSessionTimeout.String(),
		// Brokers start while the ensemble elects its leader; on a loaded
		// machine that can take as long as the set-up's own wait for it.
		"--zk-connect-timeout=60s",
		"--replica-lag-time-max="+RunReplicaLag.String())
	if len(cfg.Bugs) > 0 {
		args = append(args, "--bugs="+strings.Join(cfg.Bugs, ","))
	}
	return append(args, cfg.NodeFlags...)
}

func brokerAddrs(c *cluster.Cluster) []string {
	var out []string
	for _, n := range c.Nodes() {
		out = append(out, n.KafkaAddr())
	}
	return out
}

// layout is a topic the set-up creates: its name and each partition's
// replicas, the first of them the preferred leader.
type layout struct {
	topic  string
	assign [][]int
}

// layouts are the topics of a run of c (after defaults): the workload
// topic and, with SpreadTopic, the spread topic.
func (c RunConfig) layouts() []layout {
	work := layout{topic: c.Topic}
	for p := 0; p < int(c.Partitions); p++ {
		work.assign = append(work.assign, rotation(c.Nodes, c.RF, p))
	}
	out := []layout{work}
	if c.SpreadTopic != "" {
		spread := layout{topic: c.SpreadTopic}
		for p := 0; p < c.Nodes; p++ {
			spread.assign = append(spread.assign, rotation(c.Nodes, rundir.SpreadRF, p))
		}
		out = append(out, spread)
	}
	return out
}

// createTopics writes /brokers/topics/<topic> for each of the run's
// layouts, as ZooKeeper-era admin tools did; the controller's watch does
// the rest.
func createTopics(ctx context.Context, conn *zk.Conn, cfg RunConfig) error {
	acl := zk.WorldACL(zk.PermAll)
	for _, p := range []string{"/brokers", "/brokers/topics"} {
		if _, err := conn.Create(p, nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	for _, l := range cfg.layouts() {
		parts := map[string][]int{}
		for p, reps := range l.assign {
			parts[strconv.Itoa(p)] = reps
		}
		b, _ := json.Marshal(map[string]any{"version": 2, "partitions": parts})
		if _, err := conn.Create("/brokers/topics/"+l.topic, b, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create topic %s: %w", l.topic, err)
		}
	}
	return nil
}

// rotation is partition p's replicas in a topic of replication factor rf
// on brokers 1..nodes: rf brokers in a row from p+1, wrapping, so
// leadership starts spread (the round-robin assignment of ZooKeeper-era
// admin tools, without their random start).
func rotation(nodes, rf, p int) []int {
	var reps []int
	for r := 0; r < rf; r++ {
		reps = append(reps, (p+r)%nodes+1)
	}
	return reps
}

// waitRoles waits until every broker's event log says it has taken a role
// (leader or follower) in every partition it replicates. waitSettled reads
// ZooKeeper, where the controller writes each partition's state before it
// sends the LeaderAndIsr requests that carry it, so a set-up that ended
// there could end inside the controller's start-up burst: a driver that cut
// a link at once took a start-up request for the one its fault provoked
// (KAFKA-7235's driver, 1 run in 6).
func waitRoles(ctx context.Context, runDir string, cfg RunConfig, within time.Duration) error {
	type replica struct {
		node      int32
		topic     string
		partition int32
	}
	want := map[replica]bool{}
	for _, l := range cfg.layouts() {
		for p, reps := range l.assign {
			for _, b := range reps {
				want[replica{int32(b), l.topic, int32(p)}] = true
			}
		}
	}
	logs := newFollower(filepath.Join(runDir, rundir.HistoryDir, "n[0-9]*.jsonl"))
	defer logs.close()
	deadline := time.Now().Add(within)
	for {
		logs.poll(func(_ *followed, b []byte) {
			var e history.Event
			if json.Unmarshal(b, &e) == nil && e.Kind == history.KindRoleChange && e.Role != nil {
				delete(want, replica{e.Node, e.Role.Topic, e.Role.Partition})
			}
		})
		if len(want) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			var missing []string
			for r := range want {
				missing = append(missing, fmt.Sprintf("n%d in %s-%d", r.node, r.topic, r.partition))
			}
			slices.Sort(missing)
			return fmt.Errorf("after %s, no role yet for %s", within, strings.Join(missing, ", "))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// waitLeaders waits until every partition's state znode names a leader,
// in every topic of the run.
func waitLeaders(ctx context.Context, w *world, cfg RunConfig, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		var missing []string
		for _, l := range cfg.layouts() {
			for p := range l.assign {
				if ld, err := w.PartitionLeader(ctx, l.topic, int32(p)); err != nil || ld < 0 {
					missing = append(missing, fmt.Sprintf("%s-%d", l.topic, p))
				}
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("partitions without a leader after %s: %s", within, strings.Join(missing, ", "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitBrokerIDs waits until n brokers are registered under /brokers/ids. A
// node process that exited at start-up (an error from alive) ends the wait
// at once: it would never register.
func waitBrokerIDs(ctx context.Context, w *world, n int, within time.Duration, alive <-chan error) error {
	deadline := time.Now().Add(within)
	for {
		select {
		case err := <-alive:
			if err != nil {
				return err
			}
			alive = nil // answered: a nil channel is never ready
		default:
		}
		ids, _, err := w.conn.Children("/brokers/ids")
		if err == nil && len(ids) >= n {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%d of %d brokers registered after %s (%v)", len(ids), n, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// isrChangeNotifications is where partition leaders tell the controller of
// ISR changes; the controller deletes each notification once it has taken
// it in and sends UpdateMetadata right after.
const isrChangeNotifications = "/isr_change_notification"

// waitSettled waits until every partition's ISR (of every topic of the
// run) holds all its replicas and no ISR change waits for the controller.
func waitSettled(ctx context.Context, w *world, cfg RunConfig, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		var short []string
		for _, l := range cfg.layouts() {
			for p, reps := range l.assign {
				st, _, err := zkio.ReadPartitionState(w.synced(ctx), l.topic, int32(p))
				if err != nil || len(st.ISR) < len(reps) {
					short = append(short, fmt.Sprintf("%s-%d", l.topic, p))
				}
			}
		}
		pending, _, err := w.conn.Children(isrChangeNotifications)
		if errors.Is(err, zk.ErrNoNode) {
			pending, err = nil, nil
		}
		if len(short) == 0 && err == nil && len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("after %s, ISR short of the replicas: %v; ISR changes the controller has not taken in: %d (%v)",
				within, short, len(pending), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// collectLogs saves every container's output under dir before the
// containers are removed.
func collectLogs(c *cluster.Cluster, dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	save := func(name string, ct *docker.Container) {
		if ct == nil {
			return
		}
		if logs, err := ct.Logs(ctx, 100000); err == nil {
			os.WriteFile(filepath.Join(dir, name+".log"), []byte(logs+"\n"), 0o644)
		}
	}
	// Side by side: the verdict waits for the teardown.
	var wg sync.WaitGroup
	for _, s := range c.ZKServers() {
		wg.Add(1)
		go func() { defer wg.Done(); save(fmt.Sprintf("zk%d", s.ID), s.Container) }()
	}
	for _, n := range c.Nodes() {
		wg.Add(1)
		go func() { defer wg.Done(); save(fmt.Sprintf("n%d", n.ID), n.Container) }()
	}
	wg.Wait()
}

// stopNodes kills every broker's process and waits until each container
// has stopped, so no event log grows after Run returns. The containers stay
// for their logs to be saved.
func stopNodes(c *cluster.Cluster) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes := c.Nodes()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		if n.Container == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A broker the nemesis left stopped has no process to signal.
			if err := n.Container.Signal(ctx, "SIGKILL"); err != nil && !docker.IsNotRunning(err) {
				errs[i] = err
				return
			}
			errs[i] = n.Container.WaitExited(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stop brokers before the check: %w", err)
	}
	return nil
}

// startNodes starts every broker's container side by side (each start is a
// round of engine calls, 0.3–1 s on a loaded machine); nodesAlive checks
// that none refused its flags.
func startNodes(ctx context.Context, c *cluster.Cluster, cfg RunConfig, bin string) error {
	errs := make([]error, cfg.Nodes)
	var wg sync.WaitGroup
	for id := 1; id <= cfg.Nodes; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			spec := cluster.NodeSpec{ID: id, Binary: bin, Args: nodeArgs(c.NodeFlags(id), cfg)}
			if cfg.Cover {
				if errs[id-1] = nodecover.Prepare(filepath.Join(c.RunDir, "nodes", fmt.Sprintf("n%d", id))); errs[id-1] != nil {
					return
				}
				spec.Env = nodecover.Env(cluster.NodeDir)
			}
			_, errs[id-1] = c.StartNode(ctx, spec)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// nodesAlive catches a node program that refused its flags (an unknown bug
// switch, a bad failpoint spec): it exits at once with status 2, and its own
// message says what was wrong.
func nodesAlive(ctx context.Context, c *cluster.Cluster) error {
	time.Sleep(300 * time.Millisecond)
	for _, n := range c.Nodes() {
		st, err := n.Container.State(ctx)
		if err != nil {
			return err
		}
		if !st.Running {
			logs, _ := n.Container.Logs(ctx, 10)
			return fmt.Errorf("node %d exited with status %d at start-up:\n%s", n.ID, st.ExitCode, logs)
		}
	}
	return nil
}

// runningBrokers returns the ids of the brokers whose containers run and
// are not paused, or nil when the engine did not answer for one of them.
func runningBrokers(ctx context.Context, c *cluster.Cluster) *history.RunningBrokers {
	r := &history.RunningBrokers{IDs: []int32{}}
	for _, n := range c.Nodes() {
		st, err := n.Container.State(ctx)
		if err != nil {
			return nil
		}
		if st.Running && !st.Paused {
			r.IDs = append(r.IDs, int32(n.ID))
		}
	}
	return r
}

func nodeLogTails(ctx context.Context, c *cluster.Cluster) string {
	var b strings.Builder
	for _, n := range c.Nodes() {
		if l, err := n.Container.Logs(ctx, 10); err == nil {
			fmt.Fprintf(&b, "\n--- last log lines of n%d:\n%s", n.ID, l)
		}
	}
	return b.String()
}
