package layers

import (
	"os/exec"
	"strings"
	"testing"
)

// goList runs `go list` on the module with format f, one line per package.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func rel(p string) (string, bool) {
	if p == Module {
		return "", true
	}
	return strings.CutPrefix(p, Module+"/")
}

func TestModuleFollowsTheLayering(t *testing.T) {
	graph := map[string][]string{}
	for _, line := range goList(t, "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, Module+"/...") {
		fields := strings.Fields(line)
		pkg, ok := rel(fields[0])
		if !ok {
			continue
		}
		graph[pkg] = nil
		for _, imp := range fields[1:] {
			if r, ok := rel(imp); ok {
				graph[pkg] = append(graph[pkg], r)
			}
		}
	}
	if len(graph) < 10 {
		t.Fatalf("go list found only %d packages", len(graph))
	}
	for _, v := range Violations(graph) {
		t.Error(v)
	}
	for pkg := range Forbidden {
		var deps []string
		for _, d := range goList(t, "-deps", "-f", "{{.ImportPath}}", Module+"/"+pkg) {
			if r, ok := rel(d); ok {
				deps = append(deps, r)
			}
		}
		for _, v := range Reaches(pkg, deps) {
			t.Error(v)
		}
	}
}

// `chaos check`, `chaos report` and `chaos serve` re-check and render a
// stored run on a machine without Docker: the packages behind them link no
// container client. The command package itself links everything, so the
// check is on the packages its offline commands call into.
func TestOfflineCommandsLinkNoContainerClient(t *testing.T) {
	for _, pkg := range Offline {
		deps := goList(t, "-deps", "-f", "{{.ImportPath}}", Module+"/"+pkg)
		if len(deps) < 5 {
			t.Fatalf("go list -deps %s found only %v", pkg, deps)
		}
		if bad := ContainerDeps(deps); len(bad) > 0 {
			t.Errorf("%s links %d container-client packages, first %s: an offline command must not need Docker's client", pkg, len(bad), bad[0])
		}
	}
}

func TestContainerDeps(t *testing.T) {
	tests := []struct {
		deps []string
		want int
	}{
		{[]string{"fmt", Module + "/history", "github.com/spf13/cobra"}, 0},
		{[]string{"github.com/moby/moby/client", "github.com/docker/go-units", "github.com/testcontainers/testcontainers-go/wait"}, 3},
		{[]string{"github.com/mobyx/other"}, 0},
	}
	for _, tt := range tests {
		if got := ContainerDeps(tt.deps); len(got) != tt.want {
			t.Errorf("ContainerDeps(%v) = %v, want %d", tt.deps, got, tt.want)
		}
	}
}

// The rules catch what they are for.
func TestViolations(t *testing.T) {
	tests := []struct {
		name    string
		graph   map[string][]string
		wantSub string // "" means no violation
	}{
		{"clean", map[string][]string{"harness": {"cluster", "rundir", "history"}, "node/broker": {"node/wire", "history"}}, ""},
		{"harness imports reports", map[string][]string{"harness": {"reports"}}, "harness (layer 6) imports reports (layer 6)"},
		{"lower imports higher", map[string][]string{"history": {"checkers"}}, "history (layer 1) imports checkers"},
		{"checkers imports rundir", map[string][]string{"checkers": {"rundir"}}, "imports only lower layers"},
		{"harness imports node", map[string][]string{"harness": {"node/controller"}}, "never imports the node program"},
		{"node imports harness side", map[string][]string{"node/controller": {"nemesis"}}, "imports only node/"},
		{"unplaced package", map[string][]string{"chaosmonkey": {"history"}}, "chaosmonkey is in no layer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Violations(tt.graph)
			if tt.wantSub == "" {
				if len(got) != 0 {
					t.Fatalf("violations in a clean graph: %q", got)
				}
				return
			}
			if len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), tt.wantSub) {
				t.Fatalf("got %q, want one containing %q", got, tt.wantSub)
			}
		})
	}
	if got := Reaches("harness", []string{"cluster", "node/wire", "reports"}); len(got) != 2 {
		t.Errorf("Reaches: %q, want node/wire and reports", got)
	}
}
