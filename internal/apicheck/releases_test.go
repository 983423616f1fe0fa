package apicheck

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/radgen/radgen/internal/testutil"
)

var (
	update     = flag.Bool("update", false, "write the current API to the next minor version's record (api/vX.Y+1.0.txt); refused when it breaks a release")
	releaseVer = flag.String("release", "", "write the current API as the record of this release (vX.Y.Z) and list it in api/releases.txt; refused for a released record")
)

// releasesFile lists the releases, relative to the module root.
const releasesFile = "api/releases.txt"

// version is a release's semantic version, vMAJOR.MINOR.PATCH.
type version struct{ major, minor, patch int }

var versionRE = regexp.MustCompile(`^v(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})$`)

// parseVersion reads "vX.Y.Z" (no leading zeros, no pre-release).
func parseVersion(s string) (version, error) {
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return version{}, fmt.Errorf("version %q is not vMAJOR.MINOR.PATCH", s)
	}
	var v [3]int
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	return version{v[0], v[1], v[2]}, nil
}

func (v version) String() string { return fmt.Sprintf("v%d.%d.%d", v.major, v.minor, v.patch) }

func (v version) less(w version) bool {
	if v.major != w.major {
		return v.major < w.major
	}
	if v.minor != w.minor {
		return v.minor < w.minor
	}
	return v.patch < w.patch
}

// recordPath is the record file of v, relative to the module root.
func recordPath(v version) string { return "api/" + v.String() + ".txt" }

// release is one line of api/releases.txt.
type release struct {
	version version
	// commit is the release's commit (full hash), "" while the release is
	// being prepared ("-" in the file).
	commit string
	record string // its record, relative to the module root
}

var commitRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// parseReleases reads api/releases.txt: one release a line, oldest first,
// as "VERSION COMMIT RECORD" (COMMIT a full hash, or "-" on the last line
// for a release being prepared, whose commit is not known yet; RECORD
// api/VERSION.txt); blank lines and lines starting with # are skipped.
func parseReleases(b []byte) ([]release, error) {
	var rs []release
	pending := 0 // line number of a "-" commit
	for i, line := range strings.Split(string(b), "\n") {
		n := i + 1
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if pending != 0 {
			return nil, fmt.Errorf("%s:%d: a release follows the one being prepared on line %d", releasesFile, n, pending)
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("%s:%d: want VERSION COMMIT RECORD, have %d fields", releasesFile, n, len(f))
		}
		v, err := parseVersion(f[0])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", releasesFile, n, err)
		}
		r := release{version: v, record: f[2]}
		switch {
		case f[1] == "-":
			pending = n
		case commitRE.MatchString(f[1]):
			r.commit = f[1]
		default:
			return nil, fmt.Errorf("%s:%d: commit %.50q is neither a full hash nor -", releasesFile, n, f[1])
		}
		if want := recordPath(v); r.record != want {
			return nil, fmt.Errorf("%s:%d: the record of %s is %s, not %.100q", releasesFile, n, v, want, r.record)
		}
		if len(rs) > 0 && !rs[len(rs)-1].version.less(v) {
			return nil, fmt.Errorf("%s:%d: %s does not follow %s", releasesFile, n, v, rs[len(rs)-1].version)
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// parseRecord returns a record's lines, without blank ones.
func parseRecord(b []byte) []string {
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// apiName returns the name a record line declares, qualified by its
// package: "PKG Name" for a function, type, constant or variable,
// "PKG Type.Member" for a method, field, embedded field or interface
// method. An interface's embedded constraint or interface has no name of
// its own: its whole line is its name. A line in no known form is its own
// name too.
func apiName(line string) string {
	pkg, rest, _ := strings.Cut(line, " ")
	kind, rest, _ := strings.Cut(rest, " ")
	upTo := func(s, stops string) string {
		if i := strings.IndexAny(s, stops); i >= 0 {
			return s[:i]
		}
		return s
	}
	var name string
	switch kind {
	case "func", "type", "const", "var":
		name = upTo(rest, " [(")
	case "method": // (*T) Name(…) or (T[P]) Name(…)
		recv, sig, ok := strings.Cut(strings.TrimPrefix(rest, "("), ") ")
		if !ok {
			return line
		}
		name = upTo(strings.TrimPrefix(recv, "*"), "[") + "." + upTo(sig, "[(")
	case "field": // T.F type
		name = upTo(rest, " ")
	case "imethod": // I.M func(…), or I Embedded
		name = upTo(rest, " ")
		if !strings.Contains(name, ".") {
			return line
		}
	case "embed": // T *pkg.X
		t, x, _ := strings.Cut(rest, " ")
		x = strings.TrimPrefix(x, "*")
		if i := strings.LastIndex(upTo(x, "["), "."); i >= 0 {
			x = x[i+1:]
		}
		name = t + "." + upTo(x, "[")
	default:
		return line
	}
	return pkg + " " + name
}

// change is an incompatible difference between a record and the API.
type change struct {
	name string // as apiName gives it
	// old is the record's line, "" for a new interface method; new is
	// the API's line of the same name, "" when the name is gone.
	old, new string
}

func (c change) String() string {
	switch {
	case c.old == "":
		return "new method of an existing interface (breaks its implementations): " + c.new
	case c.new == "":
		return "removed: " + c.old
	}
	return "changed: " + c.old + "\n\t     now: " + c.new
}

// compare returns every incompatible difference between a record and the
// current API, in the record's order: a line of the record missing from
// the API (a name removed, or changed: its line differs, a signature or a
// type, say), and a method the API adds to an interface the record holds.
// A method whose receiver went from *T to T is compatible (T's values gain
// it; *T keeps it). New names are compatible additions.
func compare(recorded, current []string) []change {
	have := make(map[string]bool, len(current))
	byName := make(map[string]string, len(current))
	for _, l := range current {
		have[l] = true
		if n := apiName(l); byName[n] == "" {
			byName[n] = l
		}
	}
	rec := make(map[string]bool, len(recorded))
	for _, l := range recorded {
		rec[l] = true
	}
	var out []change
	for _, l := range recorded {
		if have[l] {
			continue
		}
		n := apiName(l)
		now := byName[n]
		if now != "" && l == strings.Replace(now, " method (", " method (*", 1) {
			continue
		}
		out = append(out, change{name: n, old: l, new: now})
	}
	for _, l := range current {
		pkg, rest, _ := strings.Cut(l, " ")
		iface, ok := strings.CutPrefix(rest, "imethod ")
		if !ok || rec[l] {
			continue
		}
		iface, _, _ = strings.Cut(iface, " ")
		iface, _, _ = strings.Cut(iface, ".")
		if rec[pkg+" type "+iface+" interface"] {
			out = append(out, change{name: apiName(l), new: l})
		}
	}
	return out
}

// apiDir is a module's api folder: its releases and records.
type apiDir struct {
	root     string // the module root
	major    int    // the module path's major version
	releases []release
}

// openAPIDir reads root's api/releases.txt; a module whose path has no
// /vN suffix has major version 1 (its v0 releases precede any promise).
func openAPIDir(root string, major int) (*apiDir, error) {
	b, err := os.ReadFile(filepath.Join(root, releasesFile))
	if err != nil {
		return nil, err
	}
	rs, err := parseReleases(b)
	if err != nil {
		return nil, err
	}
	return &apiDir{root: root, major: major, releases: rs}, nil
}

// enforced returns the releases whose records the API must stay
// compatible with: every one of the module's major version, a release
// being prepared included. Earlier majors' records are history.
func (d *apiDir) enforced() []release {
	var rs []release
	for _, r := range d.releases {
		if r.version.major == d.major {
			rs = append(rs, r)
		}
	}
	return rs
}

// next returns the version of the record of unreleased additions: the
// next minor version after the last release of the module's major.
func (d *apiDir) next() (version, bool) {
	rs := d.enforced()
	if len(rs) == 0 {
		return version{}, false
	}
	last := rs[len(rs)-1].version
	return version{last.major, last.minor + 1, 0}, true
}

func (d *apiDir) read(rel string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(d.root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, err
	}
	return parseRecord(b), nil
}

// breaks returns, for each change of the API that breaks a release
// (only the ones with a commit when released is set), a line naming the
// release; a change is reported once, against the first release that has
// it. The changes are also returned, for check to report each once.
func (d *apiDir) breaks(current []string, released bool) ([]string, []change, error) {
	var out []string
	var all []change
	seen := map[change]bool{}
	for _, r := range d.enforced() {
		if released && r.commit == "" {
			continue
		}
		recorded, err := d.read(r.record)
		if err != nil {
			return nil, nil, fmt.Errorf("the record of %s: %w", r.version, err)
		}
		for _, c := range compare(recorded, current) {
			if seen[c] {
				continue
			}
			seen[c] = true
			all = append(all, c)
			what := r.version.String()
			if r.commit == "" {
				what += " (being prepared)"
			}
			out = append(out, fmt.Sprintf("breaks %s: %s", what, c))
		}
	}
	return out, all, nil
}

// check returns every problem of the current API against the api folder:
// a change that breaks a release of the module's major; a change to an
// addition recorded in the next minor version's record; a name that no
// record holds (an addition to record with -update); a record file that
// api/releases.txt does not list and that is not the next minor's.
func (d *apiDir) check(current []string) ([]string, error) {
	rs := d.enforced()
	if len(rs) == 0 {
		return []string{fmt.Sprintf("%s lists no v%d release: record one with -release v%d.0.0", releasesFile, d.major, d.major)}, nil
	}
	problems, changes, err := d.breaks(current, false)
	if err != nil {
		return nil, err
	}
	reported := map[string]bool{} // old and new lines of reported changes
	for _, c := range changes {
		reported[c.old], reported[c.new] = true, true
	}
	if last := rs[len(rs)-1]; last.commit == "" && len(problems) > 0 {
		problems = append(problems, fmt.Sprintf("%s is being prepared (%s lists no commit for it): if these changes are intended, write its record again with -release %s", last.version, releasesFile, last.version))
	}
	nv, _ := d.next()
	nextRec := recordPath(nv)
	latest, err := d.read(rs[len(rs)-1].record)
	if err != nil {
		return nil, err
	}
	if rec, err := d.read(nextRec); err == nil {
		for _, c := range compare(rec, current) {
			if reported[c.old] && reported[c.new] {
				continue
			}
			reported[c.old], reported[c.new] = true, true
			problems = append(problems, fmt.Sprintf("%s (unreleased additions) holds what the API no longer has: %s; if intended, rewrite it with -update", nextRec, c))
		}
		latest = rec
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	recorded := map[string]bool{}
	for _, l := range latest {
		recorded[l] = true
	}
	for _, l := range current {
		if !recorded[l] && !reported[l] {
			problems = append(problems, fmt.Sprintf("not recorded: %s (an addition since %s: record it in %s with -update)", l, rs[len(rs)-1].version, nextRec))
		}
	}
	strays, err := d.strays(nextRec)
	if err != nil {
		return nil, err
	}
	for _, s := range strays {
		problems = append(problems, fmt.Sprintf("%s is neither a release's record listed in %s nor the next minor version's record %s", s, releasesFile, nextRec))
	}
	return problems, nil
}

// strays returns the api/v*.txt files that are neither listed nor keep.
func (d *apiDir) strays(keep string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(d.root, "api", "v*.txt"))
	if err != nil {
		return nil, err
	}
	listed := map[string]bool{keep: true}
	for _, r := range d.releases {
		listed[r.record] = true
	}
	var out []string
	for _, f := range files {
		if rel := "api/" + filepath.Base(f); !listed[rel] {
			out = append(out, rel)
		}
	}
	sort.Strings(out)
	return out, nil
}

func writeRecord(path string, lines []string) error {
	lines = slices.Clone(lines)
	sort.Strings(lines)
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// update writes the current API to the next minor version's record, or
// removes that record when the API is the last release's again. It
// refuses an API that breaks a release: a released record is never
// rewritten, and an incompatible change waits for a new major version.
func (d *apiDir) update(current []string) (string, error) {
	nv, ok := d.next()
	if !ok {
		return "", fmt.Errorf("%s lists no v%d release: record one with -release v%d.0.0", releasesFile, d.major, d.major)
	}
	problems, _, err := d.breaks(current, false)
	if err != nil {
		return "", err
	}
	if len(problems) > 0 {
		hint := ""
		if rs := d.enforced(); rs[len(rs)-1].commit == "" {
			v := rs[len(rs)-1].version
			hint = fmt.Sprintf("\n%s is being prepared: if the changes to it are intended, write its record again with -release %s", v, v)
		}
		return "", fmt.Errorf("-update records additions only, and this API breaks a release:\n\t%s%s", strings.Join(problems, "\n\t"), hint)
	}
	rs := d.enforced()
	last, err := d.read(rs[len(rs)-1].record)
	if err != nil {
		return "", err
	}
	rel := recordPath(nv)
	path := filepath.Join(d.root, filepath.FromSlash(rel))
	if slices.Equal(sorted(last), sorted(current)) {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		return fmt.Sprintf("the API is %s's: no additions to record (%s removed if it was there)", rs[len(rs)-1].version, rel), nil
	}
	if err := writeRecord(path, current); err != nil {
		return "", err
	}
	return fmt.Sprintf("wrote %s: %d declarations, %d of them since %s", rel, len(current), len(added(last, current)), rs[len(rs)-1].version), nil
}

// release writes the current API as the record of v and lists v in
// api/releases.txt with "-" for its commit, to be replaced by the release
// commit's hash once it exists. It refuses a version already released (a
// commit listed), one not after every listed release, one of another major
// version, while another release is being prepared, and an API that breaks
// a release. The next minor version's record that v supersedes is removed.
func (d *apiDir) release(v version, current []string) (string, error) {
	if v.major != d.major {
		return "", fmt.Errorf("%s: this module's releases are v%d (a new major version is a new module path)", v, d.major)
	}
	var pending *release
	for i, r := range d.releases {
		switch {
		case r.version == v && r.commit != "":
			return "", fmt.Errorf("%s was released at %s: its record %s cannot be rewritten", v, r.commit, r.record)
		case r.version == v:
			pending = &d.releases[i]
		case r.commit == "":
			return "", fmt.Errorf("%s is being prepared: record its commit in %s before recording %s", r.version, releasesFile, v)
		case !r.version.less(v):
			return "", fmt.Errorf("%s does not follow the last release, %s", v, r.version)
		}
	}
	problems, _, err := d.breaks(current, true)
	if err != nil {
		return "", err
	}
	if len(problems) > 0 {
		return "", fmt.Errorf("%s would break a release:\n\t%s", v, strings.Join(problems, "\n\t"))
	}
	oldNext, hadNext := d.next()
	rel := recordPath(v)
	if err := writeRecord(filepath.Join(d.root, filepath.FromSlash(rel)), current); err != nil {
		return "", err
	}
	if pending == nil {
		path := filepath.Join(d.root, releasesFile)
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		if len(b) > 0 && !bytes.HasSuffix(b, []byte("\n")) {
			b = append(b, '\n')
		}
		b = fmt.Appendf(b, "%s - %s\n", v, rel)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return "", err
		}
		d.releases = append(d.releases, release{version: v, record: rel})
	}
	msg := fmt.Sprintf("wrote %s: %d declarations; %s lists %s as being prepared: once its commit exists, replace the - with the commit's full hash", rel, len(current), releasesFile, v)
	if hadNext && oldNext != v && !v.less(oldNext) {
		old := filepath.Join(d.root, filepath.FromSlash(recordPath(oldNext)))
		if err := os.Remove(old); err == nil {
			msg += "; removed " + recordPath(oldNext) + ", which " + v.String() + " supersedes"
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	return msg, nil
}

func sorted(lines []string) []string {
	s := slices.Clone(lines)
	sort.Strings(s)
	return slices.Compact(s)
}

// added returns the lines of current that last does not have.
func added(last, current []string) []string {
	have := map[string]bool{}
	for _, l := range last {
		have[l] = true
	}
	var out []string
	for _, l := range current {
		if !have[l] {
			out = append(out, l)
		}
	}
	return out
}

// currentAPI returns the record lines of every public package, sorted.
func currentAPI(t *testing.T, root string) []string {
	fset := token.NewFileSet()
	var current []string
	for _, dir := range publicPackages(t, root) {
		current = append(current, api(fset, loadPackage(t, fset, root, dir), func(string) {})...)
	}
	sort.Strings(current)
	return current
}

// moduleMajor returns the major version of the module path in root's
// go.mod: N for a path ending in /vN, else 1.
func moduleMajor(t *testing.T, root string) int {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			if i := strings.LastIndex(p, "/v"); i >= 0 {
				if n, err := strconv.Atoi(p[i+2:]); err == nil && n >= 2 {
					return n
				}
			}
			return 1
		}
	}
	t.Fatal("go.mod names no module")
	return 0
}

// TestAPICompatibility compares the public API with every release record
// of the module's major version and with the record of unreleased
// additions; -update and -release write records (see doc.go).
func TestAPICompatibility(t *testing.T) {
	root := testutil.ModuleRoot()
	d, err := openAPIDir(root, moduleMajor(t, root))
	if err != nil {
		t.Fatal(err)
	}
	current := currentAPI(t, root)
	if len(current) < 1000 {
		t.Fatalf("the API has %d declarations: the walk is broken", len(current))
	}
	switch {
	case *releaseVer != "" && *update:
		t.Fatal("-release and -update are one or the other")
	case *releaseVer != "":
		v, err := parseVersion(*releaseVer)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := d.release(v, current)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(msg)
		return
	case *update:
		msg, err := d.update(current)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(msg)
		return
	}
	problems, err := d.check(current)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	var names []string
	for _, r := range d.enforced() {
		names = append(names, r.version.String())
	}
	t.Logf("%d declarations checked against %s", len(current), strings.Join(names, ", "))
}
