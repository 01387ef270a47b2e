package rundir

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/schedule"
)

// RunSpec is what one run is asked to do, and RUN_DIR/run.json is its JSON.
// `chaos run` parses its flags into one (Register), checks it (Validate),
// the harness runs it and writes it as run.json, and a replay command is
// made from it (ReplayArgs) and parses back into it. The keys are those
// run.json has always had, so runs stored by earlier builds read the same.
// Durations are in nanoseconds.
//
// A new run setting is a field here with its default in defaults, its
// flag in Register, a line in ReplayArgs and, if some values are
// impossible, a check in Validate, all in this file; the harness reads the
// field where it uses it. spec_test.go fails until the setting has a flag
// that ReplayArgs writes (or is named there as one no flag sets).
type RunSpec struct {
	RunID  string `json:"RunID"`
	RunDir string `json:"RunDir"`
	Seed   uint64 `json:"Seed"`
	ZK     ZK     `json:"ZK"`
	Nodes  int    `json:"Nodes"`
	// Bugs are the node bug switches turned on; none means every fix on.
	Bugs []string `json:"Bugs"`
	// NodeFlags are further node flags (failpoints, election policy, ...).
	NodeFlags []string `json:"NodeFlags"`
	// ZKSessionTimeout is the brokers' session timeout: how long a paused
	// controller keeps its role.
	ZKSessionTimeout time.Duration `json:"ZKSessionTimeout"`
	Topic            string        `json:"Topic"`
	Partitions       int32         `json:"Partitions"`
	// RF is the workload topic's replication factor; default min(3, Nodes).
	RF        int `json:"RF"`
	Producers int `json:"Producers"`
	Readers   int `json:"Readers"`
	Acks      int `json:"Acks"`
	// NoWorkload runs the control plane alone: brokers, controller and
	// nemesis, no client traffic and no final reads. The fencing, leader
	// and liveness checkers still have the node event logs and the
	// ZooKeeper watcher's history to judge.
	NoWorkload bool `json:"NoWorkload"`
	// NonIdempotent: the workload's producers were not idempotent (they are
	// by default with acks=all, as in every Kafka client since 3.0). Runs
	// stored before it existed had no idempotent producer and read false.
	NonIdempotent bool `json:"NonIdempotent,omitempty"`
	// Workload names the client workload: "" for the log workload
	// (workloads.Log: produces and reads as ClientOps, the default, and
	// every run stored before the choice existed), WorkloadQueue for
	// Jepsen's queue workload (workloads.Queue: sends and polls as
	// QueueOps; Readers are its consumers, half of them in a group).
	Workload string `json:"Workload,omitempty"`
	// QueueTxn runs the queue workload's sends in Kafka transactions and
	// its consumers at read_committed.
	QueueTxn  bool          `json:"QueueTxn,omitempty"`
	TimeLimit time.Duration `json:"TimeLimit"`
	// Faults are the fault kinds a schedule is planned from; empty means a
	// fault-free run (or a scenario, whose driver decides the faults).
	Faults  []string      `json:"Faults"`
	MinHold time.Duration `json:"MinHold"`
	MaxHold time.Duration `json:"MaxHold"`
	// Settle is how long after healing the cluster gets to recover before
	// the final reads.
	Settle time.Duration `json:"Settle"`
	// Scenario names the regression scenario that drove the run, if any:
	// the bug, then the mode for a scenario of more than two modes
	// ("KAFKA-3861 unclean").
	Scenario string `json:"Scenario,omitempty"`
	// Admin runs the control-plane workload (workloads.NewAdmin) beside
	// the clients: reassignments, preferred elections, topic creation and
	// controlled shutdowns through ZooKeeper, so the controller is busy
	// when faults land.
	Admin bool `json:"Admin,omitempty"`
	// Density is the mean number of faults in force at once of a dense
	// schedule, overlapping (faults.PlanDense); zero for one fault at a
	// time with quiet gaps (faults.Plan).
	Density float64 `json:"Density,omitempty"`
	// Cover builds the node program with Go's coverage instrumentation
	// (the node/ packages, set mode) and merges what every node process
	// reached into coverage.json (nodecover).
	Cover bool `json:"Cover,omitempty"`
	// NoOpenings plans every fault by draw, from the start: no opening
	// aimed at a known window (--openings=false), to measure what the
	// search finds on its own.
	NoOpenings bool `json:"NoOpenings,omitempty"`
	// SpreadTopic names the run's second topic beside the workload topic
	// (SpreadTopicName, no clients): RF 2, one partition per broker,
	// assignments rotating ({1,2}, {2,3}, {3,1} for 3 brokers). Real
	// clusters have topics not on every broker, and the workload topic is
	// on every broker of a 3-broker run: a zombie controller (KAFKA-532) is
	// then in every ISR, so the controller elected in its place rewrites
	// every partition when the zombie's session dies, and none of the
	// zombie's writes can land on a state the new controller left alone.
	// With the rotation, whichever broker is controller, every other broker
	// replicates a partition the controller does not host: the partitions
	// where a zombie's unfenced write would stand. "" when the run had none,
	// as every run stored before it existed, and always below 3 brokers,
	// where RF 2 puts every partition on every broker.
	SpreadTopic string `json:"SpreadTopic,omitempty"`
	// Build is the commit the binary that made the run was built from
	// (BuildRevision), so figures folded from runs of several days name
	// the builds they mix; "" for test binaries and runs stored before it
	// existed.
	Build string `json:"Build,omitempty"`
}

