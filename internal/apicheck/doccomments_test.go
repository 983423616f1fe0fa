package apicheck

import (
	"fmt"
	"go/ast"
	"strings"
	"testing"
	"unicode"

	"github.com/radgen/radgen/internal/testutil"
)

// firstWord returns the first word of a doc comment, without trailing
// punctuation or a possessive.
func firstWord(text string) string {
	fields := strings.Fields(text)
	if len(fields) == 0 {
		return ""
	}
	w := strings.TrimSuffix(fields[0], "'s")
	return strings.TrimRightFunc(w, func(r rune) bool { return unicode.IsPunct(r) && r != '_' })
}

// isIdent reports whether w is a Go identifier.
func isIdent(w string) bool {
	if w == "" {
		return false
	}
	for i, r := range w {
		if !(r == '_' || unicode.IsLetter(r) || (i > 0 && unicode.IsDigit(r))) {
			return false
		}
	}
	return true
}

// camel reports whether w reads as a Go name rather than a word: a lower
// case letter directly followed by an upper case one (decoderLayer,
// DecoderLayer).
func camel(w string) bool {
	rs := []rune(w)
	for i := 1; i < len(rs); i++ {
		if unicode.IsLower(rs[i-1]) && unicode.IsUpper(rs[i]) {
			return true
		}
	}
	return false
}

// proseNames are names of things outside Go that read as camel case.
var proseNames = map[string]bool{"ResNet": true, "PyTorch": true, "DataParallel": true, "JavaScript": true}

// declared is a package's declared names: top-level identifiers and
// methods, struct fields and interface methods by name.
func declared(p *docPackage) (top, members map[string]bool) {
	top, members = map[string]bool{}, map[string]bool{}
	for _, f := range p.files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					top[d.Name.Name] = true
				} else {
					members[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						top[s.Name.Name] = true
						ast.Inspect(s.Type, func(n ast.Node) bool {
							if fl, ok := n.(*ast.Field); ok {
								for _, n := range fl.Names {
									members[n.Name] = true
								}
							}
							return true
						})
					case *ast.ValueSpec:
						for _, n := range s.Names {
							top[n.Name] = true
						}
					}
				}
			}
		}
	}
	return top, members
}

// misplacedDocs returns a message for every doc comment of p that begins
// with the name of something other than what it documents: another
// declaration of the package, or a Go-looking name (camel case) that the
// package does not declare — a comment left behind by a rename, or sitting
// above the wrong declaration. Comments of a parenthesised group of several
// specs describe the group and are not checked.
func (x *docIndex) misplacedDocs(p *docPackage) []string {
	top, members := declared(p)
	var out []string
	check := func(doc *ast.CommentGroup, names ...string) {
		if doc == nil {
			return
		}
		w := firstWord(doc.Text())
		if !isIdent(w) {
			return
		}
		for _, n := range names {
			if w == n {
				return
			}
		}
		var why string
		switch {
		case top[w] || members[w]:
			why = "another declaration of the package"
		case camel(w) && !proseNames[w]:
			why = "a name the package does not declare"
		default:
			return
		}
		pos := x.fset.Position(doc.Pos())
		out = append(out, fmt.Sprintf("%s:%d: the comment on %s begins with %s, %s", rel(x.root, pos.Filename), pos.Line, strings.Join(names, ", "), w, why))
	}
	for _, f := range p.files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				check(d.Doc, d.Name.Name)
			case *ast.GenDecl:
				if d.Lparen.IsValid() && len(d.Specs) > 1 {
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							check(s.Doc, s.Name.Name)
						case *ast.ValueSpec:
							check(s.Doc, identNames(s.Names)...)
						}
					}
					continue
				}
				for _, s := range d.Specs {
					doc := d.Doc
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Doc != nil {
							doc = s.Doc
						}
						check(doc, s.Name.Name)
					case *ast.ValueSpec:
						if s.Doc != nil {
							doc = s.Doc
						}
						check(doc, identNames(s.Names)...)
					}
				}
			}
		}
	}
	return out
}

func identNames(ids []*ast.Ident) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.Name
	}
	return out
}

// TestDocCommentsSitOnWhatTheyDescribe fails on a doc comment, in any
// package of the module, that begins with the name of another declaration
// or with a Go name the package does not declare (see misplacedDocs).
func TestDocCommentsSitOnWhatTheyDescribe(t *testing.T) {
	root := testutil.ModuleRoot()
	x := newDocIndex(root)
	n := 0
	for _, ip := range modulePackages(t, root) {
		p, err := x.load(ip)
		if err != nil {
			t.Fatal(err)
		}
		if p == nil {
			continue
		}
		n++
		for _, m := range x.misplacedDocs(p) {
			t.Error(m)
		}
	}
	if n < 30 {
		t.Fatalf("%d packages: the walk missed the module", n)
	}
}
