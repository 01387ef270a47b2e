package docker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// resolveIn follows absolute links as if rootfs were /, and relative ones
// from the link's own directory, as the JVM's launcher alternatives do.
func TestResolveIn(t *testing.T) {
	root := t.TempDir()
	mk := func(p string) {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, p string) {
		mk(p)
		if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	mk("/usr/lib/jvm/java-17/bin/java")
	if err := os.WriteFile(filepath.Join(root, "/usr/lib/jvm/java-17/bin/java"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	link("java-17", "/usr/lib/jvm/java-1.17")
	link("/usr/lib/jvm/java-1.17/bin/java", "/etc/alternatives/java")
	link("/etc/alternatives/java", "/usr/bin/java")
	link("../../loop/b", "/loop/a/b")
	link("/loop/a/b", "/loop/b")
	link("/nowhere", "/dangling")
	tests := []struct {
		p, want, wantErr string
	}{
		{"/usr/bin/java", "/usr/lib/jvm/java-1.17/bin/java", ""},
		{"/usr/lib/jvm/java-17/bin/java", "/usr/lib/jvm/java-17/bin/java", ""},
		{"/loop/b", "", "too many links"},
		{"/dangling", "", "resolve /nowhere"},
	}
	for _, tt := range tests {
		got, err := resolveIn(root, tt.p)
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("resolveIn(%s) = %q, %v; want error with %q", tt.p, got, err, tt.wantErr)
		case tt.wantErr == "" && (err != nil || got != tt.want):
			t.Errorf("resolveIn(%s) = %q, %v; want %q", tt.p, got, err, tt.want)
		}
	}
}

// The archive is made in a real rootfs of the base image when
// ZKCHAOS_TEST_ROOTFS names one (docker export of the image, unpacked):
// chroot and a JVM are needed, so it is skipped elsewhere.
func TestZKArchiveBuild(t *testing.T) {
	rootfs := os.Getenv("ZKCHAOS_TEST_ROOTFS")
	if rootfs == "" {
		t.Skip("ZKCHAOS_TEST_ROOTFS not set")
	}
	os.Remove(filepath.Join(rootfs, ZKArchive))
	logf, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	if err := zkArchiveBuild(t.Context(), rootfs, logf); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(rootfs, ZKArchive))
	if err != nil || st.Size() < 1<<20 {
		t.Fatalf("archive %v, %v; want over 1 MiB", st, err)
	}
	if _, err := os.Stat(filepath.Join(rootfs, "/tmp/zookeeper.classlist")); !os.IsNotExist(err) {
		t.Errorf("class list left in the rootfs: %v", err)
	}
}
