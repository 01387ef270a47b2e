package docker

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// BuildGoBinary builds the Go package pkg (an import path or ./relative path
// inside this module) as a static linux/amd64-compatible binary for containers
// and returns its host path; flags go to `go build` before the package
// (e.g. coverage instrumentation). The Go build cache makes an unchanged rebuild
// cheap; the output goes to a temp name and is renamed so a concurrent build
// never exposes a half-written file. Each checkout gets its own output
// path: two checkouts (a mutant's scratch copy beside the main tree, two
// worktrees) building at once must not replace each other's binary under
// containers that bind-mount it, which a node restart would then run.
func BuildGoBinary(ctx context.Context, pkg, name string, flags ...string) (string, error) {
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	root, ok := moduleRoot()
	sum := sha256.Sum256([]byte(root))
	out := filepath.Join(dir, fmt.Sprintf("%s-%x", name, sum[:6]))
	tmp, err := os.CreateTemp(dir, name+".tmp*")
	if err != nil {
		return "", fmt.Errorf("temp binary: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())

	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if !ok {
		// The node program is built from this checkout's source, so the
		// harness must run inside it; say so rather than pass on go's
		// "go.mod file not found".
		return "", fmt.Errorf("build %s: run chaos from inside the zkchaos checkout (it builds the node program from source); no go.mod of module github.com/zkchaos/zkchaos above %s", pkg, root)
	}
	args := append([]string{"build", "-trimpath", "-o", tmp.Name()}, flags...)
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, strings.TrimSpace(string(b)))
	}
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", fmt.Errorf("install %s: %w", out, err)
	}
	return out, nil
}

// moduleRoot finds this module's go.mod upward from the working directory, so
// building works from a test's package directory and from the repository root.
// Not found, it returns the working directory and false.
func moduleRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/zkchaos/zkchaos") {
			return d, true
		}
		if filepath.Dir(d) == d {
			return dir, false
		}
	}
}
