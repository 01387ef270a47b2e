// Package layers writes down which project package may import which, and
// checks a module's import graph against it (layers_test.go runs the check
// on this module with `go list`). It is test support; nothing imports it.
//
// The harness side is a stack: a package imports only packages of lower
// layers, so two packages of one layer (harness and reports, say) never
// import each other. The system under test (node/, cmd/kafkanode) is a
// separate world: it imports only itself and history (the event schema it
// writes), and the harness side never imports it, because the harness talks
// to the node program only through containers, ZooKeeper, the Kafka protocol
// and the event log.
package layers

import (
	"fmt"
	"slices"
	"strings"
)

// Module is the project's module path.
const Module = "github.com/zkchaos/zkchaos"

// Stack is the harness side, lowest layer first. Paths are relative to
// Module; "x/..." means x and everything under it.
var Stack = [][]string{
	{"internal/ctxsleep", "internal/hugepage", "internal/sizes", "internal/wanterr", "internal/wanttext", "internal/worknames", "internal/zkcall", "internal/zkdial", "mutants", "schedule", "zklayout", "nodecover"},
	{"history", "docker", "reaper", "fourletter", "internal/dockertest", "internal/layers", "zklayout/zkio"},
	{"history/historytest", "linearize", "observer", "workloads", "nemesis", "cmd/reaper"},
	{"checkers", "shrink", "faults", "history/historytest/gen1m"},
	{"rundir", "rundir/rundirtest", "regressions"},
	{"cluster", "judge"},
	{"internal/clustertest", "harness", "reports"},
	{"scenarios", "pipeline", "compat", "power"},
	{"reprobench"},
	{"cmd/chaos"},
}

// NodeWorld is the system under test: it may import itself and Shared only.
var NodeWorld = []string{"node/...", "cmd/kafkanode"}

// Shared is what both sides may import: the event schema, and the
// ZooKeeper handshake bound both sides' clients take from the Java client.
var Shared = []string{"history", "internal/zkdial"}

// Forbidden are imports the rules single out, checked over every
// dependency (not only direct ones) by the test: pkg → what it must never
// reach.
var Forbidden = map[string][]string{
	"harness": {"node/...", "reports", "pipeline"},
	"reports": {"harness", "node/...", "nemesis", "faults", "cluster", "docker", "zklayout/zkio"},
	"judge":   {"harness", "cluster", "docker", "nemesis", "faults", "reports", "zklayout/zkio"},
	// The checkers name znodes through zklayout's constants and never
	// link a ZooKeeper client: they judge a stored history.
	"checkers": {"zklayout/zkio", "observer", "workloads"},
	// cluster names the run directory's entries it needs itself (the
	// reaper's socket) or takes them from history, so that starting
	// containers does not link the checkers.
	"cluster": {"rundir", "checkers", "linearize"},
}

// Offline are the packages behind the commands that must run without
// Docker: `chaos check` (judge) and `chaos report` and `chaos serve`
// (reports). Nothing they depend on may be a container client
// (ContainerClients), so that they link none.
var Offline = []string{"judge", "reports"}

// ContainerClients are the import path prefixes of the container engine's
// client modules (the engine client, testcontainers and what they pull).
var ContainerClients = []string{"github.com/moby/", "github.com/docker/", "github.com/testcontainers/"}

// ContainerDeps returns the deps (full import paths) that are container
// clients.
func ContainerDeps(deps []string) []string {
	var out []string
	for _, d := range deps {
		if slices.ContainsFunc(ContainerClients, func(p string) bool { return strings.HasPrefix(d, p) }) {
			out = append(out, d)
		}
	}
	return out
}

func match(pattern, pkg string) bool {
	if p, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == p || strings.HasPrefix(pkg, p+"/")
	}
	return pkg == pattern
}

// Layer is pkg's index in Stack, or -1.
func Layer(pkg string) int {
	for i, l := range Stack {
		if slices.Contains(l, pkg) {
			return i
		}
	}
	return -1
}

func inNodeWorld(pkg string) bool {
	return slices.ContainsFunc(NodeWorld, func(p string) bool { return match(p, pkg) })
}

// Violations checks a graph of direct imports (project-relative paths,
// other modules and the standard library left out) and says which edges
// break the layering and which packages the layering does not place.
func Violations(imports map[string][]string) []string {
	var out []string
	for pkg, imps := range imports {
		node := inNodeWorld(pkg)
		layer := Layer(pkg)
		if !node && layer < 0 {
			out = append(out, fmt.Sprintf("%s is in no layer: add it to internal/layers.Stack (or NodeWorld)", pkg))
			continue
		}
		for _, imp := range imps {
			switch {
			case node && (inNodeWorld(imp) || slices.Contains(Shared, imp)):
			case node:
				out = append(out, fmt.Sprintf("%s imports %s: the node program imports only node/ and %s", pkg, imp, strings.Join(Shared, ", ")))
			case inNodeWorld(imp):
				out = append(out, fmt.Sprintf("%s imports %s: the harness side never imports the node program's Go packages", pkg, imp))
			case Layer(imp) < 0:
				out = append(out, fmt.Sprintf("%s imports %s, which is in no layer", pkg, imp))
			case Layer(imp) >= layer:
				out = append(out, fmt.Sprintf("%s (layer %d) imports %s (layer %d): a package imports only lower layers", pkg, layer, imp, Layer(imp)))
			}
		}
	}
	slices.Sort(out)
	return out
}

// Reaches checks deps (every package pkg depends on, direct or not) against
// Forbidden[pkg].
func Reaches(pkg string, deps []string) []string {
	var out []string
	for _, d := range deps {
		for _, f := range Forbidden[pkg] {
			if match(f, d) {
				out = append(out, fmt.Sprintf("%s depends on %s", pkg, d))
			}
		}
	}
	return out
}
