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
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					recv, ok := exportedRecv(d)
					if !ok || !d.Name.IsExported() {
						continue
					}
					check(p.path+" "+recv+d.Name.Name, d.Type)
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if !s.Name.IsExported() {
								continue
							}
							where := p.path + " type " + s.Name.Name
							switch ty := s.Type.(type) {
							case *ast.StructType:
								for _, fl := range ty.Fields.List {
									exported := len(fl.Names) == 0 // embedded
									for _, n := range fl.Names {
										exported = exported || n.IsExported()
									}
									if exported {
										check(where, fl.Type)
									}
								}
							case *ast.InterfaceType:
								for _, m := range ty.Methods.List {
									exported := len(m.Names) == 0
									for _, n := range m.Names {
										exported = exported || n.IsExported()
									}
									if exported {
										check(where, m.Type)
									}
								}
							default:
								check(where, s.Type)
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if n.IsExported() {
									check(p.path+" "+n.Name, s.Type)
									for _, v := range s.Values {
										// An exported variable's type may come from
										// its value: a call or a composite literal.
										if cl, ok := v.(*ast.CompositeLit); ok {
											check(p.path+" "+n.Name, cl.Type)
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
	if checked < 500 {
		t.Fatalf("only %d declarations checked: the walk is broken", checked)
	}
	t.Logf("%d exported declarations checked", checked)
}
