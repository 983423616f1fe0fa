package apicheck

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/radgen/radgen/internal/testutil"
)

// publicPackages returns the directories of the module's public packages.
func publicPackages(t *testing.T, root string) []string {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		base := d.Name()
		if rel != "." && (strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") || base == "testdata" ||
			base == "internal" || base == "examples" || base == "api") {
			return filepath.SkipDir
		}
		matches, _ := filepath.Glob(filepath.Join(path, "*.go"))
		for _, m := range matches {
			if !strings.HasSuffix(m, "_test.go") {
				dirs = append(dirs, path)
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

type pkgInfo struct {
	path     string // import path
	files    []*ast.File
	examples int
}

func loadPackage(t *testing.T, fset *token.FileSet, root, dir string) pkgInfo {
	rel, _ := filepath.Rel(root, dir)
	p := pkgInfo{path: "github.com/radgen/radgen"}
	if rel != "." {
		p.path += "/" + filepath.ToSlash(rel)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if !buildsByDefault(f) {
			continue
		}
		if strings.HasSuffix(name, "_test.go") {
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Example") {
					p.examples++
				}
			}
			continue
		}
		p.files = append(p.files, f)
	}
	return p
}

// buildsByDefault reports whether f has no build constraint that excludes
// the default build (the cuda tag, say).
func buildsByDefault(f *ast.File) bool {
	for _, cg := range f.Comments {
		if cg.Pos() > f.Package {
			break
		}
		for _, c := range cg.List {
			if strings.HasPrefix(c.Text, "//go:build") && strings.Contains(c.Text, "cuda") && !strings.Contains(c.Text, "!cuda") {
				return false
			}
		}
	}
	return true
}

func exportedRecv(fd *ast.FuncDecl) (string, bool) {
	if fd.Recv == nil {
		return "", true
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	id, ok := t.(*ast.Ident)
	if !ok || !id.IsExported() {
		return "", false
	}
	return id.Name, true
}

func node(fset *token.FileSet, n any) string {
	var b bytes.Buffer
	printer.Fprint(&b, fset, n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// api lists the exported declarations of p, one line each as the release
// records hold them (see doc.go), and reports undocumented ones. Signatures
// are written without parameter names, which a caller never writes: a
// renamed parameter is no change of the API.
func api(fset *token.FileSet, p pkgInfo, undocumented func(string)) []string {
	var lines []string
	add := func(format string, a ...any) { lines = append(lines, p.path+" "+fmt.Sprintf(format, a...)) }
	for _, f := range p.files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				recv, ok := exportedRecv(d)
				if !ok || !d.Name.IsExported() {
					continue
				}
				if d.Doc == nil {
					undocumented(p.path + "." + strings.TrimPrefix(recv+"."+d.Name.Name, "."))
				}
				sig := node(fset, unnamed(d.Type))
				if d.Recv != nil {
					add("method (%s) %s%s", node(fset, d.Recv.List[0].Type), d.Name.Name, strings.TrimPrefix(sig, "func"))
				} else {
					add("func %s%s", d.Name.Name, strings.TrimPrefix(sig, "func"))
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						if d.Doc == nil && s.Doc == nil {
							undocumented(p.path + "." + s.Name.Name)
						}
						switch tt := s.Type.(type) {
						case *ast.StructType:
							add("type %s%s struct", s.Name.Name, typeParams(fset, s))
							for _, fl := range tt.Fields.List {
								for _, n := range fl.Names {
									if n.IsExported() {
										add("field %s.%s %s", s.Name.Name, n.Name, node(fset, unnamed(fl.Type)))
									}
								}
								if len(fl.Names) == 0 {
									add("embed %s %s", s.Name.Name, node(fset, fl.Type))
								}
							}
						case *ast.InterfaceType:
							add("type %s%s interface", s.Name.Name, typeParams(fset, s))
							for _, m := range tt.Methods.List {
								for _, n := range m.Names {
									add("imethod %s.%s %s", s.Name.Name, n.Name, node(fset, unnamed(m.Type)))
								}
								if len(m.Names) == 0 {
									add("imethod %s %s", s.Name.Name, node(fset, m.Type))
								}
							}
						default:
							eq := ""
							if s.Assign.IsValid() {
								eq = "= "
							}
							add("type %s%s %s%s", s.Name.Name, typeParams(fset, s), eq, node(fset, unnamed(s.Type)))
						}
					case *ast.ValueSpec:
						kind := "var"
						if d.Tok == token.CONST {
							kind = "const"
						}
						for _, n := range s.Names {
							if !n.IsExported() {
								continue
							}
							if d.Doc == nil && s.Doc == nil && s.Comment == nil {
								undocumented(p.path + "." + n.Name)
							}
							typ := ""
							if s.Type != nil {
								typ = " " + node(fset, unnamed(s.Type))
							}
							add("%s %s%s", kind, n.Name, typ)
						}
					}
				}
			}
		}
	}
	return lines
}

func TestDocumentationAndExamples(t *testing.T) {
	root := testutil.ModuleRoot()
	fset := token.NewFileSet()
	for _, dir := range publicPackages(t, root) {
		p := loadPackage(t, fset, root, dir)
		hasDoc := false
		for _, f := range p.files {
			if f.Doc != nil {
				hasDoc = true
			}
		}
		if !hasDoc {
			t.Errorf("%s: no package doc comment", p.path)
		}
		if p.examples == 0 {
			t.Errorf("%s: no runnable Example", p.path)
		}
		api(fset, p, func(name string) { t.Errorf("undocumented: %s", name) })
	}
}

// memtransBudget is the most exported identifiers package memtrans may
// have: the facade reads as configurations, Model, Load/Save, Generate and
// Trainer; decoding internals live in the modules or stay unexported.
const memtransBudget = 103

// TestMemtransAPISize counts memtrans's exported identifiers as go doc
// lists them — types, functions, methods of exported types (interface
// methods included), constants and variables — and fails above the budget.
func TestMemtransAPISize(t *testing.T) {
	root := testutil.ModuleRoot()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, filepath.Join(root, "memtrans"), func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() {
						continue
					}
					if d.Recv == nil {
						names = append(names, d.Name.Name)
						continue
					}
					if recv := receiverName(d.Recv.List[0].Type); ast.IsExported(recv) {
						names = append(names, recv+"."+d.Name.Name)
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if !s.Name.IsExported() {
								continue
							}
							names = append(names, s.Name.Name)
							if it, ok := s.Type.(*ast.InterfaceType); ok {
								for _, m := range it.Methods.List {
									for _, n := range m.Names {
										if n.IsExported() {
											names = append(names, s.Name.Name+"."+n.Name)
										}
									}
								}
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if n.IsExported() {
									names = append(names, n.Name)
								}
							}
						}
					}
				}
			}
		}
	}
	t.Logf("memtrans exports %d identifiers (at most %d)", len(names), memtransBudget)
	if len(names) > memtransBudget {
		sort.Strings(names)
		t.Errorf("memtrans exports %d identifiers, over its budget of %d:\n%s", len(names), memtransBudget, strings.Join(names, " "))
	}
}

// receiverName returns the type name of a method receiver expression.
func receiverName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverName(e.X)
	case *ast.IndexExpr:
		return receiverName(e.X)
	case *ast.IndexListExpr:
		return receiverName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}
