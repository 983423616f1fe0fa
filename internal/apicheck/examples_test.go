package apicheck

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/radgen/radgen/internal/testutil"
)

// internalImport reports whether an import path names an internal package
// of the module, which code outside it cannot import.
func internalImport(path string) bool {
	const module = "github.com/radgen/radgen"
	if path != module && !strings.HasPrefix(path, module+"/") {
		return false
	}
	return strings.HasSuffix(path, "/internal") || strings.Contains(path, "/internal/")
}

// TestExamplesImportNoInternalPackage parses every Go file under examples/
// (tests and the nested modules included) and fails on an import of the
// module's internal packages: an example is what a user copies into a
// module of their own, where those imports do not compile.
func TestExamplesImportNoInternalPackage(t *testing.T) {
	root := filepath.Join(testutil.ModuleRoot(), "examples")
	fset := token.NewFileSet()
	files, modules := 0, 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() == "go.mod" {
			modules++
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(root, path)
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if internalImport(p) {
				t.Errorf("examples/%s imports %s: examples may use only the public packages", filepath.ToSlash(rel), p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 20 || modules < 1 {
		t.Fatalf("parsed %d files and %d nested modules under %s: the walk missed the examples", files, modules, root)
	}
	t.Logf("%d Go files under examples/ (%d nested modules): no internal imports", files, modules)
}

func TestInternalImport(t *testing.T) {
	for path, want := range map[string]bool{
		"github.com/radgen/radgen/internal/pth":          true,
		"github.com/radgen/radgen/internal":              true,
		"github.com/radgen/radgen/memtrans/internal/x":   true,
		"github.com/radgen/radgen/memtrans":              false,
		"github.com/radgen/radgenx/internal/y":           false,
		"github.com/apache/beam/sdks/v2/go/pkg/internal": false,
		"internal/abi": false,
	} {
		if got := internalImport(path); got != want {
			t.Errorf("internalImport(%q) = %v, want %v", path, got, want)
		}
	}
}
