package mutants

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Every patch applies to the node source as it stands (checked, not
// applied), changes the node program only, and says in its header what it
// breaks: a mutant measured against code it no longer fits measures
// nothing.
func TestPatchesApplyToTheNode(t *testing.T) {
	patches, err := filepath.Glob("*.patch")
	if err != nil {
		t.Fatal(err)
	}
	if len(patches) == 0 {
		t.Fatal("no mutants/*.patch")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed to check the patches: %v", err)
	}
	for _, p := range patches {
		t.Run(p, func(t *testing.T) {
			files, header := patchFiles(t, p)
			if len(files) == 0 {
				t.Fatalf("%s changes no file", p)
			}
			for _, f := range files {
				if !strings.HasPrefix(f, "node/") || strings.HasSuffix(f, "_test.go") {
					t.Errorf("%s changes %s: a mutant changes the node program's code only (node/, no tests)", p, f)
				}
			}
			if header < 2 {
				t.Errorf("%s: %d header lines before the diff; say what the slip is and what harm it can do", p, header)
			}
			abs, _ := filepath.Abs(p)
			cmd := exec.Command("git", "apply", "--check", abs)
			cmd.Dir = ".."
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s no longer applies to node/ (update it to the code it mutates): %v\n%s", p, err, out)
			}
		})
	}
}

// patchFiles lists the files a patch changes and counts the non-empty
// lines before its first diff.
func patchFiles(t *testing.T, path string) (files []string, header int) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	inHeader := true
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "+++ b/"); ok {
			files = append(files, name)
		}
		if strings.HasPrefix(line, "diff --git ") {
			inHeader = false
		}
		if inHeader && strings.TrimSpace(line) != "" {
			header++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return files, header
}
