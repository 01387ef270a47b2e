package harness

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
)

// writeNodeLog appends n events of kind k to the log at path.
func writeNodeLog(t testing.TB, path string, k history.Kind, n int) {
	t.Helper()
	w, err := history.Create(path, "n1", 1)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		ev := history.Event{Kind: k, Time: 1}
		switch k {
		case history.KindFaultStart:
			ev.Fault = &history.Fault{ID: "f", Name: "failpoint", Failpoint: "controller-before-elect"}
		case history.KindZKWrite:
			ev.ZKWrite = &history.ZKWrite{Path: "/controller", Op: "create", Outcome: history.ZKOK}
		case history.KindPhase:
			ev.Phase = &history.Phase{Name: "workload", Mark: "start"}
		case history.KindNodeStart:
			ev.Process = &history.Process{}
		case history.KindBrokerRegistered:
			ev.Registration = &history.Registration{}
		}
		if err := w.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// The log is read from where the last read stopped: events written between
// calls are added once, kinds the nemesis does not ask about are dropped,
// a line still being written waits for its newline, and a log that shrank
// is read again from its start.
func TestNodeLogsReadsOnlyWhatIsNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n1.jsonl")
	l := nodeLogs{keep: nemesisKinds}
	count := func(want int) {
		t.Helper()
		evs, err := l.events(1, path)
		if err != nil || len(evs) != want {
			t.Fatalf("%d events, %v; want %d", len(evs), err, want)
		}
	}
	if _, err := l.events(1, path); err == nil {
		t.Fatal("no log yet: no error")
	}
	writeNodeLog(t, path, history.KindFaultStart, 2)
	writeNodeLog(t, path, history.KindPhase, 3)
	count(2)
	count(2)
	writeNodeLog(t, path, history.KindZKWrite, 4)
	count(6)

	// Half a line: left for later.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	full := b[len(b)-len(lastLine(b)):]
	fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.Write(full[:10]); err != nil {
		t.Fatal(err)
	}
	count(6)
	if _, err := fh.Write(full[10:]); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	count(7)

	// A new, shorter file in its place.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	writeNodeLog(t, path, history.KindZKWrite, 1)
	count(1)

	// A bad line is an error naming the file.
	if err := os.WriteFile(path, append(b, []byte("{not json\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := l.events(1, path); err == nil {
		t.Fatal("bad line: no error")
	}
}

// lastLine is b's last newline-terminated line, newline included.
func lastLine(b []byte) []byte {
	i := len(b) - 2
	for i >= 0 && b[i] != '\n' {
		i--
	}
	return b[i+1:]
}

// BenchmarkNodeEventsPoll is one failpoint poll on a long run's node log
// (20,000 events) that grew by 10 events since the last poll: "tail" reads
// only the new lines, "whole" decodes the file again as the nemesis used to.
func BenchmarkNodeEventsPoll(b *testing.B) {
	path := filepath.Join(b.TempDir(), "n1.jsonl")
	writeNodeLog(b, path, history.KindZKWrite, 20000)
	b.Run("tail", func(b *testing.B) {
		l := nodeLogs{keep: nemesisKinds}
		if _, err := l.events(1, path); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			b.StopTimer()
			writeNodeLog(b, path, history.KindZKWrite, 10)
			b.StartTimer()
			if _, err := l.events(1, path); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("whole", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			writeNodeLog(b, path, history.KindZKWrite, 10)
			b.StartTimer()
			fh, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := history.Decode(fh, path); err != nil {
				b.Fatal(err)
			}
			fh.Close()
		}
	})
}

// An operator's stop waits for the latest process's registration: one from
// an earlier process does not count once the node started again.
func TestWaitRegisteredWantsTheLatestProcess(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, history.HistoryDir, "n1.jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	logs := &nodeLogs{keep: registrationKinds}
	ctx := context.Background()
	if err := waitRegistered(ctx, logs, dir, 1, 0); err == nil {
		t.Fatal("no log yet: registered")
	}
	writeNodeLog(t, path, history.KindNodeStart, 1)
	writeNodeLog(t, path, history.KindBrokerRegistered, 1)
	writeNodeLog(t, path, history.KindPhase, 2)
	if err := waitRegistered(ctx, logs, dir, 1, 0); err != nil {
		t.Fatalf("registered after its start: %v", err)
	}
	writeNodeLog(t, path, history.KindNodeStart, 1)
	if err := waitRegistered(ctx, logs, dir, 1, 0); err == nil || !strings.Contains(err.Error(), "n1 has not registered") {
		t.Fatalf("restarted, not registered again: %v", err)
	}
	// The registration lands while the stop waits.
	written := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		w, err := history.Create(path, "n1", 1)
		if err == nil {
			err = errors.Join(w.Write(history.Event{Kind: history.KindBrokerRegistered, Time: 1, Registration: &history.Registration{}}), w.Close())
		}
		written <- err
	}()
	if err := waitRegistered(ctx, logs, dir, 1, 5*time.Second); err != nil {
		t.Fatalf("registered again while waiting: %v", err)
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
}
