package observer_test

import (
	"context"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/observer"
	"go.uber.org/goleak"
)

// srvrServer answers every four-letter word with its current reply.
type srvrServer struct {
	addr  string
	reply atomic.Value // string
}

func newSrvrServer(t *testing.T, reply string) *srvrServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &srvrServer{addr: ln.Addr().String()}
	s.reply.Store(reply)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 4)
			c.Read(buf)
			c.Write([]byte(s.reply.Load().(string)))
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return s
}

func TestPollModesRecordsEachChange(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	const (
		leader     = "Zxid: 0x100000005\nMode: leader\n"
		follower   = "Zxid: 0x100000005\nMode: follower\n"
		notServing = "This ZooKeeper instance is not currently serving requests\n"
	)
	zk1, zk2 := newSrvrServer(t, leader), newSrvrServer(t, follower)
	file := filepath.Join(t.TempDir(), "zk.jsonl")
	hw, err := history.Create(file, "zk", 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		observer.PollModes(ctx, []observer.ZKServer{{Name: "zk1", Addr: zk1.addr}, {Name: "zk2", Addr: zk2.addr}}, 10*time.Millisecond, hw)
	}()
	// Runs before goleak's check, also when the test fails early.
	t.Cleanup(func() { cancel(); <-done })
	modes := func(server string) []string {
		evs, _, err := history.ReadFile(file)
		if err != nil {
			return nil // nothing written yet
		}
		var out []string
		for _, e := range evs {
			if w := e.Watch; w != nil && w.Type == history.WatchServerMode && w.Server == server {
				out = append(out, w.Mode)
			}
		}
		return out
	}
	waitFor := func(server string, want []string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !slices.Equal(modes(server), want) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: recorded modes %q, want %q", server, modes(server), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// A server that steps down, then stops serving (out of quorum), is
	// recorded at each change and only then.
	waitFor("zk1", []string{"leader"})
	zk1.reply.Store(follower)
	waitFor("zk1", []string{"leader", "follower"})
	zk1.reply.Store(notServing)
	waitFor("zk1", []string{"leader", "follower", ""})
	time.Sleep(50 * time.Millisecond) // several more polls, no change
	cancel()
	<-done
	hw.Close()
	if got := modes("zk1"); !slices.Equal(got, []string{"leader", "follower", ""}) {
		t.Errorf("zk1: recorded %q after the polls went on", got)
	}
	if got := modes("zk2"); !slices.Equal(got, []string{"follower"}) {
		t.Errorf("zk2 never changed: recorded %q, want one follower", got)
	}
}
