package sizes

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestModuleWithinLimits is the project rule: no non-test file outside
// node/ over 700 lines, no function there over 150.
func TestModuleWithinLimits(t *testing.T) {
	over, err := Walk("../..", Project)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range over {
		t.Errorf("%s: split it where its steps are", o)
	}
}

// lines is a Go source of n lines in all: a package clause and one function
// whose declaration spans fn lines (fn >= 2), padded with comments.
func lines(n, fn int) []byte {
	var b strings.Builder
	b.WriteString("package p\n\nfunc f() {\n")
	for i := 0; i < fn-2; i++ {
		b.WriteString("\t_ = 1\n")
	}
	b.WriteString("}\n")
	for i := 3 + fn; i <= n; i++ {
		b.WriteString("// pad\n")
	}
	return []byte(b.String())
}

func TestFile(t *testing.T) {
	lim := Limits{FileLines: 20, FuncLines: 10}
	method := []byte("package p\n\ntype T[K any] struct{}\n\nfunc (t *T[K]) m() {\n" +
		strings.Repeat("\t_ = 1\n", 9) + "}\n")
	tests := []struct {
		name string
		src  []byte
		want []string
	}{
		{"within both", lines(20, 10), nil},
		{"file over", lines(21, 10), []string{"p.go: 21 lines (limit 20)"}},
		{"function over", lines(20, 11), []string{"p.go: func f: 11 lines (limit 10)"}},
		{"both over", lines(30, 12), []string{"p.go: 30 lines (limit 20)", "p.go: func f: 12 lines (limit 10)"}},
		{"generic method over", method, []string{"p.go: func T.m: 11 lines (limit 10)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			over, err := File("p.go", tt.src, lim)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range over {
				got = append(got, o.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFileBadSource(t *testing.T) {
	if _, err := File("bad.go", []byte("package p\nfunc {"), Project); err == nil || !strings.Contains(err.Error(), "bad.go") {
		t.Errorf("got %v, want a parse error naming bad.go", err)
	}
}

func TestSkipped(t *testing.T) {
	tests := []struct {
		rel  string
		want bool
	}{
		{"harness/run.go", false},
		{"cmd/chaos/main.go", false},
		{"harness/run_test.go", true},
		{"node/controller/controller.go", true},
		{"node", true},
		{"nodecover/nodecover.go", false},
		{"history/testdata/gen.go", true},
		{".git/x.go", true},
		{"README.md", true},
	}
	for _, tt := range tests {
		if got := Skipped(tt.rel); got != tt.want {
			t.Errorf("Skipped(%q) = %v, want %v", tt.rel, got, tt.want)
		}
	}
}

// TestWalkFindsOversizeFile checks Walk on a tree of its own, so the rule
// test above cannot pass by measuring nothing.
func TestWalkFindsOversizeFile(t *testing.T) {
	root := t.TempDir()
	write := func(rel string, src []byte) {
		t.Helper()
		if err := writeFile(root, rel, src); err != nil {
			t.Fatal(err)
		}
	}
	write("a/big.go", lines(30, 5))
	write("a/big_test.go", lines(30, 5))
	write("node/x/big.go", lines(30, 5))
	write("b/small.go", lines(10, 5))
	over, err := Walk(root, Limits{FileLines: 20, FuncLines: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(over); got != "[a/big.go: 30 lines (limit 20)]" {
		t.Errorf("got %s", got)
	}
}

func writeFile(root, rel string, src []byte) error {
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, src, 0o644)
}
