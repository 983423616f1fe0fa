package apicheck

import (
	"fmt"
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/radgen/radgen/internal/testutil"
)

const modulePath = "github.com/radgen/radgen"

// docPackage is one package's files and what go/doc makes of them.
type docPackage struct {
	dir, importPath string
	files           []*ast.File
	doc             *doc.Package
	imports         map[string]string // name → import path, over all files; "" when ambiguous
}

// docIndex loads packages by import path: the module's (examples/beam's
// nested module included) and the standard library's.
type docIndex struct {
	root string
	fset *token.FileSet
	mu   sync.Mutex
	pkgs map[string]*docPackage // nil: no such package
}

func newDocIndex(root string) *docIndex {
	return &docIndex{root: root, fset: token.NewFileSet(), pkgs: map[string]*docPackage{}}
}

// dirOf returns the folder of an import path, or "" for a package outside
// the module and the standard library.
func (x *docIndex) dirOf(importPath string) string {
	if importPath == modulePath {
		return x.root
	}
	if rest, ok := strings.CutPrefix(importPath, modulePath+"/"); ok {
		return filepath.Join(x.root, filepath.FromSlash(rest))
	}
	if first, _, _ := strings.Cut(importPath, "/"); !strings.Contains(first, ".") {
		return filepath.Join(runtime.GOROOT(), "src", filepath.FromSlash(importPath))
	}
	return ""
}

// load returns the package of importPath (nil when there is none): its
// non-test files, without those a build constraint excludes everywhere
// ("ignore") and without those of another package name (generators).
func (x *docIndex) load(importPath string) (*docPackage, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if p, ok := x.pkgs[importPath]; ok {
		return p, nil
	}
	dir := x.dirOf(importPath)
	if dir == "" {
		x.pkgs[importPath] = nil
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		x.pkgs[importPath] = nil
		return nil, nil
	}
	byName := map[string][]*ast.File{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(x.fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if ignored(f) {
			continue
		}
		byName[f.Name.Name] = append(byName[f.Name.Name], f)
	}
	// The package is the name most files have (a folder may hold a
	// generator of package main beside the library).
	var files []*ast.File
	for _, fs := range byName {
		if len(fs) > len(files) {
			files = fs
		}
	}
	if len(files) == 0 {
		x.pkgs[importPath] = nil
		return nil, nil
	}
	p := &docPackage{dir: dir, importPath: importPath, files: files, imports: map[string]string{}}
	for _, f := range files {
		for _, imp := range f.Imports {
			ip, _ := strconv.Unquote(imp.Path.Value)
			name := path.Base(ip)
			if imp.Name != nil {
				name = imp.Name.Name
			} else if v := strings.TrimPrefix(name, "v"); name != v && isDigits(v) {
				name = path.Base(path.Dir(ip)) // gopkg.in/x/v2 style: the name before the version
			}
			if prev, ok := p.imports[name]; ok && prev != ip {
				p.imports[name] = ""
			} else {
				p.imports[name] = ip
			}
		}
	}
	// go/doc resolves [Name] and [Type.Method] as go doc does; AllDecls
	// keeps the unexported declarations' exported methods and fields.
	// NewFromFiles wants the files' package clause only; it does not
	// type-check.
	p.doc, err = doc.NewFromFiles(x.fset, files, importPath, doc.AllDecls|doc.PreserveAST)
	if err != nil {
		return nil, err
	}
	x.pkgs[importPath] = p
	return p, nil
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// ignored reports whether f's build constraint includes the ignore tag.
func ignored(f *ast.File) bool {
	for _, cg := range f.Comments {
		if cg.Pos() > f.Package {
			break
		}
		for _, c := range cg.List {
			if strings.HasPrefix(c.Text, "//go:build") && strings.Contains(c.Text, "ignore") {
				return true
			}
		}
	}
	return false
}

// docComments returns every doc comment of f: the package's, each
// declaration's, each spec's, and each struct field's and interface
// method's (their doc and line comments).
func docComments(f *ast.File) []*ast.CommentGroup {
	var out []*ast.CommentGroup
	add := func(cgs ...*ast.CommentGroup) {
		for _, cg := range cgs {
			if cg != nil {
				out = append(out, cg)
			}
		}
	}
	add(f.Doc)
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			add(d.Doc)
		case *ast.GenDecl:
			add(d.Doc)
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					add(s.Doc, s.Comment)
					ast.Inspect(s.Type, func(n ast.Node) bool {
						if fl, ok := n.(*ast.Field); ok {
							add(fl.Doc, fl.Comment)
						}
						return true
					})
				case *ast.ValueSpec:
					add(s.Doc, s.Comment)
				}
			}
		}
	}
	return out
}

