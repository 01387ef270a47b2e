// Package nodecover owns the node program's code coverage in a run: the
// build flags that instrument it, the environment that tells each node
// process where to write its counters, and merging what every process of a
// run reached into the run's coverage.json, which power and reports read.
//
// The node program writes its counters itself while it runs
// (cmd/kafkanode's flushCoverage), because the nemesis kills nodes with
// SIGKILL and a killed process writes nothing at exit. This package only
// reads what they left in their node directories; it must not start
// containers or read the history.
package nodecover

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// File is the merged coverage of a run, in the run directory.
const File = "coverage.json"

// Dir is where a node process writes its counters, under its node
// directory (RUN_DIR/nodes/nN, mounted at the node's /node).
const Dir = "cover"

// coverPkg is what is instrumented: the node program's own packages, not
// the libraries it links (their blocks would swamp the node's in the
// totals and say nothing about which of its windows a run reached). The
// main package must be among them: without it the program registers no
// coverage meta-data and writes nothing.
const coverPkg = "github.com/zkchaos/zkchaos/node/...,github.com/zkchaos/zkchaos/cmd/kafkanode"

// BuildFlags are the `go build` flags of an instrumented node program.
// Atomic mode, because the program writes its counters while its
// goroutines run (runtime/coverage refuses that in set mode); the merge
// still only asks whether a block was reached.
func BuildFlags() []string {
	return []string{"-cover", "-covermode=atomic", "-coverpkg=" + coverPkg}
}

// Prepare makes the counter directory of the node whose directory on the
// host is hostNodeDir: an instrumented program looks for $GOCOVERDIR as it
// starts, before any of its own code runs.
func Prepare(hostNodeDir string) error {
	if err := os.MkdirAll(filepath.Join(hostNodeDir, Dir), 0o755); err != nil {
		return fmt.Errorf("coverage directory: %w", err)
	}
	return nil
}

// Env is the environment of an instrumented node process whose node
// directory is mounted at nodeDir in its container.
func Env(nodeDir string) map[string]string {
	return map[string]string{"GOCOVERDIR": nodeDir + "/" + Dir}
}

// ErrNoCoverage says no node of the run left coverage data (an
// uninstrumented build, or nodes that never ran for a second).
var ErrNoCoverage = errors.New("no node left coverage data")

// Summary is a run's merged coverage.
type Summary struct {
	// Blocks is how many blocks of the node program are instrumented;
	// Covered how many some node process of the run reached.
	Blocks  int `json:"blocks"`
	Covered int `json:"covered"`
	// Packages break the figures down by package, in import-path order.
	Packages []Package `json:"packages"`
	// Reached names every reached block ("file:line.col,line.col"), so
	// runs can be compared block by block (which run reached what no
	// other did).
	Reached []string `json:"reached"`
}

// Package is one package's share of a Summary.
type Package struct {
	Path    string `json:"path"`
	Blocks  int    `json:"blocks"`
	Covered int    `json:"covered"`
}

// Percent is the share of instrumented blocks reached.
func (s Summary) Percent() float64 {
	if s.Blocks == 0 {
		return 0
	}
	return 100 * float64(s.Covered) / float64(s.Blocks)
}

// Merge merges the counters every node process of the run in runDir left
// (RUN_DIR/nodes/*/cover) with `go tool covdata`, writes coverage.json and
// returns it.
func Merge(ctx context.Context, runDir string) (Summary, error) {
	dirs, err := filepath.Glob(filepath.Join(runDir, "nodes", "*", Dir))
	if err != nil {
		return Summary{}, err
	}
	var inputs []string
	for _, d := range dirs {
		if metas, _ := filepath.Glob(filepath.Join(d, "covmeta.*")); len(metas) > 0 {
			inputs = append(inputs, d)
		}
	}
	if len(inputs) == 0 {
		return Summary{}, fmt.Errorf("merge coverage of %s: %w", runDir, ErrNoCoverage)
	}
	tmp, err := os.CreateTemp("", "nodecover-*.txt")
	if err != nil {
		return Summary{}, err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.CommandContext(ctx, "go", "tool", "covdata", "textfmt", "-i="+strings.Join(inputs, ","), "-o="+tmp.Name())
	if out, err := cmd.CombinedOutput(); err != nil {
		return Summary{}, fmt.Errorf("go tool covdata textfmt over %s: %w\n%s", strings.Join(inputs, ","), err, strings.TrimSpace(string(out)))
	}
	f, err := os.Open(tmp.Name())
	if err != nil {
		return Summary{}, err
	}
	defer f.Close()
	s, err := parseTextFmt(f)
	if err != nil {
		return Summary{}, fmt.Errorf("coverage of %s: %w", runDir, err)
	}
	b, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		return Summary{}, err
	}
	if err := os.WriteFile(filepath.Join(runDir, File), append(b, '\n'), 0o644); err != nil {
		return Summary{}, fmt.Errorf("write %s: %w", File, err)
	}
	return s, nil
}

// Read reads a run's coverage.json; a run without one answers an error
// wrapping os.ErrNotExist.
func Read(runDir string) (Summary, error) {
	b, err := os.ReadFile(filepath.Join(runDir, File))
	if err != nil {
		return Summary{}, err
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return Summary{}, fmt.Errorf("%s: %w", filepath.Join(runDir, File), err)
	}
	return s, nil
}

// parseTextFmt reads Go's text coverage profile ("mode: set", then
// "file:start,end statements count" a block). A block listed more than
// once (from several counter files) is reached if any line says so.
func parseTextFmt(f *os.File) (Summary, error) {
	reached := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		t := sc.Text()
		if line == 1 && strings.HasPrefix(t, "mode:") || t == "" {
			continue
		}
		fields := strings.Fields(t)
		if len(fields) != 3 {
			return Summary{}, fmt.Errorf("profile line %d: %q: want \"file:start,end statements count\"", line, t)
		}
		n, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil {
			return Summary{}, fmt.Errorf("profile line %d: count %q: %w", line, fields[2], err)
		}
		reached[fields[0]] = reached[fields[0]] || n > 0
	}
	if err := sc.Err(); err != nil {
		return Summary{}, err
	}
	pkgs := map[string]*Package{}
	var s Summary
	for block, hit := range reached {
		file, _, ok := strings.Cut(block, ":")
		if !ok {
			return Summary{}, fmt.Errorf("profile block %q names no file", block)
		}
		dir := filepath.Dir(file)
		p := pkgs[dir]
		if p == nil {
			p = &Package{Path: dir}
			pkgs[dir] = p
		}
		p.Blocks++
		s.Blocks++
		if hit {
			p.Covered++
			s.Covered++
			s.Reached = append(s.Reached, block)
		}
	}
	sort.Strings(s.Reached)
	for _, p := range pkgs {
		s.Packages = append(s.Packages, *p)
	}
	sort.Slice(s.Packages, func(i, j int) bool { return s.Packages[i].Path < s.Packages[j].Path })
	return s, nil
}
