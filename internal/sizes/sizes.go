// Package sizes measures the module's Go files and functions against the
// project's size limits and lists what is over them; its test runs the
// measurement on this module. A file over the limit holds more than one job
// and a function over it more than one step, and both are where the next
// change goes wrong, so the limits hold for the harness side. The node
// program (node/) models Kafka classes that are long themselves and is left
// out, as are tests and testdata. Nothing imports this package but its test.
package sizes

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Limits are the most lines a non-test file and a function may have.
type Limits struct {
	FileLines int
	FuncLines int
}

// Project is the limit the harness side keeps.
var Project = Limits{FileLines: 700, FuncLines: 150}

// Over is one file or function over its limit.
type Over struct {
	Path  string // relative to the root, slash-separated
	Func  string // empty for a whole file; Recv.Name for a method
	Lines int
	Limit int
}

func (o Over) String() string {
	if o.Func == "" {
		return fmt.Sprintf("%s: %d lines (limit %d)", o.Path, o.Lines, o.Limit)
	}
	return fmt.Sprintf("%s: func %s: %d lines (limit %d)", o.Path, o.Func, o.Lines, o.Limit)
}

// Skipped reports whether the file at the slash-separated relative path rel
// is outside the limits: tests, the node program, testdata and hidden folders.
func Skipped(rel string) bool {
	if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
		return true
	}
	for _, part := range strings.Split(rel, "/") {
		if part == "testdata" || strings.HasPrefix(part, ".") || strings.HasPrefix(part, "_") {
			return true
		}
	}
	return rel == "node" || strings.HasPrefix(rel, "node/")
}

// Walk measures every Go file below root that Skipped keeps and returns what
// is over lim, in path order.
func Walk(root string, lim Limits) ([]Over, error) {
	var over []Over
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return fmt.Errorf("sizes: %s: %w", path, err)
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && Skipped(rel+"/x.go") {
				return filepath.SkipDir
			}
			return nil
		}
		if Skipped(rel) {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("sizes: %w", err)
		}
		o, err := File(rel, src, lim)
		if err != nil {
			return err
		}
		over = append(over, o...)
		return nil
	})
	return over, err
}

// File measures one file's source: the whole file, then each function
// declaration from its "func" keyword (the doc comment not counted) to its closing brace.
func File(rel string, src []byte, lim Limits) ([]Over, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("sizes: parse %s: %w", rel, err)
	}
	var over []Over
	if n := fset.File(f.Pos()).LineCount(); n > lim.FileLines {
		over = append(over, Over{Path: rel, Lines: n, Limit: lim.FileLines})
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		n := fset.Position(fd.End()).Line - fset.Position(fd.Type.Func).Line + 1
		if n > lim.FuncLines {
			over = append(over, Over{Path: rel, Func: funcName(fd), Lines: n, Limit: lim.FuncLines})
		}
	}
	return over, nil
}

// funcName is Name for a function and Recv.Name for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fd.Name.Name
		}
		return fd.Name.Name
	}
}
