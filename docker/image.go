package docker

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/client"
)

// BaseImage describes the one image every container of a run uses: a Debian
// rootfs made by debootstrap with ZooKeeper, a JRE and the network tools the
// faults need. The project's own binaries are NOT in it; they are bind-mounted
// at create time, so a code change never needs an image rebuild.
type BaseImage struct {
	Suite    string   // Debian suite, e.g. "bookworm"
	Mirror   string   // Debian mirror URL debootstrap downloads from
	Packages []string // installed on top of minbase
}

// DefaultBaseImage is what cluster/ runs: ZooKeeper 3.8 and its JRE, plus
// iproute2/iptables/procps so a container can be inspected by hand.
func DefaultBaseImage() BaseImage {
	return BaseImage{
		Suite:  "bookworm",
		Mirror: "http://deb.debian.org/debian",
		Packages: []string{
			"openjdk-17-jre-headless", "zookeeper", "iproute2", "iptables",
			"procps", "netcat-openbsd", "ca-certificates",
		},
	}
}

// imageRecipeVersion changes whenever the way a rootfs is turned into an image
// changes, so old cached images are not mistaken for new ones.
// 3: ZooKeeper's class-data-sharing archive (zkcds.go).
const imageRecipeVersion = "3"

// Tag names the image by a hash of everything that goes into it.
func (b BaseImage) Tag() string {
	pk := append([]string(nil), b.Packages...)
	sort.Strings(pk)
	h := sha256.Sum256([]byte(strings.Join([]string{imageRecipeVersion, b.Suite, b.Mirror, strings.Join(pk, ","), zkClassList}, "\n")))
	return "zkchaos-base:" + hex.EncodeToString(h[:])[:12]
}

// CacheDir is where rootfs builds, build logs and binaries are kept between
// runs: $ZKCHAOS_CACHE, else the user's cache directory.
func CacheDir() (string, error) {
	if d := os.Getenv("ZKCHAOS_CACHE"); d != "" {
		return d, os.MkdirAll(d, 0o755)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory (set ZKCHAOS_CACHE): %w", err)
	}
	d := filepath.Join(base, "zkchaos")
	return d, os.MkdirAll(d, 0o755)
}

// BuildReport says what EnsureImage did.
type BuildReport struct {
	Ref      string
	Built    bool          // false when the image was already present
	Duration time.Duration // time spent building (zero when cached)
	LogPath  string        // debootstrap's output, kept for diagnosis
}

// EnsureImage returns the image for b, building it from scratch only when no
// image with its tag exists. Concurrent callers (parallel test packages,
// several runs) serialise on a file lock, so one build serves them all.
// progress, if not nil, receives one line per build step.
func (e *Engine) EnsureImage(ctx context.Context, b BaseImage, progress io.Writer) (BuildReport, error) {
	ref := b.Tag()
	rep := BuildReport{Ref: ref}
	if e.imageExists(ctx, ref) {
		return rep, nil
	}
	cache, err := CacheDir()
	if err != nil {
		return rep, err
	}
	unlock, err := lockFile(ctx, filepath.Join(cache, "image.lock"))
	if err != nil {
		return rep, err
	}
	defer unlock()
	if e.imageExists(ctx, ref) { // someone else built it while we waited
		return rep, nil
	}
	if progress == nil {
		progress = io.Discard
	}
	start := time.Now()
	rep.LogPath = filepath.Join(cache, "debootstrap-"+strings.TrimPrefix(ref, "zkchaos-base:")+".log")
	rootfs := filepath.Join(cache, "rootfs-"+strings.TrimPrefix(ref, "zkchaos-base:"))
	if err := os.RemoveAll(rootfs); err != nil {
		return rep, fmt.Errorf("remove stale rootfs %s: %w", rootfs, err)
	}
	defer os.RemoveAll(rootfs)

	fmt.Fprintf(progress, "building image %s with debootstrap (%s, %d packages); log: %s\n", ref, b.Suite, len(b.Packages), rep.LogPath)
	if err := debootstrap(ctx, b, rootfs, rep.LogPath); err != nil {
		return rep, err
	}
	trimRootfs(rootfs)
	// Without the archive ZooKeeper only starts slower, so a failure is
	// said and the build goes on.
	if err := appendLog(rep.LogPath, func(logf *os.File) error { return zkArchiveBuild(ctx, rootfs, logf) }); err != nil {
		fmt.Fprintf(progress, "no ZooKeeper class archive in the image (ZooKeeper starts without it): %v\n", err)
	}
	fmt.Fprintf(progress, "importing rootfs into the engine as %s\n", ref)
	if err := e.importRootfs(ctx, rootfs, ref); err != nil {
		return rep, err
	}
	rep.Built = true
	rep.Duration = time.Since(start)
	fmt.Fprintf(progress, "built image %s in %s\n", ref, rep.Duration.Round(time.Second))
	return rep, nil
}

