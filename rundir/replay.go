package rundir

import (
	"strings"
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