// Info is the name the readers of run.json (reports, the runs index, chaos
// power --from) know a RunSpec by.
type Info = RunSpec

// ZK is the ZooKeeper ensemble of a run. Its fields are cluster.ZKOptions'
// (the harness converts one into the other, so the compiler keeps them the
// same); zero takes the cluster's default and is left out of run.json, as
// run.json always did with all but the size and tick.
type ZK struct {
	Servers           int           `json:"Servers"`
	TickTime          time.Duration `json:"TickTime,omitempty"`
	InitLimit         int           `json:"InitLimit,omitempty"`
	SyncLimit         int           `json:"SyncLimit,omitempty"`
	MinSessionTimeout time.Duration `json:"MinSessionTimeout,omitempty"`
	MaxSessionTimeout time.Duration `json:"MaxSessionTimeout,omitempty"`
	HeapMB            int           `json:"HeapMB,omitempty"`
}

// defaults holds the default of every run setting that has one, once:
// Defaults fills a zero field from it, and Default (the flags' defaults)
// is built by Defaults.
var defaults = RunSpec{
	ZK:               ZK{Servers: 3, TickTime: 200 * time.Millisecond},
	Nodes:            3,
	ZKSessionTimeout: 3 * time.Second,
	Topic:            "chaos",
	Partitions:       3,
	RF:               3, // at most; never more than the brokers
	Producers:        4,
	Readers:          2,
	Acks:             history.AcksAll,
	TimeLimit:        30 * time.Second,
	MinHold:          2 * time.Second,
	MaxHold:          6 * time.Second,
	Settle:           10 * time.Second,
}

// SpreadRF is the spread topic's replication factor: below the broker
// count, so no broker hosts every partition.
const SpreadRF = 2

// SpreadTopicName names the spread topic of a run whose workload topic is
// topic.
func SpreadTopicName(topic string) string { return topic + "-rf2" }

// MaxFaultDensity is the densest schedule --fault-density asks for.
const MaxFaultDensity = 8

// Defaults gives the zero fields their defaults. Faults, Admin and
// SpreadTopic have none here: their zero is a choice (no faults, an idle
// controller, one topic); Default turns them on for the CLI.
func (s *RunSpec) Defaults() {
	d := defaults
	fill(&s.ZK.Servers, d.ZK.Servers)
	fill(&s.ZK.TickTime, d.ZK.TickTime)
	fill(&s.Nodes, d.Nodes)
	fill(&s.ZKSessionTimeout, d.ZKSessionTimeout)
	fill(&s.Topic, d.Topic)
	fill(&s.Partitions, d.Partitions)
	fill(&s.RF, min(d.RF, s.Nodes))
	if s.Producers == 0 && s.Readers == 0 {
		s.Producers, s.Readers = d.Producers, d.Readers
	}
	fill(&s.Acks, d.Acks)
	fill(&s.TimeLimit, d.TimeLimit)
	fill(&s.MinHold, d.MinHold)
	fill(&s.MaxHold, d.MaxHold)
	fill(&s.Settle, d.Settle)
	if s.Nodes <= SpreadRF {
		s.SpreadTopic = ""
	}
}

