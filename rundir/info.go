package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
)

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
