package rundir

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// ReplayCommand is the one-line command that replays the run in runDir
// described by info. With the stored schedule the replay repeats the exact
// faults (--replay sets seed and time limit from it); without one it
// re-plans from the seed. A scenario run replays as `chaos repro BUG` (with
// --fixed when no bug switch was on, or --mode for a scenario of more than
// two modes, which names its runs "BUG MODE"): its driver, not a schedule,
// decides the faults. A nil info yields "" (nothing to replay from).
func ReplayCommand(runDir string, info *Info, haveSchedule bool) string {
	if info == nil {
		return ""
	}
	if info.Scenario != "" {
		if bug, mode, ok := strings.Cut(info.Scenario, " "); ok {
			return "chaos repro " + shellQuote(bug) + " --mode " + shellQuote(mode)
		}
		if len(info.Bugs) == 0 {
			return "chaos repro " + shellQuote(info.Scenario) + " --fixed"
		}
		return "chaos repro " + shellQuote(info.Scenario)
	}
	args, err := info.ReplayArgs(runDir, haveSchedule)
	if err != nil {
		// Only a flag this package defines wrongly gets here; say so in
		// the command rather than print one the CLI would refuse.
		return "chaos run # cannot build the replay command: " + err.Error()
	}
	return "chaos run " + strings.Join(args, " ")
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
	dur(FlagSessionTimeout, s.ZKSessionTimeout)
	// Always written, so a replay matches whatever the default: runs
	// stored before these settings existed had neither.
	add(FlagAdmin, strconv.FormatBool(s.Admin), "eq")
	add(FlagSpreadTopic, strconv.FormatBool(s.SpreadTopic != ""), "eq")
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
