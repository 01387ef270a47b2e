package rundir

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Names of the `chaos run` flags a replay command uses. RunFlags.Register
// defines them and ReplayCommand writes them, so the two cannot drift apart:
// a renamed flag is renamed in both, and a replay command that the CLI would
// refuse fails ReplayCommand's own parse (and the round-trip test in
// cmd/chaos).
const (
	FlagSeed           = "seed"
	FlagTimeLimit      = "time-limit"
	FlagFaults         = "faults"
	FlagMinHold        = "min-hold"
	FlagMaxHold        = "max-hold"
	FlagBugs           = "bugs"
	FlagNodeFlag       = "node-flag"
	FlagReplay         = "replay"
	FlagNodes          = "nodes"
	FlagZK             = "zk"
	FlagPartitions     = "partitions"
	FlagNoWorkload     = "no-workload"
	FlagProducers      = "producers"
	FlagReaders        = "readers"
	FlagSessionTimeout = "session-timeout"
	FlagNonIdempotent  = "non-idempotent"
)

// Flags of random runs aimed at the control plane (the control-plane
// workload, dense overlapping schedules, the spread topic).
const (
	FlagAdmin        = "admin"
	FlagFaultDensity = "fault-density"
	FlagSpreadTopic  = "spread-topic"
)

// FaultsNone is the --faults value of a fault-free run.
const FaultsNone = "none"

// RunFlags are the flags of `chaos run` that describe one run, the ones a
// replay command repeats. The CLI registers them with Register and turns
// them into a harness configuration.
type RunFlags struct {
	Seed           uint64
	TimeLimit      time.Duration
	Faults         string // comma-separated kinds, "all" or FaultsNone
	MinHold        time.Duration
	MaxHold        time.Duration
	Bugs           string // comma-separated bug switches
	NodeFlags      []string
	Replay         string // a stored schedule.json
	Nodes          int
	ZK             int
	Partitions     int32
	NoWorkload     bool
	Producers      int
	Readers        int
	SessionTimeout time.Duration
	NonIdempotent  bool
	// The control-plane workload, dense schedules and the spread topic.
	Admin        bool
	FaultDensity float64
	SpreadTopic  bool
}

// Register defines the flags on fs, bound to r, with their defaults and
// help. faultNames lists the fault kinds for the help text.
func (r *RunFlags) Register(fs *pflag.FlagSet, faultNames []string) {
	fs.Uint64Var(&r.Seed, FlagSeed, uint64(time.Now().UnixNano()%1_000_000), "seed of the first run (fault schedule and workload); when not given, drawn from the clock (run.json records it)")
	fs.DurationVar(&r.TimeLimit, FlagTimeLimit, 30*time.Second, "workload and nemesis duration per run")
	fs.StringVar(&r.Faults, FlagFaults, "all", "fault kinds, comma-separated, 'all' or '"+FaultsNone+"': "+strings.Join(faultNames, ", "))
	fs.DurationVar(&r.MinHold, FlagMinHold, 2*time.Second, "shortest time a fault is held")
	fs.DurationVar(&r.MaxHold, FlagMaxHold, 6*time.Second, "longest time a fault is held")
	fs.StringVar(&r.Bugs, FlagBugs, "", "node bug switches to turn on, comma-separated (e.g. KAFKA-532); default: every fix on")
	fs.StringSliceVar(&r.NodeFlags, FlagNodeFlag, nil, "extra flag for every node program (repeatable), e.g. --node-flag=--offline-election=unclean")
	fs.StringVar(&r.Replay, FlagReplay, "", "replay a stored schedule.json (sets seed and time limit)")
	fs.IntVar(&r.Nodes, FlagNodes, 3, "brokers")
	fs.IntVar(&r.ZK, FlagZK, 3, "ZooKeeper servers: 1, 3 or 5")
	fs.Int32Var(&r.Partitions, FlagPartitions, 3, "partitions of the workload topic")
	fs.BoolVar(&r.NoWorkload, FlagNoWorkload, false, "control plane only: no client traffic (fencing, leader and liveness checkers still run)")
	fs.IntVar(&r.Producers, FlagProducers, 4, "producer processes")
	fs.IntVar(&r.Readers, FlagReaders, 2, "reader processes")
	fs.DurationVar(&r.SessionTimeout, FlagSessionTimeout, 3*time.Second, "brokers' ZooKeeper session timeout")
	fs.BoolVar(&r.NonIdempotent, FlagNonIdempotent, false, "plain at-least-once producers (default: idempotent, as every Kafka client since 3.0)")
	// The control-plane workload, dense schedules and the spread topic.
	fs.BoolVar(&r.Admin, FlagAdmin, true, "run the control-plane workload beside the clients (reassignments, preferred elections, topic creation, controlled shutdowns); --admin=false to leave the controller idle")
	fs.Float64Var(&r.FaultDensity, FlagFaultDensity, 0, "mean number of faults in force at once, overlapping (0: one fault at a time with quiet gaps; at most 8)")
	fs.BoolVar(&r.SpreadTopic, FlagSpreadTopic, true, "with 3 or more brokers, also create TOPIC-rf2: RF 2, one partition per broker, assignments rotating, no clients (partitions a controller does not host); --spread-topic=false for the workload topic alone")
}