func fill[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// Default is the run `chaos run` makes without flags (but --seed, drawn
// from the clock): every fault kind, the admin workload and the spread
// topic on, the rest from Defaults but RF, which Defaults derives from the
// brokers when the run starts: filled in here, it would stay 3 when --nodes
// asks for 2.
func Default() RunSpec {
	s := RunSpec{Faults: allKinds(), Admin: true}
	s.Defaults()
	s.RF = 0
	s.SpreadTopic = SpreadTopicName(s.Topic)
	return s
}

func allKinds() []string {
	var out []string
	for _, k := range schedule.Kinds {
		out = append(out, string(k))
	}
	return out
}

// Names of the `chaos run` flags of a run's settings. Register defines them
// and ReplayArgs writes them, so the two cannot drift apart: a renamed flag
// is renamed in both, and a replay command that the CLI would refuse fails
// ReplayArgs' own parse.
const (
	FlagSeed           = "seed"
	FlagTimeLimit      = "time-limit"
	FlagFaults         = "faults"
	FlagMinHold        = "min-hold"
	FlagMaxHold        = "max-hold"
	FlagBugs           = "bugs"
	FlagNodeFlag       = "node-flag"
	FlagNodes          = "nodes"
	FlagZK             = "zk"
	FlagPartitions     = "partitions"
	FlagNoWorkload     = "no-workload"
	FlagProducers      = "producers"
	FlagReaders        = "readers"
	FlagSessionTimeout = "session-timeout"
	FlagNonIdempotent  = "non-idempotent"
	FlagAdmin          = "admin"
	FlagCover          = "cover"
	FlagOpenings       = "openings"
	FlagFaultDensity   = "fault-density"
	FlagSpreadTopic    = "spread-topic"
	FlagWorkload       = "workload"
	FlagQueueTxn       = "queue-txn"
	// FlagReplay is not a setting: it names a stored schedule.json, which
	// sets the seed, time limit and density (ApplySchedule). The command
	// registers it.
	FlagReplay = "replay"
)

// Client workloads (--workload).
const (
	WorkloadLog   = "log"
	WorkloadQueue = "queue"
)

// FaultsNone is the --faults value of a fault-free run.
const FaultsNone = "none"

// Register defines the flags of s's settings on fs, bound to s, each with
// s's current value as its default: call it on Default(), or on a copy a
// command changed to give its flags other defaults (chaos power's longer,
// dense runs). only, when given, names the flags to define; the others
// keep s's values.
func (s *RunSpec) Register(fs *pflag.FlagSet, only ...string) {
	want := func(name string) bool { return len(only) == 0 || slices.Contains(only, name) }
	def := func(name string, f func()) {
		if want(name) {
			f()
		}
	}
	// A switch is a bool flag kept in another form in s: given without
	// a value it means true.
	defSwitch := func(name string, v pflag.Value, usage string) {
		def(name, func() { fs.VarPF(v, name, "", usage).NoOptDefVal = "true" })
	}
	def(FlagSeed, func() {
		fs.Uint64Var(&s.Seed, FlagSeed, s.Seed, "seed of the first run (fault schedule and workload); later runs take seed+1, ... (run.json records each)")
	})
	def(FlagTimeLimit, func() {
		fs.DurationVar(&s.TimeLimit, FlagTimeLimit, s.TimeLimit, "workload and nemesis duration per run")
	})
	def(FlagFaults, func() {
		fs.Var((*kindsValue)(&s.Faults), FlagFaults, "fault kinds, comma-separated, 'all' or '"+FaultsNone+"': "+strings.Join(allKinds(), ", "))
	})
	def(FlagMinHold, func() { fs.DurationVar(&s.MinHold, FlagMinHold, s.MinHold, "shortest time a fault is held") })
	def(FlagMaxHold, func() { fs.DurationVar(&s.MaxHold, FlagMaxHold, s.MaxHold, "longest time a fault is held") })
	def(FlagFaultDensity, func() {
		fs.Float64Var(&s.Density, FlagFaultDensity, s.Density, fmt.Sprintf("mean number of faults in force at once, overlapping (0: one fault at a time with quiet gaps; at most %d)", MaxFaultDensity))
	})
	def(FlagBugs, func() {
		fs.Var((*listValue)(&s.Bugs), FlagBugs, "node bug switches to turn on, comma-separated (e.g. KAFKA-532); default: every fix on")
	})
	def(FlagNodeFlag, func() {
		fs.StringSliceVar(&s.NodeFlags, FlagNodeFlag, s.NodeFlags, "extra flag for every node program (repeatable), e.g. --node-flag=--offline-election=unclean")
	})
	def(FlagNodes, func() { fs.IntVar(&s.Nodes, FlagNodes, s.Nodes, "brokers") })
	def(FlagZK, func() { fs.IntVar(&s.ZK.Servers, FlagZK, s.ZK.Servers, "ZooKeeper servers: 1, 3 or 5") })
	def(FlagPartitions, func() { fs.Int32Var(&s.Partitions, FlagPartitions, s.Partitions, "partitions of the workload topic") })
	def(FlagNoWorkload, func() {
		fs.BoolVar(&s.NoWorkload, FlagNoWorkload, s.NoWorkload, "control plane only: no client traffic (fencing, leader and liveness checkers still run)")
	})
	def(FlagProducers, func() { fs.IntVar(&s.Producers, FlagProducers, s.Producers, "producer processes") })
	def(FlagReaders, func() { fs.IntVar(&s.Readers, FlagReaders, s.Readers, "reader processes") })
	def(FlagWorkload, func() {
		fs.Var((*workloadValue)(&s.Workload), FlagWorkload, "client workload: "+WorkloadLog+" (produces and reads, checked by durability and linearizability) or "+WorkloadQueue+" (Jepsen's queue workload: sends, group and assigned consumers, a final drain; the queue-* checkers)")
	})
	def(FlagQueueTxn, func() {
		fs.BoolVar(&s.QueueTxn, FlagQueueTxn, s.QueueTxn, "with --workload "+WorkloadQueue+": send in Kafka transactions (some aborted on purpose) and consume at read_committed")
	})
	def(FlagNonIdempotent, func() {
		fs.BoolVar(&s.NonIdempotent, FlagNonIdempotent, s.NonIdempotent, "plain at-least-once producers (default: idempotent, as every Kafka client since 3.0)")
	})
	def(FlagSessionTimeout, func() {
		fs.DurationVar(&s.ZKSessionTimeout, FlagSessionTimeout, s.ZKSessionTimeout, "brokers' ZooKeeper session timeout")
	})
	defSwitch(FlagOpenings, (*openingsValue)(s), "begin each schedule with the openings aimed at the seed bugs' windows; --openings=false draws every fault, from the start")
	def(FlagCover, func() {
		fs.BoolVar(&s.Cover, FlagCover, s.Cover, "build the node program with coverage instrumentation and write the blocks its processes reached to coverage.json")
	})
	def(FlagAdmin, func() {
		fs.BoolVar(&s.Admin, FlagAdmin, s.Admin, "run the control-plane workload beside the clients (reassignments, preferred elections, topic creation, controlled shutdowns); --admin=false to leave the controller idle")
	})
	defSwitch(FlagSpreadTopic, (*spreadValue)(s), "with 3 or more brokers, also create TOPIC-rf2: RF 2, one partition per broker, assignments rotating, no clients (partitions a controller does not host); --spread-topic=false for the workload topic alone")
}

// ReplayArgs are the `chaos run` arguments that repeat s, shell-quoted:
// with haveSchedule the schedule stored in runDir, otherwise one planned
// again from the seed. A zero setting (a run.json of an earlier build that
// lacked it) is left to the flag's default. Every value goes through the
// flag set Register defines, so a value the CLI would refuse is an error
// here.
func (s *RunSpec) ReplayArgs(runDir string, haveSchedule bool) ([]string, error) {
	check := Default()
	fs := pflag.NewFlagSet("replay", pflag.ContinueOnError)
	check.Register(fs)
	var replay string
	fs.StringVar(&replay, FlagReplay, "", "")
	var out []string
	var errs []string
	add := func(name, value string, form string) {
		if err := fs.Set(name, value); err != nil {
			errs = append(errs, fmt.Sprintf("--%s %s: %v", name, value, err))
			return
		}
		switch form {
		case "bool":
			out = append(out, "--"+name)
		case "eq":
			out = append(out, "--"+name+"="+shellQuote(value))
		default:
			out = append(out, "--"+name, shellQuote(value))
		}
	}
	dur := func(name string, d time.Duration) {
		if d > 0 {
			add(name, d.String(), "")
		}
	}
	add(FlagSeed, strconv.FormatUint(s.Seed, 10), "")
	if haveSchedule {
		add(FlagReplay, filepath.Join(runDir, ScheduleFile), "")
	} else {
		dur(FlagTimeLimit, s.TimeLimit)
		faults := FaultsNone
		if len(s.Faults) > 0 {
			faults = strings.Join(s.Faults, ",")
		}
		add(FlagFaults, faults, "")
		dur(FlagMinHold, s.MinHold)
		dur(FlagMaxHold, s.MaxHold)
		// A dense schedule re-plans densely.
		if s.Density > 0 {
			add(FlagFaultDensity, strconv.FormatFloat(s.Density, 'g', -1, 64), "")
		}
	}
	if len(s.Bugs) > 0 {
		add(FlagBugs, strings.Join(s.Bugs, ","), "")
	}
	for _, f := range s.NodeFlags {
		add(FlagNodeFlag, f, "eq")
	}
	if s.Nodes > 0 {
		add(FlagNodes, strconv.Itoa(s.Nodes), "")
	}
	if s.ZK.Servers > 0 {
		add(FlagZK, strconv.Itoa(s.ZK.Servers), "")
	}
	if s.Partitions > 0 {
		add(FlagPartitions, strconv.Itoa(int(s.Partitions)), "")
	}
	if s.NoWorkload {
		add(FlagNoWorkload, "true", "bool")
	} else if s.Producers > 0 || s.Readers > 0 {
		add(FlagProducers, strconv.Itoa(s.Producers), "")
		add(FlagReaders, strconv.Itoa(s.Readers), "")
		if s.NonIdempotent {
			add(FlagNonIdempotent, "true", "bool")
		}
	}
	if s.Workload != "" {
		add(FlagWorkload, s.Workload, "")
	}
	if s.QueueTxn {
		add(FlagQueueTxn, "true", "bool")
	}
	dur(FlagSessionTimeout, s.ZKSessionTimeout)
	if s.Cover {
		add(FlagCover, "true", "bool")
	}
	if s.NoOpenings {
		add(FlagOpenings, "false", "eq")
	}
	// Always written, so a replay matches whatever the default: runs
	// stored before these settings existed had neither.
	add(FlagAdmin, strconv.FormatBool(s.Admin), "eq")
	add(FlagSpreadTopic, strconv.FormatBool(s.SpreadTopic != ""), "eq")
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, nil
}

// Validate names, by its flag, every setting of s that no run can have, so
// a typo is refused before a set-up is spent on it (the harness would take
// a zero for its default, and the cluster refuses an ensemble size only
// once the engine answers). Scenarios set what no flag can (RF, Settle)
// and are not validated here.
func (s RunSpec) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if !ValidZKServers(s.ZK.Servers) {
		bad("--%s %d: want 1, 3 or 5 ZooKeeper servers", FlagZK, s.ZK.Servers)
	}
	if s.Nodes < 1 {
		bad("--%s %d: want at least 1 broker", FlagNodes, s.Nodes)
	}
	if s.Partitions < 1 {
		bad("--%s %d: want at least 1", FlagPartitions, s.Partitions)
	}
	if s.Producers < 0 || s.Readers < 0 || s.Producers == 0 && s.Readers == 0 && !s.NoWorkload {
		bad("--%s %d --%s %d: want 0 or more of each, and at least one client (--%s runs without clients)",
			FlagProducers, s.Producers, FlagReaders, s.Readers, FlagNoWorkload)
	}
	if s.TimeLimit <= 0 {
		bad("--%s %s: want more than 0", FlagTimeLimit, s.TimeLimit)
	}
	if s.QueueTxn && s.Workload != WorkloadQueue {
		bad("--%s: only with --%s %s", FlagQueueTxn, FlagWorkload, WorkloadQueue)
	}
	if _, err := s.FaultKinds(); err != nil {
		bad("--%s %s: %w", FlagFaults, strings.Join(s.Faults, ","), err)
	}
	if s.MinHold < schedule.MinHold {
		bad("--%s %s: want at least %s", FlagMinHold, s.MinHold, schedule.MinHold)
	}
	if s.MaxHold < s.MinHold {
		bad("--%s %s: want at least --%s (%s)", FlagMaxHold, s.MaxHold, FlagMinHold, s.MinHold)
	}
	if s.ZKSessionTimeout <= 0 {
		bad("--%s %s: want more than 0", FlagSessionTimeout, s.ZKSessionTimeout)
	}
	// Written so that NaN, which every comparison fails, is refused too.
	if !(s.Density >= 0 && s.Density <= MaxFaultDensity) {
		bad("--%s %g: want 0 (one fault at a time) up to %d", FlagFaultDensity, s.Density, MaxFaultDensity)
	}
	return errors.Join(errs...)
}

