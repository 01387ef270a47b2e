package observer_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/internal/clustertest"
	"github.com/zkchaos/zkchaos/observer"
	"go.uber.org/goleak"
)

func TestWatcherRecordsFencingZnodes(t *testing.T) {
	// Registered first, so it runs last: after the cluster and every
	// ZooKeeper connection of the test are closed.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	c, _ := clustertest.Start(t, cluster.Options{ZK: cluster.ZKOptions{Servers: 1}})
	file := filepath.Join(t.TempDir(), "zk.jsonl")
	hw, err := history.Create(file, "zk", 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wt, err := observer.WatchZK(ctx, c.ZKConnect(), 4*time.Second, hw)
	if err != nil {
		t.Fatal(err)
	}

	cl := clustertest.Connect(t, c.ZKConnect(), 4*time.Second, nil)
	clustertest.WaitConnected(t, cl, 10*time.Second)
	acl := zk.WorldACL(zk.PermAll)
	must := func(_ string, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(cl.Create("/controller_epoch", []byte("0"), 0, acl))
	must(cl.Create("/brokers", nil, 0, acl))
	must(cl.Create("/brokers/ids", nil, 0, acl))
	must(cl.Create("/brokers/topics", nil, 0, acl))
	reg := `{"version":4,"host":"n2","port":9092,"jmx_port":-1,"timestamp":"1","endpoints":["PLAINTEXT://n2:9092"]}`
	must(cl.Create("/brokers/ids/2", []byte(reg), zk.FlagEphemeral, acl))
	must(cl.Create("/controller", []byte(`{"version":1,"brokerid":2,"timestamp":"1"}`), zk.FlagEphemeral, acl))
	if _, err := cl.Set("/controller_epoch", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	must(cl.Create("/brokers/topics/t", []byte(`{"version":2,"partitions":{"0":[2]}}`), 0, acl))
	must(cl.Create("/brokers/topics/t/partitions", nil, 0, acl))
	must(cl.Create("/brokers/topics/t/partitions/0", nil, 0, acl))
	must(cl.Create("/brokers/topics/t/partitions/0/state", []byte(`{"version":1,"leader":2,"leader_epoch":0,"controller_epoch":1,"isr":[2]}`), 0, acl))

	want := map[string]bool{"controller": false, "epoch": false, "broker": false, "state": false}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		evs, _, err := history.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			w := e.Watch
			switch {
			case w.ControllerID != nil && *w.ControllerID == 2:
				want["controller"] = true
			case w.ControllerEpoch != nil && *w.ControllerEpoch == 1 && w.Version == 1:
				want["epoch"] = true
			case len(w.Brokers) == 1 && w.Brokers[0].ID == 2 && w.Brokers[0].Czxid > 0:
				want["broker"] = true
			case w.State != nil && w.State.Topic == "t" && w.State.Leader == 2 && w.State.ControllerEpoch == 1:
				want["state"] = true
			}
		}
		if want["controller"] && want["epoch"] && want["broker"] && want["state"] {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	wt.Wait()
	hw.Close()
	for k, ok := range want {
		if !ok {
			t.Errorf("watcher did not record the %s znode", k)
		}
	}
	if t.Failed() {
		evs, _, _ := history.ReadFile(file)
		for _, e := range evs {
			t.Logf("%+v", *e.Watch)
		}
	}
}
