package judge

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/zkchaos/zkchaos/checkers"
	"github.com/zkchaos/zkchaos/rundir"
)

// An unreadable history is bad input (ErrBadHistory, exit 2), never a
// verdict, and leaves no results.json behind.
func TestCheckBadHistory(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string // history/NAME → content; nil: no history folder
	}{
		{"no history folder", nil},
		{"not json", map[string]string{"n1.jsonl": "{not json\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.files != nil {
				if err := os.MkdirAll(filepath.Join(dir, rundir.HistoryDir), 0o755); err != nil {
					t.Fatal(err)
				}
				for name, body := range tt.files {
					if err := os.WriteFile(filepath.Join(dir, rundir.HistoryDir, name), []byte(body), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			rep, err := Check(dir, checkers.DefaultConfig())
			if !errors.Is(err, ErrBadHistory) || rep != nil {
				t.Fatalf("Check = %v, %v; want ErrBadHistory", rep, err)
			}
			if _, err := os.Stat(filepath.Join(dir, rundir.ResultsFile)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s after a bad history: %v", rundir.ResultsFile, err)
			}
		})
	}
}
