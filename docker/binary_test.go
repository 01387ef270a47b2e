package docker

import (
	"os"
	"path/filepath"
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

// Two checkouts building the same program get two binaries: a run from a
// mutant's scratch copy must not replace the binary a run of the main tree
// has bind-mounted into its containers.
func TestEachCheckoutBuildsItsOwnBinary(t *testing.T) {
	var paths []string
	for range 2 {
		root := t.TempDir()
		for name, body := range map[string]string{
			"go.mod":            "module github.com/zkchaos/zkchaos\n\ngo 1.22\n",
			"cmd/hello/main.go": "package main\n\nfunc main() {}\n",
		} {
			p := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Chdir(root)
		out, err := BuildGoBinary(t.Context(), "./cmd/hello", "hello-test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(out) })
		paths = append(paths, out)
	}
	if paths[0] == paths[1] {
		t.Fatalf("both checkouts built %s", paths[0])
	}
}