// ValidZKServers says whether an ensemble of n servers is one the cluster
// starts (cluster.ValidServers, which imports this package; a test keeps
// the two equal).
func ValidZKServers(n int) bool { return n == 1 || n == 3 || n == 5 }

// FaultKinds are s's fault kinds as the nemesis knows them; a kind this
// build no longer knows (a stored run of an earlier one) is an error naming
// it.
func (s RunSpec) FaultKinds() ([]schedule.FaultKind, error) {
	if len(s.Faults) == 0 {
		return nil, nil // ParseKinds would read "" as every kind
	}
	return schedule.ParseKinds(strings.Join(s.Faults, ","))
}

// ApplySchedule makes s the run that replays sched: the schedule, not the
// flags, carries the seed, the time limit and the density.
func (s *RunSpec) ApplySchedule(sched schedule.Schedule) {
	s.Seed, s.TimeLimit, s.Density = sched.Seed, sched.Total, sched.Density
}

// kindsValue is the --faults flag: "all", FaultsNone or kinds,
// comma-separated, checked against the catalogue as the flag is parsed.
type kindsValue []string

func (v *kindsValue) String() string {
	switch {
	case len(*v) == 0:
		return FaultsNone
	case slices.Equal(*v, allKinds()):
		return "all"
	}
	return strings.Join(*v, ",")
}

