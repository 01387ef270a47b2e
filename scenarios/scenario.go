// Package scenarios holds one regression scenario per historical Kafka bug:
// the cluster it needs, the bug switch it turns on, and a driver that hits
// the bug's exact fault window (with failpoints, pauses and restarts) instead
// of waiting for luck. With the bug switch on, a scenario must make the
// checker it names fail; with every fix on (--fixed) the same scenario must
// pass. Track record: README.md.
//
// Scenarios drive the cluster only through harness.Live (containers,
// ZooKeeper, the node's admin port and event log); they never import the node
// program.
package scenarios

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/zkchaos/zkchaos/harness"
)

// Scenario is one historical bug's reproduction.
type Scenario interface {
	// Name is the bug id, e.g. "KAFKA-532".
	Name() string
	// Summary says in one line what goes wrong.
	Summary() string
	// Config returns the run: cluster, bug switches (none when fixed), the
	// driver, time limit.
	Config(fixed bool) harness.RunConfig
	// Catches names the checker that must find the bug.
	Catches() string
}

var registry = map[string]Scenario{}

func register(s Scenario) { registry[strings.ToUpper(s.Name())] = s }

// Get returns the scenario named name (case-insensitive), or an error that
// lists the known ones.
func Get(name string) (Scenario, error) {
	if s, ok := registry[strings.ToUpper(name)]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("unknown scenario %q (known: %s)", name, strings.Join(Names(), ", "))
}

// Names lists the scenarios, sorted.
func Names() []string {
	var out []string
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return slices.Clip(out)
}
