package apicheck

import (
	"go/ast"
	"go/token"
	"testing"

	"github.com/radgen/radgen/internal/testutil"
)

// TestNoUnexportedTypeInAPI walks the exported API of every public package,
// as TestNoInternalTypeInAPI does, and fails on a signature, field or
// interface method that names a type the package does not export: a user
// could see such a method but never call it (a value of the type cannot be
// made outside the package) nor implement the interface.
func TestNoUnexportedTypeInAPI(t *testing.T) {
	root := testutil.ModuleRoot()
	fset := token.NewFileSet()
	checked := 0
	for _, dir := range publicPackages(t, root) {
		p := loadPackage(t, fset, root, dir)
		hidden := map[string]bool{} // the package's unexported type names
		for _, f := range p.files {
			for _, d := range f.Decls {
				if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.TYPE {
					for _, s := range gd.Specs {
						if ts := s.(*ast.TypeSpec); !ts.Name.IsExported() {
							hidden[ts.Name.Name] = true
						}
					}
				}
			}
		}
		for _, f := range p.files {
			var check func(where string, e ast.Node)
			check = func(where string, e ast.Node) {
				if e == nil {
					return
				}
				checked++
				ast.Inspect(e, func(n ast.Node) bool {
					switch n := n.(type) {
					case *ast.BlockStmt:
						return false // bodies are not the API
					case *ast.Field:
						check(where, n.Type) // its type, not its names
						return false
					case *ast.SelectorExpr:
						return false // another package's name
					case *ast.Ident:
						if hidden[n.Name] {
							t.Errorf("%s: %s names the unexported type %s", fset.Position(n.Pos()), where, n.Name)
						}
					}
					return true
				})
			}
			exportedAPI(p.path, f, func(n apiNode) {
				if !n.embedded && !n.option && !n.value {
					check(n.where, n.node)
				}
			})
		}
	}
	if checked < 500 {
		t.Fatalf("only %d declarations checked: the walk is broken", checked)
	}
	t.Logf("%d exported declarations checked", checked)
}
