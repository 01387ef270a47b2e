package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"
)

// Info is RUN_DIR/run.json: what a run was asked to do, written when it
// starts. Its fields are chosen for the report, the runs index and the
// replay command; the keys are those run.json has always had, so runs stored
// by earlier builds read the same. Durations are in nanoseconds.
type Info struct {
	RunID  string `json:"RunID"`
	RunDir string `json:"RunDir"`
	Seed   uint64 `json:"Seed"`
	ZK     ZK     `json:"ZK"`
	Nodes  int    `json:"Nodes"`
	// Bugs are the node bug switches turned on; none means every fix on.
	Bugs             []string      `json:"Bugs"`
	NodeFlags        []string      `json:"NodeFlags"`
	ZKSessionTimeout time.Duration `json:"ZKSessionTimeout"`
	Topic            string        `json:"Topic"`
	Partitions       int32         `json:"Partitions"`
	RF               int           `json:"RF"`
	Producers        int           `json:"Producers"`
	Readers          int           `json:"Readers"`
	Acks             int           `json:"Acks"`
	NoWorkload       bool          `json:"NoWorkload"`
	// NonIdempotent: the workload's producers were not idempotent. Runs
	// stored before it existed had no idempotent producer and read false.
	NonIdempotent bool          `json:"NonIdempotent,omitempty"`
	TimeLimit     time.Duration `json:"TimeLimit"`
	// Faults are the fault kinds a schedule was planned from; empty means a
	// fault-free run (or a scenario, whose driver decides the faults).
	Faults  []string      `json:"Faults"`
	MinHold time.Duration `json:"MinHold"`
	MaxHold time.Duration `json:"MaxHold"`
	Settle  time.Duration `json:"Settle"`
	// Scenario names the regression scenario that drove the run, if any.
	Scenario string `json:"Scenario,omitempty"`
	// Admin: the control-plane workload ran beside the clients.
	Admin bool `json:"Admin,omitempty"`
	// Density is the mean number of faults in force at once of a dense
	// schedule; zero for one fault at a time.
	Density float64 `json:"Density,omitempty"`
	// SpreadTopic names the run's second topic (RF 2, one partition per
	// broker, assignments rotating from broker 1, no clients;
	// harness.RunConfig.SpreadTopic); "" when the run had none, as every
	// run stored before it existed.
	SpreadTopic string `json:"SpreadTopic,omitempty"`
	// Build is the commit the binary that made the run was built from
	// (BuildRevision), so figures folded from runs of several days name
	// the builds they mix; "" for test binaries and runs stored before it
	// existed.
	Build string `json:"Build,omitempty"`
}

// ZK is the ZooKeeper ensemble of a run.
type ZK struct {
	Servers  int           `json:"Servers"`
	TickTime time.Duration `json:"TickTime,omitempty"`
}

// WriteInfo stores info as RUN_DIR/run.json.
func WriteInfo(runDir string, info Info) error {
	return writeJSONAtomic(filepath.Join(runDir, RunFile), info)
}

// ReadInfo loads RUN_DIR/run.json. A missing file is (nil, nil): runs
// stored before run.json existed, and hand-made test runs, have none.
func ReadInfo(runDir string) (*Info, error) {
	p := filepath.Join(runDir, RunFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read run config: %w", err)
	}
	var ri Info
	if err := json.Unmarshal(b, &ri); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return &ri, nil
}

// BuildRevision is the VCS commit this binary was built from, shortened to
// 12 hex digits, with "+modified" when the checkout had changes; "" when
// the build recorded none (go run, go test, -buildvcs=false).
func BuildRevision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, modified string
	for _, st := range bi.Settings {
		switch st.Key {
		case "vcs.revision":
			rev = st.Value
		case "vcs.modified":
			if st.Value == "true" {
				modified = "+modified"
			}
		}
	}
	if rev == "" {
		return ""
	}
	return rev[:min(12, len(rev))] + modified
}