// docLinks returns the doc links of a parsed comment.
func docLinks(d *comment.Doc) []*comment.DocLink {
	var out []*comment.DocLink
	var text func([]comment.Text)
	text = func(ts []comment.Text) {
		for _, t := range ts {
			switch t := t.(type) {
			case *comment.DocLink:
				out = append(out, t)
				text(t.Text)
			case *comment.Link:
				text(t.Text)
			}
		}
	}
	var blocks func([]comment.Block)
	blocks = func(bs []comment.Block) {
		for _, b := range bs {
			switch b := b.(type) {
			case *comment.Paragraph:
				text(b.Text)
			case *comment.Heading:
				text(b.Text)
			case *comment.List:
				for _, it := range b.Items {
					blocks(it.Content)
				}
			}
		}
	}
	blocks(d.Content)
	return out
}

// linkText is how the link reads in the comment.
func linkText(l *comment.DocLink) string {
	var b strings.Builder
	b.WriteString("[")
	if l.ImportPath != "" {
		b.WriteString(l.ImportPath)
		if l.Name != "" {
			b.WriteString(".")
		}
	}
	if l.Recv != "" {
		b.WriteString(l.Recv + ".")
	}
	b.WriteString(l.Name + "]")
	return b.String()
}

// notImported marks, in a link's import path, a package name that names a
// package of the module the commented package does not import: go doc
// shows such a link as plain text.
const notImported = "\x00not imported:"

// deadLinks returns a message for every doc link of p that names nothing.
// Links are parsed permissively (every [Name] and [Type.Method] a link,
// every [pkg.Name] a link when pkg is an import, the package itself, a
// standard library package or a package of the module) and then resolved
// against the package's declarations, its imports and the standard
// library, as go doc resolves them.
func (x *docIndex) deadLinks(p *docPackage, modulePkgs map[string][]string) ([]string, error) {
	pp := &comment.Parser{
		LookupSym: func(recv, name string) bool { return name != "" },
		LookupPackage: func(name string) (string, bool) {
			if ip, ok := p.imports[name]; ok && ip != "" {
				return ip, true
			}
			if name == p.doc.Name {
				return "", true
			}
			if _, ok := comment.DefaultLookupPackage(name); ok {
				return name, true
			}
			if paths := modulePkgs[name]; len(paths) > 0 {
				return notImported + paths[0], true
			}
			return "", false
		},
	}
	self := p.doc.Parser()
	var out []string
	for _, f := range p.files {
		for _, cg := range docComments(f) {
			for _, l := range docLinks(pp.Parse(cg.Text())) {
				pos := x.fset.Position(cg.Pos())
				where := fmt.Sprintf("%s:%d", rel(x.root, pos.Filename), pos.Line)
				if ip, ok := strings.CutPrefix(l.ImportPath, notImported); ok {
					out = append(out, fmt.Sprintf("%s: %s: package %s is not imported here, so go doc shows the link as plain text (name it by its import path, or drop the brackets)",
						where, strings.Replace(linkText(l), l.ImportPath, path.Base(ip), 1), ip))
					continue
				}
				if l.ImportPath == "" {
					if !self.LookupSym(l.Recv, l.Name) {
						out = append(out, fmt.Sprintf("%s: %s names nothing in package %s", where, linkText(l), p.doc.Name))
					}
					continue
				}
				q, err := x.load(l.ImportPath)
				if err != nil {
					return nil, err
				}
				if q == nil {
					if x.dirOf(l.ImportPath) == "" {
						continue // outside the module and the standard library: not checked
					}
					out = append(out, fmt.Sprintf("%s: %s: no package %s", where, linkText(l), l.ImportPath))
					continue
				}
				if l.Name != "" && !q.doc.Parser().LookupSym(l.Recv, l.Name) {
					out = append(out, fmt.Sprintf("%s: %s names nothing in package %s", where, linkText(l), l.ImportPath))
				}
			}
		}
	}
	return out, nil
}

