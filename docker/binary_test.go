package docker

import (
	"strings"
	"testing"
)

// Run outside the checkout, the build names the cause instead of passing on
// go's "go.mod file not found" (seen when `chaos power` ran from /tmp).
func TestBuildOutsideTheCheckoutSaysWhere(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	_, err := BuildGoBinary(t.Context(), "./cmd/kafkanode", "kafkanode-test")
	if err == nil || !strings.Contains(err.Error(), "run chaos from inside the zkchaos checkout") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("error %v, want one naming the checkout and %s", err, dir)
	}
}
