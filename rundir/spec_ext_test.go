package rundir_test

import (
	"testing"

	"github.com/zkchaos/zkchaos/cluster"
	"github.com/zkchaos/zkchaos/rundir"
)

// rundir cannot import cluster (cluster imports it), so RunSpec.Validate
// has its own copy of the ensemble sizes the cluster starts; this keeps the
// two equal.
func TestValidZKServersIsTheClusters(t *testing.T) {
	for n := -1; n <= 9; n++ {
		if got, want := rundir.ValidZKServers(n), cluster.ValidServers(n); got != want {
			t.Errorf("%d servers: rundir says %v, cluster %v", n, got, want)
		}
	}
}