func rel(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(r, "..") {
		return filepath.ToSlash(r)
	}
	return path
}

// modulePackages returns the import paths of the module's packages
// (examples/beam's nested module included), each package folder once.
func modulePackages(t *testing.T, root string) []string {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
			return filepath.SkipDir
		}
		matches, _ := filepath.Glob(filepath.Join(p, "*.go"))
		for _, m := range matches {
			if !strings.HasSuffix(m, "_test.go") {
				r, _ := filepath.Rel(root, p)
				ip := modulePath
				if r != "." {
					ip += "/" + filepath.ToSlash(r)
				}
				out = append(out, ip)
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestDocLinks resolves every doc link ([Name], [Type.Method], [pkg.Name],
// [pkg.Type.Method], [pkg]) in every doc comment of every package of the
// module — public, internal and examples — against the package's own
// declarations, its imports and the standard library, and fails on one
// that names nothing: a renamed or removed identifier leaves its links
// behind.
func TestDocLinks(t *testing.T) {
	root := testutil.ModuleRoot()
	x := newDocIndex(root)
	paths := modulePackages(t, root)
	byName := map[string][]string{}
	for _, ip := range paths {
		byName[path.Base(ip)] = append(byName[path.Base(ip)], ip)
	}
	links := 0
	for _, ip := range paths {
		p, err := x.load(ip)
		if err != nil {
			t.Fatal(err)
		}
		if p == nil {
			continue
		}
		for _, f := range p.files {
			for _, cg := range docComments(f) {
				links += len(docLinks(p.doc.Parser().Parse(cg.Text())))
			}
		}
		dead, err := x.deadLinks(p, byName)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dead {
			t.Error(d)
		}
	}
	t.Logf("%d packages, %d doc links that go doc renders", len(paths), links)
	if len(paths) < 30 || links < 100 {
		t.Fatalf("%d packages and %d links: the walk missed the module", len(paths), links)
	}
}

// The checker itself: a package whose comments link to what exists and to
// what does not.
func TestDeadLinksFound(t *testing.T) {
	dir := t.TempDir()
	src := `// Package p is linked: [T], [T.M], [T.F], [I.Do], [New], [strings.Builder], [io.Reader.Read], [fmt], [p.T].
// Dead: [Gone], [T.Gone], [strings.Gone], [io.Reader.Gone], [q.X].
package p

import "strings"

// T holds [strings.Builder]; see [Missing.Method].
type T struct {
	F int // the field, not [T.G]
}

// M is a method.
func (T) M() {}

// I is an interface.
type I interface{ Do() }

// New returns a T.
func New() T { _ = strings.Builder{}; return T{} }
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	x := newDocIndex(dir)
	x.pkgs["example.com/p"] = nil
	fset := x.fset
	f, err := parser.ParseFile(fset, filepath.Join(dir, "p.go"), nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	d, err := doc.NewFromFiles(fset, []*ast.File{f}, "example.com/p", doc.AllDecls|doc.PreserveAST)
	if err != nil {
		t.Fatal(err)
	}
	p := &docPackage{dir: dir, importPath: "example.com/p", files: []*ast.File{f}, doc: d, imports: map[string]string{"strings": "strings"}}
	dead, err := x.deadLinks(p, map[string][]string{"q": {modulePath + "/q"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range dead {
		_, after, _ := strings.Cut(m, ": ")
		got = append(got, strings.Fields(after)[0])
	}
	want := []string{"[Gone]", "[T.Gone]", "[strings.Gone]", "[io.Reader.Gone]", "[q.X]:", "[Missing.Method]", "[T.G]"}
	if !slices.Equal(got, want) {
		t.Errorf("dead links %q, want %q:\n%s", got, want, strings.Join(dead, "\n"))
	}
}

// mention matches Type.Member written in plain text: a capitalised name, a
// dot, a capitalised name.
var mention = regexp.MustCompile(`(^|[^\w.])([A-Z]\w*)\.([A-Z]\w*)\b`)

// deadMentions returns a message for every Type.Member written without
// brackets in p's doc comments where Type is a type of p and Member is
// neither its method nor its field: a renamed or removed member leaves
// these behind as it leaves doc links.
func (x *docIndex) deadMentions(p *docPackage) []string {
	types := map[string]bool{}
	for _, t := range p.doc.Types {
		types[t.Name] = true
	}
	self := p.doc.Parser()
	var out []string
	for _, f := range p.files {
		for _, cg := range docComments(f) {
			for _, m := range mention.FindAllStringSubmatch(cg.Text(), -1) {
				recv, name := m[2], m[3]
				if !types[recv] || self.LookupSym(recv, name) || embeds(p, recv) {
					continue
				}
				pos := x.fset.Position(cg.Pos())
				out = append(out, fmt.Sprintf("%s:%d: %s.%s: type %s has no method or field %s", rel(x.root, pos.Filename), pos.Line, recv, name, recv, name))
			}
		}
	}
	return out
}

// embeds reports whether the type name of p embeds another type, whose
// promoted members go/doc does not list.
func embeds(p *docPackage, name string) bool {
	for _, t := range p.doc.Types {
		if t.Name != name {
			continue
		}
		for _, s := range t.Decl.Specs {
			ts, ok := s.(*ast.TypeSpec)
			if !ok || ts.Name.Name != name {
				continue
			}
			var fields *ast.FieldList
			switch tt := ts.Type.(type) {
			case *ast.StructType:
				fields = tt.Fields
			case *ast.InterfaceType:
				fields = tt.Methods
			}
			if fields != nil {
				for _, f := range fields.List {
					if len(f.Names) == 0 {
						return true
					}
				}
			}
		}
	}
	return false
}

// TestDocMentions fails on Type.Member written in plain text in any
// package's doc comments where Type is a type of that package without such
// a method or field (see deadMentions).
func TestDocMentions(t *testing.T) {
	root := testutil.ModuleRoot()
	x := newDocIndex(root)
	for _, ip := range modulePackages(t, root) {
		p, err := x.load(ip)
		if err != nil {
			t.Fatal(err)
		}
		if p == nil {
			continue
		}
		for _, m := range x.deadMentions(p) {
			t.Error(m)
		}
	}
}

// mapEntry matches "pkg (Name, Type.Method)" in the root package's
// equation map.
var mapEntry = regexp.MustCompile(`([a-z][\w/]*) \(([^)]*)\)`)

// TestEquationMap resolves every identifier the root package's "Where each
// equation lives" map names — "memtrans/r2gen (Decoder, Model.Loss)" — in
// the package it names: the map must point at code that exists.
func TestEquationMap(t *testing.T) {
	root := testutil.ModuleRoot()
	x := newDocIndex(root)
	p, err := x.load(modulePath)
	if err != nil || p == nil {
		t.Fatalf("root package: %v", err)
	}
	_, after, ok := strings.Cut(p.doc.Doc, "# Where each equation lives")
	if !ok {
		t.Fatal("the root package doc has no equation map")
	}
	resolved := 0
	for _, line := range strings.Split(after, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			break
		}
		if !strings.HasPrefix(line, "Eq") {
			continue
		}
		for _, m := range mapEntry.FindAllStringSubmatch(line, -1) {
			q, err := x.load(modulePath + "/" + m[1])
			if err != nil {
				t.Fatal(err)
			}
			if q == nil {
				t.Errorf("%q: no package %s", line, m[1])
				continue
			}
			for _, name := range strings.Split(m[2], ",") {
				name = strings.TrimSpace(name)
				recv, sym, dotted := strings.Cut(name, ".")
				if !dotted {
					recv, sym = "", name
				}
				if !isName(sym) || (dotted && !isName(recv)) {
					continue // prose: "(attention)"
				}
				if !q.doc.Parser().LookupSym(recv, sym) {
					t.Errorf("the equation map names %s (%s), which package %s does not declare", m[1], name, m[1])
					continue
				}
				resolved++
			}
		}
	}
	t.Logf("%d identifiers of the equation map resolved", resolved)
	if resolved < 10 {
		t.Errorf("only %d identifiers resolved: the map's format changed?", resolved)
	}
}

// isName reports whether s is an exported Go identifier.
func isName(s string) bool {
	return isIdent(s) && unicode.IsUpper([]rune(s)[0])
}