func (e *Engine) imageExists(ctx context.Context, ref string) bool {
	_, err := e.cli.ImageInspect(ctx, ref)
	return err == nil
}

func debootstrap(ctx context.Context, b BaseImage, rootfs, logPath string) error {
	bin, err := exec.LookPath("debootstrap")
	if err != nil {
		return fmt.Errorf("debootstrap is needed to build the base image and is not on PATH (apt-get install debootstrap): %w", err)
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("create build log: %w", err)
	}
	defer logf.Close()
	// debootstrap has no overall timeout of its own; an unreachable mirror
	// must not hang a CI job.
	ctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	args := []string{"--variant=minbase", "--include=" + strings.Join(b.Packages, ","), b.Suite, rootfs, b.Mirror}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("debootstrap %s from %s failed (is the mirror reachable?): %w\nlast lines of %s:\n%s",
			b.Suite, b.Mirror, err, logPath, tailFile(logPath, 15))
	}
	return nil
}

// appendLog runs fn with the build log open for appending.
func appendLog(logPath string, fn func(*os.File) error) error {
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open build log: %w", err)
	}
	defer f.Close()
	return fn(f)
}

// trimRootfs drops package caches that only make the image bigger.
func trimRootfs(rootfs string) {
	for _, pat := range []string{"var/cache/apt/archives/*.deb", "var/lib/apt/lists/*_*", "usr/share/doc/*", "usr/share/man/*"} {
		matches, _ := filepath.Glob(filepath.Join(rootfs, pat))
		for _, m := range matches {
			os.RemoveAll(m)
		}
	}
}

// importRootfs streams a tar of rootfs into the engine. The engine creates the
// tag only after the whole layer is in, so a failure leaves no half image.
func (e *Engine) importRootfs(ctx context.Context, rootfs, ref string) error {
	cmd := exec.CommandContext(ctx, "tar", "--numeric-owner", "-C", rootfs, "-c", ".")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("tar rootfs: %w", err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("tar rootfs: %w", err)
	}
	res, err := e.cli.ImageImport(ctx, client.ImageImportSource{Source: out, SourceName: "-"}, ref, client.ImageImportOptions{
		Changes: []string{
			"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"LABEL " + LabelProject + "=" + projectValue,
		},
	})
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("import rootfs as %s: %w", ref, err)
	}
	body, _ := io.ReadAll(res)
	res.Close()
	if werr := cmd.Wait(); werr != nil {
		return fmt.Errorf("tar rootfs: %w: %s", werr, stderr.String())
	}
	if strings.Contains(string(body), `"error"`) {
		return fmt.Errorf("import rootfs as %s: %s", ref, strings.TrimSpace(string(body)))
	}
	return nil
}

// lockFile takes an exclusive flock, polling so ctx can cancel the wait.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if err != syscall.EWOULDBLOCK {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for lock %s: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// tailFile returns the last n lines of a file, for error messages.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
