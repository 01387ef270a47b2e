// Package scenarios holds one regression scenario per historical Kafka bug:
// the cluster it needs, the bug switch it turns on, and a driver that hits
// the bug's exact fault window (with failpoints, pauses and restarts) instead
// of waiting for luck. With the bug switch on, a scenario must make the
// checker it names fail; with the fix on the same scenario must pass.
// Track record: README.md.
//
// Scenarios are plain values listed in All; there is no registration. A
// scenario names its checker as a value of the checkers package, so a
// scenario cannot point at a checker that does not exist.
//
// Scenarios drive the cluster only through harness.Live (containers,
// ZooKeeper, the node's admin port and event log); they never import the node
// program, and they do not check or render runs (pipeline/ does).
package scenarios

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/harness"
	"github.com/zkchaos/zkchaos/nemesis"
)

// Scenario is one historical bug's reproduction.
type Scenario struct {
	// Bug is the bug id, e.g. "KAFKA-532"; it is also the scenario's name.
	Bug string
	// Summary says in one line what goes wrong.
	Summary string
	// Fix says in one line what the fixed run proves.
	Fix string
	// Catches is the checker that must find the bug, as the value
	// checkers.All returns for Check.
	Catches checkers.Checker
	// Check holds the checker knobs the scenario's runs are judged with.
	Check checkers.Config
	// Modes are the runs of the scenario, all on the same driver and seed:
	// the first has the bug, the last has the fix, and any in between are
	// alternatives shown beside them (KAFKA-3861's unclean election).
	Modes []Mode

	config func(m Mode) harness.RunConfig
}

// Mode is one way of running a scenario.
type Mode struct {
	// Name is what the mode is called on the command line and in reports:
	// "bug" and "fixed", or a policy name.
	Name string
	// Fixed is true for the run with the fix on, which must be valid.
	Fixed bool
	// About says in a few words how this mode differs.
	About string
}

// Config returns the run of mode m: cluster, node flags, driver, time limit.
func (s Scenario) Config(m Mode) harness.RunConfig {
	cfg := s.config(m)
	cfg.Scenario = s.Bug
	if len(s.Modes) > 2 {
		cfg.Scenario = s.Bug + " " + m.Name
	}
	return cfg
}

// BugMode is the run that must reproduce the bug.
func (s Scenario) BugMode() Mode { return s.Modes[0] }

// FixMode is the run that must be valid.
func (s Scenario) FixMode() Mode { return s.Modes[len(s.Modes)-1] }

// Mode returns the mode named name.
func (s Scenario) Mode(name string) (Mode, error) {
	var names []string
	for _, m := range s.Modes {
		if strings.EqualFold(m.Name, name) {
			return m, nil
		}
		names = append(names, m.Name)
	}
	return Mode{}, fmt.Errorf("%s has no mode %q (known: %s)", s.Bug, name, strings.Join(names, ", "))
}

// Checkers returns every checker the scenario's runs go through, with its
// knobs.
func (s Scenario) Checkers() []checkers.Checker { return checkers.All(s.Check) }

// Catcher returns the result of the scenario's checker among results, or
// nil when it is not there.
func (s Scenario) Catcher(results []checkers.Result) *checkers.Result {
	for i := range results {
		if results[i].Checker == s.Catches.Name() {
			return &results[i]
		}
	}
	return nil
}

// Validate reports a scenario whose checker is not one the check step runs,
// or whose modes do not start with a bug run and end with a fixed one.
func (s Scenario) Validate() error {
	if s.Catches == nil {
		return fmt.Errorf("%s: no checker", s.Bug)
	}
	found := false
	for _, c := range s.Checkers() {
		if reflect.TypeOf(c) == reflect.TypeOf(s.Catches) && c.Name() == s.Catches.Name() {
			found = true
		}
	}
	if !found {
		return fmt.Errorf("%s: checker %s (%T) is not among the checkers a run goes through", s.Bug, s.Catches.Name(), s.Catches)
	}
	if len(s.Modes) < 2 || s.BugMode().Fixed || !s.FixMode().Fixed {
		return fmt.Errorf("%s: modes must start with the bug run and end with the fixed run", s.Bug)
	}
	if s.config == nil {
		return fmt.Errorf("%s: no run configuration", s.Bug)
	}
	return nil
}

// oneSwitch completes s, a scenario with one bug switch named after its
// bug: two modes, the switch on and every fix on, both running run (the
// bug mode with the switch on).
func oneSwitch(s Scenario, run harness.RunConfig) Scenario {
	s.Modes = []Mode{
		{Name: "bug", About: "bug switch " + s.Bug + " on"},
		{Name: "fixed", Fixed: true, About: "every fix on"},
	}
	s.config = func(m Mode) harness.RunConfig {
		cfg := run
		cfg.NodeFlags = slices.Clone(run.NodeFlags) // each run its own
		if !m.Fixed {
			cfg.Bugs = []string{s.Bug}
		}
		return cfg
	}
	return s
}

// begin starts a driver: the time its window opens (what it waits on
// events from) and the controller it starts from.
func begin(ctx context.Context, l *harness.Live, bug string) (start int64, controller int, err error) {
	start = time.Now().UnixNano()
	controller, err = l.World.Controller(ctx)
	if err != nil {
		return start, -1, fmt.Errorf("%s: find controller: %w", bug, err)
	}
	return start, controller, nil
}

// stopCleanly stops broker t with SIGTERM and records the stop as a fault
// until the returned restart starts it again. With --controlled-shutdown=false
// in the scenario's node flags the broker closes its ZooKeeper session on the
// way out, so its znodes (registration, /controller) go at once instead of a
// session timeout later: the drivers' windows open without that wait.
func stopCleanly(ctx context.Context, l *harness.Live, bug string, t nemesis.Target) (restart func(context.Context) error, err error) {
	targets := []string{t.Name}
	id := l.Nemesis.Rec.Start("stop", targets, "SIGTERM, controlled shutdown off; down until restarted")
	if err := t.Container.Signal(ctx, "SIGTERM"); err != nil {
		l.Nemesis.Rec.Stop(id, "stop", targets, err)
		return nil, fmt.Errorf("%s: stop %s: %w", bug, t.Name, err)
	}
	return func(ctx context.Context) error {
		err := t.Container.WaitExited(ctx)
		if err == nil {
			err = t.Container.Start(ctx)
		}
		l.Nemesis.Rec.Stop(id, "stop", targets, err)
		if err != nil {
			return fmt.Errorf("%s: restart %s: %w", bug, t.Name, err)
		}
		return nil
	}, nil
}

// All returns every scenario, in bug-number order.
func All() []Scenario {
	return []Scenario{kafka532(), kafka3861(), kafka7235(), kafka16667(), kafka12671()}
}

// Get returns the scenario named name (case-insensitive), or an error that
// lists the known ones.
func Get(name string) (Scenario, error) {
	for _, s := range All() {
		if strings.EqualFold(s.Bug, name) {
			return s, nil
		}
	}
	return Scenario{}, fmt.Errorf("unknown scenario %q (known: %s)", name, strings.Join(Names(), ", "))
}

// Names lists the scenarios in the order of All.
func Names() []string {
	var out []string
	for _, s := range All() {
		out = append(out, s.Bug)
	}
	return out
}
