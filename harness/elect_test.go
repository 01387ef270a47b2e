package harness

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/internal/clustertest"
	"github.com/zkchaos/zkchaos/zklayout"
)

// ElectPreferred against a real ZooKeeper with a stand-in controller (a
// second session that takes the request by deleting it): it waits out a
// request already there, writes its own, and returns once it is taken; with
// nobody taking it, it says so when its context ends.
func TestElectPreferredWaitsForTheController(t *testing.T) {
	c, _ := clustertest.Start(t, cluster.Options{ZK: cluster.ZKOptions{Servers: 1, TickTime: 100 * time.Millisecond}})
	w, err := newWorld(c)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	if _, err := w.conn.Create("/admin", nil, 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
		t.Fatal(err)
	}
	// Nobody takes it: an error naming the znode once ctx ends.
	ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
	err = w.ElectPreferred(ctx, "chaos", []int32{1})
	cancel()
	if err == nil || !strings.Contains(err.Error(), "had not taken /admin/preferred_replica_election") {
		t.Fatalf("nobody took the request: %v", err)
	}
	// That request is still there (an earlier one, as the admin
	// workload's would be). The stand-in controller takes requests one at
	// a time, 300 ms after each appears.
	ctl, _, err := zk.Connect(c.ZKConnect(), 10*time.Second, zk.WithLogger(quietZK{}))
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	taken := make(chan string, 2)
	go func() {
		for range 2 {
			for {
				b, _, err := ctl.Get(zklayout.PreferredElectionPath)
				if err == nil {
					time.Sleep(300 * time.Millisecond)
					if ctl.Delete(zklayout.PreferredElectionPath, -1) == nil {
						taken <- string(b)
					}
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()
	begin := time.Now()
	if err := w.ElectPreferred(t.Context(), "chaos", []int32{0, 2}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d < 500*time.Millisecond {
		t.Fatalf("returned after %s: before both requests were taken", d)
	}
	first, second := <-taken, <-taken
	want := `{"version":1,"partitions":[{"topic":"chaos","partition":0},{"topic":"chaos","partition":2}]}`
	if !strings.Contains(first, `"partition":1}`) || second != want {
		t.Fatalf("requests taken %s then %s; want the earlier one, then %s", first, second, want)
	}
}