// ReplayCommand is the one-line command that replays the run in runDir
// described by info. With the stored schedule the replay repeats the exact
// faults (--replay sets seed and time limit from it); without one it
// re-plans from the seed. A scenario run replays as `chaos repro NAME` (with
// --fixed when no bug switch was on): its driver, not a schedule, decides
// the faults. A nil info yields "" (nothing to replay from).
func ReplayCommand(runDir string, info *Info, haveSchedule bool) string {
	if info == nil {
		return ""
	}
	if info.Scenario != "" {
		if len(info.Bugs) == 0 {
			return "chaos repro " + shellQuote(info.Scenario) + " --fixed"
		}
		return "chaos repro " + shellQuote(info.Scenario)
	}
	args, err := ReplayArgs(runDir, info, haveSchedule)
	if err != nil {
		// Only a flag this package defines wrongly gets here; say so in
		// the command rather than print one the CLI would refuse.
		return "chaos run # cannot build the replay command: " + err.Error()
	}
	return "chaos run " + strings.Join(args, " ")
}

// ReplayArgs are the `chaos run` arguments of ReplayCommand, shell-quoted.
// Every value goes through the flag set Register defines, so a value the
// CLI would refuse is an error here.
func ReplayArgs(runDir string, info *Info, haveSchedule bool) ([]string, error) {
	var rf RunFlags
	fs := pflag.NewFlagSet("replay", pflag.ContinueOnError)
	rf.Register(fs, nil)
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
	add(FlagSeed, strconv.FormatUint(info.Seed, 10), "")
	if haveSchedule {
		add(FlagReplay, filepath.Join(runDir, ScheduleFile), "")
	} else {
		dur(FlagTimeLimit, info.TimeLimit)
		faults := FaultsNone
		if len(info.Faults) > 0 {
			faults = strings.Join(info.Faults, ",")
		}
		add(FlagFaults, faults, "")
		dur(FlagMinHold, info.MinHold)
		dur(FlagMaxHold, info.MaxHold)
		// A dense schedule re-plans densely.
		if info.Density > 0 {
			add(FlagFaultDensity, strconv.FormatFloat(info.Density, 'g', -1, 64), "")
		}
	}
	if len(info.Bugs) > 0 {
		add(FlagBugs, strings.Join(info.Bugs, ","), "")
	}
	for _, f := range info.NodeFlags {
		add(FlagNodeFlag, f, "eq")
	}
	if info.Nodes > 0 {
		add(FlagNodes, strconv.Itoa(info.Nodes), "")
	}
	if info.ZK.Servers > 0 {
		add(FlagZK, strconv.Itoa(info.ZK.Servers), "")
	}
	if info.Partitions > 0 {
		add(FlagPartitions, strconv.Itoa(int(info.Partitions)), "")
	}
	if info.NoWorkload {
		add(FlagNoWorkload, "true", "bool")
	} else if info.Producers > 0 || info.Readers > 0 {
		add(FlagProducers, strconv.Itoa(info.Producers), "")
		add(FlagReaders, strconv.Itoa(info.Readers), "")
		if info.NonIdempotent {
			add(FlagNonIdempotent, "true", "bool")
		}
	}
	dur(FlagSessionTimeout, info.ZKSessionTimeout)
	// Always written, so a replay matches whatever the default.
	add(FlagAdmin, strconv.FormatBool(info.Admin), "eq")
	add(FlagSpreadTopic, strconv.FormatBool(info.SpreadTopic != ""), "eq")
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, nil
}

// shellQuote quotes s for a POSIX shell when it needs it, so a copied
// command works even for run directories with spaces.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=,:+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
