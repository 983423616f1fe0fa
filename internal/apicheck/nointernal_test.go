package apicheck

import (
	"go/ast"
	"go/token"
	"path"
	"strconv"
	"strings"
	"testing"

	"github.com/radgen/radgen/internal/testutil"
)

// TestNoInternalTypeInAPI walks the exported API of every public package —
// exported functions, methods of exported types, exported types with their
// exported fields and interface methods, exported variables and constants —
// and fails on any type from an internal package: a user can call or
// implement nothing whose signature names a type they cannot import.
func TestNoInternalTypeInAPI(t *testing.T) {
	root := testutil.ModuleRoot()
	fset := token.NewFileSet()
	checked := 0
	for _, dir := range publicPackages(t, root) {
		p := loadPackage(t, fset, root, dir)
		for _, f := range p.files {
			internal := map[string]string{} // local name → import path
			for _, imp := range f.Imports {
				ip, _ := strconv.Unquote(imp.Path.Value)
				if !strings.Contains(ip, "/internal/") && !strings.HasSuffix(ip, "/internal") {
					continue
				}
				name := path.Base(ip)
				if imp.Name != nil {
					name = imp.Name.Name
				}
				internal[name] = ip
			}
			check := func(where string, e ast.Node) {
				if e == nil {
					return
				}
				checked++
				ast.Inspect(e, func(n ast.Node) bool {
					// Function literals and bodies are not the API.
					if _, ok := n.(*ast.BlockStmt); ok {
						return false
					}
					sel, ok := n.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					if id, ok := sel.X.(*ast.Ident); ok {
						if ip, bad := internal[id.Name]; bad {
							t.Errorf("%s: %s names %s.%s from %s", fset.Position(sel.Pos()), where, id.Name, sel.Sel.Name, ip)
						}
					}
					return true
				})
			}
			exportedAPI(p.path, f, func(n apiNode) { check(n.where, n.node) })
		}
	}
	if checked < 500 {
		t.Fatalf("only %d declarations checked: the walk is broken", checked)
	}
	t.Logf("%d exported declarations checked", checked)
}
