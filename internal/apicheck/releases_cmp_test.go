package apicheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/radgen/radgen/internal/testutil"
)

// TestCompareCatchesBreaks takes the current API, removes a function and
// changes a method's signature in memory, and checks that compare reports
// both by name, and nothing else; adding a function changes nothing.
func TestCompareCatchesBreaks(t *testing.T) {
	recorded := currentAPI(t, testutil.ModuleRoot())
	const (
		gone    = modulePath + " func NewStepMemory() *StepMemory"
		before  = modulePath + " method (*Graph) Add(*Tensor, *Tensor) *Tensor"
		after   = modulePath + " method (*Graph) Add(*Tensor, *Tensor, float64) *Tensor"
		newFunc = modulePath + " func NewThing() int"
	)
	for _, l := range []string{gone, before} {
		if !slices.Contains(recorded, l) {
			t.Fatalf("the API has no line %q", l)
		}
	}
	var current []string
	for _, l := range recorded {
		switch l {
		case gone:
		case before:
			current = append(current, after)
		default:
			current = append(current, l)
		}
	}
	current = append(current, newFunc)
	got := compare(recorded, current)
	want := []change{
		{name: modulePath + " Graph.Add", old: before, new: after},
		{name: modulePath + " NewStepMemory", old: gone},
	}
	slices.SortFunc(got, func(a, b change) int { return strings.Compare(a.name, b.name) })
	if !slices.Equal(got, want) {
		t.Fatalf("compare reports\n%v\nwant\n%v", got, want)
	}
	if s := got[0].String(); !strings.Contains(s, "changed: "+before) || !strings.Contains(s, "now: "+after) {
		t.Errorf("the signature change reads %q", s)
	}
	if s := got[1].String(); s != "removed: "+gone {
		t.Errorf("the removal reads %q", s)
	}
	if c := compare(recorded, recorded); len(c) != 0 {
		t.Errorf("the API against itself: %v", c)
	}
}

