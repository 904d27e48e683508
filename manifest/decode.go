package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	sigsjson "sigs.k8s.io/json"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

const (
	kindPolicy      = "Policy"
	kindFrozenAgent = "FrozenAgent"
)

// header is what every document must say about itself before it can be
// decoded: apiVersion, kind and, for messages, metadata.name.
type header struct {
	apiVersion, kind, name string
	items                  json.RawMessage
}

// addDocument decodes one document (already JSON) into s, or records why it
// cannot be. A document that is empty or only comments holds nothing.
func (s *Set) addDocument(src Source, doc []byte, errs *Errors) {
	t := bytes.TrimSpace(doc)
	if len(t) == 0 || string(t) == "null" {
		return
	}
	h, ok := readHeader(src, "", t, errs)
	if !ok {
		return
	}
	if h.kind == "List" || (strings.HasSuffix(h.kind, "List") && h.apiVersion == v1alpha1.GroupVersion.String()) {
		s.addList(src, h, errs)
		return
	}
	s.addObject(src, "", h, t, errs)
}

// addList reads a List (what `kubectl get -o yaml` prints) item by item.
func (s *Set) addList(src Source, h header, errs *Errors) {
	fail := func(field, format string, args ...any) {
		*errs = append(*errs, &Error{Source: src, Kind: h.kind, Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if h.kind == "List" && h.apiVersion != "v1" {
		fail("apiVersion", "unknown apiVersion %q for List: want v1", h.apiVersion)
		return
	}
	if want := strings.TrimSuffix(h.kind, "List"); h.kind != "List" && want != kindPolicy && want != kindFrozenAgent {
		fail("kind", "unknown kind %q: toolgate reads Policy, FrozenAgent and their lists", h.kind)
		return
	}
	var items []json.RawMessage
	if t := bytes.TrimSpace(h.items); len(t) > 0 && string(t) != "null" {
		if err := json.Unmarshal(t, &items); err != nil {
			fail("items", "must be a list of objects")
			return
		}
	}
	for i, item := range items {
		isrc := src
		isrc.Item = i
		prefix := fmt.Sprintf("items[%d].", i)
		ih, ok := readHeader(isrc, prefix, item, errs)
		if !ok {
			continue
		}
		if strings.HasSuffix(ih.kind, "List") {
			*errs = append(*errs, &Error{Source: isrc, Kind: ih.kind, Name: ih.name, Field: prefix + "kind",
				Message: "a List cannot contain another List"})
			continue
		}
		s.addObject(isrc, prefix, ih, item, errs)
	}
}

func readHeader(src Source, prefix string, doc []byte, errs *Errors) (header, bool) {
	fail := func(field, msg string) (header, bool) {
		*errs = append(*errs, &Error{Source: src, Field: field, Message: msg})
		return header{}, false
	}
	var fields map[string]json.RawMessage
	if t := bytes.TrimSpace(doc); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &fields) != nil {
		return fail(strings.TrimSuffix(prefix, "."), "must be an object with apiVersion, kind, metadata and spec")
	}
	var h header
	var meta struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(fields["metadata"], &meta) // best effort: only for messages
	h.name = meta.Name
	h.items = fields["items"]
	for _, f := range []struct {
		name string
		dst  *string
	}{{"kind", &h.kind}, {"apiVersion", &h.apiVersion}} {
		raw := bytes.TrimSpace(fields[f.name])
		if len(raw) == 0 || string(raw) == "null" {
			return fail(prefix+f.name, fmt.Sprintf("missing: every document needs apiVersion: %s and kind: %s or %s",
				v1alpha1.GroupVersion, kindPolicy, kindFrozenAgent))
		}
		if err := json.Unmarshal(raw, f.dst); err != nil {
			return fail(prefix+f.name, "must be a string, not "+jsonKind(raw))
		}
		if *f.dst == "" {
			return fail(prefix+f.name, "must not be empty")
		}
	}
	return h, true
}

// addObject decodes a Policy or FrozenAgent strictly: unknown and duplicate
// fields are errors, as `kubectl apply` (strict field validation) makes them.
func (s *Set) addObject(src Source, prefix string, h header, doc []byte, errs *Errors) {
	fail := func(field, msg string) {
		*errs = append(*errs, &Error{Source: src, Kind: h.kind, Name: h.name, Field: field, Message: msg})
	}
	if h.kind != kindPolicy && h.kind != kindFrozenAgent {
		fail(prefix+"kind", fmt.Sprintf("unknown kind %q (apiVersion %q): toolgate reads %s and %s of %s",
			h.kind, h.apiVersion, kindPolicy, kindFrozenAgent, v1alpha1.GroupVersion))
		return
	}
	if h.apiVersion != v1alpha1.GroupVersion.String() {
		fail(prefix+"apiVersion", fmt.Sprintf("unknown apiVersion %q for %s: want %s", h.apiVersion, h.kind, v1alpha1.GroupVersion))
		return
	}
	var target any
	var p v1alpha1.Policy
	var f v1alpha1.FrozenAgent
	if h.kind == kindPolicy {
		target = &p
	} else {
		if field, msg, bad := checkExpiresAt(doc); bad {
			fail(prefix+field, msg)
			return
		}
		target = &f
	}
	strict, err := sigsjson.UnmarshalStrict(doc, target)
	if err != nil {
		field, msg := locateDecodeError(doc, err)
		if field != "" {
			field = prefix + field
		}
		fail(field, msg)
		return
	}
	if len(strict) > 0 {
		for _, e := range strict {
			field, msg := "", e.Error()
			if fe, ok := e.(sigsjson.FieldError); ok {
				field = prefix + fe.FieldPath()
				msg, _, _ = strings.Cut(msg, " \"")
			}
			fail(field, msg)
		}
		return
	}
	if h.kind == kindPolicy {
		if p.Spec.DefaultEffect == "" {
			p.Spec.DefaultEffect = v1alpha1.EffectAllow // the CRD default, as the API server applies it
		}
		s.Policies = append(s.Policies, Policy{Object: p, Source: src})
		return
	}
	s.FrozenAgents = append(s.FrozenAgents, FrozenAgent{Object: f, Source: src})
}

// checkExpiresAt reports a spec.expiresAt that is not an RFC 3339 time. The
// decoder's own error for it names no field.
func checkExpiresAt(doc []byte) (field, msg string, bad bool) {
	var v struct {
		Spec struct {
			ExpiresAt json.RawMessage `json:"expiresAt"`
		} `json:"spec"`
	}
	if json.Unmarshal(doc, &v) != nil {
		return "", "", false // the strict decode reports it, with its field
	}
	raw := bytes.TrimSpace(v.Spec.ExpiresAt)
	if len(raw) == 0 || string(raw) == "null" {
		return "", "", false
	}
	var str string
	if json.Unmarshal(raw, &str) != nil {
		return "spec.expiresAt", "must be an RFC 3339 time string, not " + jsonKind(raw), true
	}
	if _, err := time.Parse(time.RFC3339, str); err != nil {
		return "spec.expiresAt", fmt.Sprintf("%q is not an RFC 3339 time (like 2030-01-31T17:00:00Z)", str), true
	}
	return "", "", false
}

var typeError = regexp.MustCompile(`^json: cannot unmarshal (\S+)( \S+)? into Go struct field [^ .]*\.(\S+) of type (\S+)$`)

// locateDecodeError turns a decoder type error into the field path of the
// offending value, with list indices, and a message in the manifest's terms.
func locateDecodeError(doc []byte, err error) (field, msg string) {
	m := typeError.FindStringSubmatch(err.Error())
	if m == nil {
		return "", strings.TrimPrefix(err.Error(), "json: ")
	}
	got, literal, path, want := m[1], strings.TrimSpace(m[2]), m[3], m[4]
	msg = fmt.Sprintf("must be %s, not %s", goTypeWord(want), withArticle(got))
	if literal != "" {
		msg += " (" + literal + ")"
	}
	var v any
	if json.Unmarshal(doc, &v) != nil {
		return path, msg
	}
	if exact, ok := findValue(v, strings.Split(path, "."), "", got); ok {
		return exact, msg
	}
	return path, msg
}

// findValue finds the first value of JSON kind want at a dotted path that
// does not spell out list indices, trying each element of each list on the
// way.
func findValue(v any, segs []string, at string, want string) (string, bool) {
	if list, ok := v.([]any); ok {
		for i, e := range list {
			if p, ok := findValue(e, segs, at+"["+strconv.Itoa(i)+"]", want); ok {
				return p, true
			}
		}
		return "", false
	}
	if len(segs) == 0 {
		return at, kindWord(v) == want
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return "", false
	}
	child, ok := obj[segs[0]]
	if !ok {
		return "", false
	}
	next := segs[0]
	if at != "" {
		next = at + "." + segs[0]
	}
	return findValue(child, segs[1:], next, want)
}

func kindWord(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "null"
}

func jsonKind(raw []byte) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "invalid JSON"
	}
	return withArticle(kindWord(v))
}

func withArticle(kind string) string {
	switch kind {
	case "array", "object":
		return "an " + kind
	case "bool":
		return "a boolean"
	case "null":
		return "null"
	}
	return "a " + kind
}

// goTypeWord names a Go type the way a manifest author thinks of it.
func goTypeWord(t string) string {
	switch {
	case t == "string" || t == "v1alpha1.Effect" || t == "v1alpha1.Operator":
		return "a string"
	case t == "v1.Time":
		return "an RFC 3339 time string"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "an integer (" + t + ")"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "bool":
		return "a boolean"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map[") || strings.Contains(t, "."):
		return "an object"
	}
	return t
}
