package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/nodecover"
	"github.com/zkchaos/zkchaos/observer"
	"github.com/zkchaos/zkchaos/rundir"
	"github.com/zkchaos/zkchaos/workloads"
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
	// Transactional producers reach windows other workloads never do
	// (KAFKA-12671's): only their runs plan them.
	opt := faults.Options{NoOpenings: s.NoOpenings, Transactions: s.Workload == rundir.WorkloadQueue && s.QueueTxn && !s.NoWorkload}
	plan := func() nemesis.Schedule {
		return faults.PlanWith(s.Seed, topo, s.TimeLimit, s.MinHold, s.MaxHold, kinds, opt)
	}
	var sched nemesis.Schedule
	if s.Density > 0 {
		usable, skipped := faults.Usable(topo, kinds)
		var err error
		if sched, err = faults.PlanDenseWith(s.Seed, s.TimeLimit, s.MinHold, s.MaxHold, usable, s.Density, opt); err != nil {
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
	rf, err := openRunFiles(&cfg)
	if err != nil {
		return abs, err
	}
	defer rf.close()
	hdir := rf.hdir

	// --- setup
	// The steps overlap where nothing orders them: the node binary builds
	// while the run's network is made, and the brokers' containers start
	// beside the ensemble's (the brokers retry ZooKeeper until it serves).
	// The topic waits for every broker's registration: created earlier, the
	// controller would lead a partition from whichever replicas were up, and
	// the scenarios count on the first replica leading (KAFKA-16667's
	// driver picks its brokers by it).
	rf.phase(history.PhaseSetup, history.PhaseBegin)
	setupStart := time.Now()
	alive := startNodesBeside(ctx, &envCfg, cfg)
	env, err := StartEnv(ctx, envCfg)
	if err != nil {
		return abs, err
	}
	defer func() {
		finish := func() error { return closeEnv(ctx, env, cfg, abs, rf.plog) }
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
	stopWatch, err := watchZK(ctx, c, hdir)
	if err != nil {
		return abs, err
	}
	defer stopWatch()
	w, err := newWorld(c)
	if err != nil {
		return abs, err
	}
	defer w.close()
	if err := setUpTopics(ctx, w, cfg, abs, alive, setupStart, brokersUp); err != nil {
		return abs, err
	}
	rf.phase(history.PhaseSetup, history.PhaseEnd)

	// --- workload and nemesis, side by side for TimeLimit
	rec := nemesis.NewFileRecorder(filepath.Join(hdir, "nemesis.jsonl"))
	defer rec.Close()
	fpw := newFailpointWorld(w, c, abs, cfg)
	nem := nemesis.New(fpw, rec)
	fs, err := faults.New(nem, fpw.env())
	if err == nil {
		err = fs.Missing()
	}
	if err != nil {
		return abs, err
	}
	defer nem.Heal(context.WithoutCancel(ctx)) // also on panic and Ctrl-C
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
		if wl, err = newClientWorkload(cfg, lc, open); err != nil {
			return abs, err
		}
	}
	// The admin workload outlives the client workload by the heal and the
	// settle: an operation the controller owes when the faults end must be
	// seen completing (or not) for liveness to judge it.
	adm, err := startAdmin(ctx, cfg, c, live, open)
	if err != nil {
		return abs, err
	}
	defer adm.cancel()
	if err := runWorkload(ctx, cfg.TimeLimit, wl, driver, live, rf); err != nil {
		adm.stop()
		return abs, err
	}

	// --- heal, and give the cluster time to recover
	rf.phase(history.PhaseHeal, history.PhaseBegin)
	if err := nem.Heal(ctx); err != nil {
		adm.stop()
		return abs, fmt.Errorf("heal: %w", err)
	}
	settleAfterHeal(ctx, w, cfg)
	if err := adm.stop(); err != nil {
		return abs, fmt.Errorf("admin workload: %w", err)
	}
	// The recovery checker judges the broker processes running at the end;
	// a crash leaves no node_stop, so the harness says which it sees.
	rf.phaseWith(history.Phase{Name: history.PhaseHeal, Mark: history.PhaseEnd, Running: runningBrokers(ctx, c)})

	// --- final reads
	if cfg.NoWorkload {
		return abs, nil
	}
	if err := finalReads(ctx, cfg, lc, open, rf); err != nil {
		return abs, err
	}
	rf.phase(history.PhaseCollect, history.PhaseBegin)
	rf.phase(history.PhaseCollect, history.PhaseEnd)
	return abs, nil
}

// closeEnv collects every container's log into the run directory, removes
// the environment and, with cfg.Cover, merges the node processes' coverage
// (after the removal: every node process has stopped and written its last
// counters), saying on plog how much was reached.
func closeEnv(ctx context.Context, env *Env, cfg RunConfig, abs string, plog io.Writer) error {
	collectLogs(env.Cluster, filepath.Join(abs, rundir.LogsDir))
	cerr := env.Close()
	if cfg.Cover {
		if s, err := nodecover.Merge(context.WithoutCancel(ctx), abs); err != nil {
			fmt.Fprintf(plog, "coverage: %v\n", err)
		} else {
			fmt.Fprintf(plog, "coverage: %d of %d node program blocks reached (%.1f%%), %s\n", s.Covered, s.Blocks, s.Percent(), nodecover.File)
		}
	}
	return cerr
}

// runWorkload runs the client workload and the driver side by side for
// limit, inside the workload phase; a cancelled ctx is an error even when
// both ended cleanly.
func runWorkload(ctx context.Context, limit time.Duration, wl workloads.Workload, driver Driver, live *Live, rf *runFiles) error {
	rf.phase(history.PhaseWorkload, history.PhaseBegin)
	rctx, cancel := context.WithTimeout(ctx, limit)
	werr := make(chan error, 1)
	go func() { werr <- wl.Run(rctx) }()
	derr := driver.Drive(rctx, live)
	cancel()
	if err := errors.Join(derr, <-werr); err != nil {
		return fmt.Errorf("workload: %w", err)
	}
	rf.phase(history.PhaseWorkload, history.PhaseEnd)
	return ctx.Err()
}

// runFiles are what a run writes from its first moment: the harness's own
// history (the phase marks) and the progress log, with the progress
// display that follows the history files.
type runFiles struct {
	hdir string
	hw   *history.Writer
	plog *os.File
	prog *progress
}

// openRunFiles makes the run directory's history and log directories,
// writes run.json and starts the progress display, which from then on
// receives cfg.Progress.
func openRunFiles(cfg *RunConfig) (*runFiles, error) {
	abs := cfg.RunDir
	hdir := filepath.Join(abs, rundir.HistoryDir)
	if err := EnsureDir(hdir); err != nil {
		return nil, err
	}
	spec := cfg.RunSpec
	spec.Build = rundir.BuildRevision()
	if err := rundir.WriteInfo(abs, spec); err != nil {
		return nil, err
	}
	// The progress lines are kept in the run directory too: runs whose
	// output nobody watches (chaos power, the nightly shards) would
	// otherwise leave no trace of where a slow set-up spent its time.
	ldir := filepath.Join(abs, rundir.LogsDir)
	if err := EnsureDir(ldir); err != nil {
		return nil, err
	}
	hw, err := history.Create(filepath.Join(hdir, "harness.jsonl"), "harness", 0)
	if err != nil {
		return nil, err
	}
	plog, err := os.OpenFile(filepath.Join(ldir, rundir.HarnessLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		hw.Close()
		return nil, fmt.Errorf("progress log: %w", err)
	}
	// Every line of progress goes through prog: it follows the history
	// files and, on a terminal, keeps a status line under them.
	prog := newProgress(cfg.Progress, hdir, map[string]time.Duration{history.PhaseWorkload: cfg.TimeLimit})
	prog.log = plog
	prog.run()
	cfg.Progress = prog
	return &runFiles{hdir: hdir, hw: hw, plog: plog, prog: prog}, nil
}

func (f *runFiles) close() {
	f.prog.stop()
	f.plog.Close()
	f.hw.Close()
}

// phaseWith marks a phase in the harness's history, synced at once: a
// run that dies leaves the phase it died in.
func (f *runFiles) phaseWith(p history.Phase) {
	f.hw.Write(history.Event{Kind: history.KindPhase, Phase: &p})
	f.hw.Sync()
	f.prog.phaseMark(p.Name, p.Mark)
}

func (f *runFiles) phase(name, mark string) { f.phaseWith(history.Phase{Name: name, Mark: mark}) }

// startNodesBeside has envCfg start the node processes beside the
// ensemble, from a binary built meanwhile. The channel it returns receives
// the start-up check of the node processes (nodesAlive), which looks a
// moment after the starts: the set-up goes on meanwhile and the wait for
// the brokers' registrations takes its answer.
func startNodesBeside(ctx context.Context, envCfg *EnvConfig, cfg RunConfig) <-chan error {
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
	return alive
}

// watchZK starts the ZooKeeper observer writing zk.jsonl, and returns how
// to stop it and wait for its last line.
func watchZK(ctx context.Context, c *cluster.Cluster, hdir string) (stop func(), err error) {
	zw, err := history.Create(filepath.Join(hdir, "zk.jsonl"), "zk", 0)
	if err != nil {
		return nil, err
	}
	wctx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	watcher, err := observer.WatchZK(wctx, c.ZKConnect(), 10*time.Second, zw)
	if err != nil {
		stopWatch()
		zw.Close()
		return nil, err
	}
	servers := make([]observer.ZKServer, 0, len(c.ZKServers()))
	for _, s := range c.ZKServers() {
		servers = append(servers, observer.ZKServer{Name: fmt.Sprintf("zk%d", s.ID), Addr: s.ClientAddr()})
	}
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		observer.PollModes(wctx, servers, 500*time.Millisecond, zw)
	}()
	return func() {
		stopWatch()
		watcher.Wait()
		<-polled
		zw.Close()
	}, nil
}

// setUpTopics waits for every broker's registration, creates the run's
// topics and waits for their leaders and full ISRs.
func setUpTopics(ctx context.Context, w *world, cfg RunConfig, abs string, alive <-chan error, setupStart time.Time, brokersUp time.Duration) error {
	if err := waitBrokerIDs(ctx, w, cfg.Nodes, 60*time.Second, alive); err != nil {
		return fmt.Errorf("setup: %w%s", err, nodeLogTails(ctx, w.c))
	}
	if err := createTopics(ctx, w.conn, cfg); err != nil {
		return err
	}
	if err := waitLeaders(ctx, w, cfg, 60*time.Second); err != nil {
		return fmt.Errorf("setup: %w%s", err, nodeLogTails(ctx, w.c))
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
	return nil
}

// adminRun is the admin workload running beside the client workload.
type adminRun struct {
	cancel context.CancelFunc
	done   chan error
}

// startAdmin starts the admin workload if cfg asks for it.
func startAdmin(ctx context.Context, cfg RunConfig, c *cluster.Cluster, live *Live, open func(string) (*history.Writer, error)) (*adminRun, error) {
	actx, cancel := context.WithCancel(ctx)
	a := &adminRun{cancel: cancel, done: make(chan error, 1)}
	if !cfg.Admin {
		a.done <- nil
		return a, nil
	}
	adm, err := newAdminWorkload(cfg, c, live, open)
	if err != nil {
		cancel()
		return nil, err
	}
	go func() { a.done <- adm.Run(actx) }()
	return a, nil
}

// stop ends the admin workload and returns how it ended. Call it once.
func (a *adminRun) stop() error {
	a.cancel()
	return <-a.done
}

// settleAfterHeal gives the healed cluster cfg.Settle to lead every
// partition again, and lingers until cfg.Linger after the heal.
func settleAfterHeal(ctx context.Context, w *world, cfg RunConfig) {
	healed := time.Now()
	waitLeaders(ctx, w, cfg, cfg.Settle) // not fatal: staying offline is a finding
	if d := time.Until(healed.Add(cfg.Linger)); d > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
}

// finalReads reads every partition in full after the heal, into
// final.jsonl: the durability checker's truth.
func finalReads(ctx context.Context, cfg RunConfig, lc workloads.LogConfig, open func(string) (*history.Writer, error), rf *runFiles) error {
	rf.phase(history.PhaseFinalReads, history.PhaseBegin)
	fw, err := open("final")
	if err != nil {
		return err
	}
	lc.OpTimeout = 5 * time.Second
	read := workloads.FinalReads
	if cfg.Workload == rundir.WorkloadQueue {
		read = func(ctx context.Context, lc workloads.LogConfig, w *history.Writer, within time.Duration) error {
			return workloads.QueueDrain(ctx, queueConfig(cfg, lc), w, within)
		}
	}
	if err := read(ctx, lc, fw, 30*time.Second); err != nil {
		fmt.Fprintf(cfg.Progress, "final reads incomplete: %v\n", err)
	}
	fw.Close()
	rf.phase(history.PhaseFinalReads, history.PhaseEnd)
	return nil
}

// idle is the workload of a control-plane-only run: it waits out the time.
type idle struct{}

func (idle) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}
