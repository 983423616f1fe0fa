package apicheck

import "go/ast"

// apiNode is one piece of a package's exported API that names types.
type apiNode struct {
	where string   // what it belongs to, for messages
	node  ast.Node // the type expression (a signature, a field's type, …)
	// embedded marks an exported struct's embedded field; option marks
	// the function type of a declaration `type T func(*options) [error]`;
	// value marks the composite literal an exported variable is set to.
	embedded, option, value bool
}

// exportedAPI calls visit for every type expression of f's exported API:
// exported functions and methods of exported types (their signatures),
// exported types (their exported fields and embedded ones, their exported
// interface methods, or their definition), and exported variables and
// constants (their declared types, and the composite literals they are set
// to).
func exportedAPI(pkg string, f *ast.File, visit func(apiNode)) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if recv, ok := exportedRecv(d); ok && d.Name.IsExported() {
				visit(apiNode{where: pkg + " " + recv + d.Name.Name, node: d.Type})
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					where := pkg + " type " + s.Name.Name
					switch ty := s.Type.(type) {
					case *ast.StructType:
						for _, fl := range ty.Fields.List {
							if len(fl.Names) == 0 {
								visit(apiNode{where: where, node: fl.Type, embedded: true})
							}
							for _, n := range fl.Names {
								if n.IsExported() {
									visit(apiNode{where: where + "." + n.Name, node: fl.Type})
									break
								}
							}
						}
					case *ast.InterfaceType:
						for _, m := range ty.Methods.List {
							if len(m.Names) == 0 || m.Names[0].IsExported() {
								visit(apiNode{where: where, node: m.Type})
							}
						}
					case *ast.FuncType:
						visit(apiNode{where: where, node: ty, option: functionalOption(ty)})
					default:
						visit(apiNode{where: where, node: s.Type})
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if !n.IsExported() {
							continue
						}
						visit(apiNode{where: pkg + " " + n.Name, node: s.Type})
						for _, v := range s.Values {
							if cl, ok := v.(*ast.CompositeLit); ok {
								visit(apiNode{where: pkg + " " + n.Name, node: cl.Type, value: true})
							}
						}
					}
				}
			}
		}
	}
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
