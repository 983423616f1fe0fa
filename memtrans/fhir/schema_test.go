package fhir_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// schema is a JSON Schema (draft-06) validator for the subset of keywords
// the FHIR R4 schema uses: $ref into definitions, oneOf, properties,
// additionalProperties (false), required, type, enum, const, pattern, items
// and minItems. loadSchema refuses a schema with any other keyword, so a
// keyword the validator would silently ignore cannot slip in.
type schema struct {
	root map[string]any
	mu   sync.Mutex
	res  map[string]*regexp.Regexp
}

// Keywords validated, and those that only annotate.
var (
	validating = []string{"$ref", "oneOf", "properties", "additionalProperties", "required", "type", "enum", "const", "pattern", "items", "minItems"}
	annotating = []string{"$schema", "id", "description", "discriminator", "definitions"}
)

func loadSchema(t testing.TB, path string) *schema {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(zr)
	dec.UseNumber()
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		t.Fatal(err)
	}
	if err := checkKeywords(root, "#"); err != nil {
		t.Fatal(err)
	}
	return &schema{root: root, res: map[string]*regexp.Regexp{}}
}

// checkKeywords walks a schema node and refuses unknown keywords.
func checkKeywords(node any, at string) error {
	m, ok := node.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: schema node is %T", at, node)
	}
	for k, v := range m {
		switch {
		case k == "properties" || k == "definitions":
			for name, sub := range v.(map[string]any) {
				if err := checkKeywords(sub, at+"/"+k+"/"+name); err != nil {
					return err
				}
			}
		case k == "oneOf":
			for i, sub := range v.([]any) {
				if err := checkKeywords(sub, fmt.Sprintf("%s/oneOf/%d", at, i)); err != nil {
					return err
				}
			}
		case k == "items":
			if err := checkKeywords(v, at+"/items"); err != nil {
				return err
			}
		case k == "additionalProperties":
			if b, ok := v.(bool); !ok || b {
				return fmt.Errorf("%s: additionalProperties %v (only false is supported)", at, v)
			}
		case slices.Contains(validating, k) || slices.Contains(annotating, k):
		default:
			return fmt.Errorf("%s: unsupported keyword %q", at, k)
		}
	}
	return nil
}

func (s *schema) regexp(p string) (*regexp.Regexp, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if re, ok := s.res[p]; ok {
		return re, nil
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, err
	}
	s.res[p] = re
	return re, nil
}

// Validate checks a JSON document against the schema's root and returns
// the first violation found.
func (s *schema) Validate(doc []byte) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	return s.validate(s.root, v, "$")
}

func (s *schema) resolve(ref string) (map[string]any, error) {
	name, ok := strings.CutPrefix(ref, "#/definitions/")
	if !ok {
		return nil, fmt.Errorf("unsupported $ref %q", ref)
	}
	def, ok := s.root["definitions"].(map[string]any)[name].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("unresolved $ref %q", ref)
	}
	return def, nil
}

func (s *schema) validate(node map[string]any, v any, at string) error {
	// Draft-06: a $ref replaces its siblings.
	if ref, ok := node["$ref"].(string); ok {
		def, err := s.resolve(ref)
		if err != nil {
			return fmt.Errorf("%s: %w", at, err)
		}
		return s.validate(def, v, at)
	}
	if c, ok := node["const"]; ok && !jsonEqual(c, v) {
		return fmt.Errorf("%s: %v is not the constant %v", at, v, c)
	}
	if e, ok := node["enum"].([]any); ok && !slices.ContainsFunc(e, func(x any) bool { return jsonEqual(x, v) }) {
		return fmt.Errorf("%s: %v is not one of %v", at, v, e)
	}
	if typ, ok := node["type"].(string); ok && !hasType(typ, v) {
		return fmt.Errorf("%s: %T is not of type %s", at, v, typ)
	}
	if p, ok := node["pattern"].(string); ok {
		if str, isStr := v.(string); isStr {
			re, err := s.regexp(p)
			if err != nil {
				return fmt.Errorf("%s: pattern %q: %w", at, p, err)
			}
			if !re.MatchString(str) {
				return fmt.Errorf("%s: %q does not match %s", at, str, p)
			}
		}
	}
	if arr, ok := v.([]any); ok {
		if mn, ok := node["minItems"].(json.Number); ok {
			if n, _ := mn.Int64(); int64(len(arr)) < n {
				return fmt.Errorf("%s: %d items, at least %d wanted", at, len(arr), n)
			}
		}
		if items, ok := node["items"].(map[string]any); ok {
			for i, x := range arr {
				if err := s.validate(items, x, fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		}
	}
	if obj, ok := v.(map[string]any); ok {
		if err := s.validateObject(node, obj, at); err != nil {
			return err
		}
	}
	if one, ok := node["oneOf"].([]any); ok {
		matched := 0
		var first error
		for _, sub := range one {
			if err := s.validate(sub.(map[string]any), v, at); err == nil {
				matched++
			} else if first == nil || deeper(err, first) {
				first = err
			}
		}
		switch {
		case matched == 0:
			return fmt.Errorf("%s: matches none of %d alternatives; closest: %w", at, len(one), first)
		case matched > 1:
			return fmt.Errorf("%s: matches %d of the oneOf alternatives", at, matched)
		}
	}
	return nil
}

// deeper prefers the error of the alternative that got furthest (the one
// whose resourceType matched), to make oneOf failures readable.
func deeper(a, b error) bool {
	return !strings.Contains(a.Error(), "is not the constant") && strings.Contains(b.Error(), "is not the constant")
}

func (s *schema) validateObject(node map[string]any, obj map[string]any, at string) error {
	props, _ := node["properties"].(map[string]any)
	// resourceType first: it rejects the wrong oneOf alternatives at once.
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if (keys[i] == "resourceType") != (keys[j] == "resourceType") {
			return keys[i] == "resourceType"
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		sub, ok := props[k].(map[string]any)
		if !ok {
			if ap, has := node["additionalProperties"]; has && ap == false {
				return fmt.Errorf("%s: unknown property %q", at, k)
			}
			continue
		}
		if err := s.validate(sub, obj[k], at+"."+k); err != nil {
			return err
		}
	}
	if req, ok := node["required"].([]any); ok {
		for _, r := range req {
			if _, ok := obj[r.(string)]; !ok {
				return fmt.Errorf("%s: required property %q missing", at, r)
			}
		}
	}
	return nil
}

func hasType(typ string, v any) bool {
	switch typ {
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		_, err := n.Int64()
		return err == nil
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "null":
		return v == nil
	}
	return false
}

func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