func (v *kindsValue) Set(x string) error {
	if x == FaultsNone {
		*v = nil
		return nil
	}
	kinds, err := schedule.ParseKinds(x)
	if err != nil {
		return err
	}
	*v = nil
	for _, k := range kinds {
		*v = append(*v, string(k))
	}
	return nil
}

func (v *kindsValue) Type() string { return "kinds" }

// listValue is a comma-separated flag whose last use wins; "" is nil, as
// in a run.json of a run with every fix on.
type listValue []string

func (v *listValue) String() string { return strings.Join(*v, ",") }

func (v *listValue) Set(x string) error {
	*v = nil
	if x != "" {
		*v = strings.Split(x, ",")
	}
	return nil
}

func (v *listValue) Type() string { return "strings" }

// WorkloadName names s's client workload as --workload and --queue-txn
// set it: "log", "queue", "queue (transactions)".
func (s RunSpec) WorkloadName() string {
	w := s.Workload
	if w == "" {
		w = WorkloadLog
	}
	if s.QueueTxn {
		w += " (transactions)"
	}
	return w
}

// workloadValue is the --workload flag: WorkloadLog is stored as "", so
// run.json files written before the flag existed read as the log workload.
type workloadValue string

func (v *workloadValue) String() string {
	if *v == "" {
		return WorkloadLog
	}
	return string(*v)
}

