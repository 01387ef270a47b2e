package reaper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	grace        = 150 * time.Millisecond
	firstContact = 300 * time.Millisecond
)

// shortDir is a temporary directory whose socket paths fit sun_path
// (t.TempDir's may not, with a long test name).
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "reaper")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// watching starts Watch on a fresh socket with reap as its removal, until
// ctx or the test ends, and returns the socket and a wait for Watch's
// result.
func watching(t *testing.T, ctx context.Context, reap func(context.Context) error) (string, func() error) {
	t.Helper()
	sock := filepath.Join(shortDir(t), "r.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() { res <- Watch(ctx, ln, Config{FirstContact: firstContact, Grace: grace, Reap: reap}) }()
	wait := sync.OnceValue(func() error { return <-res })
	t.Cleanup(func() {
		cancel()
		wait()
	})
	return sock, wait
}

func dial(t *testing.T, sock string) *Hold {
	t.Helper()
	h, err := Dial(context.Background(), sock, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// reapCounter counts calls of Reap and signals the first.
type reapCounter struct {
	mu    sync.Mutex
	n     int
	first chan struct{}
}

func newReapCounter() *reapCounter { return &reapCounter{first: make(chan struct{})} }

func (r *reapCounter) reap(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	if r.n == 1 {
		close(r.first)
	}
	return nil
}

func (r *reapCounter) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

func TestWatch(t *testing.T) {
	tests := []struct {
		name string
		// owner does what the owner does; the watch then runs for
		// 4 graces (plus the first contact) from its start before reaped
		// is checked.
		owner  func(t *testing.T, sock string)
		reaped bool
	}{
		{"dropped connection reaps", func(t *testing.T, sock string) {
			dial(t, sock).Close()
		}, true},
		{"no owner ever reaps", func(*testing.T, string) {}, true},
		{"held connection keeps the run", func(t *testing.T, sock string) {
			h := dial(t, sock)
			t.Cleanup(func() { h.Close() })
		}, false},
		{"reconnect within the grace keeps the run", func(t *testing.T, sock string) {
			dial(t, sock).Close()
			time.Sleep(grace / 3)
			h := dial(t, sock)
			t.Cleanup(func() { h.Close() })
		}, false},
		{"one of two connections dropped keeps the run", func(t *testing.T, sock string) {
			a, b := dial(t, sock), dial(t, sock)
			a.Close()
			t.Cleanup(func() { b.Close() })
		}, false},
		{"both of two connections dropped reaps", func(t *testing.T, sock string) {
			a, b := dial(t, sock), dial(t, sock)
			a.Close()
			time.Sleep(grace / 3)
			b.Close()
		}, true},
	}
	// Every case watches its own socket at once, and all share one wait:
	// subtests marked parallel would run two at a time on a 2-core machine
	// (-parallel is GOMAXPROCS), and the wait is most of each case.
	type started struct {
		rc   *reapCounter
		wait func() error
		end  time.Time
	}
	runs := make([]started, len(tests))
	for i, tt := range tests {
		rc := newReapCounter()
		sock, wait := watching(t, context.Background(), rc.reap)
		runs[i] = started{rc, wait, time.Now().Add(firstContact + 4*grace)}
		tt.owner(t, sock)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runs[i]
			select {
			case <-r.rc.first:
			case <-time.After(time.Until(r.end)):
			}
			if got := r.rc.calls() > 0; got != tt.reaped {
				t.Fatalf("reaped = %v, want %v", got, tt.reaped)
			}
			if tt.reaped {
				if err := r.wait(); err != nil {
					t.Fatalf("Watch: %v", err)
				}
			}
		})
	}
}

// TestWatchWaitsOutTheGrace: a dropped owner is not reaped before the grace
// is over, and is once it is.
func TestWatchWaitsOutTheGrace(t *testing.T) {
	rc := newReapCounter()
	sock, _ := watching(t, context.Background(), rc.reap)
	h := dial(t, sock)
	time.Sleep(firstContact + grace) // past the first-contact wait
	dropped := time.Now()
	h.Close()
	<-rc.first
	if waited := time.Since(dropped); waited < grace {
		t.Fatalf("reaped %s after the drop, before the grace of %s", waited, grace)
	}
}

// A watch cancelled while it waits returns, every time: the listener is
// closed on the way out however the cancellation races the watch's own
// clean-up (it once could stay open, leaving Watch waiting on its accept
// loop for ever). Many watches, cancelled together, make the race likely.
func TestWatchCancelledReturns(t *testing.T) {
	const watches = 500
	dir := shortDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	lns := make([]net.Listener, watches)
	done := make(chan error, watches)
	for i := range lns {
		ln, err := net.Listen("unix", filepath.Join(dir, fmt.Sprintf("r%d.sock", i)))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		lns[i] = ln
		go func() {
			done <- Watch(ctx, ln, Config{FirstContact: time.Minute, Grace: time.Minute, Reap: func(context.Context) error { return nil }})
		}()
	}
	time.Sleep(20 * time.Millisecond) // every watch waiting in its loop
	cancel()
	timeout := time.After(5 * time.Second)
	for returned := 0; returned < watches; returned++ {
		select {
		case <-done:
		case <-timeout:
			for _, ln := range lns {
				ln.Close() // let the stuck watches end, for the leak check
			}
			t.Fatalf("%d of %d watches still running 5s after their context was cancelled", watches-returned, watches)
		}
	}
}

func TestWatchCancelledRemovesNothing(t *testing.T) {
	rc := newReapCounter()
	ctx, cancel := context.WithCancel(context.Background())
	sock, wait := watching(t, ctx, rc.reap)
	h := dial(t, sock)
	defer h.Close()
	cancel()
	if err := wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch = %v, want context.Canceled", err)
	}
	if rc.calls() != 0 {
		t.Fatal("a cancelled watch reaped")
	}
}

