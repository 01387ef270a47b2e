// Package rundirtest is test support for packages that read or write run
// directories: the runs kept under cmd/chaos/testdata, found from any
// package, and writable copies of them. Only tests import it.
package rundirtest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/zkchaos/zkchaos/history"
)

// Kafka532 names the stored KAFKA-532 run (a paused controller's stale
// LeaderAndIsr accepted): invalid for controller-fencing.
const Kafka532 = "kafka-532"

// Stored is the path of the run directory kept as cmd/chaos/testdata/name,
// wherever the calling test runs from.
func Stored(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "cmd", "chaos", "testdata", name)
}

// Copy copies the run directory src into a new temporary directory and
// returns that, so a test can add or change files without touching src.
func Copy(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatalf("copy run %s: %v", src, err)
	}
	return dst
}

// AppendHistory appends text as it is to the run's history file name (a
// line torn by a crash, a line written out of order), for a test of how a
// reader takes it.
func AppendHistory(t testing.TB, dir, name, text string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, history.HistoryDir, name), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