func (v *workloadValue) Set(x string) error {
	switch x {
	case WorkloadLog:
		*v = ""
	case WorkloadQueue:
		*v = workloadValue(x)
	default:
		return fmt.Errorf("want %s or %s", WorkloadLog, WorkloadQueue)
	}
	return nil
}

func (v *workloadValue) Type() string { return "workload" }

// spreadValue is the --spread-topic flag: a switch on the command line, the
// spread topic's name in run.json (which names it for the report).
type spreadValue RunSpec

func (v *spreadValue) String() string { return strconv.FormatBool(v.SpreadTopic != "") }

func (v *spreadValue) Set(x string) error {
	on, err := strconv.ParseBool(x)
	if err != nil {
		return err
	}
	v.SpreadTopic = ""
	if on {
		topic := v.Topic
		if topic == "" {
			topic = defaults.Topic
		}
		v.SpreadTopic = SpreadTopicName(topic)
	}
	return nil
}

func (v *spreadValue) Type() string { return "bool" }

// openingsValue is the --openings flag: on by default, stored as its
// opposite (NoOpenings) so run.json files written before it read as on.
type openingsValue RunSpec

func (v *openingsValue) String() string { return strconv.FormatBool(!v.NoOpenings) }

func (v *openingsValue) Set(x string) error {
	b, err := strconv.ParseBool(x)
	if err != nil {
		return fmt.Errorf("want true or false: %w", err)
	}
	v.NoOpenings = !b
	return nil
}

func (v *openingsValue) Type() string { return "bool" }