func TestDialLongPath(t *testing.T) {
	dir := shortDir(t)
	long := filepath.Join(dir, strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(long, 0o755); err != nil {
		t.Fatal(err)
	}
	// Listen where the path is short enough, as the reaper does inside its
	// container: the same socket, another name for its directory.
	short := filepath.Join(dir, "s")
	if err := os.Symlink(long, short); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(short, "r.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, ln, Config{FirstContact: time.Minute, Grace: time.Minute, Reap: newReapCounter().reap})
	}()
	defer func() { cancel(); <-done }()
	sock := filepath.Join(long, "r.sock")
	if len(sock) <= maxSocketPath {
		t.Fatalf("path of %d bytes is not too long for sun_path", len(sock))
	}
	dial(t, sock).Close()
}

// fakeEngine is the part of the Engine API a removal uses, on a unix socket,
// with objects that carry labels.
type fakeEngine struct {
	mu         sync.Mutex
	containers map[string]fakeObject // by id
	networks   map[string]fakeObject
	deleted    []string // "container ID" / "network ID", in order
	queries    []url.Values
}

type fakeObject struct {
	name    string
	labels  []string
	network string // a container's network, by id: it blocks the network's removal
}

func (f *fakeEngine) selected(o fakeObject, q url.Values) bool {
	var filter map[string][]string
	if err := json.Unmarshal([]byte(q.Get("filters")), &filter); err != nil || len(filter["label"]) == 0 {
		return false
	}
	for _, l := range filter["label"] {
		if !slices.Contains(o.labels, l) {
			return false
		}
	}
	return true
}

func (f *fakeEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/containers/json":
		f.queries = append(f.queries, r.URL.Query())
		var out []map[string]any
		for id, c := range f.containers {
			if f.selected(c, r.URL.Query()) {
				out = append(out, map[string]any{"Id": id, "Names": []string{"/" + c.name}})
			}
		}
		json.NewEncoder(w).Encode(out)
	case r.Method == http.MethodGet && r.URL.Path == "/networks":
		f.queries = append(f.queries, r.URL.Query())
		var out []map[string]any
		for id, n := range f.networks {
			if f.selected(n, r.URL.Query()) {
				out = append(out, map[string]any{"Id": id, "Name": n.name})
			}
		}
		json.NewEncoder(w).Encode(out)
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/containers/"):
		id := strings.TrimPrefix(r.URL.Path, "/containers/")
		if r.URL.Query().Get("force") != "1" {
			http.Error(w, `{"message":"container is running: stop it or force"}`, http.StatusConflict)
			return
		}
		if _, ok := f.containers[id]; !ok {
			http.Error(w, `{"message":"no such container"}`, http.StatusNotFound)
			return
		}
		delete(f.containers, id)
		f.deleted = append(f.deleted, "container "+id)
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/networks/"):
		id := strings.TrimPrefix(r.URL.Path, "/networks/")
		for _, c := range f.containers {
			if c.network == id {
				http.Error(w, `{"message":"network has active endpoints"}`, http.StatusForbidden)
				return
			}
		}
		delete(f.networks, id)
		f.deleted = append(f.deleted, "network "+id)
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, `{"message":"not in the fake"}`, http.StatusNotImplemented)
	}
}