// TestCompareInterfacesAndReceivers: a method added to a recorded
// interface breaks its implementations, one added to a new interface does
// not; a method moving from *T to T is compatible, from T to *T it is not.
func TestCompareInterfacesAndReceivers(t *testing.T) {
	recorded := []string{
		modulePath + " type Module interface",
		modulePath + " imethod Module.VisitParams func(func(string, *Tensor))",
		modulePath + " method (*Tensor) Len() int",
		modulePath + " method (Device) String() string",
	}
	current := []string{
		modulePath + " type Module interface",
		modulePath + " imethod Module.VisitParams func(func(string, *Tensor))",
		modulePath + " imethod Module.Name func() string",
		modulePath + " imethod Module Stringer",
		modulePath + " type Fresh interface",
		modulePath + " imethod Fresh.Anything func()",
		modulePath + " method (Tensor) Len() int",
		modulePath + " method (*Device) String() string",
	}
	got := compare(recorded, current)
	want := []change{
		{name: modulePath + " Device.String", old: modulePath + " method (Device) String() string", new: modulePath + " method (*Device) String() string"},
		{name: modulePath + " Module.Name", new: modulePath + " imethod Module.Name func() string"},
		{name: modulePath + " imethod Module Stringer", new: modulePath + " imethod Module Stringer"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("compare reports\n%v\nwant\n%v", got, want)
	}
	if s := got[1].String(); !strings.HasPrefix(s, "new method of an existing interface") {
		t.Errorf("the new interface method reads %q", s)
	}
}

// TestCompareSourceEdits records a small package written to a temporary
// module, edits its source — a function removed, a signature changed, a
// field's type changed, parameters renamed, a function added — and checks
// what compare reports of the edited package's record.
func TestCompareSourceEdits(t *testing.T) {
	dir := t.TempDir()
	write := func(src string) []string {
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module "+modulePath+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return currentAPI(t, dir)
	}
	recorded := write(`// Package p is a package.
package p

// Old goes.
func Old() {}

// Scale keeps its name and changes its signature.
func Scale(x float32, by int) float32 { return x }

// Renamed has its parameters renamed, which breaks no caller.
func Renamed(a, b int) (n int, err error) { return 0, nil }

// Config is a configuration.
type Config struct {
	// Size changes type.
	Size int
	// Hook takes a function whose parameter is renamed.
	Hook func(visit func(name string))
}
`)
	current := write(`// Package p is a package.
package p

// Scale keeps its name and changes its signature.
func Scale(x float64, by int) float64 { return x }

// Renamed has its parameters renamed, which breaks no caller.
func Renamed(x int, y int) (count int, e error) { return 0, nil }

// Config is a configuration.
type Config struct {
	// Size changes type.
	Size int64
	// Hook takes a function whose parameter is renamed.
	Hook func(f func(s string))
	// Added is new.
	Added bool
}

// New is an addition.
func New() {}
`)
	var got []string
	for _, c := range compare(recorded, current) {
		got = append(got, c.String())
	}
	slices.Sort(got)
	want := []string{
		"changed: " + modulePath + " field Config.Size int\n\t     now: " + modulePath + " field Config.Size int64",
		"changed: " + modulePath + " func Scale(float32, int) float32\n\t     now: " + modulePath + " func Scale(float64, int) float64",
		"removed: " + modulePath + " func Old()",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("compare reports\n%s\nwant\n%s\n(recorded %q)", strings.Join(got, "\n"), strings.Join(want, "\n"), recorded)
	}
}

func TestAPIName(t *testing.T) {
	for line, want := range map[string]string{
		modulePath + " func Register[T Config](string)":                        modulePath + " Register",
		modulePath + " func F()":                                               modulePath + " F",
		modulePath + " method (*Graph) Add(*Tensor, *Tensor) *Tensor":          modulePath + " Graph.Add",
		modulePath + " method (Rows[T]) Len() int":                             modulePath + " Rows.Len",
		modulePath + " type Arena struct":                                      modulePath + " Arena",
		modulePath + " type Pair[K comparable, V any] struct":                  modulePath + " Pair",
		modulePath + " type Device uint32":                                     modulePath + " Device",
		modulePath + " field Config.Size int":                                  modulePath + " Config.Size",
		modulePath + " embed ReportModel *Model":                               modulePath + " ReportModel.Model",
		modulePath + " embed Wrapped *radgen.Graph":                            modulePath + " Wrapped.Graph",
		modulePath + " imethod Module.VisitParams func(func(string, *Tensor))": modulePath + " Module.VisitParams",
		modulePath + " imethod Float ~float32 | ~float64":                      modulePath + " imethod Float ~float32 | ~float64",
		modulePath + " const PadNone PaddingRule":                              modulePath + " PadNone",
		modulePath + " var ErrWeights":                                         modulePath + " ErrWeights",
		"garbage":                                                              "garbage",
		modulePath + " method broken":                                          modulePath + " method broken",
	} {
		if got := apiName(line); got != want {
			t.Errorf("apiName(%q) = %q, want %q", line, got, want)
		}
	}
}

const (
	hashA = "bdfd252c29b7408bf1c5ba83ab9ed42ad9080901"
	hashB = "58cf4d7aa5fab5712b5351085bac71087a0a19cc"
)

func TestParseReleases(t *testing.T) {
	rs, err := parseReleases([]byte("# comment\n\nv0.2.0 " + hashA + " api/v0.2.0.txt\n  v1.0.0 " + hashB + " api/v1.0.0.txt  \nv1.1.0 - api/v1.1.0.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := []release{
		{version{0, 2, 0}, hashA, "api/v0.2.0.txt"},
		{version{1, 0, 0}, hashB, "api/v1.0.0.txt"},
		{version{1, 1, 0}, "", "api/v1.1.0.txt"},
	}
	if !slices.Equal(rs, want) {
		t.Fatalf("parsed %v, want %v", rs, want)
	}
	for in, msg := range map[string]string{
		"v1.0.0 " + hashA:                                                          "have 2 fields",
		"1.0.0 " + hashA + " api/1.0.0.txt":                                        "not vMAJOR.MINOR.PATCH",
		"v1.0.0-rc1 " + hashA + " api/v1.0.0-rc1.txt":                              "not vMAJOR.MINOR.PATCH",
		"v01.0.0 " + hashA + " api/v01.0.0.txt":                                    "not vMAJOR.MINOR.PATCH",
		"v1.0.0 bdfd252 api/v1.0.0.txt":                                            "neither a full hash nor -",
		"v1.0.0 " + hashA + " ../../etc/passwd":                                    "the record of v1.0.0 is api/v1.0.0.txt",
		"v1.1.0 " + hashA + " api/v1.1.0.txt\nv1.0.0 - api/v1.0.0.txt":             "v1.0.0 does not follow v1.1.0",
		"v1.0.0 " + hashA + " api/v1.0.0.txt\nv1.0.0 " + hashB + " api/v1.0.0.txt": "v1.0.0 does not follow v1.0.0",
		"v1.0.0 - api/v1.0.0.txt\nv1.1.0 " + hashA + " api/v1.1.0.txt":             "follows the one being prepared on line 1",
	} {
		if _, err := parseReleases([]byte(in)); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("parseReleases(%q): error %v, want one saying %q", in, err, msg)
		}
	}
}

// TestReleaseLifecycle runs the api folder of a temporary module through
// its life: the first v1 record, a release, additions recorded in the next
// minor version's record, and every refusal.
func TestReleaseLifecycle(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "api"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	put := func(rel, s string) {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(rel)), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	open := func() *apiDir {
		d, err := openAPIDir(dir, 1)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	mustFail := func(err error, msg string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Fatalf("error %v, want one saying %q", err, msg)
		}
	}
	expect := func(d *apiDir, current []string, want ...string) {
		t.Helper()
		problems, err := d.check(current)
		if err != nil {
			t.Fatal(err)
		}
		if len(problems) != len(want) {
			t.Fatalf("check reports %d problems, want %d:\n%s", len(problems), len(want), strings.Join(problems, "\n"))
		}
		for i, w := range want {
			if !strings.Contains(problems[i], w) {
				t.Errorf("problem %d is %q, want it to say %q", i, problems[i], w)
			}
		}
	}

	const (
		f   = modulePath + " func F(int) int"
		g   = modulePath + " func G()"
		h   = modulePath + " func H()"
		f64 = modulePath + " func F(int64) int"
	)
	v1 := []string{f, g}
	put("api/releases.txt", "# releases\nv0.3.0 "+hashA+" api/v0.3.0.txt\n")
	put("api/v0.3.0.txt", modulePath+" func Old()\n")

	// Before any v1 release: v0 records are history, not enforced.
	expect(open(), v1, "lists no v1 release: record one with -release v1.0.0")
	_, err := open().update(v1)
	mustFail(err, "lists no v1 release")

	// The first v1 record, as a release being prepared.
	v100, _ := parseVersion("v1.0.0")
	if _, err := open().release(v100, v1); err != nil {
		t.Fatal(err)
	}
	if got, want := file("api/releases.txt"), "# releases\nv0.3.0 "+hashA+" api/v0.3.0.txt\nv1.0.0 - api/v1.0.0.txt\n"; got != want {
		t.Fatalf("api/releases.txt is\n%s\nwant\n%s", got, want)
	}
	if got := file("api/v1.0.0.txt"); got != f+"\n"+g+"\n" {
		t.Fatalf("api/v1.0.0.txt is %q", got)
	}
	expect(open(), v1)
	// A release being prepared is enforced, and may be written again.
	expect(open(), []string{f}, "breaks v1.0.0 (being prepared): removed: "+g, "write its record again with -release v1.0.0")
	_, err = open().update([]string{f})
	mustFail(err, "v1.0.0 is being prepared: if the changes to it are intended, write its record again with -release v1.0.0")
	if _, err := open().release(v100, []string{f, h}); err != nil {
		t.Fatal(err)
	}
	if got := file("api/v1.0.0.txt"); got != f+"\n"+h+"\n" {
		t.Fatalf("api/v1.0.0.txt is %q after writing it again", got)
	}
	_, err = open().release(version{1, 1, 0}, v1)
	mustFail(err, "v1.0.0 is being prepared: record its commit")
	if _, err := open().release(v100, v1); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(file("api/releases.txt"), "v1.0.0"); n != 2 { // the version and its record
		t.Fatalf("api/releases.txt names v1.0.0 %d times:\n%s", n, file("api/releases.txt"))
	}

	// Released: its commit is listed.
	put("api/releases.txt", "v0.3.0 "+hashA+" api/v0.3.0.txt\nv1.0.0 "+hashB+" api/v1.0.0.txt\n")
	released := file("api/v1.0.0.txt")
	_, err = open().release(v100, v1)
	mustFail(err, "v1.0.0 was released at "+hashB+": its record api/v1.0.0.txt cannot be rewritten")
	_, err = open().release(version{0, 4, 0}, v1)
	mustFail(err, "this module's releases are v1")
	_, err = open().release(version{2, 0, 0}, v1)
	mustFail(err, "a new major version is a new module path")

	// A removal and a changed signature break v1.0.0; -update refuses them.
	expect(open(), []string{f64}, "breaks v1.0.0: changed: "+f, "breaks v1.0.0: removed: "+g)
	_, err = open().update([]string{f64})
	mustFail(err, "breaks v1.0.0: changed: "+f)
	_, err = open().release(version{1, 1, 0}, []string{f})
	mustFail(err, "breaks v1.0.0: removed: "+g)

	// An addition is recorded in v1.1.0's record, never in v1.0.0's.
	v11 := []string{f, g, h}
	expect(open(), v11, "not recorded: "+h+" (an addition since v1.0.0: record it in api/v1.1.0.txt with -update)")
	if _, err := open().update(v11); err != nil {
		t.Fatal(err)
	}
	if got := file("api/v1.1.0.txt"); got != f+"\n"+g+"\n"+h+"\n" {
		t.Fatalf("api/v1.1.0.txt is %q", got)
	}
	if file("api/v1.0.0.txt") != released {
		t.Fatal("-update rewrote the released record")
	}
	expect(open(), v11)
	// An unreleased addition may go again: check reports it, -update
	// accepts it by removing the record, now empty of additions.
	expect(open(), v1, "api/v1.1.0.txt (unreleased additions) holds what the API no longer has: removed: "+h)
	if _, err := open().update(v1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "api", "v1.1.0.txt")); !os.IsNotExist(err) {
		t.Fatalf("api/v1.1.0.txt after -update with no additions: %v", err)
	}

	// A record nobody lists.
	put("api/v1.5.0.txt", f+"\n")
	expect(open(), v1, "api/v1.5.0.txt is neither a release's record")
	if err := os.Remove(filepath.Join(dir, "api", "v1.5.0.txt")); err != nil {
		t.Fatal(err)
	}

	// Releasing v1.2.0 supersedes the v1.1.0 record of additions.
	if _, err := open().update(v11); err != nil {
		t.Fatal(err)
	}
	_, err = open().release(v100, v11)
	mustFail(err, "cannot be rewritten")
	msg, err := open().release(version{1, 2, 0}, v11)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "removed api/v1.1.0.txt") {
		t.Errorf("release says %q", msg)
	}
	if _, err := os.Stat(filepath.Join(dir, "api", "v1.1.0.txt")); !os.IsNotExist(err) {
		t.Fatalf("api/v1.1.0.txt after releasing v1.2.0: %v", err)
	}
	if got := file("api/v1.2.0.txt"); got != f+"\n"+g+"\n"+h+"\n" {
		t.Fatalf("api/v1.2.0.txt is %q", got)
	}
	d := open()
	if nv, _ := d.next(); nv != (version{1, 3, 0}) {
		t.Fatalf("the next record after v1.2.0 is %s", nv)
	}
	expect(d, v11)
	expect(d, v1, "breaks v1.2.0 (being prepared): removed: "+h, "write its record again with -release v1.2.0")
}

