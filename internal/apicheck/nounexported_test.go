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
									for _, n := range fl.Names {
										if n.IsExported() {
											check(where+"."+n.Name, fl.Type)
											break
										}
									}
								}
							case *ast.InterfaceType:
								for _, m := range ty.Methods.List {
									if len(m.Names) == 0 || m.Names[0].IsExported() {
										check(where, m.Type)
									}
								}
							case *ast.FuncType:
								if !functionalOption(ty) {
									check(where, s.Type)
								}
							default:
								check(where, s.Type)
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if n.IsExported() {
									check(p.path+" "+n.Name, s.Type)
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

// functionalOption reports whether ft is func(*T) or func(*T) error.
func functionalOption(ft *ast.FuncType) bool {
	if ft.Params == nil || len(ft.Params.List) != 1 || len(ft.Params.List[0].Names) > 1 {
		return false
	}
	if _, ok := ft.Params.List[0].Type.(*ast.StarExpr); !ok {
		return false
	}
	if ft.Results == nil || len(ft.Results.List) == 0 {
		return true
	}
	id, ok := ft.Results.List[0].Type.(*ast.Ident)
	return len(ft.Results.List) == 1 && ok && id.Name == "error"
}