var (
	runA = []string{"io.zkchaos.project=zkchaos", "io.zkchaos.run=a"}
	runB = []string{"io.zkchaos.project=zkchaos", "io.zkchaos.run=b"}
)

// serveFake starts a fake engine with two runs, a and b, each with a
// ZooKeeper container on the run's network, a reaper on none (as the
// cluster starts it), and an unlabelled container.
func serveFake(t *testing.T) (*fakeEngine, string) {
	t.Helper()
	f := &fakeEngine{
		containers: map[string]fakeObject{
			"a-zk1": {"zkchaos-a-zk1", runA, "a-net"}, "a-reaper": {"zkchaos-a-reaper", runA, ""},
			"b-zk1": {"zkchaos-b-zk1", runB, "b-net"}, "b-reaper": {"zkchaos-b-reaper", runB, ""},
			"other": {"other", nil, ""},
		},
		networks: map[string]fakeObject{"a-net": {"zkchaos-a", runA, ""}, "b-net": {"zkchaos-b", runB, ""}},
	}
	sock := filepath.Join(shortDir(t), "engine.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: f}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return f, sock
}

func (f *fakeEngine) deletions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.deleted)
}

func TestRemoveLabelled(t *testing.T) {
	f, sock := serveFake(t)
	eng := NewEngine(sock)
	defer eng.hc.CloseIdleConnections()
	rep, err := eng.RemoveLabelled(context.Background(), runA, "zkchaos-a-reaper")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Removed{Containers: 1, Networks: 1}); rep != want {
		t.Errorf("removed %+v, want %+v", rep, want)
	}
	if got, want := f.deletions(), []string{"container a-zk1", "network a-net"}; !slices.Equal(got, want) {
		t.Errorf("deleted %q, want %q (run a's container before its network; its reaper, run b and the unlabelled container left)", got, want)
	}
	if _, err := eng.RemoveLabelled(context.Background(), nil, ""); err == nil {
		t.Error("an empty selector was accepted; it would select every object on the engine")
	}
}

// TestWatchRemovesTheRunByLabel puts the two together as cmd/reaper does:
// the owner's drop removes its run and nothing else; a reconnect within the
// grace removes nothing.
func TestWatchRemovesTheRunByLabel(t *testing.T) {
	for _, reconnect := range []bool{false, true} {
		t.Run(map[bool]string{false: "drop", true: "reconnect"}[reconnect], func(t *testing.T) {
			t.Parallel() // each its own engine and socket
			f, engSock := serveFake(t)
			eng := NewEngine(engSock)
			defer eng.hc.CloseIdleConnections()
			reaped := make(chan error, 1)
			sock, _ := watching(t, context.Background(), func(ctx context.Context) error {
				_, err := eng.RemoveLabelled(ctx, runA, "zkchaos-a-reaper")
				reaped <- err
				return err
			})
			h := dial(t, sock)
			h.Close()
			if reconnect {
				time.Sleep(grace / 3)
				h = dial(t, sock)
				defer h.Close()
			}
			select {
			case err := <-reaped:
				if reconnect {
					t.Fatalf("reaped after a reconnect within the grace (err %v): deleted %q", err, f.deletions())
				}
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(4 * grace):
				if !reconnect {
					t.Fatal("not reaped within 4 graces of the drop")
				}
			}
			want := []string{"container a-zk1", "network a-net"}
			if reconnect {
				want = nil
			}
			if got := f.deletions(); !slices.Equal(got, want) {
				t.Errorf("deleted %q, want %q", got, want)
			}
		})
	}
}
