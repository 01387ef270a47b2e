package worknames

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The examples are split ("issue" + " 4") so that this file, a project
// file too, holds no work-item name itself.
func TestFind(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []Hit
	}{
		{"heading", "## Issue" + " 13: session" + " 12", []Hit{{1, "Issue" + " 13"}, {1, "session" + " 12"}}},
		{"plural", "see sessions" + " 13 and 14", []Hit{{1, "sessions" + " 13"}}},
		{"hyphen", "| 60 s runs, session" + "-11 checkers |", []Hit{{1, "session" + "-11"}}},
		{"number sign", "tracked in issue" + " #4", []Hit{{1, "issue" + " #4"}}},
		{"code comment", "x := 1\n\t// Data plane (issue" + " 4).", []Hit{{2, "issue" + " 4"}}},
		{"possessive", "the 20 seeds issue" + " 13's rows ask for", []Hit{{1, "issue" + " 13"}}},
		{"zookeeper session id", `log.Printf("new zookeeper session 0x%x", id)`, nil},
		{"session id literal", "belongs to session 0x1000000e3", nil},
		{"session timeout", "session timeout 3 s, 3 s sessions, --session-timeout 3s", nil},
		{"no number", "this session's checkers; the issue asks for 20 seeds", nil},
		{"inside a word", "tissue 5, reissue 2", nil},
		{"a Kafka issue", "KAFKA-16667 and KIP-380", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Find(tt.text); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Find(%q) = %v, want %v", tt.text, got, tt.want)
			}
		})
	}
}

// pending are names left for the file's owner to replace; each must still
// be there (so the list cannot rot) and is the only name its file may hold.
var pending = map[string][]string{}

// scanned says which project files are prose or code a reader sees.
func scanned(path string) bool {
	switch filepath.Ext(path) {
	case ".go", ".md", ".sh", ".yml", ".yaml":
		return true
	}
	return false
}

func TestProjectFilesNameNoWorkItems(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found from %s: %v", root, err)
	}
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			// Run directories and build output are not project files.
			if rel != "." && (strings.HasPrefix(d.Name(), ".") && d.Name() != ".github" || d.Name() == "runs" || d.Name() == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !scanned(path) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		rel = filepath.ToSlash(rel)
		var names []string
		for _, h := range Find(string(b)) {
			names = append(names, h.Name)
			if !contains(pending[rel], h.Name) {
				t.Errorf("%s:%d: %q names a work item; say what it meant, or name the commit, date or command", rel, h.Line, h.Name)
			}
		}
		for _, p := range pending[rel] {
			if !contains(names, p) {
				t.Errorf("%s: %q is gone; remove it from pending", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	if files < 100 {
		t.Fatalf("scanned only %d files under %s", files, root)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
