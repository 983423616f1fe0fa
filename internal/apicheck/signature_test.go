package apicheck

import (
	"go/ast"
	"go/token"
	"strings"
)

// unnamed returns a copy of the type expression e in which every function
// type, at any depth (a parameter that is itself a function, an interface
// method, a field of function type), lists its parameters and results by
// type alone: a caller never writes those names, so renaming one changes
// nothing a user compiles. Struct field and interface method names, type
// parameters and everything else are kept. e itself is not modified.
func unnamed(e ast.Expr) ast.Expr {
	switch e := e.(type) {
	case *ast.FuncType:
		return &ast.FuncType{TypeParams: e.TypeParams, Params: unnamedFields(e.Params), Results: unnamedFields(e.Results)}
	case *ast.StarExpr:
		return &ast.StarExpr{X: unnamed(e.X)}
	case *ast.ParenExpr:
		return &ast.ParenExpr{X: unnamed(e.X)}
	case *ast.Ellipsis:
		return &ast.Ellipsis{Elt: unnamed(e.Elt)}
	case *ast.ArrayType:
		return &ast.ArrayType{Len: e.Len, Elt: unnamed(e.Elt)}
	case *ast.MapType:
		return &ast.MapType{Key: unnamed(e.Key), Value: unnamed(e.Value)}
	case *ast.ChanType:
		return &ast.ChanType{Dir: e.Dir, Value: unnamed(e.Value)}
	case *ast.IndexExpr:
		return &ast.IndexExpr{X: e.X, Index: unnamed(e.Index)}
	case *ast.IndexListExpr:
		idx := make([]ast.Expr, len(e.Indices))
		for i, x := range e.Indices {
			idx[i] = unnamed(x)
		}
		return &ast.IndexListExpr{X: e.X, Indices: idx}
	case *ast.StructType:
		return &ast.StructType{Fields: keepNames(e.Fields), Struct: e.Struct}
	case *ast.InterfaceType:
		return &ast.InterfaceType{Methods: keepNames(e.Methods), Interface: e.Interface}
	}
	return e
}

// unnamedFields returns a parameter or result list with one unnamed field
// per name (a, b *T becomes *T, *T), each type passed through unnamed.
func unnamedFields(fl *ast.FieldList) *ast.FieldList {
	if fl == nil {
		return nil
	}
	out := &ast.FieldList{}
	for _, f := range fl.List {
		n := max(len(f.Names), 1)
		for range n {
			out.List = append(out.List, &ast.Field{Type: unnamed(f.Type)})
		}
	}
	return out
}

// keepNames copies a struct's fields or an interface's methods with their
// names, passing each type through unnamed.
func keepNames(fl *ast.FieldList) *ast.FieldList {
	if fl == nil {
		return nil
	}
	out := &ast.FieldList{Opening: fl.Opening, Closing: fl.Closing}
	for _, f := range fl.List {
		out.List = append(out.List, &ast.Field{Names: f.Names, Type: unnamed(f.Type), Tag: f.Tag})
	}
	return out
}

// typeParams returns a type declaration's type parameter list as written
// ("[T any, U Float]"), or "" for a type that has none.
func typeParams(fset *token.FileSet, s *ast.TypeSpec) string {
	if s.TypeParams == nil || len(s.TypeParams.List) == 0 {
		return ""
	}
	var parts []string
	for _, f := range s.TypeParams.List {
		names := make([]string, len(f.Names))
		for i, n := range f.Names {
			names[i] = n.Name
		}
		parts = append(parts, strings.Join(names, ", ")+" "+node(fset, f.Type))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
