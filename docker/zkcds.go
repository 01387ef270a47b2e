package docker

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// ZooKeeper's class-data-sharing archive. A ZooKeeper JVM spends most of
// its start-up loading and verifying about 2,500 classes (0.9 s of CPU on
// the reference machine, three JVMs at once at every run's set-up); mapped
// from an archive made at image build they cost about a quarter less. The
// archive is made for the jars of ZKClassPath, in that order; a JVM that
// runs with them as the start of its class path and ZKArchive as
// -XX:SharedArchiveFile maps it, and one that cannot (an image built
// before the archive existed) starts without it under -Xshare:auto.
const (
	ZKClassPath = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar"
	ZKArchive   = "/usr/share/zkchaos/zookeeper.jsa"
)

// zkClassList names the classes the archive holds: the list a ZooKeeper
// 3.8 server of the base image loaded (-XX:DumpLoadedClassList) from its
// start to leading a one-server quorum, JDK classes included, with the
// same JVM flags as cluster/ runs it. Classes the image's ZooKeeper lacks
// are skipped with a warning in the build log, so a newer package makes a
// smaller archive, not a failed build.
//
//go:embed zookeeper.classlist
var zkClassList string

// zkArchiveBuild makes ZKArchive inside rootfs by running the rootfs' own
// JVM under chroot (-Xshare:dump). The rootfs has no /proc mounted, so the
// launcher cannot find its libraries through $ORIGIN; LD_LIBRARY_PATH
// names them. Output goes to logf.
func zkArchiveBuild(ctx context.Context, rootfs string, logf *os.File) error {
	java, err := resolveIn(rootfs, "/usr/bin/java")
	if err != nil {
		return fmt.Errorf("zookeeper class archive: %w", err)
	}
	home := path.Dir(path.Dir(java)) // .../bin/java
	list := "/tmp/zookeeper.classlist"
	if err := os.WriteFile(filepath.Join(rootfs, list), []byte(zkClassList), 0o644); err != nil {
		return fmt.Errorf("zookeeper class archive: %w", err)
	}
	defer os.Remove(filepath.Join(rootfs, list))
	if err := os.MkdirAll(filepath.Join(rootfs, path.Dir(ZKArchive)), 0o755); err != nil {
		return fmt.Errorf("zookeeper class archive: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "chroot", rootfs, "env", "LD_LIBRARY_PATH="+home+"/lib:"+home+"/lib/server",
		java, "-Xmx128m", "-XX:+UseSerialGC", "-Xshare:dump",
		"-XX:SharedClassListFile="+list, "-XX:SharedArchiveFile="+ZKArchive, "-cp", ZKClassPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("zookeeper class archive: java -Xshare:dump in %s: %w", rootfs, err)
	}
	if _, err := os.Stat(filepath.Join(rootfs, ZKArchive)); err != nil {
		return fmt.Errorf("zookeeper class archive: %w", err)
	}
	return nil
}

// resolveIn follows the symbolic links of p (absolute, as seen inside
// rootfs) the way they resolve inside rootfs, and returns the result as
// seen inside rootfs: /usr/bin/java → /etc/alternatives/java → the JRE's.
func resolveIn(rootfs, p string) (string, error) {
	for range 16 {
		target, err := os.Readlink(filepath.Join(rootfs, p))
		if err != nil {
			if _, serr := os.Stat(filepath.Join(rootfs, p)); serr != nil {
				return "", fmt.Errorf("resolve %s in %s: %w", p, rootfs, serr)
			}
			return p, nil // not a link: p is the file
		}
		if !strings.HasPrefix(target, "/") {
			target = path.Join(path.Dir(p), target)
		}
		p = path.Clean(target)
	}
	return "", fmt.Errorf("resolve %s in %s: too many links", p, rootfs)
}
