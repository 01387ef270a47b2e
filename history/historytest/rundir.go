package historytest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/zkchaos/zkchaos/history"
)

// WriteSource writes evs, as they are, to runDir's history file of source
// src (RUN/history/<src>.jsonl, the folder made if missing), through the
// writer a run uses, so the file reads back as the run's own would.
func WriteSource(t testing.TB, runDir, src string, node int32, evs ...history.Event) {
	t.Helper()
	hdir := filepath.Join(runDir, history.HistoryDir)
	if err := os.MkdirAll(hdir, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := history.Create(filepath.Join(hdir, src+".jsonl"), src, node)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if err := w.Write(e); err != nil {
			w.Close()
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
