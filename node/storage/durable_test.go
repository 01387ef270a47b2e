package storage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/history"
)

// loseUnflushed does to dir what the crash-lose-unflushed fault does to a
// down node: every segment cut to the length its sidecar says was fsynced
// (an unlisted segment to nothing).
func loseUnflushed(t *testing.T, dir string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, history.DurableLengthsFile))
	if err != nil {
		t.Fatal(err)
	}
	lengths, err := history.ParseDurableLengths(data)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), segmentSuffix) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if n := lengths[e.Name()]; n < st.Size() {
			if err := os.Truncate(p, n); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestUnflushedSuffixIsWhatACrashLoses: the durable lengths follow the
// fsyncs the log makes where Kafka flushes (roll, truncation, Sync, Close)
// and nothing else, a restart makes nothing durable, and cutting the files
// to them leaves a log that opens cleanly at the last flushed batch, with
// the epoch cache cut to match.
func TestUnflushedSuffixIsWhatACrashLoses(t *testing.T) {
	const batch = 5 // records per batch
	cases := []struct {
		name string
		// do runs on an open log of 3 KiB segments (a batch of 5 records
		// of 100 bytes is about 650 bytes, so the 5th batch rolls) and
		// leaves it open, as a SIGKILL does.
		do      func(t *testing.T, l *Log, dir string) *Log
		wantLEO int64 // after the loss and a reopen
	}{
		{name: "nothing ever flushed", do: func(t *testing.T, l *Log, _ string) *Log {
			appendN(t, l, 3, batch, 0, 0)
			return l
		}, wantLEO: 0},
		{name: "roll flushes the sealed segment only", do: func(t *testing.T, l *Log, _ string) *Log {
			appendN(t, l, 6, batch, 0, 0)
			if len(l.segs) != 2 {
				t.Fatalf("%d segments, want 2", len(l.segs))
			}
			return l
		}, wantLEO: 20},
		{name: "Sync flushes the active segment", do: func(t *testing.T, l *Log, _ string) *Log {
			appendN(t, l, 2, batch, 0, 0)
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			appendN(t, l, 1, batch, 1, 10)
			return l
		}, wantLEO: 10},
		{name: "a truncation is fsynced at its new end", do: func(t *testing.T, l *Log, _ string) *Log {
			appendN(t, l, 3, batch, 0, 0)
			if _, err := l.TruncateTo(10); err != nil {
				t.Fatal(err)
			}
			appendN(t, l, 2, batch, 1, 10)
			return l
		}, wantLEO: 10},
		{name: "a restart after a kill makes nothing durable", do: func(t *testing.T, l *Log, dir string) *Log {
			appendN(t, l, 3, batch, 0, 0)
			l.closeFiles() // a SIGKILL: no Close, no flush
			l2 := mustOpen(t, dir, Options{SegmentBytes: 3 << 10})
			if got := l2.LogEndOffset(); got != 15 {
				t.Fatalf("after the kill LEO %d, want 15 (the page cache kept it)", got)
			}
			return l2
		}, wantLEO: 0},
		{name: "a clean close flushes everything", do: func(t *testing.T, l *Log, dir string) *Log {
			appendN(t, l, 3, batch, 0, 0)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			return mustOpen(t, dir, Options{SegmentBytes: 3 << 10})
		}, wantLEO: 15},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			l := c.do(t, mustOpen(t, dir, Options{SegmentBytes: 3 << 10}), dir)
			before := l.LogEndOffset()
			l.closeFiles()
			loseUnflushed(t, dir)
			l2 := mustOpen(t, dir, Options{SegmentBytes: 3 << 10})
			defer l2.Close()
			if got := l2.LogEndOffset(); got != c.wantLEO {
				t.Fatalf("LEO after losing the unflushed suffix %d (before %d), want %d", got, before, c.wantLEO)
			}
			if e := l2.Epochs(); len(e) > 0 && e[len(e)-1].StartOffset >= max(c.wantLEO, 1) && c.wantLEO > 0 {
				t.Fatalf("epoch cache %v has an entry at or past the LEO %d", e, c.wantLEO)
			}
			readAll(t, l2)
			for name, n := range l2.DurableLengths() {
				st, err := os.Stat(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				if n != st.Size() {
					t.Fatalf("%s: durable %d of %d bytes after the loss, want all", name, n, st.Size())
				}
			}
		})
	}
}

// TestDurableLengthsRefuseADamagedSidecar: a sidecar that does not parse
// is a start-up error naming it, never a guess.
func TestDurableLengthsRefuseADamagedSidecar(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{})
	appendN(t, l, 1, 1, 0, 0)
	l.closeFiles()
	if err := os.WriteFile(filepath.Join(dir, history.DurableLengthsFile), []byte("0\n1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := Open(dir, Options{})
	if err == nil || !strings.Contains(err.Error(), history.DurableLengthsFile) {
		t.Fatalf("Open: %v, want an error naming %s", err, history.DurableLengthsFile)
	}
}
