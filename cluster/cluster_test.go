package cluster_test

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/internal/clustertest"
)

func TestEnsembleFormsAndReplicates(t *testing.T) {
	c, _ := clustertest.Start(t, cluster.Options{ZK: cluster.ZKOptions{Servers: 3}})

	w := clustertest.Connect(t, []string{c.ZKServer(1).ClientAddr()}, 4*time.Second, nil)
	r := clustertest.Connect(t, []string{c.ZKServer(3).ClientAddr()}, 4*time.Second, nil)
	clustertest.WaitConnected(t, w, 10*time.Second)
	clustertest.WaitConnected(t, r, 10*time.Second)

	if _, err := w.Create("/replicated", []byte("through zk1"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create through zk1: %v", err)
	}
	// A ZooKeeper read is served locally and may lag; Sync makes zk3 catch
	// up with the leader first, so this read must see the write.
	if _, err := r.Sync("/replicated"); err != nil {
		t.Fatalf("sync through zk3: %v", err)
	}
	got, _, err := r.Get("/replicated")
	if err != nil {
		t.Fatalf("get through zk3: %v", err)
	}
	if string(got) != "through zk1" {
		t.Fatalf("zk3 read %q, want %q", got, "through zk1")
	}
}

func TestOptionsRejectBadEnsembleSize(t *testing.T) {
	for _, n := range []int{2, 4, 7, -1} {
		o := cluster.ZKOptions{Servers: n}
		_, err := cluster.Start(t.Context(), nil, cluster.Options{RunDir: t.TempDir(), ZK: o})
		if err == nil {
			t.Errorf("servers=%d: want error", n)
		}
	}
}