func FuzzParseReleases(f *testing.F) {
	f.Add([]byte("v0.2.0 " + hashA + " api/v0.2.0.txt\nv1.0.0 - api/v1.0.0.txt\n"))
	f.Add([]byte("# c\n\nv1.0.0 " + hashB + " api/v1.0.0.txt\r\n"))
	f.Add([]byte("v1.0.0 - api/v1.0.0.txt\nv1.1.0 - api/v1.1.0.txt"))
	f.Add([]byte("v999999.0.0 x y"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := parseReleases(b)
		if err != nil {
			return
		}
		for i, r := range rs {
			if r.record != recordPath(r.version) {
				t.Fatalf("%v: record %q", r, r.record)
			}
			if i > 0 && !rs[i-1].version.less(r.version) {
				t.Fatalf("%v after %v", r, rs[i-1])
			}
			if r.commit == "" && i != len(rs)-1 {
				t.Fatalf("release %d of %d is being prepared", i, len(rs))
			}
		}
	})
}

func FuzzCompare(f *testing.F) {
	f.Add(modulePath+" method (*Graph) Add(*Tensor, *Tensor) *Tensor", modulePath+" method (Graph) Add(*Tensor, *Tensor) *Tensor")
	f.Add(modulePath+" type Module interface\n"+modulePath+" imethod Module.F func()", modulePath+" type Module interface\n"+modulePath+" imethod Module.G func()")
	f.Add(modulePath+" embed A *b.C", "x")
	f.Add("a method (", "a imethod .")
	f.Fuzz(func(t *testing.T, a, b string) {
		ra, rb := parseRecord([]byte(a)), parseRecord([]byte(b))
		if c := compare(ra, ra); len(c) != 0 {
			t.Fatalf("a record against itself: %v", c)
		}
		for _, c := range compare(ra, rb) {
			if c.old == "" && c.new == "" || c.name == "" {
				t.Fatalf("empty change %#v", c)
			}
			if c.old != "" && !slices.Contains(ra, c.old) || c.new != "" && !slices.Contains(rb, c.new) {
				t.Fatalf("change %#v names a line of neither record", c)
			}
			_ = c.String()
		}
	})
}
